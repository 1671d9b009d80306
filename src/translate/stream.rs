//! The per-request stream pipeline for the client: either the same-family
//! [`PassthroughStream`] or a [`StreamTranslator`] (SSE decoder → upstream
//! family's parser → canonical events → client family's encoder), behind one
//! [`ClientStream`] with the passthrough's API so the relay loop drives either.
//!
//! Everything is synchronous and push-based: each call to `push` translates
//! every complete upstream frame in the chunk and appends the client's bytes
//! to `out`, so the first token leaves as soon as it arrives.
//!
//! Both paths treat an upstream event whose data or name is not UTF-8 the
//! same way: a malformed frame (`passthrough::check_utf8`), which ends the
//! client's stream with its family's error event and cools the upstream.
//!
//! ```
//! use switchboard::family::Family;
//! use switchboard::translate::passthrough::Framing;
//! use switchboard::translate::stream::StreamTranslator;
//!
//! let mut t = StreamTranslator::new(Family::Gemini, Family::OpenAi, Framing::Sse, "google/gemini-2.5-flash", false, 1 << 20);
//! let mut out = Vec::new();
//! t.push(b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]},\"finishReason\":\"STOP\"}]}\r\n\r\n", &mut out).unwrap();
//! t.finish(&mut out).unwrap();
//! let text = String::from_utf8(out).unwrap();
//! assert!(text.contains("\"content\":\"Hi\""));
//! assert!(text.ends_with("data: [DONE]\n\n"));
//! ```

use crate::family::Family;
use crate::ir::stream::{merge_usage, StreamEvent};
use crate::ir::Usage as CanonicalUsage;
use crate::protocol::responses::envelope::Envelope;
pub use crate::protocol::stream_codec::{Encoder, Parser};
use crate::sse::{SseDecoder, SseError, SseItem};
use crate::translate::passthrough::{self, skip, Framing, PassthroughStream, StreamFault, Usage};

/// Translates one upstream stream of one family into the client's family.
#[derive(Debug)]
pub struct StreamTranslator {
    decoder: SseDecoder,
    parser: Parser,
    encoder: Encoder,
    usage: Option<CanonicalUsage>,
    /// The stream ended with a message stop or an upstream error event.
    complete: bool,
    /// A fault was reported: later input is ignored.
    faulted: bool,
    /// Unreadable frames skipped so far (`passthrough::skip`).
    skipped: u32,
}

impl StreamTranslator {
    /// A translator from `upstream`'s stream to `client`'s, written with
    /// `framing`, naming the model `client_model` as the client expects it
    /// (OpenAI `provider/model_id`, Anthropic and Gemini the bare id);
    /// `include_usage` is OpenAI's `stream_options.include_usage`.
    pub fn new(
        upstream: Family,
        client: Family,
        framing: Framing,
        client_model: &str,
        include_usage: bool,
        max_frame_bytes: usize,
    ) -> Self {
        StreamTranslator {
            decoder: SseDecoder::new(max_frame_bytes),
            parser: Parser::new(upstream),
            encoder: Encoder::new(
                client,
                framing,
                client_model,
                include_usage,
                crate::protocol::common::support::now(),
            ),
            usage: None,
            complete: false,
            faulted: false,
            skipped: 0,
        }
    }

    /// Sets the `created` time OpenAI (and `created_at` Responses) clients
    /// see when the upstream gives none (default: the translator's creation
    /// time), for reproducible output.
    #[must_use]
    pub fn with_created(mut self, created: u64) -> Self {
        match &mut self.encoder {
            Encoder::OpenAi(e) => e.set_created(created),
            Encoder::Responses(e) => e.set_created(created),
            _ => {}
        }
        self
    }

    /// The unreadable upstream frames skipped so far.
    pub fn skipped_frames(&self) -> u32 {
        self.skipped
    }

    /// Whether the stream has ended: its end event, or an upstream error event, was translated.
    pub fn is_complete(&self) -> bool {
        self.complete || self.parser.is_complete()
    }

    /// Token usage reported so far (input includes cached prompt tokens;
    /// output includes reasoning tokens).
    pub fn usage(&self) -> Usage {
        self.usage
            .as_ref()
            .map(Usage::from_canonical)
            .unwrap_or_default()
    }

