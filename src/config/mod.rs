//! Config (to be written).
