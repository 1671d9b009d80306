//! The Anthropic Messages spoke: wire types and codecs to and from the IR.
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
//!
//! Imports from another spoke: `openai::response::fallback_id` (ids for
//! responses that carry none). `openai` imports no spoke, so this stays acyclic.

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

/// Anthropic Messages' facts and functions.
pub const SPOKE: Spoke = Spoke {
    family: Family::Anthropic,
    input_field: "messages",
    counted_fields: &["system", "messages", "tools"],
    max_temperature: 1.0,
    temperature_field: "temperature",
    requires_max_tokens: true,
    required_header: Some("anthropic-version"),
    model_in_body: true,
    model_name: ModelName::Bare,
    stream_done: None,
    stream_end: Some((Some("message_stop"), br#"{"type":"message_stop"}"#)),
    error_event: Some("error"),
    stream_error: None,
    stream_usage_opt_in: false,
    inspect: peek::request,
    peek_response: peek::response,
    peek_repeated: crate::protocol::common::peek::no_repeat,
    stream_started: peek::stream_started,
    error_body: error::error_body,
    error_type_header: None,
    upstream_message: error::upstream_message,
    upstream_code: error::upstream_code,
    client_key: http::client_key,
    client_key_hint: "an x-api-key header",
    upstream_path: http::upstream_path,
    upstream_auth: http::upstream_auth,
    count_tokens_body: Some(http::count_tokens_body),
    drop_untranslatable: None,
    continue_body: request::prefill::continue_body,
    mark_prefill: None,
};
