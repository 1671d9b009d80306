//! Same-family responses: the upstream speaks the client's protocol, so bodies
//! and SSE frames pass through unchanged except for the model name, which is
//! spliced in place (no re-serialisation, unknown fields and key order kept).
//! Usage and the stream's terminal event are read on the way for accounting and
//! to tell a complete stream from a truncated one.
//!
//! Bytes that are not UTF-8 inside an upstream's JSON (a whole body or any
//! stream event's data or name) make the answer invalid (RFC 8259 §8.1): a
//! whole body is refused (502) and a stream ends with the family's error
//! event, as on translated routes, and the upstream is cooled like any other
//! broken answer. SSE comments carry no JSON: their invalid bytes are
//! replaced by U+FFFD, as a client's SSE decoder would.

use super::transcript::Transcript;
use crate::family::Family;
use crate::protocol::common::framing::name_is_utf8;
pub use crate::protocol::common::framing::{check_utf8, Framing, StreamFault, MAX_SKIPPED_FRAMES};
use crate::protocol::common::peek::Peeked;
pub use crate::protocol::common::peek::Usage;
use crate::protocol::responses::{self, envelope::Envelope};
use crate::protocol::{spoke, Spoke};
use crate::sse::{
    encode_comment, encode_event, encode_named, encode_unbroken, SseDecoder, SseError, SseEvent,
    SseItem,
};
use std::ops::Range;

/// Appends `doc` to `out` with the model value replaced by `model_json`.
fn splice(doc: &[u8], span: Option<&Range<usize>>, model_json: &[u8], out: &mut Vec<u8>) {
    for piece in spliced_pieces(doc, span, model_json) {
        out.extend_from_slice(piece);
    }
}

/// `doc` with the model value at `span` replaced by `model_json`, as the
/// pieces to write one after another (empty ones where `span` is None).
fn spliced_pieces<'a>(
    doc: &'a [u8],
    span: Option<&Range<usize>>,
    model_json: &'a [u8],
) -> [&'a [u8]; 3] {
    match span {
        Some(r) => [&doc[..r.start], model_json, &doc[r.end..]],
        None => [doc, &[], &[]],
    }
}

/// Where `r`, a range of a document, is after [`splice`] put `new_len`
/// bytes in place of `span` (a whole value: inside `r`, or outside it).
fn spliced(r: Range<usize>, span: Option<&Range<usize>>, new_len: usize) -> Range<usize> {
    let Some(s) = span else {
        return r;
    };
    let moved = |p: usize| match p >= s.end {
        true => p - s.len() + new_len,
        false => p,
    };
    moved(r.start)..moved(r.end)
}

/// Sets `env` on the event in `scratch` (`data` with the model spliced
/// in at `span`), whose response object the peek found at `at` in `data`; where
/// that object now is in `scratch`. Where the peek found the members the
/// envelope sets, they are set there, without another walk of the object
/// (an envelope is the Responses API's, whose peek read `data` last on
/// this thread). Kept out of the frame loop: three events of a stream come
/// here, and the loop is kept small.
#[inline(never)]
fn enveloped_event(
    env: &Envelope,
    data: &[u8],
    span: Option<&Range<usize>>,
    at: Range<usize>,
    model_json: &[u8],
    scratch: &mut Vec<u8>,
) -> Range<usize> {
    let moved = |r| spliced(r, span, model_json.len());
    let at = moved(at);
    let found = responses::peek::envelope_members(data).map(|m| m.map(|r| r.map(moved)));
    let edited = found
        .and_then(|m| env.apply_event_at(scratch, at.clone(), &m))
        .or_else(|| env.apply_event(scratch, at.clone()));
    match edited {
        Some((edited, r)) => {
            *scratch = edited;
            r
        }
        None => at,
    }
}

/// The model name a family's responses carry, as a JSON string literal.
pub fn model_json(name: &str) -> Vec<u8> {
    serde_json::to_vec(name).unwrap_or_else(|_| b"\"\"".to_vec())
}

/// Rewrites a non-stream response body; returns the new body and its usage,
/// or `None` when the body is not a JSON object.
pub fn rewrite_body(family: Family, body: &[u8], model_json: &[u8]) -> Option<(Vec<u8>, Usage)> {
    // The peek skips members it does not read without validating them.
    std::str::from_utf8(body).ok()?;
    let p = (spoke(family).peek_response)(body)?;
    let mut out = Vec::with_capacity(body.len() + model_json.len());
    splice(body, p.span.as_ref(), model_json, &mut out);
    Some((out, p.usage))
}

