//! openai: wire (to be written).
