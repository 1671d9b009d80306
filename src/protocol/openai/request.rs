//! openai: request (to be written).
