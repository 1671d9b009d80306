//! OpenAI chat error bodies: `{"error":{"message","type","param","code"}}`.

use crate::error::{ErrorKind, GatewayError};
use serde_json::json;

/// The OpenAI `type` for an error kind.
fn error_type(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidRequest
        | ErrorKind::ContextLengthExceeded
        | ErrorKind::NotFound
        | ErrorKind::MethodNotAllowed
        | ErrorKind::PayloadTooLarge => "invalid_request_error",
        ErrorKind::Authentication => "authentication_error",
        ErrorKind::PermissionDenied => "permission_error",
        ErrorKind::RateLimited => "rate_limit_error",
        ErrorKind::Internal
        | ErrorKind::BadGateway
        | ErrorKind::Unavailable
        | ErrorKind::Timeout => "server_error",
    }
}

fn default_code(kind: ErrorKind) -> Option<&'static str> {
    match kind {
        ErrorKind::ContextLengthExceeded => Some("context_length_exceeded"),
        ErrorKind::Authentication => Some("invalid_api_key"),
        ErrorKind::PermissionDenied => Some("model_not_allowed"),
        ErrorKind::NotFound => Some("not_found"),
        ErrorKind::MethodNotAllowed => Some("method_not_allowed"),
        ErrorKind::PayloadTooLarge => Some("request_too_large"),
        ErrorKind::RateLimited => Some("rate_limit_exceeded"),
        ErrorKind::BadGateway => Some("upstream_error"),
        ErrorKind::Unavailable => Some("upstream_unavailable"),
        ErrorKind::Timeout => Some("upstream_timeout"),
        ErrorKind::InvalidRequest | ErrorKind::Internal => None,
    }
}

/// Renders the error object (the value of the top-level `error` key).
pub fn error_object(e: &GatewayError) -> serde_json::Value {
    json!({
        "message": e.message,
        "type": error_type(e.kind),
        "param": e.param,
        "code": e.code.as_deref().or_else(|| default_code(e.kind)),
    })
}

/// Renders the whole error body.
pub fn error_body(e: &GatewayError) -> Vec<u8> {
    json!({ "error": error_object(e) }).to_string().into_bytes()
}

/// The `code` of an OpenAI-shaped error body (`context_length_exceeded`,
/// `content_policy_violation`, ...), if it has one.
pub fn upstream_code(body: &serde_json::Value) -> Option<String> {
    let code = body.get("error")?.get("code")?.as_str()?;
    Some(code.to_string()).filter(|c| !c.is_empty() && c.len() <= 64)
}

/// The message of an upstream error body (`error.message`, or `error` as a string).
pub fn upstream_message(body: &serde_json::Value) -> Option<String> {
    let err = body.get("error")?;
    match err {
        serde_json::Value::String(s) => Some(s.clone()),
        _ => err.get("message")?.as_str().map(str::to_string),
    }
}
