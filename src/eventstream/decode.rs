//! Decoding an upstream's AWS event stream (Bedrock's `/converse-stream`
//! and `/invoke-with-response-stream`) into the events the spokes' stream
//! parsers read, written as SSE so the relay's pipeline (passthrough,
//! translation, the transcript a continuation replays, the first-token
//! check) reads them as it reads any upstream's. The frames are read with
//! AWS's own decoder (`aws-smithy-eventstream`), which checks both CRCs; a
//! frame whose declared length passes the relay's frame bound is refused
//! before it is buffered.
//!
//! - [`Payload::Events`] (Converse): a message is the event named by its
//!   `:event-type` header, its payload the data.
//! - [`Payload::Chunks`] (InvokeModelWithResponseStream): a `chunk` message's
//!   payload is `{"bytes": "<base64>"}`, the model's own event (Anthropic's
//!   Messages event): the data is that event, its name its `type`.
//! - An exception message (`:message-type: exception`, `:exception-type`,
//!   payload `{"message": …}`) or an error message (`:message-type: error`,
//!   `:error-code`, `:error-message`) is the upstream's in-band error: for
//!   Converse, the event named by the exception (the union member AWS's
//!   SDKs read); for chunks, the model protocol's error event
//!   (`throttlingException` → `rate_limit_error`, …).

use crate::sse::encode_event;
use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};
use bytes::{Buf, BytesMut};

/// What a message's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// The event itself (Converse).
    Events,
    /// `{"bytes": base64}` wrapping an Anthropic Messages event (InvokeModel).
    Chunks,
}

/// Why the stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A frame is not AWS's event-stream encoding (a bad CRC, a bad length).
    Malformed(String),
    /// A frame declares more bytes than the bound.
    TooLarge(usize),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Malformed(m) => write!(f, "malformed event-stream frame: {m}"),
            FrameError::TooLarge(limit) => {
                write!(f, "event-stream frame larger than {limit} bytes")
            }
        }
    }
}

/// An incremental decoder of one upstream's event stream.
#[derive(Debug)]
pub struct EventStreamDecoder {
    payload: Payload,
    buf: BytesMut,
    frames: MessageFrameDecoder,
    max_frame_bytes: usize,
    /// The length of the frame being read (its prelude seen), checked once.
    checked: bool,
    scratch: Vec<u8>,
    failed: bool,
}

/// The prelude: total length, headers length, prelude CRC.
const PRELUDE: usize = 12;

impl EventStreamDecoder {
    pub fn new(payload: Payload, max_frame_bytes: usize) -> Self {
        EventStreamDecoder {
            payload,
            buf: BytesMut::new(),
            frames: MessageFrameDecoder::new(),
            max_frame_bytes,
            checked: false,
            scratch: Vec::new(),
            failed: false,
        }
    }