/// An upstream event, as the relay reads it.
enum Read {
    /// The peek's answer: relayed as it says.
    Peeked(Peeked),
    /// The protocol's end marker (`[DONE]`): relayed as it came.
    Done,
    /// Not a document of this protocol: skipped (while few are).
    Skipped,
}

/// Reads an upstream event: a delta that repeats the last frame peeked at
/// is answered from that one, checked as UTF-8 where it differs
/// (`Spoke::peek_repeated`); any other is checked whole, then peeked at.
/// Err: the fault it is (invalid UTF-8, one unreadable frame too many).
// Inlined into the frame loop, its one caller: called, its answer (a
// `Peeked`) is written to memory and copied out, 40 instructions a frame.
#[inline(always)]
fn read_event(spoke: &Spoke, ev: &SseEvent<'_>, skipped: &mut u32) -> Result<Read, StreamFault> {
    let data = ev.data;
    if name_is_utf8(ev.event) {
        if let Some(p) = (spoke.peek_repeated)(data) {
            return Ok(Read::Peeked(p));
        }
    }
    check_utf8(ev.event, data)?;
    if spoke.stream_done == Some(data) {
        return Ok(Read::Done);
    }
    match (spoke.peek_response)(data) {
        Some(p) => Ok(Read::Peeked(p)),
        None => {
            let excerpt = String::from_utf8_lossy(&data[..data.len().min(120)]);
            match skip(skipped, StreamFault::Unreadable(excerpt.into_owned())) {
                Some(f) => Err(f),
                None => Ok(Read::Skipped),
            }
        }
    }
}

/// An SSE stream of the client's own family, passed through frame by frame.
#[derive(Debug)]
pub struct PassthroughStream {
    spoke: &'static Spoke,
    framing: Framing,
    decoder: SseDecoder,
    model_json: Vec<u8>,
    scratch: Vec<u8>,
    /// JSON array framing: elements written so far.
    elements: usize,
    complete: bool,
    /// The answer reached its finish reason (`Peeked::finished`).
    finished: bool,
    /// Unreadable frames skipped so far.
    skipped: u32,
    /// The next sequence number (Responses events carry one).
    next_seq: u64,
    /// The response id the stream announced (Responses).
    response_id: Option<String>,
    /// Drop OpenAI usage-only chunks (the gateway asked for them, the client did not).
    withhold_usage: bool,
    /// Responses: what each event's `response` object is set to carry (docs/api.md "Stored
    /// responses").
    envelope: Option<Envelope>,
    /// Responses: the terminal event's `response` object as sent, for the store.
    final_response: Option<Vec<u8>>,
    /// The upstream bytes passed so far, kept (up to
    /// `continuation::MAX_TRANSCRIPT`) when the stream may be continued
    /// after a cut; None when not kept or past the limit.
    transcript: Option<Transcript>,
    /// An upstream error event held back for a continuation, as the client
    /// would have got it.
    held: Option<Vec<u8>>,
    pub usage: Usage,
}

impl PassthroughStream {
    /// Withholds OpenAI usage-only chunks from the client (they are still metered).
    pub fn withhold_usage_chunk(&mut self, on: bool) {
        self.withhold_usage = on;
    }

    /// Responses: sets the id and members of every event's `response` object
    /// (a stored or continued response).
    pub fn set_envelope(&mut self, envelope: Envelope) {
        if let Some(id) = &envelope.id {
            self.response_id = Some(id.clone());
        }
        self.envelope = Some(envelope);
    }

    /// Responses: the `response` object of the stream's terminal event (as
    /// the client received it), once passed.
    pub fn final_response(&self) -> Option<&[u8]> {
        self.final_response.as_deref()
    }

    /// A passthrough for `family` writing `framing`, naming the model `model_json`.
    pub fn new(
        family: Family,
        framing: Framing,
        model_json: Vec<u8>,
        max_frame_bytes: usize,
    ) -> Self {
        PassthroughStream {
            spoke: spoke(family),
            framing,
            decoder: SseDecoder::new(max_frame_bytes),
            model_json,
            scratch: Vec::new(),
            elements: 0,
            complete: false,
            finished: false,
            skipped: 0,
            next_seq: 0,
            response_id: None,
            withhold_usage: false,
            envelope: None,
            final_response: None,
            transcript: None,
            held: None,
            usage: Usage::default(),
        }
    }

