//! tokens (to be written).