    /// Whether bytes of an unfinished frame are held.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.checked
    }

    /// Feeds upstream bytes; appends each whole message, as an SSE event,
    /// to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
        if self.failed {
            return Err(FrameError::Malformed("the stream failed earlier".into()));
        }
        self.buf.extend_from_slice(chunk);
        let r = self.drain(out);
        if r.is_err() {
            self.failed = true;
            self.buf.clear();
        }
        r
    }

    fn drain(&mut self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        loop {
            if !self.checked {
                if self.buf.len() < PRELUDE {
                    return Ok(());
                }
                let total =
                    u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
                if usize::try_from(total).map_or(true, |t| t > self.max_frame_bytes) {
                    return Err(FrameError::TooLarge(self.max_frame_bytes));
                }
                self.checked = true;
            }
            let before = self.buf.remaining();
            let frame = self
                .frames
                .decode_frame(&mut self.buf)
                .map_err(|e| FrameError::Malformed(e.to_string()))?;
            match frame {
                DecodedFrame::Incomplete => {
                    // The decoder keeps the prelude it took.
                    if self.buf.remaining() == before {
                        return Ok(());
                    }
                }
                DecodedFrame::Complete(message) => {
                    self.checked = false;
                    self.message(&message, out)?;
                }
            }
        }
    }

    /// One message as an SSE event.
    fn message(&mut self, m: &Message, out: &mut Vec<u8>) -> Result<(), FrameError> {
        let kind = header(m, ":message-type").unwrap_or("event");
        match kind {
            "event" => {
                let name = header(m, ":event-type").unwrap_or("");
                match self.payload {
                    Payload::Events => encode_event(out, Some(name), m.payload()),
                    Payload::Chunks if name == "chunk" => self.chunk(m.payload(), out)?,
                    // Nothing else is sent on this stream: not the model's event.
                    Payload::Chunks => {}
                }
            }
            "exception" => {
                let name = header(m, ":exception-type").unwrap_or("internalServerException");
                let message = serde_json::from_slice::<serde_json::Value>(m.payload())
                    .ok()
                    .and_then(|v| v.get("message").or_else(|| v.get("Message")).cloned())
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| String::from_utf8_lossy(m.payload()).into_owned());
                self.exception(name, &message, m.payload(), out);
            }
            "error" => {
                let code = header(m, ":error-code").unwrap_or("internalServerException");
                let message = header(m, ":error-message").unwrap_or("").to_string();
                let payload = serde_json::to_vec(&serde_json::json!({ "message": message }))
                    .unwrap_or_default();
                self.exception(code, &message, &payload, out);
            }
            other => {
                return Err(FrameError::Malformed(format!(
                    "unknown :message-type {:?}",
                    other.chars().take(40).collect::<String>()
                )))
            }
        }
        Ok(())
    }

    /// A `chunk`'s model event: `{"bytes": base64}` decoded.
    fn chunk(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
        #[derive(serde::Deserialize)]
        struct Chunk<'a> {
            #[serde(borrow)]
            bytes: std::borrow::Cow<'a, str>,
        }
        #[derive(serde::Deserialize)]
        struct Typed<'a> {
            #[serde(
                borrow,
                rename = "type",
                default,
                deserialize_with = "crate::util::serde_str::opt_str"
            )]
            kind: Option<std::borrow::Cow<'a, str>>,
        }
        let chunk: Chunk<'_> = serde_json::from_slice(payload)
            .map_err(|_| FrameError::Malformed("a chunk without \"bytes\"".into()))?;
        let decoded = crate::util::base64::decode(&chunk.bytes)
            .ok_or_else(|| FrameError::Malformed("a chunk whose bytes are not base64".into()))?;
        self.scratch = decoded;
        // Its name is its `type` (Anthropic's events name themselves); data
        // that is not such an object goes on unnamed, for the parser to judge.
        let name = serde_json::from_slice::<Typed<'_>>(&self.scratch)
            .ok()
            .and_then(|t| t.kind);
        encode_event(out, name.as_deref(), &self.scratch);
        Ok(())
    }

    /// An in-band error, as the stream's protocol carries one.
    fn exception(&mut self, name: &str, message: &str, payload: &[u8], out: &mut Vec<u8>) {
        match self.payload {
            Payload::Events => encode_event(out, Some(name), payload),
            Payload::Chunks => {
                let event = serde_json::json!({
                    "type": "error",
                    "error": {"type": anthropic_error_type(name), "message": format!("{name}: {message}")},
                });
                let data = serde_json::to_vec(&event).unwrap_or_default();
                encode_event(out, Some("error"), &data);
            }
        }
    }
}

/// A string header's value.
fn header<'m>(m: &'m Message, name: &str) -> Option<&'m str> {
    m.headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// The Anthropic error type of a Bedrock exception (its name, in either
