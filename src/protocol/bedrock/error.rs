//! Bedrock error bodies: `{"message": "..."}`, the error's type in the
//! `x-amzn-errortype` header (AWS's restJson1 error protocol), chosen from
//! the error's kind and status.

use crate::error::{ErrorKind, GatewayError};
use crate::protocol::common::spoke::CONTEXT_OVERFLOW;

/// The `x-amzn-errortype` of an error (the service model's exception names).
pub fn error_type(e: &GatewayError) -> &'static str {
    match e.kind {
        ErrorKind::InvalidRequest
        | ErrorKind::ContextLengthExceeded
        | ErrorKind::MethodNotAllowed
        | ErrorKind::PayloadTooLarge => "ValidationException",
        ErrorKind::Authentication | ErrorKind::PermissionDenied => "AccessDeniedException",
        ErrorKind::NotFound => "ResourceNotFoundException",
        ErrorKind::RateLimited => "ThrottlingException",
        ErrorKind::Timeout => "ModelTimeoutException",
        ErrorKind::BadGateway => "ModelErrorException",
        ErrorKind::Unavailable => "ServiceUnavailableException",
        ErrorKind::Internal => "InternalServerException",
    }
}

/// The exception name of an error inside a stream (the stream union's
/// lowerCamel member names: `throttlingException`, …).
pub fn stream_exception_type(e: &GatewayError) -> &'static str {
    match e.kind {
        ErrorKind::RateLimited => "throttlingException",
        ErrorKind::Unavailable => "serviceUnavailableException",
        ErrorKind::InvalidRequest
        | ErrorKind::ContextLengthExceeded
        | ErrorKind::MethodNotAllowed
        | ErrorKind::PayloadTooLarge
        | ErrorKind::Authentication
        | ErrorKind::PermissionDenied
        | ErrorKind::NotFound => "validationException",
        ErrorKind::Timeout | ErrorKind::BadGateway => "modelStreamErrorException",
        ErrorKind::Internal => "internalServerException",
    }
}

/// Renders the whole error body.
pub fn error_body(e: &GatewayError) -> Vec<u8> {
    serde_json::json!({ "message": e.message })
        .to_string()
        .into_bytes()
}

/// The message of an upstream error body (`message`, or `Message` as some
/// AWS services spell it).
pub fn upstream_message(body: &serde_json::Value) -> Option<String> {
    body.get("message")
        .or_else(|| body.get("Message"))?
        .as_str()
        .map(str::to_string)
}

/// [`CONTEXT_OVERFLOW`] for Bedrock's "input is too long" validation errors
/// (Bedrock errors carry no code in the body).
pub fn upstream_code(body: &serde_json::Value) -> Option<String> {
    let m = upstream_message(body)?.to_ascii_lowercase();
    (m.contains("too long") || m.contains("too many input tokens") || m.contains("context window"))
        .then(|| CONTEXT_OVERFLOW.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shape_and_types() {
        let e = GatewayError::new(ErrorKind::RateLimited, "slow down");
        assert_eq!(error_body(&e), br#"{"message":"slow down"}"#);
        assert_eq!(error_type(&e), "ThrottlingException");
        assert_eq!(stream_exception_type(&e), "throttlingException");
        let e = GatewayError::new(ErrorKind::Authentication, "no key");
        assert_eq!(error_type(&e), "AccessDeniedException");
        let body = serde_json::json!({"message": "Input is too long for requested model."});
        assert_eq!(upstream_code(&body).as_deref(), Some(CONTEXT_OVERFLOW));
        assert_eq!(
            upstream_message(&serde_json::json!({"Message": "x"})).as_deref(),
            Some("x")
        );
    }
}
