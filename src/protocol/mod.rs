//! Per-family wire protocols (hub and spoke around the IR in `crate::ir`).
//!
//! - [`common`]: what the spokes share (the `Spoke` table type, peeks, HTTP
//!   addressing, stream framing and helpers, the translation error).
//! - [`openai`], [`anthropic`], [`gemini`], [`responses`], [`bedrock`]: one spoke per
//!   family, each with the same layout (wire types, `request/{decode,encode}`,
//!   `response`, `stream/{parser,encoder}`, peeks, HTTP details, listings,
//!   error shape). Spokes import `common`, never the registry.
//! - [`cloud`]: where Azure OpenAI and Vertex AI put a call of a wire
//!   protocol (path, credential header, Vertex's Messages body).
//! - [`rerank`]: the rerank wire (clients' `/v1/rerank`, Cohere v2 and
//!   OpenAI-compatible `/rerank` upstreams), one shape both ways.
//! - [`registry`]: the only module that imports the spokes: the
//!   by-family dispatch of codecs and stream codecs, and `spoke(family)`.
//!
//! This folder knows no proxy and no async runtime.

pub mod anthropic;
pub mod bedrock;
pub mod bedrock_embed;
pub mod cloud;
pub mod common;
pub mod gemini;
pub mod openai;
pub mod registry;
pub mod rerank;
pub mod responses;

pub use common::spoke::Spoke;
pub use common::{DecodeContext, EncodeOptions, TranslateError, TranslateErrorKind};
pub use registry::{
    decode_request, decode_response, encode_request, encode_request_value, encode_response,
    encode_response_value, error_body, spoke, stream_codec,
};
