//! The gateway's error value: an HTTP status, a protocol-neutral kind, a message
//! and the offending parameter. Each family renders it in its own shape
//! (`protocol::*::error`); nothing below `proxy/` knows about HTTP types.
//! Every message is scrubbed of the gateway's secrets when it is made.

use std::fmt;

/// Longest echo of client input inside an error message (characters).
const QUOTE_CHARS: usize = 64;
/// Longest error message sent back (bytes): a safety net for messages that
/// embed client input without [`quote`] (e.g. a JSON parser's "invalid type:
/// string ..." naming a whole value).
const MAX_MESSAGE_BYTES: usize = 1024;

/// `s` quoted for an error message, cut to a short prefix when long (an
/// unknown 1 MiB model name must not come back whole).
pub fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_CHARS) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &s[..cut], s.len()),
    }
}

/// `message` without any secret the gateway holds (`crate::secrets`):
/// every error message passes here, so no answer, access-log line or log
/// line that prints an error carries one. Before [`bounded`], so a cut never
/// leaves part of a key.
fn scrubbed(message: String) -> String {
    match crate::secrets::scrub(&message) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(s) => s,
    }
}

/// Longest client-supplied string in a log line (characters; [`cut`] adds
/// the real length).
pub const LOGGED_CHARS: usize = 256;

/// `s` for a log line: as it is when at most `chars` characters, else its
/// first `chars` and its real length (a 1 MiB URI must not make a 1 MiB line).
pub fn cut(s: &str, chars: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(chars) {
        None => std::borrow::Cow::Borrowed(s),
        Some((at, _)) => std::borrow::Cow::Owned(format!("{}… ({} bytes)", &s[..at], s.len())),
    }
}

/// `message` cut to [`MAX_MESSAGE_BYTES`] at a character boundary.
fn bounded(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut cut = MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = message.len();
        message.truncate(cut);
        message.push_str(&format!("… (message cut from {total} bytes)"));
    }
    message
}

/// The one table between HTTP statuses and error kinds. A kind's default
/// status is its first row; a status's kind is the first row with that
/// status (so 400 reads as a plain invalid request, and an upstream's 422 or
/// Anthropic's 529 still map to a kind). Statuses not listed are `Internal`.
const STATUS_KINDS: [(u16, ErrorKind); 14] = [
    (400, ErrorKind::InvalidRequest),
    (422, ErrorKind::InvalidRequest),
    (400, ErrorKind::ContextLengthExceeded),
    (401, ErrorKind::Authentication),
    (403, ErrorKind::PermissionDenied),
    (404, ErrorKind::NotFound),
    (405, ErrorKind::MethodNotAllowed),
    (413, ErrorKind::PayloadTooLarge),
    (429, ErrorKind::RateLimited),
    (500, ErrorKind::Internal),
    (502, ErrorKind::BadGateway),
    (503, ErrorKind::Unavailable),
    (529, ErrorKind::Unavailable),
    (504, ErrorKind::Timeout),
];

/// What went wrong, independent of any protocol's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 400: malformed or invalid request.
    InvalidRequest,
    /// 400: input plus requested output exceeds the model's context.
    ContextLengthExceeded,
    /// 401: missing or unknown key.
    Authentication,
    /// 403: the key may not call this model.
    PermissionDenied,
    /// 404: unknown route, provider or model.
    NotFound,
    /// 405: known path, wrong method.
    MethodNotAllowed,
    /// 413: request body above the limit.
    PayloadTooLarge,
    /// 429: rate limited (by us or by the upstream).
    RateLimited,
    /// 500: our own failure.
    Internal,
    /// 502: upstream unreachable or answered something invalid.
    BadGateway,
    /// 503: the upstream cannot be used (e.g. its key is not configured) or is overloaded.
    Unavailable,
    /// 504: the upstream did not answer in time.
    Timeout,
}

impl ErrorKind {
    /// The kind's default HTTP status (from [`STATUS_KINDS`]).
    pub fn status(self) -> u16 {
        STATUS_KINDS
            .iter()
            .find(|(_, k)| *k == self)
            .map_or(500, |(s, _)| *s)
    }

    /// The kind an HTTP status maps to (from [`STATUS_KINDS`]).
    pub fn for_status(status: u16) -> ErrorKind {
        STATUS_KINDS
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(ErrorKind::Internal, |(_, k)| *k)
    }

    /// A stable snake_case name (the access log's `error_type`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::ContextLengthExceeded => "context_length_exceeded",
            ErrorKind::Authentication => "authentication",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::NotFound => "not_found",
            ErrorKind::MethodNotAllowed => "method_not_allowed",
            ErrorKind::PayloadTooLarge => "payload_too_large",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Internal => "internal",
            ErrorKind::BadGateway => "bad_gateway",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Timeout => "timeout",
        }
    }
}

/// An error to be sent to the client in its family's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayError {
    pub status: u16,
    pub kind: ErrorKind,
    pub message: String,
    /// The request parameter at fault, when there is one.
    pub param: Option<String>,
    /// A machine-readable code (OpenAI's `code`), when there is one: the
    /// gateway's own, or an upstream's kept as it sent it.
    pub code: Option<std::borrow::Cow<'static, str>>,
    /// Seconds for `retry-after` on 429/503.
    pub retry_after: Option<u64>,
    /// The `allow` header of a 405.
    pub allow: Option<&'static str>,
}

impl GatewayError {
    /// An error of `kind` with the kind's default status.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let status = kind.status();
        GatewayError {
            status,
            kind,
            message: bounded(scrubbed(message.into())),
            param: None,
            code: None,
            retry_after: None,
            allow: None,
        }
    }

    /// A 400 naming the parameter at fault.
    pub fn invalid_param(param: impl Into<String>, message: impl Into<String>) -> Self {
        let mut e = GatewayError::new(ErrorKind::InvalidRequest, message);
        e.param = Some(bounded(param.into()));
        e
    }

    /// Sets the machine-readable code.
    pub fn with_code(mut self, code: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// Overrides the status (e.g. to mirror an upstream's status).
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// Sets `retry-after` seconds.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// The kind a bare upstream status maps to.
    pub fn kind_for_status(status: u16) -> ErrorKind {
        ErrorKind::for_status(status)
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.message)
    }
}

impl std::error::Error for GatewayError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_input_is_echoed_as_a_short_prefix() {
        assert_eq!(quote("gpt-5"), "\"gpt-5\"");
        let long = "x".repeat(1 << 20);
        let q = quote(&long);
        assert!(q.starts_with(&format!("{:?}", "x".repeat(64))[..65]), "{q}");
        assert!(q.ends_with("… (1048576 bytes)"), "{q}");
        let multi = "é".repeat(100);
        assert!(quote(&multi).contains("(200 bytes)"));
    }

    #[test]
    fn messages_are_bounded() {
        let e = GatewayError::new(ErrorKind::InvalidRequest, "é".repeat(5000));
        assert!(
            e.message.len() < MAX_MESSAGE_BYTES + 64,
            "{}",
            e.message.len()
        );
        assert!(e.message.ends_with("(message cut from 10000 bytes)"));
        let short = GatewayError::new(ErrorKind::InvalidRequest, "fine");
        assert_eq!(short.message, "fine");
    }
}
