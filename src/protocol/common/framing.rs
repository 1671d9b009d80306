//! How a client stream is framed, and how an upstream stream can fail: the
//! vocabulary shared by every spoke's stream codec and the relay.

/// How a stream is framed for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events.
    Sse,
    /// Gemini's JSON array stream (`:streamGenerateContent` without `alt=sse`, docs/api.md "Routes"): `[obj,\r\nobj,…]`.
    JsonArray,
    /// AWS event-stream messages of Converse events (E21,
    /// `/converse-stream`): the Bedrock encoder writes them itself.
    EventStream,
    /// InvokeModelWithResponseStream (E23): the Anthropic stream's SSE
    /// events, each re-framed as an event-stream `chunk` message
    /// (`protocol::bedrock::invoke::Chunks`) on its way to the client; the
    /// client stream itself writes SSE ([`Framing::inner`]).
    BedrockChunks,
}

impl Framing {
    /// The framing the client stream (encoder or passthrough) writes: SSE
    /// for a stream re-framed afterwards.
    pub fn inner(self) -> Framing {
        match self {
            Framing::BedrockChunks => Framing::Sse,
            f => f,
        }
    }

    /// The answer's media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::JsonArray => "application/json",
            Framing::EventStream | Framing::BedrockChunks => {
                crate::eventstream::encode::CONTENT_TYPE
            }
        }
    }
}

/// How an upstream frames its stream (`protocol::cloud::upstream_framing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFraming {
    /// Server-sent events.
    Sse,
    /// AWS's event stream (`application/vnd.amazon.eventstream`), each
    /// message an event named by its `:event-type` header (Converse).
    EventStream,
    /// AWS's event stream whose `chunk` messages carry another protocol's
    /// event base64-encoded in `{"bytes": …}` (InvokeModelWithResponseStream).
    EventStreamChunks,
}

/// The unreadable frames a stream may skip (each counted and logged); one
/// more ends it with the client's error event.
pub const MAX_SKIPPED_FRAMES: u32 = 3;

/// Why a stream could not be passed on to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamFault {
    /// The upstream sent bytes that are not a valid frame.
    Malformed(String),
    /// One frame's data is not a document the parser can read at all (not
    /// JSON, or not the shape of any event): the frame can be skipped and an
    /// otherwise healthy stream goes on ([`MAX_SKIPPED_FRAMES`]).
    Unreadable(String),
    /// The upstream stream ended before its terminal event.
    Truncated,
    /// A continuation of a cut stream (`translate::continuation`) did not
    /// begin with what the client already received.
    Diverged(String),
    /// The upstream's own error event, mid-stream, of a kind another
    /// attempt may not meet (overloaded, rate-limited, a server error),
    /// held back from a stream that may be continued: its canonical error,
    /// and for a passed-through stream the event as the client would have
    /// got it (written as it is when the stream is not continued).
    Upstream(crate::ir::stream::StreamError, Vec<u8>),
}

impl StreamFault {
    /// Whether an upstream error event of this kind is worth another
    /// attempt: the upstream's trouble, not the request's.
    pub fn transient(kind: crate::ir::stream::StreamErrorKind) -> bool {
        use crate::ir::stream::StreamErrorKind as K;
        matches!(
            kind,
            K::Overloaded | K::Api | K::RateLimited | K::Timeout | K::InvalidUpstream
        )
    }
}

/// Checks that an upstream event's name and data are UTF-8, as JSON must be
/// (RFC 8259 §8.1) and SSE is, and gives the data as text: every stream
/// path, passed through or translated, runs this on each event before
/// reading it (the translated path in its family's parser, first thing), so
/// invalid bytes anywhere in an event (even in a member nobody reads) end
/// the stream with the client family's error event instead of reaching the
/// client raw. One linear validation of the payload (std's, with its ASCII
/// fast path); no re-parse, no copy. The parsers read the text with
/// `serde_json::from_str`, which checks no string of it again (from bytes,
/// serde validates each string it reads: in a chat chunk, more
/// instructions than this one pass over the whole). The bytes themselves
/// are not echoed.
pub fn check_utf8<'a>(event: Option<&[u8]>, data: &'a [u8]) -> Result<&'a str, StreamFault> {
    let text = match std::str::from_utf8(data) {
        Ok(text) => text,
        Err(e) => {
            return Err(StreamFault::Malformed(format!(
                "invalid UTF-8 at byte {} of an event's JSON data (JSON must be UTF-8, RFC 8259 section 8.1)",
                e.valid_up_to()
            )))
        }
    };
    if !name_is_utf8(event) {
        return Err(StreamFault::Malformed(
            "invalid UTF-8 in an event's name".to_string(),
        ));
    }
    Ok(text)
}

/// Whether an event's name (none, or its bytes) is valid UTF-8.
pub fn name_is_utf8(event: Option<&[u8]>) -> bool {
    event.is_none_or(crate::util::words::is_utf8)
}

impl std::fmt::Display for StreamFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFault::Malformed(m) | StreamFault::Unreadable(m) => {
                write!(f, "upstream sent a malformed stream frame: {m}")
            }
            StreamFault::Truncated => f.write_str("upstream stream ended before it was complete"),
            StreamFault::Diverged(m) => f.write_str(m),
            StreamFault::Upstream(e, _) => write!(f, "{}", e.message),
        }
    }
}
