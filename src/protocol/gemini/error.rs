//! Gemini error bodies: `{"error":{"code","message","status"}}`.

use crate::error::{ErrorKind, GatewayError};
use serde_json::json;

/// The google.rpc status name for an error kind.
pub fn status_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidRequest
        | ErrorKind::ContextLengthExceeded
        | ErrorKind::PayloadTooLarge => "INVALID_ARGUMENT",
        ErrorKind::Authentication => "UNAUTHENTICATED",
        ErrorKind::PermissionDenied => "PERMISSION_DENIED",
        ErrorKind::NotFound => "NOT_FOUND",
        ErrorKind::MethodNotAllowed => "UNIMPLEMENTED",
        ErrorKind::RateLimited => "RESOURCE_EXHAUSTED",
        ErrorKind::Internal => "INTERNAL",
        ErrorKind::BadGateway | ErrorKind::Unavailable => "UNAVAILABLE",
        ErrorKind::Timeout => "DEADLINE_EXCEEDED",
    }
}

/// Renders the error object (the value of the `error` key).
pub fn error_object(e: &GatewayError) -> serde_json::Value {
    json!({ "code": e.status, "message": e.message, "status": status_name(e.kind) })
}

/// Renders the whole error body.
pub fn error_body(e: &GatewayError) -> Vec<u8> {
    json!({ "error": error_object(e) }).to_string().into_bytes()
}

/// The code of a Gemini error body: [`CONTEXT_OVERFLOW`] for a token count
/// over the model's limit (Gemini says `INVALID_ARGUMENT` for all bad input).
///
/// [`CONTEXT_OVERFLOW`]: crate::protocol::common::spoke::CONTEXT_OVERFLOW
pub fn upstream_code(body: &serde_json::Value) -> Option<String> {
    let message = upstream_message(body)?;
    (message.contains("exceeds the maximum number of tokens")
        || message.contains("exceeds the maximum number of input tokens"))
    .then(|| crate::protocol::common::spoke::CONTEXT_OVERFLOW.to_string())
}

/// The message of an upstream error body (`error.message`).
pub fn upstream_message(body: &serde_json::Value) -> Option<String> {
    body.get("error")?
        .get("message")?
        .as_str()
        .map(str::to_string)
}
