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
//! same way: a malformed frame (`framing::check_utf8`, which the
//! pass-through runs itself and every family's stream parser first thing),
//! which ends the client's stream with its family's error event and cools
//! the upstream.
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
use crate::protocol::responses::namespace::Namespaces;
pub use crate::protocol::stream_codec::{Encoder, Parser};
use crate::sse::{SseDecoder, SseError, SseItem};
use crate::translate::continuation::{Partial, Splice};
use crate::translate::passthrough::{self, skip, Framing, PassthroughStream, StreamFault, Usage};
use crate::translate::transcript::Transcript;

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
    /// What the client has received, recorded when the stream may be
    /// continued after a cut (`translate::continuation`): the upstream bytes
    /// read (`transcript`, each frame kept as its difference from the one
    /// before, replayed at a cut: nothing parsed per event), or, once
    /// continued, the events the client was given (its answer then has more
    /// than one upstream).
    record: Option<Box<Partial>>,
    transcript: Option<Transcript>,
    /// A continuation's events on their way into the client's stream.
    splice: Option<Box<Splice>>,
    /// The client was given the answer's stop reason.
    finished: bool,
    /// An upstream error event held back for a continuation: what the
    /// client gets if the stream is not continued.
    held: Option<crate::ir::stream::StreamError>,
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
            record: None,
            transcript: None,
            splice: None,
            finished: false,
            held: None,
        }
    }

    /// Records what the client receives, so the stream can be continued
    /// after a cut ([`StreamTranslator::partial`]).
    #[must_use]
    pub fn recording(mut self) -> Self {
        self.transcript = Some(Transcript::default());
        self
    }

    /// Whether the stream may be continued after a cut.
    fn rescuable(&self) -> bool {
        self.record.is_some() || self.transcript.is_some()
    }

    /// A translator that takes over a passed-through stream the client has
    /// received `partial` of: a fresh encoder brought to where the client
    /// is (what it writes meanwhile is thrown away: the client has it),
    /// then [`resume`](Self::resume)d on the continuation's upstream.
    pub fn primed(client: &Resume<'_>, partial: &Partial, envelope: Option<Envelope>) -> Self {
        let mut t = StreamTranslator::new(
            client.family,
            client.family,
            client.framing,
            client.model,
            client.include_usage,
            client.max_frame_bytes,
        );
        if let (Some(env), Encoder::Responses(e)) = (envelope, &mut t.encoder) {
            e.set_envelope(env);
        }
        t.set_namespaces(client.namespaces);
        let mut discard = Vec::new();
        for e in partial.events() {
            t.encoder.event(&e, &mut discard);
            discard.clear();
        }
        t.usage = partial.usage().cloned();
        t.record = Some(Box::new(partial.clone()));
        t
    }

    /// What the client has received so far (when recording; None when
    /// not, or too long to rebuild); `upstream` is the protocol read.
    pub fn partial(&self, upstream: Family, max_frame_bytes: usize) -> Option<Partial> {
        match (&self.record, &self.transcript) {
            (Some(r), _) => Some(Partial::clone(r)),
            (None, Some(t)) => Some(Partial::replay(upstream, &t.bytes(), max_frame_bytes)),
            (None, None) => None,
        }
    }

    /// Goes on with a continuation from an `upstream` stream: its events
    /// reach the client's encoder through `splice`.
    pub fn resume(
        &mut self,
        upstream: Family,
        splice: Splice,
        partial: &Partial,
        max_frame_bytes: usize,
    ) {
        // From here the answer has more than one upstream: the client's
        // view is recorded as it is given.
        self.transcript = None;
        if self.record.is_none() {
            self.record = Some(Box::new(partial.clone()));
        }
        self.decoder = SseDecoder::new(max_frame_bytes);
        self.parser = Parser::new(upstream);
        self.splice = Some(Box::new(splice));
        self.complete = false;
        self.faulted = false;
        self.held = None;
    }

    /// The usage of the answer's earlier segments and of the current
    /// continuation, apart (None before any continuation).
    pub fn usage_parts(&self) -> Option<(CanonicalUsage, Option<CanonicalUsage>)> {
        let (base, cont) = self.splice.as_ref()?.usage_parts();
        Some((base.clone(), cont.cloned()))
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

    /// Responses: the namespaced tools the client declared, whose calls
    /// (flat-named upstream) it gets back with their `namespace`.
    pub fn set_namespaces(&mut self, names: &Namespaces) {
        if let (Encoder::Responses(e), false) = (&mut self.encoder, names.is_empty()) {
            e.set_namespaces(names.clone());
        }
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
            record,
            transcript,
            splice,
            finished,
            held: _,
        } = self;
        if transcript.as_mut().is_some_and(|t| !t.push(chunk)) {
            *transcript = None;
        }
        let rescue = record.is_some() || transcript.is_some();
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
                    // The parser checks the event is UTF-8 first thing
                    // (`framing::check_utf8`): a fault that ends the stream.
                    let mut spliced = None;
                    let mut sink = |e: &StreamEvent| {
                        if spliced.is_none() {
                            spliced = deliver(e, splice, record, rescue, usage, encoder, out).err();
                            *finished |= is_stop(e);
                        }
                    };
                    if let Err(f) = parser.push(&ev, &mut sink) {
                        fault = skip(skipped, f);
                    }
                    if spliced.is_some() {
                        fault = spliced;
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
                if let StreamFault::Upstream(e, _) = &f {
                    self.held = Some(e.clone());
                }
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
            // Cut mid-frame past the stop reason, the answer is whole.
            if (partial && !self.finished) || self.faulted {
                return Err(StreamFault::Truncated);
            }
            let rescue = self.rescuable();
            let Self {
                parser,
                encoder,
                usage,
                record,
                splice,
                ..
            } = self;
            let mut spliced = None;
            parser.finish(&mut |e: &StreamEvent| {
                if spliced.is_none() {
                    spliced = deliver(e, splice, record, rescue, usage, encoder, out).err();
                }
            })?;
            if let Some(f) = spliced {
                return Err(f);
            }
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
        match self.held.take() {
            // The upstream's own error event, held back for a continuation
            // that did not come: the client gets it as it would have.
            Some(e) => self.encoder.event(&StreamEvent::Error(e), out),
            None => self.encoder.fail(error_json, out),
        }
        self.encoder.close(out);
    }
}

