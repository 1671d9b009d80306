//! openai: response (to be written).
