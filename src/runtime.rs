//! runtime (to be written).
