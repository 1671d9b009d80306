//! The one error type of the translation layer: what could not be decoded or
//! expressed, which parameter it concerns, and on which side it happened.

/// Which side of the exchange a [`TranslateError`] is about; decides the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TranslateErrorKind {
    /// The client's request body is not valid for its own protocol (400).
    InvalidRequest,
    /// The client's request is valid but asks for something the upstream
    /// protocol cannot express, and dropping it would not be harmless (400).
    Unsupported,
    /// The upstream's response body could not be decoded or re-encoded for
    /// the client (502: the upstream, not the client, is at fault).
    InvalidUpstreamResponse,
}

/// A translation failure. The gateway renders it in the client family's error
/// shape with [`TranslateError::status`] and [`TranslateError::param`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TranslateError {
    /// Which side is at fault (and so the HTTP status).
    pub kind: TranslateErrorKind,
    /// The request parameter concerned, as a JSON path, if any. Decoding
    /// errors use the client's own wire path (`messages[2].content[0].image_url.url`);
    /// "cannot be expressed" errors use the canonical request's path
    /// (`messages[i]` counts conversation turns, system prompts excluded;
    /// `tools[i]`, `tool_choice`, `n`, `response_format.json_schema.schema`).
    pub param: Option<String>,
    /// A sentence saying what is wrong and why.
    pub message: String,
}

impl TranslateError {
    /// The client's request is malformed for its protocol.
    pub fn invalid(param: impl Into<Option<String>>, message: impl Into<String>) -> Self {
        TranslateError {
            kind: TranslateErrorKind::InvalidRequest,
            param: param.into(),
            message: message.into(),
        }
    }

    /// The request cannot be expressed in the upstream protocol.
    pub fn unsupported(param: impl Into<Option<String>>, message: impl Into<String>) -> Self {
        TranslateError {
            kind: TranslateErrorKind::Unsupported,
            param: param.into(),
            message: message.into(),
        }
    }

    /// The upstream response is not valid for its protocol (or cannot be re-encoded).
    pub fn upstream(message: impl Into<String>) -> Self {
        TranslateError {
            kind: TranslateErrorKind::InvalidUpstreamResponse,
            param: None,
            message: message.into(),
        }
    }

    /// The HTTP status the gateway should answer with: 400 for client-side
    /// problems, 502 for an upstream response that cannot be translated.
    pub fn status(&self) -> u16 {
        match self.kind {
            TranslateErrorKind::InvalidRequest | TranslateErrorKind::Unsupported => 400,
            TranslateErrorKind::InvalidUpstreamResponse => 502,
        }
    }

    /// Turns a request-side error into an upstream-response error (used when
    /// a response decoder reuses request-side helpers).
    pub fn into_upstream(self, family: crate::family::Family) -> Self {
        match self.kind {
            TranslateErrorKind::InvalidUpstreamResponse => self,
            _ => TranslateError::upstream(format!(
                "the upstream {family} response could not be translated: {}",
                self.message
            )),
        }
    }
}
