//! The `responses` wire protocol (family D, the OpenAI Responses API).

pub mod envelope;
pub mod error;
pub mod hosted;
pub mod http;
pub mod peek;
pub mod request;
pub mod response;
pub mod stream;
pub mod wire;

use crate::family::Family;
use crate::protocol::common::spoke::{ModelName, Spoke};

/// Family D's facts and functions.
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
    error_event: Some("error"),
    stream_error: Some(stream::passthrough_failure),
    stream_usage_opt_in: false,
    inspect: peek::request,
    peek_response: peek::response,
    stream_started: peek::stream_started,
    error_body: error::error_body,
    upstream_message: error::upstream_message,
    client_key: http::client_key,
    client_key_hint: "an Authorization: Bearer header",
    upstream_path: http::upstream_path,
    upstream_auth: http::upstream_auth,
    count_tokens_body: Some(http::count_tokens_body),
    drop_untranslatable: Some(hosted::drop_hosted_tools),
};
