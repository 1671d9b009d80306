//! anthropic: request (to be written).