/// One canonical event on its way to the client: through the splice of a
/// continuation (which may refuse it), recorded, counted, encoded.
fn deliver(
    e: &StreamEvent,
    splice: &mut Option<Box<Splice>>,
    record: &mut Option<Box<Partial>>,
    rescue: bool,
    usage: &mut Option<CanonicalUsage>,
    encoder: &mut Encoder,
    out: &mut Vec<u8>,
) -> Result<(), StreamFault> {
    // A stream that may be continued holds back an upstream error event
    // worth another attempt (`relay` decides; `fail` writes it if not).
    if let (true, StreamEvent::Error(err)) = (rescue, e) {
        if StreamFault::transient(err.kind) {
            return Err(StreamFault::Upstream(err.clone(), Vec::new()));
        }
    }
    let mut to_client = |e: &StreamEvent| {
        track(usage, e);
        if let Some(r) = record.as_mut() {
            r.record(e);
        }
        encoder.event(e, out);
    };
    match splice.as_mut() {
        Some(s) => s.map(e, &mut to_client),
        None => {
            to_client(e);
            Ok(())
        }
    }
}

/// Whether `e` gives the answer's stop reason.
fn is_stop(e: &StreamEvent) -> bool {
    matches!(e, StreamEvent::MessageDelta(d) if d.stop_reason.is_some())
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
    reason = "the pass-through, the most common stream, stays inline: no allocation of its own"
)]
pub enum ClientStream {
    /// Upstream and client speak the same protocol: frames pass through with the model renamed.
    Passthrough(PassthroughStream),
    /// Cross-family: decoded, translated through the canonical events,
    /// re-encoded. Boxed: the translator is twice a pass-through's size, and
    /// every open stream holds its `ClientStream` for its whole life.
    Translate(Box<StreamTranslator>),
}

impl ClientStream {
    /// The stream for an `upstream` response to a `client` request: a
    /// passthrough when the families match (Bedrock's aside), a translator otherwise.
    pub fn new(
        upstream: Family,
        client: Family,
        framing: Framing,
        client_model: &str,
        include_usage: bool,
        max_frame_bytes: usize,
    ) -> Self {
        // A Bedrock client's stream is event-stream messages, which only
        // the Bedrock encoder writes: never passed through.
        if upstream == client && client != Family::Bedrock {
            ClientStream::Passthrough(PassthroughStream::new(
                client,
                framing,
                passthrough::model_json(client_model),
                max_frame_bytes,
            ))
        } else {
            ClientStream::Translate(Box::new(StreamTranslator::new(
                upstream,
                client,
                framing,
                client_model,
                include_usage,
                max_frame_bytes,
            )))
        }
    }

