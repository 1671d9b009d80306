//! openai: error (to be written).
