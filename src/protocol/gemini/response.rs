//! gemini: response (to be written).
