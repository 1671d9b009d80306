//! openai: stream (to be written).
