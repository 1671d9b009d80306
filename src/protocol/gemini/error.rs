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

/// Reads the message out of a Gemini-shaped error body, if it is one.
pub fn upstream_message(body: &serde_json::Value) -> Option<String> {
    body.get("error")?
        .get("message")?
        .as_str()
        .map(str::to_string)
}
