//! anthropic: models (to be written).
