//! OpenAI Responses streams: [`Parser`] turns an upstream's Responses events
//! into canonical [`StreamEvent`]s, [`Encoder`] turns canonical events into
//! the events a Responses client reads.
//!
//! # Parser
//!
//! `response.created` starts the message. Output items arrive one after the
//! other: a `message` item's content parts are text blocks (opened by
//! `response.content_part.added` or the first delta, closed by
//! `response.content_part.done`; refusal deltas are text and make the stop
//! reason a refusal), a `function_call` item is a tool call whose argument
//! deltas pass through, a `custom_tool_call` a tool call whose free-form
//! input is written as the JSON arguments `{"custom_tool_input": "…"}`
//! (escaped fragment by fragment), a `reasoning` item a thinking block (its
//! summary parts joined by a blank line) whose signature, the packed id and
//! `encrypted_content`, is sent from `response.output_item.done`, the one
//! event that holds it whole. What a server sends only in `.done` events
//! (no deltas) is taken from there. Items of other types are opaque blocks.
//! `response.completed` / `response.incomplete` give the stop reason and
//! usage and end the message; `response.failed` and `error` are stream errors.
//!
//! # Encoder
//!
//! Every event is `event: <type>` plus `data:` JSON with `type` and
//! `sequence_number` (0, 1, 2, …). The stream opens with `response.created`
//! and `response.in_progress`; each canonical block is one output item
//! (`response.output_item.added` … `response.output_item.done`): text a
//! `message` with one `output_text` part and its delta / done events,
//! thinking a `reasoning` item with one summary part, a tool call a
//! `function_call` with argument deltas, or a `custom_tool_call` when its
//! arguments begin `{"custom_tool_input": "` (the first fragments are held
//! until that can be told, then the string's content is unescaped as it
//! streams). Done events and the final `response.completed` (or
//! `response.incomplete`) repeat what was streamed, so the encoder keeps the
//! open item's text and the finished items' JSON. A failure is an `error`
//! event followed by `response.failed`.

use super::envelope::Envelope;
use super::request::{carried, custom_input, Carried, CUSTOM_INPUT_KEY};
use super::response::{
    call_item, decode_status, decode_usage, encode_status, encode_usage, failure_message, item_id,
    reasoning_item, redacted_item, response_id, ENVELOPE_DEFAULTS,
};
use super::wire::{Item, Usage as WireUsage};
use crate::family::Family;
use crate::ir::stream::{
    merge_usage, parse_arguments, BlockDelta, BlockStart, MessageDelta, MessageStart, StreamError,
    StreamEvent,
};
use crate::ir::{Extra, Opaque, StopReason, ThinkingBlock, ToolCall, Usage};
use crate::protocol::common::framing::StreamFault;
use crate::protocol::common::support::{
    error_body, error_kind, json_str, json_u64, json_value, malformed, DeltaBuf, DeltaKind, Emit,
};
use crate::sse::SseEvent;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

const F: Family = Family::Responses;

// ------------------------------------------------------------------ wire (borrowed)

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response: Option<ResponsePeek<'a>>,
    #[serde(borrow, default)]
    item: Option<&'a RawValue>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    part: Option<PartPeek<'a>>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    input: Option<Cow<'a, str>>,
    // `error` events.
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ResponsePeek<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    created_at: Option<f64>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(default)]
    incomplete_details: Option<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct PartPeek<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
}

/// The canonical error for an upstream `error` object or event.
fn stream_error(code: Option<&Value>, kind: Option<&str>, message: String) -> StreamError {
    let kind = match code {
        Some(Value::String(c)) => match error_kind(c) {
            crate::ir::stream::StreamErrorKind::Api => error_kind(kind.unwrap_or_default()),
            known => known,
        },
        Some(Value::Number(n)) => {
            crate::protocol::common::support::error_kind_for_status(n.as_u64().unwrap_or(500))
        }
        _ => error_kind(kind.unwrap_or_default()),
    };
    StreamError { kind, message }
}

// ------------------------------------------------------------------ parser

/// The event types the parser reads.
const HANDLED: &[&str] = &[
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.refusal.delta",
    "response.output_text.done",
    "response.refusal.done",
    "response.content_part.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Text(usize),
    Thinking(usize),
    Call { index: usize, custom: bool },
}

/// Upstream Responses events → canonical events.
#[derive(Debug, Default)]
pub struct Parser {
    started: bool,
    done: bool,
    open: Option<Open>,
    next_index: usize,
    /// The open block got a delta (so `.done` events must not repeat it).
    got_delta: bool,
    /// The current output item produced a block.
    item_had_block: bool,
    /// Summary parts seen in the open reasoning item.
    summary_parts: u64,
    /// The current item was taken whole when it was added (redacted thinking).
    whole: bool,
    refusal: bool,
    has_calls: bool,
    buf: DeltaBuf,
    scratch: String,
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the terminal event (or an error) has been read.
    pub fn is_complete(&self) -> bool {
        self.done
    }

    fn open(&self) -> Open {
        self.open.unwrap_or(Open::None)
    }