    /// Keeps the upstream bytes passed, so what the client received can be
    /// rebuilt after a cut (`continuation::Partial::replay`).
    pub fn keep_transcript(&mut self) {
        self.transcript = Some(Transcript::default());
    }

    /// The upstream bytes passed so far (None: not kept, or too long to keep).
    pub fn transcript(&self) -> Option<&Transcript> {
        self.transcript.as_ref()
    }

    /// The kept transcript, to make room in ([`Transcript::expect`]).
    pub fn transcript_mut(&mut self) -> Option<&mut Transcript> {
        self.transcript.as_mut()
    }

    /// Compacts the transcript (when kept) before the stream waits for its
    /// upstream ([`Transcript::settle`]).
    pub fn settle(&mut self) {
        if let Some(t) = &mut self.transcript {
            t.settle();
        }
    }

    /// Responses: the response id the client was given, and the next
    /// sequence number.
    pub fn position(&self) -> (Option<&str>, u64) {
        (self.response_id.as_deref(), self.next_seq)
    }

    /// Responses: the envelope the stream's `response` objects carry.
    pub fn envelope(&self) -> Option<&Envelope> {
        self.envelope.as_ref()
    }

    /// Whether the terminal event has been seen.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether the answer reached its finish reason (its terminator may
    /// still be missing).
    pub fn is_finished(&self) -> bool {
        self.finished || self.complete
    }

    /// The unreadable frames the stream skipped.
    pub fn skipped_frames(&self) -> u32 {
        self.skipped
    }

    /// Feeds upstream bytes; appends what the client should receive to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), StreamFault> {
        let Self {
            spoke,
            framing,
            decoder,
            model_json,
            scratch,
            elements,
            complete,
            finished,
            skipped,
            next_seq,
            response_id,
            withhold_usage,
            envelope,
            final_response,
            transcript,
            held,
            usage,
        } = self;
        if transcript.as_mut().is_some_and(|t| !t.push(chunk)) {
            *transcript = None;
        }
        let mut fault = None;
        let r = decoder.push(chunk, |item| {
            if fault.is_some() {
                return;
            }
            match item {
                SseItem::Comment(c) => {
                    if *framing == Framing::Sse {
                        encode_comment(out, String::from_utf8_lossy(c).as_bytes());
                    }
                }
                SseItem::Event(ev) => {
                    let data = ev.data;
                    let p = match read_event(spoke, &ev, skipped) {
                        Ok(Read::Peeked(p)) => p,
                        Ok(Read::Done) => {
                            *complete = true;
                            encode_event(out, None, data);
                            return;
                        }
                        Ok(Read::Skipped) => return,
                        Err(f) => {
                            fault = Some(f);
                            return;
                        }
                    };
                    usage.merge(p.usage);
                    if let Some(n) = p.sequence {
                        *next_seq = n + 1;
                    }
                    if p.response_id.is_some() && envelope.as_ref().is_none_or(|e| e.id.is_none()) {
                        *response_id = p.response_id;
                    }
                    if p.error && transcript.is_some() {
                        // A stream that may be continued holds back an
                        // upstream error event worth another attempt.
                        let first = *elements == 0;
                        let at = (*framing, first);
                        if let Some(f) = held_error(spoke, &ev, p.span.as_ref(), model_json, at) {
                            fault = Some(f);
                            return;
                        }
                    }
                    *complete |= p.terminal || p.error;
                    *finished |= p.finished;
                    if *withhold_usage && p.usage_only {
                        return;
                    }
                    // The envelope goes on the events that wrap the
                    // response object (the peek found one): not on deltas.
                    let enveloped = envelope.is_some() && p.response.is_some();
                    // One data line with the model's JSON string in it
                    // holds no line break (the envelope's values may): with
                    // nothing else to edit, the frame goes to the client
                    // with the model spliced in on the way, not through
                    // `scratch` first.
                    if framing != &Framing::JsonArray && ev.one_line && !enveloped {
                        let pieces = spliced_pieces(data, p.span.as_ref(), model_json);
                        encode_unbroken(out, ev.event, &pieces);
                        return;
                    }
                    scratch.clear();
                    splice(data, p.span.as_ref(), model_json, scratch);
                    if let (Some(env), Some(at)) = (envelope.as_ref(), p.response.clone()) {
                        let span = p.span.as_ref();
                        let response = enveloped_event(env, data, span, at, model_json, scratch);
                        if p.terminal && !p.error {
                            *final_response = scratch.get(response).map(<[u8]>::to_vec);
                        }
                    }
                    match framing {
                        // A Bedrock framing is SSE here (E23 re-frames the
                        // SSE after; a Bedrock client is never passed through).
                        Framing::Sse | Framing::EventStream | Framing::BedrockChunks => {
                            encode_named(out, ev.event, scratch)
                        }
                        Framing::JsonArray => {
                            out.extend_from_slice(if *elements == 0 { b"[" } else { b",\r\n" });
                            out.extend_from_slice(scratch);
                            *elements += 1;
                        }
                    }
                }
            }
        });
        if let Err(SseError::FrameTooLarge { limit }) = r {
            return Err(StreamFault::Malformed(format!(
                "frame larger than {limit} bytes"
            )));
        }
        match fault {
            Some(StreamFault::Upstream(e, bytes)) => {
                *held = Some(bytes);
                Err(StreamFault::Upstream(e, Vec::new()))
            }
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// Called at the upstream's end of stream: closes the framing, or reports a truncation.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), StreamFault> {
        // An incomplete frame at the end never reached the client: what
        // counts is whether the answer reached its end.
        let _incomplete = self.decoder.finish().is_err();
        // A stream that reached its finish reason and then ended without its
        // terminator (cleanly, or cut mid-frame) is complete: the client gets
        // the terminator (Gemini streams have none: their finish reason is
        // terminal already).
        if !self.complete && self.finished {
            if let (Framing::Sse, Some((event, data))) = (self.framing, self.spoke.stream_end) {
                encode_event(out, event, data);
            }
            self.complete = true;
        }
        if !self.complete {
            return Err(StreamFault::Truncated);
        }
        if self.framing == Framing::JsonArray {
            out.extend_from_slice(if self.elements == 0 { b"[]" } else { b"]" });
        }
        Ok(())
    }

