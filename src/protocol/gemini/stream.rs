//! Gemini `streamGenerateContent` streams: [`Parser`] turns upstream
//! `GenerateContentResponse` chunks into canonical [`StreamEvent`]s,
//! [`Encoder`] turns canonical events into the chunks a Gemini client reads
//! (SSE, or the JSON array Gemini sends without `alt=sse`).
//!
//! # Parser
//!
//! The first chunk starts the message (`responseId`, `modelVersion`). Parts
//! of the first candidate are read in order: text parts extend an open text
//! block, `thought: true` parts an open thinking block, and a part's
//! `thoughtSignature` is that block's signature, after which the block is
//! closed (the next part starts a new one). A `functionCall` part is a whole
//! tool call: start, its `args` serialized as one arguments fragment, its
//! signature, stop. Calls without an id get a stable synthetic one (as the
//! non-streaming decoder does), and a thought signature travels inside the
//! id as well, so a client of another protocol hands it back. `inlineData`
//! is an image block; other parts are opaque blocks. Usage (sent on many
//! chunks, cumulative) is held and sent with the stop reason; `finishReason`
//! (or a `promptFeedback.blockReason`) gives the stop reason. Gemini has no
//! end event: the end of the upstream body after a finish reason ends the
//! message, without one it is a truncation.
//!
//! # Encoder
//!
//! One `GenerateContentResponse` per canonical delta: text as `{"text"}`
//! parts, thinking as `{"text","thought":true}`, a signature as an empty part
//! carrying `thoughtSignature`; a tool call's argument fragments are held
//! until the call is complete and sent as one `functionCall {name, args}`
//! part. The last chunk has the `finishReason` and `usageMetadata`. Every
//! chunk carries `modelVersion` (the client's model name) and `responseId`.

use super::request::{embed_signature, split_call_id, synthetic_call_id, wire_call_id};
use super::response::{decode_finish_reason, decode_usage, encode_finish_reason, encode_usage};
use super::wire::UsageMetadata;
use crate::family::Family;
use crate::ir::stream::{
    merge_usage, parse_arguments, BlockDelta, BlockStart, MessageDelta, MessageStart, StreamError,
    StreamEvent,
};
use crate::ir::Extra;
use crate::ir::{ImageBlock, ImageSource, Opaque, StopReason, Usage};
use crate::protocol::common::framing::{Framing, StreamFault};
use crate::protocol::common::support::{
    error_body, error_kind, error_kind_for_status, json_str, json_value, malformed, DeltaBuf,
    DeltaKind, Emit, First, Indexed,
};
use crate::sse::SseEvent;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::borrow::Cow;

const F: Family = Family::Gemini;

// ------------------------------------------------------------------ wire (borrowed)

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(borrow, default)]
    candidates: First<Candidate<'a>>,
    #[serde(borrow, default)]
    usage_metadata: Option<&'a RawValue>,
    #[serde(borrow, default)]
    model_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(borrow, default)]
    error: Option<ErrorObject<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

impl Indexed for Candidate<'_> {
    fn index(&self) -> Option<u64> {
        self.index
    }
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    parts: Parts<'a>,
}

/// A candidate's parts, unparsed; the first two (a chunk has one or two in
/// practice) are kept without allocating.
#[derive(Default)]
struct Parts<'a> {
    inline: [Option<&'a RawValue>; 2],
    more: Vec<&'a RawValue>,
}

impl<'a> Parts<'a> {
    fn iter(&self) -> impl Iterator<Item = &'a RawValue> + '_ {
        self.inline
            .iter()
            .flatten()
            .copied()
            .chain(self.more.iter().copied())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Parts<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Parts<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of parts")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Parts::default())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut parts = Parts::default();
                let mut n = 0;
                while let Some(raw) = seq.next_element::<&'de RawValue>()? {
                    match parts.inline.get_mut(n) {
                        Some(slot) => *slot = Some(raw),
                        None => parts.more.push(raw),
                    }
                    n += 1;
                }
                Ok(parts)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartWire<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(borrow, default, alias = "thought_signature")]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "function_call")]
    function_call: Option<FunctionCallWire<'a>>,
    #[serde(borrow, default, alias = "inline_data")]
    inline_data: Option<BlobWire<'a>>,
}