    /// Reads one SSE event.
    pub fn push(&mut self, event: &SseEvent<'_>, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        if self.done {
            return Ok(());
        }
        let data = event.data;
        if data.is_empty() || data == b"[DONE]" {
            return Ok(());
        }
        let ev: Event<'_> = match serde_json::from_slice(data) {
            Ok(ev) => ev,
            // An event type this parser does not read may have fields of
            // other shapes; only the ones it reads must parse.
            Err(_) if event.event_str().is_some_and(|n| !HANDLED.contains(&n)) => return Ok(()),
            Err(e) => return Err(malformed(F, &format!("invalid event ({e})"), data)),
        };
        let kind = match (&ev.kind, event.event_str()) {
            (Some(k), _) => k.as_ref(),
            (None, Some(name)) => name,
            (None, None) => return Ok(()),
        };
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                self.start(ev.response.as_ref(), emit);
            }
            "response.output_item.added" => {
                self.start(None, emit);
                self.close(emit);
                self.item_had_block = false;
                self.summary_parts = 0;
                self.whole = false;
                if let Some(raw) = ev.item {
                    self.item_added(raw, data, emit)?;
                }
            }
            "response.content_part.added" => {
                let text_part = ev
                    .part
                    .as_ref()
                    .and_then(|p| p.kind.as_deref())
                    .is_some_and(|k| k == "output_text" || k == "refusal");
                if text_part {
                    self.open_text(emit);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if kind == "response.refusal.delta" {
                    self.refusal = true;
                }
                if let Some(d) = ev.delta.as_deref().filter(|d| !d.is_empty()) {
                    let index = self.open_text(emit);
                    self.got_delta = true;
                    self.buf.emit(index, DeltaKind::Text, d, emit);
                }
            }
            "response.output_text.done" | "response.refusal.done" => {
                let whole = if kind == "response.refusal.done" {
                    self.refusal = true;
                    ev.refusal.as_deref()
                } else {
                    ev.text.as_deref()
                };
                if let Some(text) = whole.filter(|t| !t.is_empty()) {
                    let index = self.open_text(emit);
                    if !self.got_delta {
                        self.got_delta = true;
                        self.buf.emit(index, DeltaKind::Text, text, emit);
                    }
                }
            }
            "response.content_part.done" => {
                if let Open::Text(_) = self.open() {
                    self.close(emit);
                }
            }
            "response.function_call_arguments.delta" => {
                if let (Open::Call { index, .. }, Some(d)) = (self.open(), ev.delta.as_deref()) {
                    if !d.is_empty() {
                        self.got_delta = true;
                        self.buf.emit(index, DeltaKind::ToolArguments, d, emit);
                    }
                }
            }
            "response.function_call_arguments.done" => {
                if let (Open::Call { index, .. }, Some(a)) = (self.open(), ev.arguments.as_deref())
                {
                    if !self.got_delta && !a.is_empty() {
                        self.got_delta = true;
                        self.buf.emit(index, DeltaKind::ToolArguments, a, emit);
                    }
                }
            }
            "response.custom_tool_call_input.delta" => {
                if let (
                    Open::Call {
                        index,
                        custom: true,
                    },
                    Some(d),
                ) = (self.open(), ev.delta.as_deref())
                {
                    self.got_delta = true;
                    self.custom_fragment(index, d, emit);
                }
            }
            "response.custom_tool_call_input.done" => {
                if let (
                    Open::Call {
                        index,
                        custom: true,
                    },
                    Some(i),
                ) = (self.open(), ev.input.as_deref())
                {
                    if !self.got_delta {
                        self.got_delta = true;
                        self.custom_fragment(index, i, emit);
                    }
                }
            }
            "response.reasoning_summary_part.added" => {
                if let Open::Thinking(index) = self.open() {
                    if self.summary_parts > 0 || ev.summary_index.is_some_and(|i| i > 0) {
                        self.buf.emit(index, DeltaKind::Thinking, "\n\n", emit);
                    }
                    self.summary_parts += 1;
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let (Open::Thinking(index), Some(d)) = (self.open(), ev.delta.as_deref()) {
                    if !d.is_empty() {
                        self.got_delta = true;
                        self.buf.emit(index, DeltaKind::Thinking, d, emit);
                    }
                }
            }
            "response.output_item.done" => {
                self.start(None, emit);
                if let Some(raw) = ev.item {
                    self.item_done(raw, data, emit)?;
                }
                // The next item starts afresh, announced or not.
                self.item_had_block = false;
                self.whole = false;
                self.summary_parts = 0;
            }
            "response.completed" | "response.incomplete" => {
                self.start(ev.response.as_ref(), emit);
                self.close(emit);
                let (stop, usage) = match ev.response {
                    Some(r) => {
                        let status = r
                            .status
                            .as_deref()
                            .or_else(|| kind.strip_prefix("response."));
                        (
                            decode_status(
                                status,
                                r.incomplete_details.as_ref(),
                                self.refusal,
                                self.has_calls,
                            ),
                            r.usage.map(decode_usage),
                        )
                    }
                    None => (
                        decode_status(
                            kind.strip_prefix("response."),
                            None,
                            self.refusal,
                            self.has_calls,
                        ),
                        None,
                    ),
                };
                emit(&StreamEvent::MessageDelta(MessageDelta {
                    stop_reason: stop,
                    usage,
                }));
                emit(&StreamEvent::MessageStop);
                self.done = true;
            }
            "response.failed" => {
                let error = ev
                    .response
                    .as_ref()
                    .and_then(|r| r.error.as_ref())
                    .filter(|e| !e.is_null());
                let message = error.map_or_else(
                    || "the upstream response failed".to_string(),
                    failure_message,
                );
                let code = error.and_then(|e| e.get("code"));
                self.done = true;
                emit(&StreamEvent::Error(stream_error(code, None, message)));
            }
            "error" => {
                // `{"type":"error","code","message","param"}`, or an `error` object.
                let (code, message, kind) = match &ev.error {
                    Some(e) if e.is_object() => (
                        e.get("code").cloned(),
                        e.get("message").and_then(Value::as_str).map(str::to_string),
                        e.get("type").and_then(Value::as_str).map(str::to_string),
                    ),
                    _ => (
                        ev.code.clone(),
                        ev.message.as_deref().map(str::to_string),
                        None,
                    ),
                };
                self.done = true;
                emit(&StreamEvent::Error(stream_error(
                    code.as_ref(),
                    kind.as_deref(),
                    message.unwrap_or_else(|| String::from_utf8_lossy(data).into_owned()),
                )));
            }
            _ => {}
        }
        Ok(())
    }

    /// Called at the end of the upstream stream: a stream without its terminal event is truncated.
    pub fn finish(&mut self, _emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        if self.done {
            Ok(())
        } else {
            Err(StreamFault::Truncated)
        }
    }

    fn start(&mut self, r: Option<&ResponsePeek<'_>>, emit: &mut Emit<'_>) {
        if self.started {
            return;
        }
        self.started = true;
        let mut start = MessageStart::default();
        if let Some(r) = r {
            start.id = r.id.as_deref().unwrap_or_default().to_string();
            start.model = r.model.as_deref().unwrap_or_default().to_string();
            start.created = r.created_at.map(|t| t as u64);
        }
        emit(&StreamEvent::MessageStart(start));
    }

    fn begin(&mut self, block: BlockStart, open: Open, emit: &mut Emit<'_>) -> usize {
        self.close(emit);
        let index = self.next_index;
        self.next_index += 1;
        emit(&StreamEvent::BlockStart { index, block });
        let open = match open {
            Open::Text(_) => Open::Text(index),
            Open::Thinking(_) => Open::Thinking(index),
            Open::Call { custom, .. } => Open::Call { index, custom },
            Open::None => Open::None,
        };
        self.open = Some(open);
        self.got_delta = false;
        self.item_had_block = true;
        index
    }

    /// Closes the open block (a custom call's JSON string and object first).
    fn close(&mut self, emit: &mut Emit<'_>) {
        let index = match self.open() {
            Open::None => return,
            Open::Text(i) | Open::Thinking(i) => i,
            Open::Call { index, custom } => {
                if custom {
                    self.buf.emit(index, DeltaKind::ToolArguments, "\"}", emit);
                }
                index
            }
        };
        self.open = None;
        emit(&StreamEvent::BlockStop { index });
    }

    fn open_text(&mut self, emit: &mut Emit<'_>) -> usize {
        if let Open::Text(i) = self.open() {
            return i;
        }
        self.begin(BlockStart::Text, Open::Text(0), emit)
    }

    /// Writes free-form custom tool input as the JSON string's next fragment.
    fn custom_fragment(&mut self, index: usize, text: &str, emit: &mut Emit<'_>) {
        if text.is_empty() {
            return;
        }
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        push_json_escaped(&mut s, text);
        self.buf.emit(index, DeltaKind::ToolArguments, &s, emit);
        self.scratch = s;
    }

    fn item_added(
        &mut self,
        raw: &RawValue,
        data: &[u8],
        emit: &mut Emit<'_>,
    ) -> Result<(), StreamFault> {
        let item: Item = serde_json::from_str(raw.get())
            .map_err(|e| malformed(F, &format!("invalid output item ({e})"), data))?;
        match item.kind.as_deref().unwrap_or("message") {
            "function_call" => {
                self.has_calls = true;
                let index = self.begin(
                    BlockStart::ToolCall {
                        id: item.call_id.unwrap_or_default(),
                        name: item.name.unwrap_or_default(),
                    },
                    Open::Call {
                        index: 0,
                        custom: false,
                    },
                    emit,
                );
                if let Some(a) = item.arguments.as_deref().filter(|a| !a.is_empty()) {
                    self.got_delta = true;
                    self.buf.emit(index, DeltaKind::ToolArguments, a, emit);
                }
            }
            "custom_tool_call" => {
                self.has_calls = true;
                let index = self.begin(
                    BlockStart::ToolCall {
                        id: item.call_id.unwrap_or_default(),
                        name: item.name.unwrap_or_default(),
                    },
                    Open::Call {
                        index: 0,
                        custom: true,
                    },
                    emit,
                );
                let head = format!("{{\"{CUSTOM_INPUT_KEY}\":\"");
                self.buf.emit(index, DeltaKind::ToolArguments, &head, emit);
                if let Some(i) = item.input.as_deref().filter(|i| !i.is_empty()) {
                    self.got_delta = true;
                    self.custom_fragment(index, i, emit);
                }
            }
            "reasoning" => {
                let redacted = item
                    .encrypted_content
                    .as_deref()
                    .map(|e| carried(item.id.as_deref().unwrap_or_default(), e));
                if let Some(Carried::Redacted(data)) = redacted {
                    let index = self.begin(
                        BlockStart::RedactedThinking { data },
                        Open::Thinking(0),
                        emit,
                    );
                    self.open = None;
                    self.whole = true;
                    emit(&StreamEvent::BlockStop { index });
                } else {
                    self.begin(BlockStart::Thinking, Open::Thinking(0), emit);
                }
            }
            // Messages open their text blocks part by part; other items are
            // taken whole from their `.done` event.
            _ => {}
        }
        Ok(())
    }

    fn item_done(
        &mut self,
        raw: &RawValue,
        data: &[u8],
        emit: &mut Emit<'_>,
    ) -> Result<(), StreamFault> {
        let item: Item = serde_json::from_str(raw.get())
            .map_err(|e| malformed(F, &format!("invalid output item ({e})"), data))?;
        let kind = item.kind.clone().unwrap_or_else(|| "message".into());
        match kind.as_str() {
            "message" => {
                if !self.item_had_block {
                    // No part events: the parts are in the item.
                    for part in item.content.into_iter().flat_map(|c| match c {
                        crate::protocol::common::json::StringOr::List(parts) => parts,
                        crate::protocol::common::json::StringOr::String(text) => {
                            vec![super::wire::Part {
                                kind: "output_text".into(),
                                text: Some(text),
                                ..super::wire::Part::default()
                            }]
                        }
                    }) {
                        let text = if part.kind == "refusal" {
                            self.refusal = true;
                            part.refusal
                        } else {
                            part.text
                        };
                        let index = self.begin(BlockStart::Text, Open::Text(0), emit);
                        if let Some(t) = text.filter(|t| !t.is_empty()) {
                            self.buf.emit(index, DeltaKind::Text, &t, emit);
                        }
                        self.close(emit);
                    }
                }
                self.close(emit);
            }
            "function_call" | "custom_tool_call" => {
                let custom = kind == "custom_tool_call";
                let index = match self.open() {
                    Open::Call { index, .. } => index,
                    _ => {
                        self.has_calls = true;
                        let index = self.begin(
                            BlockStart::ToolCall {
                                id: item.call_id.clone().unwrap_or_default(),
                                name: item.name.clone().unwrap_or_default(),
                            },
                            Open::Call { index: 0, custom },
                            emit,
                        );
                        if custom {
                            let head = format!("{{\"{CUSTOM_INPUT_KEY}\":\"");
                            self.buf.emit(index, DeltaKind::ToolArguments, &head, emit);
                        }
                        index
                    }
                };
                if !self.got_delta {
                    self.got_delta = true;
                    if custom {
                        if let Some(i) = item.input.as_deref() {
                            self.custom_fragment(index, i, emit);
                        }
                    } else if let Some(a) = item.arguments.as_deref().filter(|a| !a.is_empty()) {
                        self.buf.emit(index, DeltaKind::ToolArguments, a, emit);
                    }
                }
                self.close(emit);
            }
            "reasoning" if self.whole => self.whole = false,
            "reasoning" => {
                let index = match self.open() {
                    Open::Thinking(index) => index,
                    _ => self.begin(BlockStart::Thinking, Open::Thinking(0), emit),
                };
                if !self.got_delta {
                    let parts = item.summary.as_deref().unwrap_or_default();
                    let texts: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
                    let text = texts.join("\n\n");
                    if !text.is_empty() {
                        self.buf.emit(index, DeltaKind::Thinking, &text, emit);
                    }
                }
                if let Some(e) = item.encrypted_content.as_deref() {
                    match carried(item.id.as_deref().unwrap_or_default(), e) {
                        Carried::Signature(sig) => {
                            self.buf.emit(index, DeltaKind::Signature, &sig, emit);
                        }
                        // Redacted thinking comes whole in `.added`; late, it has no place.
                        Carried::Redacted(_) => {}
                    }
                }
                self.close(emit);
            }
            other => {
                self.close(emit);
                let value = serde_json::to_value(&item).unwrap_or(Value::Null);
                let index = self.begin(
                    BlockStart::Opaque(Opaque {
                        origin: F,
                        kind: other.to_string(),
                        value,
                    }),
                    Open::Text(0),
                    emit,
                );
                self.open = None;
                emit(&StreamEvent::BlockStop { index });
            }
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ custom input

/// Appends `text` escaped as the content of a JSON string (no quotes).
fn push_json_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

/// Where a tool call's argument text stands on the way to telling whether
/// it is a custom tool's input (`{"custom_tool_input": "…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prefix {
    /// The text so far could still go either way.
    More,
    /// It is not a custom input.
    No,
    /// It is; the string's content starts at this byte.
    Yes(usize),
}

/// Matches `{ "custom_tool_input" : "` (JSON whitespace allowed) at the start of `s`.
fn custom_prefix(s: &str) -> Prefix {
    let key = format!("\"{CUSTOM_INPUT_KEY}\"");
    let bytes = s.as_bytes();
    let mut pos = 0;
    let ws = |pos: &mut usize| {
        while *pos < bytes.len() && matches!(bytes[*pos], b' ' | b'\t' | b'\n' | b'\r') {
            *pos += 1;
        }
    };
    for token in ["{", key.as_str(), ":", "\""] {
        ws(&mut pos);
        let rest = &s[pos..];
        if rest.len() < token.len() {
            return if token.starts_with(rest) {
                Prefix::More
            } else {
                Prefix::No
            };
        }
        if !rest.starts_with(token) {
            return Prefix::No;
        }
        pos += token.len();
    }
    Prefix::Yes(pos)
}

/// Unescapes a JSON string's content fragment by fragment (escapes may be
/// split between fragments); stops at the closing quote.
#[derive(Debug, Default)]
struct Unescape {
    /// After a backslash.
    escape: bool,
    /// Hex digits of a `\u` escape read so far (`Some` while reading).
    hex: Option<(u32, u8)>,
    /// A high surrogate waiting for its low half.
    high: Option<u32>,
    closed: bool,
}

impl Unescape {
    fn lone_high(&mut self, out: &mut String) {
        if self.high.take().is_some() {
            out.push('\u{fffd}');
        }
    }

    fn feed(&mut self, s: &str, out: &mut String) {
        for c in s.chars() {
            if self.closed {
                return;
            }
            if let Some((acc, n)) = self.hex {
                let acc = acc * 16 + c.to_digit(16).unwrap_or(0);
                if n < 3 {
                    self.hex = Some((acc, n + 1));
                    continue;
                }
                self.hex = None;
                match acc {
                    0xD800..=0xDBFF => {
                        self.lone_high(out);
                        self.high = Some(acc);
                    }
                    0xDC00..=0xDFFF => match self.high.take() {
                        Some(h) => out.push(
                            char::from_u32(0x10000 + ((h - 0xD800) << 10) + (acc - 0xDC00))
                                .unwrap_or('\u{fffd}'),
                        ),
                        None => out.push('\u{fffd}'),
                    },
                    _ => {
                        self.lone_high(out);
                        out.push(char::from_u32(acc).unwrap_or('\u{fffd}'));
                    }
                }
                continue;
            }
            if self.escape {
                self.escape = false;
                if c == 'u' {
                    self.hex = Some((0, 0));
                    continue;
                }
                self.lone_high(out);
                out.push(match c {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    other => other,
                });
                continue;
            }
            match c {
                '\\' => self.escape = true,
                '"' => {
                    self.lone_high(out);
                    self.closed = true;
                }
                c => {
                    self.lone_high(out);
                    out.push(c);
                }
            }
        }
    }
}

// ------------------------------------------------------------------ encoder

/// How the open tool call is being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallMode {
    /// Argument text is held until it shows whether the call is custom.
    Deciding,
    /// A `function_call`: argument deltas pass through.
    Function,
    /// A `custom_tool_call`: the input string is unescaped as it streams.
    Custom,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    None,
    Text,
    Thinking { summary_open: bool },
    Call(CallMode),
    Dropped,
}

