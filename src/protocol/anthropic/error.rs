//! anthropic: error (to be written).
