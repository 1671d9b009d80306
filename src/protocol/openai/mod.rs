//! The OpenAI chat spoke (chat completions): wire types and codecs to and from the IR.
//!
//! Its pieces, in the order a call uses them:
//!
//! - `peek.rs`: what the gateway reads from bodies without decoding them.
//! - `wire.rs`: the wire types.
//! - `request/`: `decode.rs` (client body → IR), `encode.rs` (IR → upstream body).
//! - `http.rs`: the upstream path and key headers.
//! - `response.rs`: non-streaming responses, both ways.
//! - `stream/`: `parser.rs` (upstream SSE → IR events), `encoder.rs` (IR
//!   events → client SSE).
//! - `error.rs`, `models.rs`: error bodies and model listings.
//!
//! [`SPOKE`] is the table the registry hands out for this family. Shared
//! pieces come from `protocol::common`; the registry is never imported.

pub mod embeddings;
pub mod error;
pub mod http;
pub mod models;
pub mod peek;
pub mod request;
pub mod response;
pub mod stream;
pub mod wire;

use crate::family::Family;
use crate::protocol::common::spoke::{ModelName, Spoke};

/// OpenAI chat's facts and functions.
pub const SPOKE: Spoke = Spoke {
    family: Family::OpenAi,
    input_field: "messages",
    counted_fields: &["messages", "tools"],
    max_temperature: 2.0,
    temperature_field: "temperature",
    requires_max_tokens: false,
    required_header: None,
    model_in_body: true,
    model_name: ModelName::Qualified,
    stream_done: Some(b"[DONE]"),
    stream_end: Some((None, b"[DONE]")),
    error_event: None,
    stream_error: None,
    stream_usage_opt_in: true,
    inspect: peek::request,
    peek_response: peek::response,
    peek_repeated: peek::repeated,
    stream_started: peek::stream_started,
    error_body: error::error_body,
    error_type_header: None,
    upstream_message: error::upstream_message,
    upstream_code: error::upstream_code,
    client_key: http::client_key,
    client_key_hint: "an Authorization: Bearer header",
    upstream_path: http::upstream_path,
    upstream_auth: http::upstream_auth,
    count_tokens_body: None,
    drop_untranslatable: None,
    continue_body: request::prefill::continue_body,
    mark_prefill: Some(request::prefill::mark_prefill),
};