/// Canonical events → Responses SSE events.
#[derive(Debug)]
pub struct Encoder {
    model: String,
    created: u64,
    id: String,
    seq: u64,
    started: bool,
    ended: bool,
    open: Out,
    /// Output index of the open item (= items done so far).
    output_index: usize,
    item_id: String,
    /// The open item's text, summary, argument text or custom input.
    text: String,
    /// A custom call's raw argument text (its JSON), kept to check the input at the end.
    raw: String,
    signature: String,
    call_id: String,
    name: String,
    unescape: Unescape,
    /// The finished items' JSON, comma-separated.
    output: Vec<u8>,
    stop: Option<StopReason>,
    usage: Option<Usage>,
    scratch: String,
    /// A stored or continued response (docs/api.md "Stored responses"): what its objects carry
    /// and its final object (boxed: most streams have none).
    kept: Option<Box<Kept>>,
}

/// What a stored or continued response's stream carries and leaves.
#[derive(Debug)]
struct Kept {
    envelope: Envelope,
    /// The terminal event's response object (completed or incomplete).
    final_object: Option<Vec<u8>>,
}

impl Encoder {
    /// An encoder naming the model `client_model` (`provider/model_id`);
    /// `created` is used when the upstream gives no creation time.
    pub fn new(client_model: &str, created: u64) -> Self {
        Encoder {
            model: client_model.to_string(),
            created,
            id: String::new(),
            seq: 0,
            started: false,
            ended: false,
            open: Out::None,
            output_index: 0,
            item_id: String::new(),
            text: String::new(),
            raw: String::new(),
            signature: String::new(),
            call_id: String::new(),
            name: String::new(),
            unescape: Unescape::default(),
            output: Vec::new(),
            stop: None,
            usage: None,
            scratch: String::new(),
            kept: None,
        }
    }

