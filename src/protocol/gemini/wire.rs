//! gemini: wire (to be written).
