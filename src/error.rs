//! error (to be written).
