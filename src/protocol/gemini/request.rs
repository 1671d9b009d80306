//! gemini: request (to be written).
