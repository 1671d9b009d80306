//! Responses error bodies: OpenAI's shape, `{"error":{"message","type","param","code"}}`
//! (CONTRACT 6), plus the stream's `error` event.

use crate::error::GatewayError;

/// Renders the whole error body (as OpenAI chat).
pub fn error_body(e: &GatewayError) -> Vec<u8> {
    crate::protocol::openai::error::error_body(e)
}

/// The `code` of an upstream error body (OpenAI's shape).
pub fn upstream_code(body: &serde_json::Value) -> Option<String> {
    crate::protocol::openai::error::upstream_code(body)
}

/// The message of an upstream error body (OpenAI's shape).
pub fn upstream_message(body: &serde_json::Value) -> Option<String> {
    crate::protocol::openai::error::upstream_message(body)
}