    /// [`ClientStream::new`] for an `upstream` stream to `client`.
    pub fn for_client(upstream: Family, client: &Resume<'_>) -> Self {
        let mut s = ClientStream::new(
            upstream,
            client.family,
            client.framing,
            client.model,
            client.include_usage,
            client.max_frame_bytes,
        );
        if let ClientStream::Translate(t) = &mut s {
            t.set_namespaces(client.namespaces);
        }
        s
    }

    /// Feeds upstream bytes; appends what the client should receive to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), StreamFault> {
        match self {
            ClientStream::Passthrough(p) => p.push(chunk, out),
            ClientStream::Translate(t) => t.push(chunk, out),
        }
    }

    /// `n` upstream bytes are about to be pushed at once (a burst taken in
    /// more than one read): a kept transcript makes room for them all now,
    /// so it is not copied to grow between the reads.
    pub fn expect(&mut self, n: usize) {
        let transcript = match self {
            ClientStream::Passthrough(p) => p.transcript_mut(),
            ClientStream::Translate(t) => t.transcript.as_mut(),
        };
        if let Some(t) = transcript {
            t.expect(n);
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

    /// Whether the answer reached its stop reason (its terminator may still
    /// be missing): a read that fails after it ends the stream as complete.
    pub fn is_finished(&self) -> bool {
        match self {
            ClientStream::Passthrough(p) => p.is_finished(),
            ClientStream::Translate(t) => t.finished || t.is_complete(),
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

    /// Compacts what a recorded stream keeps before it waits for its
    /// upstream's next read (`transcript::Transcript::settle`).
    pub fn settle(&mut self) {
        match self {
            ClientStream::Passthrough(p) => p.settle(),
            ClientStream::Translate(t) => {
                if let Some(tr) = &mut t.transcript {
                    tr.settle();
                }
            }
        }
    }

    /// Records what the client receives, so the stream can be continued
    /// after a cut.
    pub fn record(&mut self) {
        match self {
            ClientStream::Passthrough(p) => p.keep_transcript(),
            ClientStream::Translate(t) => t.transcript = Some(Transcript::default()),
        }
    }

    /// What the client has received so far, when recorded (None: not
    /// recorded, or too long to rebuild); `upstream` is the protocol of the
    /// stream passed through.
    pub fn partial(&self, upstream: Family, max_frame_bytes: usize) -> Option<Partial> {
        match self {
            ClientStream::Passthrough(p) => p
                .transcript()
                .map(|t| Partial::replay(upstream, &t.bytes(), max_frame_bytes)),
            ClientStream::Translate(t) => t.partial(upstream, max_frame_bytes),
        }
    }

    /// Goes on with a continuation from an `upstream` stream, its events
    /// through `splice`. A passed-through stream becomes a translated one
    /// whose encoder is first brought to where the client is (`partial`).
    pub fn resume(
        &mut self,
        upstream: Family,
        splice: Splice,
        partial: &Partial,
        client: &Resume<'_>,
    ) {
        if let ClientStream::Passthrough(p) = self {
            let mut t = StreamTranslator::primed(client, partial, p.envelope().cloned());
            t.skipped = p.skipped_frames();
            if let Encoder::Responses(e) = &mut t.encoder {
                let (id, next_seq) = p.position();
                e.continue_from(id, next_seq);
            }
            *self = ClientStream::Translate(Box::new(t));
        }
        if let ClientStream::Translate(t) = self {
            t.resume(upstream, splice, partial, client.max_frame_bytes);
        }
    }

    /// The usage of the answer's earlier segments and of the current
    /// continuation, apart (None before any continuation).
    pub fn usage_parts(&self) -> Option<(CanonicalUsage, Option<CanonicalUsage>)> {
        match self {
            ClientStream::Passthrough(_) => None,
            ClientStream::Translate(t) => t.usage_parts(),
        }
    }
}

/// The client's side of a stream: what an encoder for it needs (at the
/// start, and fresh for a continuation).
#[derive(Debug, Clone, Copy)]
pub struct Resume<'a> {
    pub family: Family,
    pub framing: Framing,
    /// The model name as the client's protocol writes it.
    pub model: &'a str,
    pub include_usage: bool,
    pub max_frame_bytes: usize,
    /// Responses: the namespaced tools the client's request declared.
    pub namespaces: &'a Namespaces,
}
