//! The neutral canonical model (to be written).