/// case of its first letter, as the stream and the HTTP header write it).
pub fn anthropic_error_type(exception: &str) -> &'static str {
    let lower = exception.to_ascii_lowercase();
    match lower.as_str() {
        "throttlingexception" | "toomanyrequestsexception" | "servicequotaexceededexception" => {
            "rate_limit_error"
        }
        "serviceunavailableexception" | "modelnotreadyexception" => "overloaded_error",
        "modeltimeoutexception" => "timeout_error",
        "validationexception" | "modelerrorexception" => "invalid_request_error",
        "accessdeniedexception" => "permission_error",
        "resourcenotfoundexception" => "not_found_error",
        "unrecognizedclientexception" | "invalidsignatureexception" => "authentication_error",
        _ => "api_error",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use aws_smithy_eventstream::frame::write_message_to;
    use aws_smithy_types::event_stream::Header;

    fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
        let mut m = Message::new(bytes::Bytes::copy_from_slice(payload));
        for (k, v) in headers {
            m = m.add_header(Header::new(
                k.to_string(),
                HeaderValue::String(v.to_string().into()),
            ));
        }
        let mut out = Vec::new();
        write_message_to(&m, &mut out).unwrap();
        out
    }

    fn event(name: &str, payload: &str) -> Vec<u8> {
        frame(
            &[
                (":message-type", "event"),
                (":event-type", name),
                (":content-type", "application/json"),
            ],
            payload.as_bytes(),
        )
    }

    #[test]
    fn converse_events_are_named_by_their_event_type_in_any_split() {
        let mut wire = event("messageStart", r#"{"role":"assistant"}"#);
        wire.extend(event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
        ));
        for split in [1, 5, 13, wire.len()] {
            let mut d = EventStreamDecoder::new(Payload::Events, 1 << 20);
            let mut out = Vec::new();
            for piece in wire.chunks(split) {
                d.push(piece, &mut out).unwrap();
            }
            assert!(!d.has_partial());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "event: messageStart\ndata: {\"role\":\"assistant\"}\n\nevent: contentBlockDelta\ndata: {\"contentBlockIndex\":0,\"delta\":{\"text\":\"Hi\"}}\n\n"
            );
        }
    }

    #[test]
    fn chunks_carry_the_anthropic_event() {
        let inner =
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#;
        let mut b64 = String::new();
        crate::util::base64::encode(inner.as_bytes(), &mut b64);
        let wire = event("chunk", &format!(r#"{{"bytes":"{b64}","p":"abc"}}"#));
        let mut d = EventStreamDecoder::new(Payload::Chunks, 1 << 20);
        let mut out = Vec::new();
        d.push(&wire, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("event: content_block_delta\ndata: {inner}\n\n")
        );
    }

    #[test]
    fn exceptions_are_in_band_errors() {
        let wire = frame(
            &[
                (":message-type", "exception"),
                (":exception-type", "throttlingException"),
            ],
            br#"{"message":"Too many requests"}"#,
        );
        let mut d = EventStreamDecoder::new(Payload::Chunks, 1 << 20);
        let mut out = Vec::new();
        d.push(&wire, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("event: error\ndata: "), "{text}");
        assert!(text.contains("\"rate_limit_error\"") && text.contains("Too many requests"));
        let mut d = EventStreamDecoder::new(Payload::Events, 1 << 20);
        let mut out = Vec::new();
        d.push(&wire, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: throttlingException\ndata: {\"message\":\"Too many requests\"}\n\n"
        );
        assert_eq!(
            anthropic_error_type("ValidationException"),
            "invalid_request_error"
        );
    }

    #[test]
    fn a_bad_crc_or_a_frame_over_the_bound_is_refused() {
        let mut wire = event("messageStop", r#"{"stopReason":"end_turn"}"#);
        let n = wire.len();
        wire[n - 1] ^= 0xff;
        let mut d = EventStreamDecoder::new(Payload::Events, 1 << 20);
        let mut out = Vec::new();
        assert!(matches!(
            d.push(&wire, &mut out),
            Err(FrameError::Malformed(_))
        ));
        assert!(out.is_empty());
        // the prelude's own CRC
        let mut wire = event("messageStop", "{}");
        wire[9] ^= 1;
        let mut d = EventStreamDecoder::new(Payload::Events, 1 << 20);
        assert!(d.push(&wire, &mut out).is_err());
        let wire = event("messageStop", &"x".repeat(200));
        let mut d = EventStreamDecoder::new(Payload::Events, 100);
        assert_eq!(
            d.push(&wire[..12], &mut out),
            Err(FrameError::TooLarge(100))
        );
    }
}