    /// Ends the client's stream with `error_json` (the family's error object
    /// body), or with the upstream's own error event when one was held back
    /// for a continuation that did not come.
    pub fn fail(&mut self, error_json: &[u8], out: &mut Vec<u8>) {
        if let Some(held) = self.held.take() {
            out.extend_from_slice(&held);
            return;
        }
        match self.framing {
            Framing::JsonArray => {
                out.extend_from_slice(if self.elements == 0 { b"[" } else { b",\r\n" });
                out.extend_from_slice(error_json);
                out.extend_from_slice(b"]");
                self.elements += 1;
            }
            Framing::Sse | Framing::EventStream | Framing::BedrockChunks => match self
                .spoke
                .stream_error
            {
                Some(write) => write(error_json, self.next_seq, self.response_id.as_deref(), out),
                None => encode_event(out, self.spoke.error_event, error_json),
            },
        }
    }
}

/// An upstream error event of a kind another attempt may not meet, read as
/// the canonical error its protocol's parser makes of it, with the event as
/// the client would get it (the model renamed); None for any other (a
/// Responses stream's error is followed by its `response.failed`: passed on
/// as it is).
fn held_error(
    spoke: &Spoke,
    ev: &crate::sse::SseEvent<'_>,
    span: Option<&Range<usize>>,
    model_json: &[u8],
    (framing, first): (Framing, bool),
) -> Option<StreamFault> {
    if spoke.family == Family::Responses {
        return None;
    }
    let mut parser = crate::protocol::stream_codec::Parser::new(spoke.family);
    let mut found = None;
    let _ = parser.push(ev, &mut |e: &crate::ir::stream::StreamEvent| {
        if let crate::ir::stream::StreamEvent::Error(err) = e {
            found.get_or_insert_with(|| err.clone());
        }
    });
    let err = found.filter(|e| StreamFault::transient(e.kind))?;
    let mut data = Vec::with_capacity(ev.data.len() + model_json.len());
    splice(ev.data, span, model_json, &mut data);
    let mut bytes = Vec::new();
    match framing {
        Framing::Sse | Framing::EventStream | Framing::BedrockChunks => {
            encode_event(&mut bytes, ev.event_str(), &data)
        }
        // The array's element, and its end: nothing follows the error.
        Framing::JsonArray => {
            bytes.extend_from_slice(if first { b"[" } else { b",\r\n" });
            bytes.extend_from_slice(&data);
            bytes.push(b']');
        }
    }
    Some(StreamFault::Upstream(err, bytes))
}