#[derive(Deserialize)]
struct FunctionCallWire<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlobWire<'a> {
    #[serde(borrow, default, alias = "mime_type")]
    mime_type: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback<'a> {
    #[serde(borrow, default)]
    block_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ErrorObject<'a> {
    #[serde(default)]
    code: Option<u64>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
}

// ------------------------------------------------------------------ parser

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Text(usize),
    Thinking(usize),
}

/// Upstream Gemini chunks → canonical events.
#[derive(Debug)]
pub struct Parser {
    started: bool,
    /// A finish reason has been read: the end of the body ends the message.
    finished: bool,
    /// An in-band error ended the stream.
    failed: bool,
    open: Open,
    next_index: usize,
    /// Position of the next part in the whole stream (for synthetic call ids).
    part_position: usize,
    has_calls: bool,
    response_id: String,
    /// The latest `usageMetadata`, unparsed (Gemini repeats it on every chunk).
    usage: Vec<u8>,
    buf: DeltaBuf,
}

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Parser {
            started: false,
            finished: false,
            failed: false,
            open: Open::None,
            next_index: 0,
            part_position: 0,
            has_calls: false,
            response_id: String::new(),
            usage: Vec::new(),
            buf: DeltaBuf::default(),
        }
    }

    /// True once a finish reason (or an in-band error) has been read.
    pub fn is_complete(&self) -> bool {
        self.finished || self.failed
    }

    /// Reads one SSE event.
    pub fn push(&mut self, event: &SseEvent<'_>, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        if self.failed {
            return Ok(());
        }
        let data = event.data;
        let chunk: Chunk<'_> = serde_json::from_slice(data)
            .map_err(|e| malformed(F, &format!("invalid chunk ({e})"), data))?;
        if let Some(err) = chunk.error {
            self.failed = true;
            let kind = match (err.status.as_deref(), err.code) {
                (Some(status), _) => error_kind(status),
                (None, Some(code)) => error_kind_for_status(code),
                (None, None) => error_kind(""),
            };
            emit(&StreamEvent::Error(StreamError {
                kind,
                message: err.message.map_or_else(String::new, Cow::into_owned),
            }));
            return Ok(());
        }
        if let Some(raw) = chunk.usage_metadata {
            self.usage.clear();
            self.usage.extend_from_slice(raw.get().as_bytes());
        }
        if !self.started {
            self.started = true;
            self.response_id = chunk.response_id.as_deref().unwrap_or_default().to_string();
            // The prompt count is known from the first chunk on: say it at the start.
            emit(&StreamEvent::MessageStart(MessageStart {
                id: self.response_id.clone(),
                model: chunk
                    .model_version
                    .as_deref()
                    .unwrap_or_default()
                    .to_string(),
                created: None,
                usage: self.peek_usage(),
            }));
        }
        let mut stop = None;
        match chunk.candidates.0 {
            Some(candidate) => {
                if let Some(content) = candidate.content {
                    for raw in content.parts.iter() {
                        self.part(raw, data, emit)?;
                    }
                }
                if let Some(reason) = candidate.finish_reason {
                    stop = Some(decode_finish_reason(&reason, self.has_calls));
                }
            }
            None => {
                if let Some(reason) = chunk.prompt_feedback.and_then(|p| p.block_reason) {
                    stop = Some(StopReason::ContentFilter(Some(reason.into_owned())));
                }
            }
        }
        if stop.is_some() || (self.finished && !self.usage.is_empty()) {
            self.close(emit);
            self.finished = true;
            let usage = self.peek_usage();
            self.usage.clear();
            emit(&StreamEvent::MessageDelta(MessageDelta {
                stop_reason: stop,
                usage,
            }));
        }
        Ok(())
    }

    /// The latest usage, parsed (a usage object of the wrong shape is ignored).
    fn peek_usage(&self) -> Option<Usage> {
        if self.usage.is_empty() {
            return None;
        }
        serde_json::from_slice::<UsageMetadata>(&self.usage)
            .map(decode_usage)
            .inspect_err(|e| log::warn!("ignoring a malformed Gemini usageMetadata: {e}"))
            .ok()
    }

    /// Called at the end of the upstream stream: ends the message after a
    /// finish reason; without one the stream was truncated.
    pub fn finish(&mut self, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        if self.failed {
            return Ok(());
        }
        if !self.finished {
            return Err(StreamFault::Truncated);
        }
        self.close(emit);
        emit(&StreamEvent::MessageStop);
        Ok(())
    }

    fn close(&mut self, emit: &mut Emit<'_>) {
        match self.open {
            Open::None => {}
            Open::Text(index) | Open::Thinking(index) => {
                emit(&StreamEvent::BlockStop { index });
            }
        }
        self.open = Open::None;
    }

    fn start_block(&mut self, block: BlockStart, emit: &mut Emit<'_>) -> usize {
        self.close(emit);
        let index = self.next_index;
        self.next_index += 1;
        emit(&StreamEvent::BlockStart { index, block });
        index
    }

    fn part(
        &mut self,
        raw: &RawValue,
        data: &[u8],
        emit: &mut Emit<'_>,
    ) -> Result<(), StreamFault> {
        let position = self.part_position;
        self.part_position += 1;
        let p: PartWire<'_> = serde_json::from_str(raw.get())
            .map_err(|e| malformed(F, &format!("invalid part ({e})"), data))?;
        let signature = p.thought_signature.as_deref().filter(|s| !s.is_empty());
        if let Some(call) = p.function_call {
            self.has_calls = true;
            let name = call.name.as_deref().unwrap_or_default().to_string();
            let args = call.args.unwrap_or_else(|| Value::Object(Map::new()));
            let mut id = match call.id.as_deref().filter(|id| !id.is_empty()) {
                Some(id) => id.to_string(),
                None => synthetic_call_id(&self.response_id, position, &name, &args),
            };
            if let Some(sig) = signature {
                id = embed_signature(&id, sig);
            }
            let index = self.start_block(BlockStart::ToolCall { id, name }, emit);
            let text = args.to_string();
            self.buf.emit(index, DeltaKind::ToolArguments, &text, emit);
            if let Some(sig) = signature {
                self.buf.emit(index, DeltaKind::Signature, sig, emit);
            }
            emit(&StreamEvent::BlockStop { index });
            return Ok(());
        }
        if let Some(text) = p.text {
            let thought = p.thought == Some(true);
            if text.is_empty() && signature.is_none() {
                return Ok(());
            }
            let index = match (self.open, thought) {
                (Open::Text(i), false) | (Open::Thinking(i), true) => i,
                (_, false) => {
                    let i = self.start_block(BlockStart::Text, emit);
                    self.open = Open::Text(i);
                    i
                }
                (_, true) => {
                    let i = self.start_block(BlockStart::Thinking, emit);
                    self.open = Open::Thinking(i);
                    i
                }
            };
            if !text.is_empty() {
                let kind = if thought {
                    DeltaKind::Thinking
                } else {
                    DeltaKind::Text
                };
                self.buf.emit(index, kind, &text, emit);
            }
            if let Some(sig) = signature {
                self.buf.emit(index, DeltaKind::Signature, sig, emit);
                self.close(emit);
            }
            return Ok(());
        }
        if let Some(blob) = p.inline_data {
            let image = ImageBlock {
                source: ImageSource::Base64 {
                    media_type: blob.mime_type.as_deref().unwrap_or_default().to_string(),
                    data: blob.data.as_deref().unwrap_or_default().to_string(),
                },
                detail: None,
                cache_control: None,
                extra: Extra::default(),
            };
            let index = self.start_block(BlockStart::Image(image), emit);
            emit(&StreamEvent::BlockStop { index });
            return Ok(());
        }
        let value: Value = serde_json::from_str(raw.get())
            .map_err(|e| malformed(F, &format!("invalid part ({e})"), data))?;
        let kind = value
            .as_object()
            .and_then(|o| o.keys().find(|k| k.as_str() != "thoughtSignature"))
            .cloned()
            .unwrap_or_else(|| "part".to_string());
        let index = self.start_block(
            BlockStart::Opaque(Opaque {
                origin: F,
                kind,
                value,
            }),
            emit,
        );
        emit(&StreamEvent::BlockStop { index });
        Ok(())
    }
}

