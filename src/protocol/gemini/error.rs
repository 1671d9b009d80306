//! gemini: error (to be written).
