//! Responses stream parser: upstream SSE events → canonical [`StreamEvent`]s.
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

use super::custom_input::push_json_escaped;
use crate::family::Family;
use crate::ir::stream::{BlockStart, MessageDelta, MessageStart, StreamError, StreamEvent};
use crate::ir::Opaque;
use crate::protocol::common::framing::{check_utf8, name_is_utf8, StreamFault};
use crate::protocol::common::repeat::Repeat;
use crate::protocol::common::support::{
    error_kind, malformed, unreadable, DeltaBuf, DeltaKind, Emit,
};
use crate::protocol::responses::request::{carried, Carried, CUSTOM_INPUT_KEY};
use crate::protocol::responses::response::{decode_status, decode_usage, failure_message};
use crate::protocol::responses::wire::{Item, Usage as WireUsage};
use crate::sse::SseEvent;
use crate::util::serde_str::opt_str;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

const F: Family = Family::Responses;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow, default, deserialize_with = "opt_str")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response: Option<ResponsePeek<'a>>,
    #[serde(borrow, default)]
    item: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    part: Option<PartPeek<'a>>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    arguments: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    input: Option<Cow<'a, str>>,
    // `error` events.
    #[serde(borrow, default, deserialize_with = "opt_str")]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ResponsePeek<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    created_at: Option<f64>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
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
    #[serde(rename = "type", borrow, default, deserialize_with = "opt_str")]
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

/// The top-level members of a delta event this parser does not read that
/// change from one event to the next (`Repeat`).
const IGNORED: [&[u8]; 2] = [b"sequence_number", b"obfuscation"];

/// What a delta event says: its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Said {
    /// `response.output_text.delta`.
    #[default]
    Text,
    /// `response.refusal.delta`.
    Refusal,
    /// `response.function_call_arguments.delta`.
    Arguments,
    /// `response.reasoning_summary_text.delta`, `response.reasoning_text.delta`.
    Thinking,
}

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
    /// The last event, when it was a delta whose one effect was its text:
    /// the next one that repeats it but for that text (and the values in
    /// [`IGNORED`]) is not parsed (`common::repeat`).
    repeat: Repeat,
    /// What that event said.
    last_said: Said,
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

    /// Forgets the kept delta event: the next event is parsed in full
    /// (for the tests that compare both ways).
    #[cfg(test)]
    pub(super) fn forget_repeat(&mut self) {
        self.repeat.clear();
    }

    /// Whether a delta event is kept for the next to repeat.
    #[cfg(test)]
    pub(super) fn repeats(&self) -> bool {
        self.repeat.is_kept()
    }

    fn open(&self) -> Open {
        self.open.unwrap_or(Open::None)
    }

    /// Reads one SSE event.
    pub fn push(&mut self, event: &SseEvent<'_>, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        // The last delta event again but for its text and values this
        // parser does not read (checked as UTF-8 where it differs): its
        // effect, with this text.
        if !self.done && name_is_utf8(event.event) {
            if let Some(d) = self.repeat.text(event.data) {
                let said = self.last_said;
                self.said(said, Some(&Cow::Borrowed(d)), emit);
                return Ok(());
            }
        }
        let text = check_utf8(event.event, event.data)?;
        if self.done {
            return Ok(());
        }
        let data = event.data;
        if data.is_empty() || data == b"[DONE]" {
            return Ok(());
        }
        let ev: Event<'_> = match serde_json::from_str(text) {
            Ok(ev) => ev,
            // An event type this parser does not read may have fields of
            // other shapes; only the ones it reads must parse.
            Err(_) if event.event_str().is_some_and(|n| !HANDLED.contains(&n)) => return Ok(()),
            Err(e) => return Err(unreadable(F, &format!("invalid event ({e})"), data)),
        };
        let kind = match (&ev.kind, event.event_str()) {
            (Some(k), _) => k.as_ref(),
            (None, Some(name)) => name,
            (None, None) => return Ok(()),
        };
        let mut kept = None;
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
                let said = if kind == "response.refusal.delta" {
                    Said::Refusal
                } else {
                    Said::Text
                };
                kept = self.said(said, ev.delta.as_ref(), emit);
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
                kept = self.said(Said::Arguments, ev.delta.as_ref(), emit);
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
                kept = self.said(Said::Thinking, ev.delta.as_ref(), emit);
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
            "response.completed" | "response.incomplete" => self.complete(kind, ev.response, emit),
            "response.failed" => self.failed(ev.response.as_ref(), emit),
            "error" => self.in_band_error(&ev, data, emit),
            _ => {}
        }
        // The type named in the event's data (the `event:` line may differ
        // from one event to the next, the data it is compared on may not).
        if let (Some((d, said)), Some(Cow::Borrowed(_))) = (kept, &ev.kind) {
            self.repeat.keep(text, d, IGNORED);
            self.last_said = said;
        }
        Ok(())
    }

    /// `response.completed` / `response.incomplete`: the stop reason and
    /// usage, then the end of the message.
    fn complete(&mut self, kind: &str, response: Option<ResponsePeek<'_>>, emit: &mut Emit<'_>) {
        self.start(response.as_ref(), emit);
        self.close(emit);
        let (stop, usage) = match response {
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

    /// `response.failed`: a stream error with the response's error message.
    fn failed(&mut self, response: Option<&ResponsePeek<'_>>, emit: &mut Emit<'_>) {
        let error = response
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

    /// An `error` event: a stream error.
    fn in_band_error(&mut self, ev: &Event<'_>, data: &[u8], emit: &mut Emit<'_>) {
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

    /// A delta event's text `delta` (of the kind `said`) in the open
    /// block, as its type says. The text, when it was not empty, had an
    /// effect and had no escapes (serde lent it): what a next event that
    /// repeats this one but for its text may be applied as (`Repeat`).
    fn said<'e>(
        &mut self,
        said: Said,
        delta: Option<&Cow<'e, str>>,
        emit: &mut Emit<'_>,
    ) -> Option<(&'e str, Said)> {
        if said == Said::Refusal {
            self.refusal = true;
        }
        let d = delta.filter(|d| !d.is_empty())?;
        let (index, kind) = match (said, self.open()) {
            (Said::Text | Said::Refusal, _) => (self.open_text(emit), DeltaKind::Text),
            (Said::Arguments, Open::Call { index, .. }) => (index, DeltaKind::ToolArguments),
            (Said::Thinking, Open::Thinking(index)) => (index, DeltaKind::Thinking),
            _ => return None,
        };
        self.got_delta = true;
        self.buf.emit(index, kind, d, emit);
        match d {
            Cow::Borrowed(d) => Some((d, said)),
            Cow::Owned(_) => None,
        }
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
                            vec![crate::protocol::responses::wire::Part {
                                kind: "output_text".into(),
                                text: Some(text),
                                ..crate::protocol::responses::wire::Part::default()
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
