//! reload (to be written).
