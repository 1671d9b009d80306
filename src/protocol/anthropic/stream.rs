//! anthropic: stream (to be written).
