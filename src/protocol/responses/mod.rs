//! The Responses spoke (the OpenAI Responses API): wire types and codecs to and from the IR.
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
//! - `error.rs`: error bodies (model listings use the OpenAI chat shape).
//! - `request/custom.rs`, `request/reasoning.rs`, `stream/custom_input.rs`:
//!   custom tools and reasoning items in the canonical model.
//! - `envelope.rs`: what the gateway sets on a stored or relayed `response`.
//! - `hosted.rs`: tools only a Responses upstream can run.
//! - `namespace.rs`: `namespace` tools as flat function names for other
//!   protocols, and back.
//!
//! [`SPOKE`] is the table the registry hands out for this family. Shared
//! pieces come from `protocol::common`; the registry is never imported.
//!
//! Imports from another spoke: `openai` (the error shape, the `user` hashing
//! and effort mapping of the request encoder, `response::fallback_id`).
//! `openai` imports no spoke, so this stays acyclic.

pub mod envelope;
pub mod error;
pub mod hosted;
pub mod http;
pub mod namespace;
pub mod peek;
pub mod request;
pub mod response;
pub mod stream;
pub mod wire;

use crate::family::Family;
use crate::protocol::common::spoke::{ModelName, Spoke};

/// Responses' facts and functions.
pub const SPOKE: Spoke = Spoke {
    family: Family::Responses,
    input_field: "input",
    counted_fields: &["instructions", "input", "tools"],
    max_temperature: 2.0,
    temperature_field: "temperature",
    requires_max_tokens: false,
    required_header: None,
    model_in_body: true,
    model_name: ModelName::Qualified,
    stream_done: None,
    stream_end: None,
    error_event: Some("error"),
    stream_error: Some(stream::passthrough_failure),
    stream_usage_opt_in: false,
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
    count_tokens_body: Some(http::count_tokens_body),
    drop_untranslatable: Some(hosted::drop_hosted_tools),
    continue_body: request::prefill::continue_body,
    mark_prefill: None,
};
