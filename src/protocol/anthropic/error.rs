//! Anthropic Messages error bodies: `{"type":"error","error":{"type","message"}}`.

use crate::error::{ErrorKind, GatewayError};
use serde_json::json;

/// The Anthropic error `type` for an error kind.
pub fn error_type(e: &GatewayError) -> &'static str {
    match e.kind {
        ErrorKind::InvalidRequest
        | ErrorKind::ContextLengthExceeded
        | ErrorKind::MethodNotAllowed => "invalid_request_error",
        ErrorKind::Authentication => "authentication_error",
        ErrorKind::PermissionDenied => "permission_error",
        ErrorKind::NotFound => "not_found_error",
        ErrorKind::PayloadTooLarge => "request_too_large",
        ErrorKind::RateLimited => "rate_limit_error",
        ErrorKind::Unavailable if e.status == 529 => "overloaded_error",
        ErrorKind::Timeout => "timeout_error",
        ErrorKind::Internal | ErrorKind::BadGateway | ErrorKind::Unavailable => "api_error",
    }
}

/// Renders the error object (the value of the `error` key).
pub fn error_object(e: &GatewayError) -> serde_json::Value {
    json!({ "type": error_type(e), "message": e.message })
}

/// Renders the whole error body.
pub fn error_body(e: &GatewayError) -> Vec<u8> {
    json!({ "type": "error", "error": error_object(e) })
        .to_string()
        .into_bytes()
}

/// The code of an Anthropic error body: [`CONTEXT_OVERFLOW`] for "prompt is
/// too long" (Anthropic errors carry a type and a message, no code).
///
/// [`CONTEXT_OVERFLOW`]: crate::protocol::common::spoke::CONTEXT_OVERFLOW
pub fn upstream_code(body: &serde_json::Value) -> Option<String> {
    let message = upstream_message(body)?;
    message
        .starts_with("prompt is too long")
        .then(|| crate::protocol::common::spoke::CONTEXT_OVERFLOW.to_string())
}

/// The message of an upstream error body (`error.message`).
pub fn upstream_message(body: &serde_json::Value) -> Option<String> {
    body.get("error")?
        .get("message")?
        .as_str()
        .map(str::to_string)
}