/// What an unreadable frame comes to: skipped (`None`, counted in
/// `skipped`) while the stream has skipped fewer than
/// [`MAX_SKIPPED_FRAMES`]; past that, the fault that ends the stream. Any
/// other fault is passed on.
pub fn skip(skipped: &mut u32, fault: StreamFault) -> Option<StreamFault> {
    match fault {
        StreamFault::Unreadable(m) if *skipped < MAX_SKIPPED_FRAMES => {
            *skipped += 1;
            log::warn!("skipped an unreadable upstream stream frame: {m}");
            None
        }
        StreamFault::Unreadable(m) => Some(StreamFault::Malformed(format!(
            "more than {MAX_SKIPPED_FRAMES} unreadable frames; the last: {m}"
        ))),
        other => Some(other),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A range keeps its place before the model's and inside it moves
    /// its end, and after it both, by the change in length.
    #[test]
    fn a_range_moves_with_the_spliced_model() {
        let doc = br#"{"a":1,"response":{"model":"m1","x":2},"b":3}"#;
        let model = 27..31;
        assert_eq!(&doc[model.clone()], br#""m1""#);
        let object = 18..38;
        let after = 43..44;
        let mut out = Vec::new();
        splice(doc, Some(&model), br#""longer""#, &mut out);
        assert_eq!(
            &out[spliced(object, Some(&model), 8)],
            br#"{"model":"longer","x":2}"#
        );
        assert_eq!(&out[spliced(after, Some(&model), 8)], b"3");
        assert_eq!(&out[spliced(0..4, Some(&model), 8)], br#"{"a""#);
        assert_eq!(spliced(3..9, None, 8), 3..9);
    }

    #[test]
    fn reads_cached_and_reasoning_tokens_of_each_family() {
        let u = |input, output, cached, cache_write, cache_write_1h, reasoning| Usage {
            input: Some(input),
            output: Some(output),
            cached,
            cache_write,
            cache_write_1h,
            reasoning,
        };
        let cases: [(Family, &[u8], Usage); 6] = [
            (
                Family::OpenAi,
                br#"{"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":5}}}"#,
                u(10, 7, Some(4), None, None, Some(5)),
            ),
            // DeepSeek: prompt_tokens is the cache hits plus the misses.
            (
                Family::OpenAi,
                br#"{"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":7,"prompt_cache_hit_tokens":6,"prompt_cache_miss_tokens":4}}"#,
                u(10, 7, Some(6), None, None, None),
            ),
            // Anthropic reports the uncached input apart: every prompt token
            // is input (3 + 9 + 5), as on the translated routes.
            (
                Family::Anthropic,
                br#"{"model":"m","usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":9,"cache_creation_input_tokens":5,"cache_creation":{"ephemeral_5m_input_tokens":1,"ephemeral_1h_input_tokens":4}}}"#,
                u(17, 2, Some(9), Some(5), Some(4), None),
            ),
            (
                Family::Anthropic,
                br#"{"model":"m","usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":9}}"#,
                u(12, 2, Some(9), None, None, None),
            ),
            (
                Family::Gemini,
                br#"{"modelVersion":"m","usageMetadata":{"promptTokenCount":6,"candidatesTokenCount":2,"thoughtsTokenCount":3,"cachedContentTokenCount":1}}"#,
                u(6, 5, Some(1), None, None, Some(3)),
            ),
            (
                Family::Responses,
                br#"{"model":"m","usage":{"input_tokens":6,"output_tokens":5,"input_tokens_details":{"cached_tokens":2,"cache_write_tokens":3},"output_tokens_details":{"reasoning_tokens":1}}}"#,
                u(6, 5, Some(2), Some(3), None, Some(1)),
            ),
        ];
        for (family, body, want) in cases {
            let (_, u) = rewrite_body(family, body, &model_json("x")).unwrap();
            assert_eq!(u, want, "{family}");
        }
    }

    #[test]
    fn rewrites_model_in_place() {
        let body = br#"{"id":"x","model":"up-model","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        let (out, u) = rewrite_body(Family::OpenAi, body, &model_json("openai/gpt-5")).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"id":"x","model":"openai/gpt-5","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#
        );
        assert_eq!(
            u,
            Usage {
                input: Some(3),
                output: Some(4),
                ..Usage::default()
            }
        );
    }

    fn run(
        family: Family,
        framing: Framing,
        input: &[u8],
        cut: usize,
    ) -> (Vec<u8>, Result<(), StreamFault>) {
        let mut s = PassthroughStream::new(family, framing, model_json("m"), 1 << 20);
        let mut out = Vec::new();
        s.push(&input[..cut], &mut out).unwrap();
        s.push(&input[cut..], &mut out).unwrap();
        let r = s.finish(&mut out);
        (out, r)
    }

    #[test]
    fn anthropic_stream_rewrites_and_completes_at_any_cut() {
        let input = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"up\",\"usage\":{\"input_tokens\":5}}}\n\n: keep-alive\n\nevent: message_delta\r\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\r\n\r\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".as_bytes();
        let (whole, r) = run(Family::Anthropic, Framing::Sse, input, 0);
        assert!(r.is_ok());
        assert!(std::str::from_utf8(&whole)
            .unwrap()
            .contains("\"model\":\"m\""));
        for cut in 0..=input.len() {
            assert_eq!(
                run(Family::Anthropic, Framing::Sse, input, cut).0,
                whole,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn an_anthropic_stream_counts_its_cache_once() {
        // message_start carries the cache counts; a message_delta that
        // repeats input_tokens alone does not undo them.
        let input = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"up\",\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":9,\"cache_creation_input_tokens\":5,\"cache_creation\":{\"ephemeral_5m_input_tokens\":1,\"ephemeral_1h_input_tokens\":4},\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":3,\"output_tokens\":7}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        let mut s =
            PassthroughStream::new(Family::Anthropic, Framing::Sse, model_json("m"), 1 << 20);
        let mut out = Vec::new();
        s.push(input.as_bytes(), &mut out).unwrap();
        s.finish(&mut out).unwrap();
        assert_eq!(
            s.usage,
            Usage {
                input: Some(17),
                output: Some(7),
                cached: Some(9),
                cache_write: Some(5),
                cache_write_1h: Some(4),
                reasoning: None,
            }
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_refused() {
        assert!(rewrite_body(Family::OpenAi, b"{\"model\":\"x\",", b"\"m\"").is_none());
        assert!(rewrite_body(Family::Gemini, b"<html>", b"\"m\"").is_none());
    }

    #[test]
    fn truncated_streams_are_faults_and_unreadable_frames_are_skipped_up_to_a_limit() {
        let input = b"data: {\"model\":\"up\",\"choices\":[]}\n\n";
        assert_eq!(
            run(Family::OpenAi, Framing::Sse, input, 3).1,
            Err(StreamFault::Truncated)
        );
        // Unreadable frames are skipped (and counted) up to the limit; the
        // next one ends the stream.
        let mut s = PassthroughStream::new(Family::OpenAi, Framing::Sse, model_json("m"), 1 << 20);
        let mut out = Vec::new();
        for n in 1..=MAX_SKIPPED_FRAMES {
            assert_eq!(s.push(b"data: {oops\n\n", &mut out), Ok(()));
            assert_eq!(s.skipped_frames(), n);
        }
        assert!(out.is_empty(), "a skipped frame reached the client");
        assert!(matches!(
            s.push(b"data: {oops\n\n", &mut out),
            Err(StreamFault::Malformed(_))
        ));
    }

    /// A delta that repeats the last one but in its text is answered
    /// without a whole check: invalid bytes in that text, in a counter's
    /// place or in its event's name are still a fault, after valid deltas
    /// passed.
    #[test]
    fn invalid_utf8_in_a_repeated_delta_is_a_fault() {
        let openai = |text: &[u8]| {
            [
                &b"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""[..],
                text,
                b"\"},\"finish_reason\":null}]}\n\n",
            ]
            .concat()
        };
        let responses = |name: &[u8], seq: &[u8], text: &[u8]| {
            [
                &b"event: "[..],
                name,
                b"\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":",
                seq,
                b",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"",
                text,
                b"\",\"logprobs\":[]}\n\n",
            ]
            .concat()
        };
        let delta = b"response.output_text.delta";
        for (family, good, bad) in [
            (
                Family::OpenAi,
                [openai(b"a"), openai(b"b")],
                openai(b"c\xff"),
            ),
            (
                Family::Responses,
                [responses(delta, b"4", b"a"), responses(delta, b"5", b"b")],
                responses(delta, b"6", b"\xe2\x82"),
            ),
            (
                Family::Responses,
                [responses(delta, b"4", b"a"), responses(delta, b"5", b"b")],
                responses(b"response.output_text.delt\xff", b"6", b"c"),
            ),
        ] {
            let mut s = PassthroughStream::new(family, Framing::Sse, model_json("m"), 1 << 20);
            let mut out = Vec::new();
            for frame in &good {
                s.push(frame, &mut out).unwrap();
            }
            let relayed = out.len();
            assert!(relayed > 0);
            let r = s.push(&bad, &mut out);
            assert!(
                matches!(&r, Err(StreamFault::Malformed(m)) if m.contains("UTF-8")),
                "{family}: {r:?}"
            );
            assert_eq!(
                out.len(),
                relayed,
                "{family}: nothing of the bad frame relayed"
            );
        }
    }

    #[test]
    fn invalid_utf8_anywhere_in_an_event_is_a_fault_and_comments_are_cleaned() {
        for (family, input) in [
            (
                Family::Anthropic,
                &b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"a\xff\"}}\n\n"[..],
            ),
            (Family::OpenAi, &b"data: {\"x_note\":\"\xc3(\",\"choices\":[]}\n\n"[..]),
            (Family::Responses, &b"event: r\xff\ndata: {\"type\":\"response.in_progress\"}\n\n"[..]),
        ] {
            let mut s = PassthroughStream::new(family, Framing::Sse, model_json("m"), 1 << 20);
            let mut out = Vec::new();
            let r = s.push(input, &mut out);
            assert!(
                matches!(&r, Err(StreamFault::Malformed(m)) if m.contains("UTF-8")),
                "{family}: {r:?}"
            );
            assert!(out.is_empty(), "{family}: nothing of the frame relayed");
        }
        let mut s = PassthroughStream::new(Family::OpenAi, Framing::Sse, model_json("m"), 1 << 20);
        let mut out = Vec::new();
        s.push(b": ping \xff\n\n", &mut out).unwrap();
        assert_eq!(std::str::from_utf8(&out).unwrap(), ": ping \u{fffd}\n\n");
        assert!(rewrite_body(
            Family::Anthropic,
            b"{\"content\":[{\"text\":\"\xff\"}]}",
            b"\"m\""
        )
        .is_none());
    }

    #[test]
    fn withheld_usage_chunk_is_metered_not_sent() {
        let input = b"data: {\"model\":\"up\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\ndata: {\"model\":\"up\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        let mut s = PassthroughStream::new(Family::OpenAi, Framing::Sse, model_json("m"), 1 << 20);
        s.withhold_usage_chunk(true);
        let mut out = Vec::new();
        s.push(input, &mut out).unwrap();
        s.finish(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("prompt_tokens"), "{text}");
        assert!(text.contains("[DONE]") && text.contains("\"hi\""));
        assert_eq!(
            s.usage,
            Usage {
                input: Some(4),
                output: Some(2),
                ..Usage::default()
            }
        );
    }

    #[test]
    fn openai_in_band_error_ends_the_stream() {
        let input = b"data: {\"model\":\"up\",\"choices\":[]}\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n";
        for cut in 0..=input.len() {
            let (out, r) = run(Family::OpenAi, Framing::Sse, input, cut);
            assert_eq!(
                r,
                Ok(()),
                "cut {cut}: an upstream error event is a complete stream"
            );
            let out = String::from_utf8(out).unwrap();
            assert!(out.contains("{\"error\":{\"message\":\"boom\"}}"), "{out}");
        }
    }

    #[test]
    fn gemini_json_array_framing() {
        let input = b"data: {\"candidates\":[{\"content\":{}}],\"modelVersion\":\"up\"}\r\n\r\ndata: {\"candidates\":[{\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":2,\"candidatesTokenCount\":3}}\r\n\r\n";
        let (out, r) = run(Family::Gemini, Framing::JsonArray, input, 10);
        assert!(r.is_ok());
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v[0]["modelVersion"], "m");
        assert_eq!(v.as_array().unwrap().len(), 2);
    }
}