    /// Sets the id and members every `response` object of this stream carries.
    pub fn set_envelope(&mut self, envelope: Envelope) {
        self.kept = Some(Box::new(Kept {
            envelope,
            final_object: None,
        }));
    }

    /// The `response` object of the stream's `response.completed` (or
    /// `response.incomplete`) event, once written.
    pub fn final_response(&self) -> Option<&[u8]> {
        self.kept.as_ref().and_then(|k| k.final_object.as_deref())
    }

    /// Sets the `created_at` time used when the upstream gives none.
    pub fn set_created(&mut self, created: u64) {
        self.created = created;
    }

    /// True once the stream has been ended (normally or with an error).
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Writes `event: <kind>` and the start of its data up to the first field after `sequence_number`.
    fn begin(&mut self, out: &mut Vec<u8>, kind: &str) {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: {\"type\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\",\"sequence_number\":");
        json_u64(out, self.seq);
        self.seq += 1;
    }

    fn end(out: &mut Vec<u8>) {
        out.extend_from_slice(b"}\n\n");
    }

    /// `,"item_id":…,"output_index":…`
    fn item_ref(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b",\"item_id\":");
        json_str(out, &self.item_id);
        out.extend_from_slice(b",\"output_index\":");
        json_u64(out, self.output_index as u64);
    }

    /// Writes the `response` object with `status`.
    fn response_object(
        &self,
        out: &mut Vec<u8>,
        status: &str,
        incomplete: &Value,
        error: Option<&Value>,
        final_usage: bool,
    ) {
        out.extend_from_slice(b"{\"id\":");
        json_str(out, &self.id);
        out.extend_from_slice(b",\"object\":\"response\",\"created_at\":");
        json_u64(out, self.created);
        out.extend_from_slice(b",\"status\":");
        json_str(out, status);
        out.extend_from_slice(b",\"error\":");
        match error {
            Some(e) => json_value(out, e),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"incomplete_details\":");
        json_value(out, incomplete);
        out.extend_from_slice(b",\"model\":");
        json_str(out, &self.model);
        out.extend_from_slice(b",\"output\":[");
        out.extend_from_slice(&self.output);
        out.push(b']');
        for (key, value) in ENVELOPE_DEFAULTS {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(b"\":");
            match self.kept.as_ref().and_then(|k| k.envelope.field(key)) {
                Some(v) => out.extend_from_slice(v),
                None => out.extend_from_slice(value.as_bytes()),
            }
        }
        out.extend_from_slice(b",\"usage\":");
        match (&self.usage, final_usage) {
            (Some(u), true) => json_value(out, &encode_usage(u)),
            _ => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    }

    fn response_event(
        &mut self,
        out: &mut Vec<u8>,
        kind: &str,
        status: &str,
        incomplete: &Value,
        error: Option<&Value>,
        final_usage: bool,
    ) -> std::ops::Range<usize> {
        self.begin(out, kind);
        out.extend_from_slice(b",\"response\":");
        let start = out.len();
        self.response_object(out, status, incomplete, error, final_usage);
        let span = start..out.len();
        Self::end(out);
        span
    }

    fn start(&mut self, start: &MessageStart, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        self.id = match self.kept.as_ref().and_then(|k| k.envelope.id.as_ref()) {
            Some(id) => id.clone(),
            None => response_id(&start.id, None),
        };
        if let Some(c) = start.created {
            self.created = c;
        }
        if let Some(u) = &start.usage {
            self.usage = Some(merge_usage(self.usage.take(), u));
        }
        self.response_event(
            out,
            "response.created",
            "in_progress",
            &Value::Null,
            None,
            false,
        );
        self.response_event(
            out,
            "response.in_progress",
            "in_progress",
            &Value::Null,
            None,
            false,
        );
    }

    fn ensure_started(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.start(&MessageStart::default(), out);
        }
    }

    /// `response.output_item.added` for `item`.
    fn item_added(&mut self, out: &mut Vec<u8>, item: &Value) {
        self.begin(out, "response.output_item.added");
        out.extend_from_slice(b",\"output_index\":");
        json_u64(out, self.output_index as u64);
        out.extend_from_slice(b",\"item\":");
        json_value(out, item);
        Self::end(out);
    }

    /// `response.output_item.done` for `item`, which joins the output.
    fn item_done(&mut self, out: &mut Vec<u8>, item: &Value) {
        self.begin(out, "response.output_item.done");
        out.extend_from_slice(b",\"output_index\":");
        json_u64(out, self.output_index as u64);
        out.extend_from_slice(b",\"item\":");
        let mark = out.len();
        json_value(out, item);
        if !self.output.is_empty() {
            self.output.push(b',');
        }
        self.output.extend_from_slice(&out[mark..]);
        Self::end(out);
        self.output_index += 1;
    }

    /// Writes what `event` means for the client.
    pub fn event(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            StreamEvent::MessageStart(start) => self.start(start, out),
            StreamEvent::BlockStart { block, .. } => {
                self.ensure_started(out);
                self.block_start(block, out);
            }
            StreamEvent::BlockDelta { delta, .. } => self.delta(delta, out),
            StreamEvent::BlockStop { .. } => self.block_stop(out),
            StreamEvent::MessageDelta(d) => {
                if let Some(r) = &d.stop_reason {
                    self.stop = Some(r.clone());
                }
                if let Some(u) = &d.usage {
                    self.usage = Some(merge_usage(self.usage.take(), u));
                }
            }
            StreamEvent::MessageStop => {
                self.ensure_started(out);
                self.block_stop(out);
                let (status, incomplete) = encode_status(self.stop.as_ref());
                let kind = if status == "incomplete" {
                    "response.incomplete"
                } else {
                    "response.completed"
                };
                let span = self.response_event(out, kind, status, &incomplete, None, true);
                if let Some(k) = &mut self.kept {
                    k.final_object = out.get(span).map(<[u8]>::to_vec);
                }
                self.ended = true;
            }
            StreamEvent::Ping => {}
            StreamEvent::Error(e) => self.fail(
                &error_body(F, e, crate::protocol::responses::error::error_body),
                out,
            ),
        }
    }

    fn block_start(&mut self, block: &BlockStart, out: &mut Vec<u8>) {
        self.block_stop(out);
        self.text.clear();
        self.raw.clear();
        self.signature.clear();
        match block {
            BlockStart::Text => {
                self.item_id = item_id("msg_", &self.id, self.output_index);
                let item = serde_json::json!({"id": self.item_id, "type": "message",
                    "status": "in_progress", "content": [], "role": "assistant"});
                self.item_added(out, &item);
                self.begin(out, "response.content_part.added");
                self.item_ref(out);
                out.extend_from_slice(b",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"\"}");
                Self::end(out);
                self.open = Out::Text;
            }
            BlockStart::Thinking => {
                self.item_id = item_id("rs_", &self.id, self.output_index);
                let item =
                    serde_json::json!({"id": self.item_id, "type": "reasoning", "summary": []});
                self.item_added(out, &item);
                self.open = Out::Thinking {
                    summary_open: false,
                };
            }
            BlockStart::RedactedThinking { data } => {
                self.item_id = item_id("rs_", &self.id, self.output_index);
                let item = redacted_item(data, &self.item_id);
                self.item_added(out, &item);
                self.item_done(out, &item);
                self.open = Out::Dropped;
            }
            BlockStart::ToolCall { id, name } => {
                self.call_id.clone_from(id);
                self.name.clone_from(name);
                self.unescape = Unescape::default();
                self.open = Out::Call(CallMode::Deciding);
            }
            BlockStart::Opaque(o) if o.origin == F => {
                self.item_added(out, &o.value);
                self.item_done(out, &o.value);
                self.open = Out::Dropped;
            }
            BlockStart::Image(_) | BlockStart::Opaque(_) => self.open = Out::Dropped,
        }
    }

    fn delta(&mut self, delta: &BlockDelta, out: &mut Vec<u8>) {
        match (self.open, delta) {
            (Out::Text, BlockDelta::Text(t)) if !t.is_empty() => {
                self.text.push_str(t);
                self.begin(out, "response.output_text.delta");
                self.item_ref(out);
                out.extend_from_slice(b",\"content_index\":0,\"delta\":");
                json_str(out, t);
                out.extend_from_slice(b",\"logprobs\":[]");
                Self::end(out);
            }
            (Out::Thinking { summary_open }, BlockDelta::Thinking(t)) if !t.is_empty() => {
                if !summary_open {
                    self.begin(out, "response.reasoning_summary_part.added");
                    self.item_ref(out);
                    out.extend_from_slice(
                        b",\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":\"\"}",
                    );
                    Self::end(out);
                    self.open = Out::Thinking { summary_open: true };
                }
                self.text.push_str(t);
                self.begin(out, "response.reasoning_summary_text.delta");
                self.item_ref(out);
                out.extend_from_slice(b",\"summary_index\":0,\"delta\":");
                json_str(out, t);
                Self::end(out);
            }
            (Out::Thinking { .. }, BlockDelta::Signature(s)) => self.signature.push_str(s),
            (Out::Call(mode), BlockDelta::ToolArguments(a)) if !a.is_empty() => {
                self.raw.push_str(a);
                match mode {
                    CallMode::Deciding => match custom_prefix(&self.raw) {
                        Prefix::More => {}
                        Prefix::No => {
                            self.call_added(false, out);
                            let held = std::mem::take(&mut self.raw);
                            self.arguments_delta(&held, out);
                            self.raw = held;
                        }
                        Prefix::Yes(at) => {
                            self.call_added(true, out);
                            let held = std::mem::take(&mut self.raw);
                            self.custom_delta(&held[at..], out);
                            self.raw = held;
                        }
                    },
                    CallMode::Function => self.arguments_delta(a, out),
                    CallMode::Custom => self.custom_delta(a, out),
                }
            }
            _ => {}
        }
    }

    /// `response.output_item.added` for the open tool call, now that its kind is known.
    fn call_added(&mut self, custom: bool, out: &mut Vec<u8>) {
        let (prefix, mode) = if custom {
            ("ctc_", CallMode::Custom)
        } else {
            ("fc_", CallMode::Function)
        };
        self.item_id = item_id(prefix, &self.id, self.output_index);
        let item = if custom {
            serde_json::json!({"id": self.item_id, "type": "custom_tool_call", "status": "in_progress",
                "call_id": self.call_id, "input": "", "name": self.name})
        } else {
            serde_json::json!({"id": self.item_id, "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": self.call_id, "name": self.name})
        };
        self.item_added(out, &item);
        self.open = Out::Call(mode);
    }

    fn arguments_delta(&mut self, a: &str, out: &mut Vec<u8>) {
        if a.is_empty() {
            return;
        }
        self.text.push_str(a);
        self.begin(out, "response.function_call_arguments.delta");
        self.item_ref(out);
        out.extend_from_slice(b",\"delta\":");
        json_str(out, a);
        Self::end(out);
    }

    fn custom_delta(&mut self, fragment: &str, out: &mut Vec<u8>) {
        let mut decoded = std::mem::take(&mut self.scratch);
        decoded.clear();
        self.unescape.feed(fragment, &mut decoded);
        if !decoded.is_empty() {
            self.text.push_str(&decoded);
            self.begin(out, "response.custom_tool_call_input.delta");
            self.item_ref(out);
            out.extend_from_slice(b",\"delta\":");
            json_str(out, &decoded);
            Self::end(out);
        }
        self.scratch = decoded;
    }

    fn block_stop(&mut self, out: &mut Vec<u8>) {
        match std::mem::replace(&mut self.open, Out::None) {
            Out::None | Out::Dropped => {}
            Out::Text => {
                self.begin(out, "response.output_text.done");
                self.item_ref(out);
                out.extend_from_slice(b",\"content_index\":0,\"text\":");
                json_str(out, &self.text);
                out.extend_from_slice(b",\"logprobs\":[]");
                Self::end(out);
                let part = serde_json::json!({"type": "output_text", "annotations": [], "logprobs": [], "text": self.text});
                self.begin(out, "response.content_part.done");
                self.item_ref(out);
                out.extend_from_slice(b",\"content_index\":0,\"part\":");
                json_value(out, &part);
                Self::end(out);
                let item = serde_json::json!({"id": self.item_id, "type": "message",
                    "status": "completed", "content": [part], "role": "assistant"});
                self.item_done(out, &item);
            }
            Out::Thinking { summary_open } => {
                if summary_open {
                    self.begin(out, "response.reasoning_summary_text.done");
                    self.item_ref(out);
                    out.extend_from_slice(b",\"summary_index\":0,\"text\":");
                    json_str(out, &self.text);
                    Self::end(out);
                    self.begin(out, "response.reasoning_summary_part.done");
                    self.item_ref(out);
                    out.extend_from_slice(
                        b",\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":",
                    );
                    json_str(out, &self.text);
                    out.push(b'}');
                    Self::end(out);
                }
                let block = ThinkingBlock {
                    text: std::mem::take(&mut self.text),
                    signature: (!self.signature.is_empty())
                        .then(|| std::mem::take(&mut self.signature)),
                    extra: Extra::default(),
                };
                let item = reasoning_item(&block, &self.item_id);
                self.item_done(out, &item);
            }
            Out::Call(mode) => {
                let arguments = parse_arguments(&self.raw);
                let custom = match mode {
                    CallMode::Deciding => {
                        let custom = custom_input(&arguments).is_some();
                        self.call_added(custom, out);
                        if !custom {
                            let held = std::mem::take(&mut self.raw);
                            self.arguments_delta(&held, out);
                            self.raw = held;
                        } else if let Some(input) = custom_input(&arguments) {
                            let input = input.to_string();
                            self.custom_delta_raw(&input, out);
                        }
                        custom
                    }
                    CallMode::Function => false,
                    CallMode::Custom => true,
                };
                let call = ToolCall {
                    id: std::mem::take(&mut self.call_id),
                    name: std::mem::take(&mut self.name),
                    arguments: if custom {
                        // The input as streamed, unless the whole text says otherwise.
                        match custom_input(&arguments) {
                            Some(_) => arguments,
                            None => super::request::custom_arguments(&self.text),
                        }
                    } else {
                        arguments
                    },
                    signature: None,
                    cache_control: None,
                    extra: Extra::default(),
                };
                if custom {
                    let input = custom_input(&call.arguments).unwrap_or_default();
                    self.begin(out, "response.custom_tool_call_input.done");
                    self.item_ref(out);
                    out.extend_from_slice(b",\"input\":");
                    json_str(out, input);
                    Self::end(out);
                } else {
                    self.begin(out, "response.function_call_arguments.done");
                    self.item_ref(out);
                    out.extend_from_slice(b",\"name\":");
                    json_str(out, &call.name);
                    out.extend_from_slice(b",\"arguments\":");
                    json_str(out, &self.text);
                    Self::end(out);
                }
                let mut item = call_item(&call, &self.item_id, "completed");
                if !custom {
                    // The arguments exactly as streamed.
                    item["arguments"] = Value::String(std::mem::take(&mut self.text));
                }
                self.item_done(out, &item);
            }
        }
        self.text.clear();
        self.raw.clear();
    }

    /// A custom call decided only at its end: its whole input as one delta.
    fn custom_delta_raw(&mut self, input: &str, out: &mut Vec<u8>) {
        if input.is_empty() {
            return;
        }
        self.text.push_str(input);
        self.begin(out, "response.custom_tool_call_input.delta");
        self.item_ref(out);
        out.extend_from_slice(b",\"delta\":");
        json_str(out, input);
        Self::end(out);
    }

    /// Forwards an upstream comment (keep-alive).
    pub fn comment(&mut self, text: &[u8], out: &mut Vec<u8>) {
        if !self.ended {
            crate::sse::encode_comment(out, text);
        }
    }

    /// Ends the stream with `error_body` (`{"error":{…}}`): an `error` event,
    /// then `response.failed` with what was produced so far.
    pub fn fail(&mut self, error_body: &[u8], out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        self.ensure_started(out);
        let (message, code, param) = error_fields(error_body);
        let (message, code) = (message.as_str(), code.as_str());
        self.begin(out, "error");
        out.extend_from_slice(b",\"code\":");
        json_str(out, code);
        out.extend_from_slice(b",\"message\":");
        json_str(out, message);
        out.extend_from_slice(b",\"param\":");
        json_value(out, &param);
        Self::end(out);
        let error = serde_json::json!({"code": code, "message": message});
        self.response_event(
            out,
            "response.failed",
            "failed",
            &Value::Null,
            Some(&error),
            true,
        );
        self.ended = true;
    }
}

