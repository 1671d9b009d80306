//! Per-family wire protocols: each has the same files (wire types, request and
//! response codecs to and from the IR, stream parser/encoder, listings, error shape).

pub mod anthropic;
pub mod gemini;
pub mod openai;