// ------------------------------------------------------------------ encoder

#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    None,
    Text,
    Thinking,
    /// A tool call being gathered: sent whole at its stop.
    Call {
        id: String,
        name: String,
        args: String,
        signature: Option<String>,
    },
    Dropped,
}

/// Canonical events → Gemini `GenerateContentResponse` chunks.
#[derive(Debug)]
pub struct Encoder {
    framing: Framing,
    model: String,
    /// `,"modelVersion":…,"responseId":…}`
    suffix: Vec<u8>,
    started: bool,
    ended: bool,
    /// JSON array framing: `]` has been written.
    closed: bool,
    elements: usize,
    open: Out,
    stop: Option<StopReason>,
    usage: Option<Usage>,
}

impl Encoder {
    /// An encoder naming the model `client_model` (the bare model id) and writing `framing`.
    pub fn new(client_model: &str, framing: Framing) -> Self {
        Encoder {
            framing,
            model: client_model.to_string(),
            suffix: Vec::new(),
            started: false,
            ended: false,
            closed: false,
            elements: 0,
            open: Out::None,
            stop: None,
            usage: None,
        }
    }

    /// True once the stream has been ended (normally or with an error).
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Writes what `event` means for the client.
    pub fn event(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            StreamEvent::MessageStart(start) => {
                self.start(&start.id);
                if let Some(u) = &start.usage {
                    self.usage = Some(merge_usage(self.usage.take(), u));
                }
            }
            StreamEvent::BlockStart { block, .. } => {
                self.ensure_started();
                self.open = match block {
                    BlockStart::Text => Out::Text,
                    BlockStart::Thinking => Out::Thinking,
                    BlockStart::ToolCall { id, name } => Out::Call {
                        id: id.clone(),
                        name: name.clone(),
                        args: String::new(),
                        signature: None,
                    },
                    BlockStart::Image(image) => {
                        let part = match &image.source {
                            ImageSource::Base64 { media_type, data } => {
                                json!({"inlineData": {"mimeType": media_type, "data": data}})
                            }
                            ImageSource::Url {
                                url,
                                media_type: Some(mime),
                            } => json!({"fileData": {"mimeType": mime, "fileUri": url}}),
                            ImageSource::Url { url, .. } => json!({"fileData": {"fileUri": url}}),
                        };
                        self.part_chunk(out, |out| json_value(out, &part));
                        Out::Dropped
                    }
                    BlockStart::Opaque(o) if o.origin == F => {
                        self.part_chunk(out, |out| json_value(out, &o.value));
                        Out::Dropped
                    }
                    BlockStart::RedactedThinking { .. } | BlockStart::Opaque(_) => Out::Dropped,
                };
            }
            StreamEvent::BlockDelta { delta, .. } => match (&mut self.open, delta) {
                (Out::Text, BlockDelta::Text(t)) if !t.is_empty() => {
                    self.part_chunk(out, |out| {
                        out.extend_from_slice(b"{\"text\":");
                        json_str(out, t);
                        out.push(b'}');
                    });
                }
                (Out::Thinking, BlockDelta::Thinking(t)) if !t.is_empty() => {
                    self.part_chunk(out, |out| {
                        out.extend_from_slice(b"{\"text\":");
                        json_str(out, t);
                        out.extend_from_slice(b",\"thought\":true}");
                    });
                }
                (Out::Text, BlockDelta::Signature(s)) if !s.is_empty() => {
                    self.part_chunk(out, |out| {
                        out.extend_from_slice(b"{\"text\":\"\",\"thoughtSignature\":");
                        json_str(out, s);
                        out.push(b'}');
                    });
                }
                (Out::Thinking, BlockDelta::Signature(s)) if !s.is_empty() => {
                    self.part_chunk(out, |out| {
                        out.extend_from_slice(
                            b"{\"text\":\"\",\"thought\":true,\"thoughtSignature\":",
                        );
                        json_str(out, s);
                        out.push(b'}');
                    });
                }
                (Out::Call { args, .. }, BlockDelta::ToolArguments(a)) => args.push_str(a),
                (Out::Call { signature, .. }, BlockDelta::Signature(s)) => {
                    signature.get_or_insert_with(String::new).push_str(s);
                }
                _ => {}
            },
            StreamEvent::BlockStop { .. } => self.stop_block(out),
            StreamEvent::MessageDelta(d) => {
                if let Some(r) = &d.stop_reason {
                    self.stop = Some(r.clone());
                }
                if let Some(u) = &d.usage {
                    self.usage = Some(merge_usage(self.usage.take(), u));
                }
            }
            StreamEvent::MessageStop => {
                self.ensure_started();
                self.stop_block(out);
                let reason =
                    encode_finish_reason(self.stop.as_ref().unwrap_or(&StopReason::EndTurn));
                self.begin(out);
                out.extend_from_slice(
                    b"{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"\"}]},\"finishReason\":",
                );
                json_str(out, &reason);
                out.extend_from_slice(b"}]");
                if let Some(u) = self.usage.take() {
                    out.extend_from_slice(b",\"usageMetadata\":");
                    json_value(out, &encode_usage(&u));
                }
                out.extend_from_slice(&self.suffix);
                self.end(out);
                self.ended = true;
            }
            StreamEvent::Ping => {}
            StreamEvent::Error(e) => self.fail(
                &error_body(F, e, crate::protocol::gemini::error::error_body),
                out,
            ),
        }
    }

    /// Forwards an upstream comment (keep-alive) when framing is SSE.
    pub fn comment(&mut self, text: &[u8], out: &mut Vec<u8>) {
        if !self.ended && self.framing == Framing::Sse {
            crate::sse::encode_comment(out, text);
        }
    }

    /// Ends the stream with `error_body` (`{"error":{…}}`): an SSE event, or
    /// the last element of the JSON array.
    pub fn fail(&mut self, error_body: &[u8], out: &mut Vec<u8>) {
        if self.ended {
            self.close(out);
            return;
        }
        self.ended = true;
        self.begin(out);
        out.extend_from_slice(error_body);
        self.end(out);
        self.close(out);
    }

    /// Closes the JSON array (SSE needs nothing).
    pub fn close(&mut self, out: &mut Vec<u8>) {
        if self.framing == Framing::JsonArray && !self.closed {
            self.closed = true;
            out.extend_from_slice(if self.elements == 0 { b"[]" } else { b"]" });
        }
    }

    fn start(&mut self, id: &str) {
        if self.started {
            return;
        }
        self.started = true;
        self.suffix.clear();
        self.suffix.extend_from_slice(b",\"modelVersion\":");
        json_str(&mut self.suffix, &self.model);
        if !id.is_empty() {
            self.suffix.extend_from_slice(b",\"responseId\":");
            json_str(&mut self.suffix, id);
        }
        self.suffix.push(b'}');
    }

    fn ensure_started(&mut self) {
        if !self.started {
            self.start("");
        }
    }

    fn begin(&mut self, out: &mut Vec<u8>) {
        match self.framing {
            Framing::Sse => out.extend_from_slice(b"data: "),
            Framing::JsonArray => {
                out.extend_from_slice(if self.elements == 0 { b"[" } else { b",\r\n" });
            }
        }
        self.elements += 1;
    }

    fn end(&self, out: &mut Vec<u8>) {
        if self.framing == Framing::Sse {
            out.extend_from_slice(b"\r\n\r\n");
        }
    }

    /// Writes a chunk with one part, written by `part`.
    fn part_chunk(&mut self, out: &mut Vec<u8>, part: impl FnOnce(&mut Vec<u8>)) {
        self.begin(out);
        out.extend_from_slice(b"{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[");
        part(out);
        out.extend_from_slice(b"]}}]");
        out.extend_from_slice(&self.suffix);
        self.end(out);
    }

    fn stop_block(&mut self, out: &mut Vec<u8>) {
        let Out::Call {
            id,
            name,
            args,
            signature,
        } = std::mem::replace(&mut self.open, Out::None)
        else {
            return;
        };
        let (_, embedded) = split_call_id(&id);
        let signature = signature.or(embedded);
        let wire_id = wire_call_id(&id);
        self.part_chunk(out, |out| {
            out.extend_from_slice(b"{\"functionCall\":{");
            if let Some(wire_id) = &wire_id {
                out.extend_from_slice(b"\"id\":");
                json_str(out, wire_id);
                out.push(b',');
            }
            out.extend_from_slice(b"\"name\":");
            json_str(out, &name);
            out.extend_from_slice(b",\"args\":");
            write_args(out, &args);
            out.push(b'}');
            if let Some(sig) = &signature {
                out.extend_from_slice(b",\"thoughtSignature\":");
                json_str(out, sig);
            }
            out.push(b'}');
        });
    }
}

