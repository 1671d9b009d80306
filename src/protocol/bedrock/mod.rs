//! The Bedrock spoke (Amazon Bedrock's Converse API): wire types and codecs
//! to and from the IR.
//!
//! Its pieces, in the order a call uses them:
//!
//! - `peek.rs`: what the gateway reads from bodies without decoding them.
//! - `wire.rs`: the wire types (the `bedrock-runtime` service model's names).
//! - `request/`: `decode.rs` (client body → IR), `encode.rs` (IR → upstream
//!   body), `prefill.rs` (a cut answer's continuation).
//! - `http.rs`: the upstream path, the client's key.
//! - `response.rs`: whole answers, both ways.
//! - `stream/`: `parser.rs` (upstream ConverseStream events → IR events),
//!   `encoder.rs` (IR events → client event-stream messages, written with
//!   `crate::eventstream`).
//! - `error.rs`: error bodies (`{"message"}`) and their `x-amzn-errortype`.
//! - `invoke.rs`: the InvokeModel envelope around Anthropic Messages (E22,
//!   E23): the body unwrapped, the stream's `chunk` messages.
//!
//! No model listings: Bedrock clients name models in the path. [`SPOKE`] is
//! the table the registry hands out for this family; shared pieces come
//! from `protocol::common`, no other spoke is imported.

pub mod error;
pub mod http;
pub mod invoke;
pub mod peek;
pub mod request;
pub mod response;
pub mod stream;
pub mod wire;

use crate::family::Family;
use crate::protocol::common::spoke::{ModelName, Spoke};

/// Bedrock Converse's facts and functions.
pub const SPOKE: Spoke = Spoke {
    family: Family::Bedrock,
    input_field: "messages",
    counted_fields: &["system", "messages", "toolConfig"],
    max_temperature: 1.0,
    temperature_field: "inferenceConfig.temperature",
    requires_max_tokens: false,
    required_header: None,
    model_in_body: false,
    model_name: ModelName::Bare,
    stream_done: None,
    stream_end: None,
    error_event: None,
    stream_error: None,
    stream_usage_opt_in: false,
    inspect: peek::request,
    peek_response: peek::response,
    peek_repeated: crate::protocol::common::peek::no_repeat,
    stream_started: peek::stream_started,
    error_body: error::error_body,
    error_type_header: Some(("x-amzn-errortype", error::error_type)),
    upstream_message: error::upstream_message,
    upstream_code: error::upstream_code,
    client_key: http::client_key,
    client_key_hint: "an Authorization: Bearer header",
    upstream_path: http::upstream_path,
    upstream_auth: http::upstream_auth,
    count_tokens_body: None,
    drop_untranslatable: None,
    continue_body: request::prefill::continue_body,
    mark_prefill: None,
};
