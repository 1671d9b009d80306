//! validate (to be written).
