//! stream (to be written).