    /// Feeds upstream bytes; appends what the client should receive to `out`.
    /// An error means the upstream stream is malformed: call [`fail`](Self::fail).
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), StreamFault> {
        if self.faulted {
            return Ok(());
        }
        let Self {
            decoder,
            parser,
            encoder,
            usage,
            complete,
            faulted,
            skipped,
        } = self;
        let mut fault = None;
        let r = decoder.push(chunk, |item| {
            if fault.is_some() || *complete {
                return;
            }
            match item {
                SseItem::Comment(text) => {
                    encoder.comment(String::from_utf8_lossy(text).as_bytes(), out)
                }
                SseItem::Event(ev) => {
                    // Invalid UTF-8 in a member the parser skips would
                    // otherwise pass unnoticed (see `check_utf8`).
                    if let Err(f) = crate::protocol::common::framing::check_utf8(ev.event, ev.data)
                    {
                        fault = Some(f);
                        return;
                    }
                    let mut sink = |e: &StreamEvent| {
                        track(usage, e);
                        encoder.event(e, out);
                    };
                    if let Err(f) = parser.push(&ev, &mut sink) {
                        fault = skip(skipped, f);
                    }
                    *complete = encoder.is_ended();
                }
            }
        });
        if let Err(SseError::FrameTooLarge { limit }) = r {
            fault.get_or_insert(StreamFault::Malformed(format!(
                "frame larger than {limit} bytes"
            )));
        }
        match fault {
            Some(f) => {
                *faulted = true;
                Err(f)
            }
            None => Ok(()),
        }
    }

    /// Called at the upstream's end of stream: ends the client's stream, or
    /// reports a truncation (then call [`fail`](Self::fail)).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), StreamFault> {
        let partial = self.decoder.finish().is_err();
        if !self.complete {
            if partial || self.faulted {
                return Err(StreamFault::Truncated);
            }
            let Self {
                parser,
                encoder,
                usage,
                ..
            } = self;
            parser.finish(&mut |e: &StreamEvent| {
                track(usage, e);
                encoder.event(e, out);
            })?;
            self.complete = self.encoder.is_ended();
            if !self.complete {
                return Err(StreamFault::Truncated);
            }
        }
        self.encoder.close(out);
        Ok(())
    }

    /// Ends the client's stream with `error_json` (the client family's whole
    /// error body, as `respond::error_body` renders it).
    pub fn fail(&mut self, error_json: &[u8], out: &mut Vec<u8>) {
        self.faulted = true;
        self.encoder.fail(error_json, out);
        self.encoder.close(out);
    }
}

/// Keeps the running canonical usage up to date.
fn track(usage: &mut Option<CanonicalUsage>, e: &StreamEvent) {
    let u = match e {
        StreamEvent::MessageStart(s) => s.usage.as_ref(),
        StreamEvent::MessageDelta(d) => d.usage.as_ref(),
        _ => None,
    };
    if let Some(u) = u {
        *usage = Some(merge_usage(usage.take(), u));
    }
}

/// The client's side of a streamed response: passed through (same family) or translated.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per streamed request, held across the relay loop; boxing would only add an allocation"
)]
pub enum ClientStream {
    /// Upstream and client speak the same protocol: frames pass through with the model renamed.
    Passthrough(PassthroughStream),
    /// Cross-family: decoded, translated through the canonical events, re-encoded.
    Translate(StreamTranslator),
}

impl ClientStream {
    /// The stream for an `upstream` response to a `client` request: a
    /// passthrough when the families match, a translator otherwise.
    pub fn new(
        upstream: Family,
        client: Family,
        framing: Framing,
        client_model: &str,
        include_usage: bool,
        max_frame_bytes: usize,
    ) -> Self {
        if upstream == client {
            ClientStream::Passthrough(PassthroughStream::new(
                client,
                framing,
                passthrough::model_json(client_model),
                max_frame_bytes,
            ))
        } else {
            ClientStream::Translate(StreamTranslator::new(
                upstream,
                client,
                framing,
                client_model,
                include_usage,
                max_frame_bytes,
            ))
        }
    }

    /// Feeds upstream bytes; appends what the client should receive to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), StreamFault> {
        match self {
            ClientStream::Passthrough(p) => p.push(chunk, out),
            ClientStream::Translate(t) => t.push(chunk, out),
        }
    }

    /// Called at the upstream's end of stream: closes the client's stream, or reports a truncation.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), StreamFault> {
        match self {
            ClientStream::Passthrough(p) => p.finish(out),
            ClientStream::Translate(t) => t.finish(out),
        }
    }

    /// Ends the client's stream with `error_json` (the client family's error body).
    pub fn fail(&mut self, error_json: &[u8], out: &mut Vec<u8>) {
        match self {
            ClientStream::Passthrough(p) => p.fail(error_json, out),
            ClientStream::Translate(t) => t.fail(error_json, out),
        }
    }

    /// Responses: sets the id and members the stream's `response` objects
    /// carry (a stored or continued response, docs/api.md "Stored responses").
    pub fn set_envelope(&mut self, envelope: Envelope) {
        match self {
            ClientStream::Passthrough(p) => p.set_envelope(envelope),
            ClientStream::Translate(t) => {
                if let Encoder::Responses(e) = &mut t.encoder {
                    e.set_envelope(envelope);
                }
            }
        }
    }

    /// Responses: the response object of the stream's terminal event, as the
    /// client received it (for the store).
    pub fn final_response(&self) -> Option<&[u8]> {
        match self {
            ClientStream::Passthrough(p) => p.final_response(),
            ClientStream::Translate(t) => match &t.encoder {
                Encoder::Responses(e) => e.final_response(),
                _ => None,
            },
        }
    }

    /// Token usage read so far.
    pub fn usage(&self) -> Usage {
        match self {
            ClientStream::Passthrough(p) => p.usage,
            ClientStream::Translate(t) => t.usage(),
        }
    }

    /// Whether the stream's terminal event has been seen.
    pub fn is_complete(&self) -> bool {
        match self {
            ClientStream::Passthrough(p) => p.is_complete(),
            ClientStream::Translate(t) => t.is_complete(),
        }
    }

    /// The unreadable upstream frames the stream skipped.
    pub fn skipped_frames(&self) -> u32 {
        match self {
            ClientStream::Passthrough(p) => p.skipped_frames(),
            ClientStream::Translate(t) => t.skipped_frames(),
        }
    }
}