/// Writes tool-call argument text as a `functionCall.args` object: a JSON
/// object as it is, nothing as `{}`, anything else wrapped as
/// `{"raw_arguments": …}` (as the non-streaming encoder does).
fn write_args(out: &mut Vec<u8>, args: &str) {
    let trimmed = args.trim();
    // Raw text is kept only on one line: an SSE data line cannot hold a line break.
    let one_line = !trimmed.bytes().any(|b| b == b'\n' || b == b'\r');
    if one_line && trimmed.starts_with('{') && serde_json::from_str::<&RawValue>(trimmed).is_ok() {
        out.extend_from_slice(trimmed.as_bytes());
        return;
    }
    match parse_arguments(args) {
        v @ Value::Object(_) => json_value(out, &v),
        other => json_value(out, &json!({ "raw_arguments": other })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &str) -> (Vec<StreamEvent>, Result<(), StreamFault>) {
        let mut p = Parser::new();
        crate::protocol::common::support::parse_all(
            input.as_bytes(),
            &mut |event, emit| match event {
                Some(e) => p.push(e, emit),
                None => p.finish(emit),
            },
        )
    }

    #[test]
    fn a_blocked_prompt_ends_with_a_content_filter_stop() {
        let (events, r) = parse("data: {\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\"},\"usageMetadata\":{\"promptTokenCount\":7}}\r\n\r\n");
        assert_eq!(r, Ok(()));
        assert!(events.contains(&StreamEvent::MessageDelta(MessageDelta {
            stop_reason: Some(StopReason::ContentFilter(Some("PROHIBITED_CONTENT".into()))),
            usage: Some(Usage {
                input_tokens: 7,
                ..Usage::default()
            }),
        })));
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop));
    }

    #[test]
    fn a_signature_closes_its_block() {
        let (events, r) = parse(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\",\"thoughtSignature\":\"s\"},{\"text\":\"b\"}]},\"finishReason\":\"STOP\"}]}\r\n\r\n",
        );
        assert_eq!(r, Ok(()));
        let starts = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::BlockStart { .. }))
            .count();
        assert_eq!(starts, 2, "{events:?}");
        assert!(events.contains(&StreamEvent::BlockDelta {
            index: 0,
            delta: BlockDelta::Signature("s".into())
        }));
    }

    #[test]
    fn no_finish_reason_is_a_truncation() {
        let (_, r) =
            parse("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}\r\n\r\n");
        assert_eq!(r, Err(StreamFault::Truncated));
    }
}
