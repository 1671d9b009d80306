//! gemini: stream (to be written).