/// The message, code (falling back to the error `type`) and param of a
/// family error body (`{"error":{…}}`), for the stream's `error` event.
fn error_fields(error_body: &[u8]) -> (String, String, Value) {
    let parsed: Value = serde_json::from_slice(error_body).unwrap_or(Value::Null);
    let err = parsed.get("error").unwrap_or(&parsed);
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the upstream failed");
    let code = err
        .get("code")
        .filter(|c| !c.is_null())
        .or_else(|| err.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("server_error");
    let param = err.get("param").cloned().unwrap_or(Value::Null);
    (message.to_string(), code.to_string(), param)
}

/// Ends a passed-through Responses stream (the upstream speaks the client's
/// protocol, so no encoder holds its state) with `error_body`
/// (`{"error":{…}}`): an `error` event numbered `seq`, then `response.failed`
/// for the response `id` the stream announced.
pub fn passthrough_failure(error_body: &[u8], seq: u64, id: Option<&str>, out: &mut Vec<u8>) {
    let (message, code, param) = error_fields(error_body);
    let error = serde_json::json!({
        "type": "error",
        "sequence_number": seq,
        "code": code,
        "message": message,
        "param": param,
    });
    crate::sse::encode_event(out, Some("error"), error.to_string().as_bytes());
    let failed = serde_json::json!({
        "type": "response.failed",
        "sequence_number": seq + 1,
        "response": {
            "id": id.map_or_else(|| crate::protocol::common::support::fresh_id("resp_"), str::to_string),
            "object": "response",
            "status": "failed",
            "error": {"code": code, "message": message},
            "output": [],
        },
    });
    crate::sse::encode_event(out, Some("response.failed"), failed.to_string().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_custom_prefix_is_told_from_the_first_bytes() {
        assert_eq!(custom_prefix(""), Prefix::More);
        assert_eq!(custom_prefix("{ \"custom_to"), Prefix::More);
        assert_eq!(
            custom_prefix("{\"custom_tool_input\": \"a"),
            Prefix::Yes(23)
        );
        assert_eq!(custom_prefix("{\"input\": \"a\"}"), Prefix::No);
        assert_eq!(custom_prefix("[]"), Prefix::No);
        assert_eq!(custom_prefix("{\"custom_tool_input\":1"), Prefix::No);
    }

    use crate::ir::stream::{Accumulator, GrammarChecker};
    use crate::ir::{Block, StopReason};
    use serde_json::json;

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

    fn fold(events: &[StreamEvent]) -> crate::ir::ChatResponse {
        let mut checker = GrammarChecker::new();
        let mut acc = Accumulator::new();
        for e in events {
            assert_eq!(checker.push(e), Ok(()), "{e:?}\n{events:#?}");
            acc.push(e);
        }
        acc.finish()
    }

    fn ev(kind: &str, body: &Value) -> String {
        let mut v = body.clone();
        v["type"] = json!(kind);
        format!("event: {kind}\ndata: {v}\n\n")
    }

    fn encode(events: &[StreamEvent]) -> String {
        let mut e = Encoder::new("acme/m", 1);
        let mut out = Vec::new();
        for event in events {
            e.event(event, &mut out);
        }
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn a_custom_call_is_told_and_unescaped_however_its_arguments_are_cut() {
        let input = "*** Begin Patch\n+say \"hi\" \\ 😀\n*** End Patch";
        let args = serde_json::to_string(&super::super::request::custom_arguments(input))
            .unwrap_or_default()
            .replace(':', ": ");
        let cuts: Vec<usize> = (0..=args.len())
            .filter(|c| args.is_char_boundary(*c))
            .collect();
        for &cut in &cuts {
            let mut events = vec![
                StreamEvent::MessageStart(MessageStart {
                    id: "resp_1".into(),
                    ..MessageStart::default()
                }),
                StreamEvent::BlockStart {
                    index: 0,
                    block: BlockStart::ToolCall {
                        id: "call_1".into(),
                        name: "apply_patch".into(),
                    },
                },
            ];
            for piece in [&args[..cut], &args[cut..]] {
                events.push(StreamEvent::BlockDelta {
                    index: 0,
                    delta: BlockDelta::ToolArguments(piece.to_string()),
                });
            }
            events.push(StreamEvent::BlockStop { index: 0 });
            events.push(StreamEvent::MessageDelta(MessageDelta {
                stop_reason: Some(StopReason::ToolUse),
                usage: None,
            }));
            events.push(StreamEvent::MessageStop);
            let wire = encode(&events);
            assert!(
                wire.contains("\"type\":\"custom_tool_call\""),
                "cut {cut}: {wire}"
            );
            assert!(!wire.contains("function_call"), "cut {cut}: {wire}");
            let (parsed, r) = parse(&wire);
            assert_eq!(r, Ok(()));
            let resp = fold(&parsed);
            let Some(Block::ToolCall(call)) = resp.content.first() else {
                panic!("cut {cut}: {resp:?}");
            };
            assert_eq!(
                custom_input(&call.arguments),
                Some(input),
                "cut {cut}: {wire}"
            );
            assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
        }
    }

    #[test]
    fn what_comes_only_in_done_events_is_read_from_there() {
        let input = [
            ev("response.created", &json!({"response": {"id": "resp_1", "model": "m", "created_at": 5}})),
            ev("response.output_item.added", &json!({"item": {"type": "reasoning", "id": "rs_1", "summary": []}})),
            ev("response.output_item.done", &json!({"item": {"type": "reasoning", "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
                "encrypted_content": "gAAA"}})),
            ev("response.output_item.added", &json!({"item": {"type": "message", "role": "assistant", "content": []}})),
            ev("response.output_text.done", &json!({"text": "whole"})),
            ev("response.content_part.done", &json!({})),
            ev("response.output_item.done", &json!({"item": {"type": "message", "content": []}})),
            ev("response.output_item.done", &json!({"item": {"type": "message",
                "content": [{"type": "refusal", "refusal": "no"}]}})),
            ev("response.output_item.done", &json!({"item": {"type": "function_call", "call_id": "c1",
                "name": "f", "arguments": "{\"a\":1}"}})),
            ev("response.completed", &json!({"response": {"status": "completed",
                "usage": {"input_tokens": 3, "output_tokens": 4}}})),
        ]
        .concat();
        let (events, r) = parse(&input);
        assert_eq!(r, Ok(()));
        let resp = fold(&events);
        assert_eq!(resp.id, "resp_1");
        assert_eq!(resp.created, Some(5));
        assert!(
            matches!(&resp.content[0], Block::Thinking(t) if t.text == "a\n\nb"
            && t.signature.as_deref().and_then(crate::ir::signature::unwrap_reasoning_item)
                == Some(("rs_1".into(), "gAAA".into())))
        );
        assert!(matches!(&resp.content[1], Block::Text(t) if t.text == "whole"));
        assert!(matches!(&resp.content[2], Block::Text(t) if t.text == "no"));
        assert!(matches!(&resp.content[3], Block::ToolCall(c) if c.arguments == json!({"a": 1})));
        // A refusal part wins over the tool call.
        assert_eq!(resp.stop_reason, Some(StopReason::Refusal));
        assert_eq!(resp.usage.map(|u| u.output_tokens), Some(4));
    }

    #[test]
    fn errors_and_incomplete_ends() {
        let (events, r) = parse(&ev(
            "error",
            &json!({"code": "rate_limit_exceeded", "message": "slow down", "param": null}),
        ));
        assert_eq!(r, Ok(()));
        assert_eq!(
            events,
            [StreamEvent::Error(StreamError {
                kind: crate::ir::stream::StreamErrorKind::RateLimited,
                message: "slow down".into()
            })]
        );
        let input = [
            ev("response.created", &json!({"response": {"id": "resp_1"}})),
            ev("response.output_text.delta", &json!({"delta": "x"})),
            ev(
                "response.incomplete",
                &json!({"response": {"status": "incomplete",
                "incomplete_details": {"reason": "content_filter"}}}),
            ),
        ]
        .concat();
        let (events, r) = parse(&input);
        assert_eq!(r, Ok(()));
        assert_eq!(
            fold(&events).stop_reason,
            Some(StopReason::ContentFilter(None))
        );
        // Without its terminal event a stream is truncated.
        let (_, r) = parse(&ev(
            "response.created",
            &json!({"response": {"id": "resp_1"}}),
        ));
        assert_eq!(r, Err(StreamFault::Truncated));
        // Unknown event types are skipped, even with fields of other shapes.
        let input = [
            ev("response.created", &json!({"response": {"id": "resp_1"}})),
            ev(
                "response.image_generation_call.partial_image",
                &json!({"delta": {"x": 1}}),
            ),
            ev(
                "response.completed",
                &json!({"response": {"status": "completed"}}),
            ),
        ]
        .concat();
        assert_eq!(parse(&input).1, Ok(()));
    }

    #[test]
    fn a_failure_before_anything_still_opens_the_response() {
        let mut e = Encoder::new("acme/m", 1);
        let mut out = Vec::new();
        e.event(
            &StreamEvent::Error(StreamError {
                kind: crate::ir::stream::StreamErrorKind::Overloaded,
                message: "busy".into(),
            }),
            &mut out,
        );
        assert!(e.is_ended());
        let text = String::from_utf8(out).unwrap_or_default();
        let kinds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "error",
                "response.failed"
            ]
        );
        assert!(text.contains("\"message\":\"busy\""), "{text}");
        assert!(text.contains("\"status\":\"failed\""), "{text}");
    }

    #[test]
    fn unescaping_survives_any_split() {
        let original = "line \"one\"\n\ttab \\ é 😀 end";
        let json = serde_json::to_string(original).unwrap_or_default();
        // Also with the emoji as a surrogate-pair escape.
        let escaped_pair = json.replace('😀', "\\ud83d\\ude00");
        for text in [json, escaped_pair] {
            let body = &text[1..];
            for cut in 0..body.len() {
                if !body.is_char_boundary(cut) {
                    continue;
                }
                let mut u = Unescape::default();
                let mut out = String::new();
                u.feed(&body[..cut], &mut out);
                u.feed(&body[cut..], &mut out);
                assert_eq!(out, original, "cut at {cut}");
                assert!(u.closed);
            }
        }
    }
}
