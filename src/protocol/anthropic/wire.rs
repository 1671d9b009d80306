//! anthropic: wire (to be written).
