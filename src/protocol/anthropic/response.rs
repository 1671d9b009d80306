//! anthropic: response (to be written).
