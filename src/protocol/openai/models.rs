//! openai: models (to be written).
