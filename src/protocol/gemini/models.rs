//! gemini: models (to be written).
