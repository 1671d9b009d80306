//! OpenAI chat stream parser: upstream SSE events → canonical [`StreamEvent`]s.
//!
//! The first chunk starts the message. `delta.content` (and `refusal`) is
//! text, `delta.reasoning_content` (or `reasoning`) thinking; each is emitted
//! as soon as it arrives. Tool calls come as fragments keyed by `index`: the
//! first names the call, the rest append to its arguments. The canonical
//! grammar has one open block at a time, so one call streams live while a
//! fragment of *another* call is buffered; the live call is closed (and the
//! other one opened, its buffered text sent at once) as soon as the live
//! call's arguments are a complete JSON value, which no further fragment can
//! extend. Calls still buffered are sent whole before the stop reason. A
//! provider that numbers every call 0 but gives each a new `id` is read as
//! several calls. `finish_reason` gives the stop reason, a chunk with `usage`
//! the usage, `[DONE]` the end; `{"error":…}` in-band is a stream error.

use crate::family::Family;
use crate::ir::stream::{
    merge_usage, BlockStart, MessageDelta, MessageStart, StreamError, StreamErrorKind, StreamEvent,
};
use crate::ir::{ids, StopReason, Usage};
use crate::protocol::common::framing::{check_utf8, name_is_utf8, StreamFault};
use crate::protocol::common::repeat::Repeat;
use crate::protocol::common::support::{
    error_kind, error_kind_for_status, malformed, unreadable, DeltaBuf, DeltaKind, Emit, First,
    Indexed,
};
use crate::protocol::openai::response::{decode_finish_reason, decode_usage};
use crate::protocol::openai::wire::{
    CompletionTokensDetails, PromptTokensDetails, Usage as WireUsage,
};
use crate::sse::SseEvent;
use crate::util::serde_str::opt_str;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

const F: Family = Family::OpenAi;

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    created: Option<u64>,
    #[serde(borrow, default)]
    choices: First<Choice<'a>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    finish_reason: Option<Cow<'a, str>>,
}

impl Indexed for Choice<'_> {
    fn index(&self) -> Option<u64> {
        self.index
    }
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    arguments: Option<Cow<'a, str>>,
}

/// `usage`, tolerant of absent and `null` counts.
#[derive(Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionTokensDetails>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl ChunkUsage {
    fn into_canonical(self) -> Usage {
        decode_usage(WireUsage {
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            completion_tokens: self.completion_tokens.unwrap_or(0),
            total_tokens: self.total_tokens,
            prompt_tokens_details: self.prompt_tokens_details,
            completion_tokens_details: self.completion_tokens_details,
            extra: self.extra,
        })
    }
}

#[derive(Deserialize)]
struct ErrorObject<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    message: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "type", default, deserialize_with = "opt_str")]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    code: Option<Value>,
}

/// Reads an in-band `error` value (an object, or a bare message string).
fn stream_error(raw: &RawValue) -> StreamError {
    if let Ok(message) = serde_json::from_str::<String>(raw.get()) {
        return StreamError {
            kind: error_kind(""),
            message,
        };
    }
    let obj: ErrorObject<'_> = serde_json::from_str(raw.get()).unwrap_or(ErrorObject {
        message: None,
        kind: None,
        code: None,
    });
    let kind = match (&obj.code, obj.kind.as_deref()) {
        (Some(Value::Number(n)), _) => error_kind_for_status(n.as_u64().unwrap_or(500)),
        (Some(Value::String(code)), kind) => match error_kind(code) {
            StreamErrorKind::Api => error_kind(kind.unwrap_or_default()),
            known => known,
        },
        (_, kind) => error_kind(kind.unwrap_or_default()),
    };
    StreamError {
        kind,
        message: obj
            .message
            .map_or_else(|| raw.get().to_string(), Cow::into_owned),
    }
}

/// How far a tool call has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallState {
    /// Fragments are buffered (another block is open, or the name is unknown).
    Waiting,
    /// The open block, at this canonical index.
    Live(usize),
    /// Closed; nothing more may be added.
    Done,
}

#[derive(Debug)]
struct CallSlot {
    /// The upstream's `index`.
    wire_index: u64,
    id: String,
    name: String,
    /// All argument text so far (buffered while waiting, mirrored while live).
    args: String,
    state: CallState,
    /// Cached answer to "are `args` a complete JSON value?", cleared on append.
    complete: Option<bool>,
}

impl CallSlot {
    fn is_complete(&mut self) -> bool {
        let args = &self.args;
        *self
            .complete
            .get_or_insert_with(|| serde_json::from_str::<IgnoredAny>(args).is_ok())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Text(usize),
    Thinking(usize),
    /// A tool call: slot number.
    Call(usize),
}

/// Upstream OpenAI chunks → canonical events.
#[derive(Debug)]
pub struct Parser {
    started: bool,
    done: bool,
    open: Open,
    next_index: usize,
    calls: Vec<CallSlot>,
    message_id: String,
    finish_seen: bool,
    refusal: bool,
    usage: Option<Usage>,
    buf: DeltaBuf,
    /// The last chunk, when its one effect was a text: the next one that
    /// repeats it but for that text is not parsed (`common::repeat`).
    repeat: Repeat,
    /// Which text that was.
    said: Said,
}

/// The one text a chunk said (`Parser::repeat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Said {
    Content,
    Reasoning,
    Refusal,
}

/// The one non-empty text of `chunk` when that text is all it does once
/// the message has started (no usage, error, finish reason or tool call;
/// no second text), with which it is; the text borrowed from the chunk.
fn one_text<'a>(chunk: &Chunk<'a>) -> Option<(&'a str, Said)> {
    if chunk.usage.is_some() || chunk.error.is_some() {
        return None;
    }
    let choice = chunk.choices.0.as_ref()?;
    let d = choice.delta.as_ref()?;
    if choice.finish_reason.is_some() || d.tool_calls.is_some() {
        return None;
    }
    let lent = |t: &Option<Cow<'a, str>>| match t {
        Some(Cow::Borrowed(s)) if !s.is_empty() => Some(Some(*s)),
        Some(t) if !t.is_empty() => None,
        _ => Some(None),
    };
    // As `Parser::delta` reads them: `reasoning_content`, else `reasoning`.
    let reasoning = if d.reasoning_content.is_some() {
        &d.reasoning_content
    } else {
        &d.reasoning
    };
    match (lent(reasoning)?, lent(&d.content)?, lent(&d.refusal)?) {
        (Some(t), None, None) => Some((t, Said::Reasoning)),
        (None, Some(t), None) => Some((t, Said::Content)),
        (None, None, Some(t)) => Some((t, Said::Refusal)),
        _ => None,
    }
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
            done: false,
            open: Open::None,
            next_index: 0,
            calls: Vec::new(),
            message_id: String::new(),
            finish_seen: false,
            refusal: false,
            usage: None,
            buf: DeltaBuf::default(),
            repeat: Repeat::default(),
            said: Said::Content,
        }
    }

    /// True once `[DONE]` (or an in-band error) has been read.
    pub fn is_complete(&self) -> bool {
        self.done
    }

    /// Reads one SSE event.
    pub fn push(&mut self, event: &SseEvent<'_>, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        // The last chunk again but for its text (checked as UTF-8 where
        // it differs): its effect, with this text.
        if !self.done && name_is_utf8(event.event) {
            if let Some(said) = self.repeat.text(event.data) {
                let (text_block, kind) = match self.said {
                    Said::Reasoning => (false, DeltaKind::Thinking),
                    Said::Content => (true, DeltaKind::Text),
                    Said::Refusal => (true, DeltaKind::Text),
                };
                let index = self.open_flat(text_block, emit);
                self.buf.emit(index, kind, said, emit);
                return Ok(());
            }
        }
        let text = check_utf8(event.event, event.data)?;
        if self.done {
            return Ok(());
        }
        let data = event.data;
        if data == b"[DONE]" {
            self.end(emit);
            return Ok(());
        }
        let chunk: Chunk<'_> = serde_json::from_str(text)
            .map_err(|e| unreadable(F, &format!("invalid chunk ({e})"), data))?;
        let kept = one_text(&chunk).filter(|_| !self.finish_seen);
        if let Some(err) = chunk.error {
            self.done = true;
            emit(&StreamEvent::Error(stream_error(err)));
            return Ok(());
        }
        if !self.started {
            self.start(
                MessageStart {
                    id: chunk.id.as_deref().unwrap_or_default().to_string(),
                    model: chunk.model.as_deref().unwrap_or_default().to_string(),
                    created: chunk.created,
                    usage: None,
                },
                emit,
            );
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(merge_usage(self.usage.take(), &usage.into_canonical()));
        }
        if let Some(choice) = chunk.choices.0 {
            if let Some(delta) = choice.delta {
                self.delta(delta, data, emit)?;
            }
            if let Some(reason) = choice.finish_reason {
                self.close_all(emit);
                let has_calls = !self.calls.is_empty();
                let stop = match reason.as_ref() {
                    "stop" if self.refusal => StopReason::Refusal,
                    "stop" if has_calls => StopReason::ToolUse,
                    r => decode_finish_reason(r),
                };
                self.finish_seen = true;
                emit(&StreamEvent::MessageDelta(MessageDelta {
                    stop_reason: Some(stop),
                    usage: self.usage.take(),
                }));
            }
        }
        if self.finish_seen && self.usage.is_some() {
            self.close_all(emit);
            emit(&StreamEvent::MessageDelta(MessageDelta {
                stop_reason: None,
                usage: self.usage.take(),
            }));
        }
        if let Some((said, kind)) = kept {
            self.repeat.keep(text, said, [b"obfuscation"]);
            self.said = kind;
        }
        Ok(())
    }

    /// Called at the end of the upstream stream. A stream that reached its
    /// finish reason is complete even without `[DONE]` (the answer is all
    /// there); one that did not is truncated.
    pub fn finish(&mut self, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        if !self.done && self.finish_seen {
            self.end(emit);
        }
        if self.done {
            Ok(())
        } else {
            Err(StreamFault::Truncated)
        }
    }

    /// The stream's end: open blocks closed, usage still held, the stop.
    fn end(&mut self, emit: &mut Emit<'_>) {
        self.start(MessageStart::default(), emit);
        self.close_all(emit);
        if let Some(usage) = self.usage.take() {
            emit(&StreamEvent::MessageDelta(MessageDelta {
                stop_reason: None,
                usage: Some(usage),
            }));
        }
        emit(&StreamEvent::MessageStop);
        self.done = true;
    }

    fn start(&mut self, start: MessageStart, emit: &mut Emit<'_>) {
        if !self.started {
            self.started = true;
            self.message_id.clone_from(&start.id);
            emit(&StreamEvent::MessageStart(start));
        }
    }

    fn delta(&mut self, d: Delta<'_>, data: &[u8], emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        let reasoning = d.reasoning_content.or(d.reasoning);
        if let Some(text) = reasoning.as_deref().filter(|t| !t.is_empty()) {
            let index = self.open_flat(false, emit);
            self.buf.emit(index, DeltaKind::Thinking, text, emit);
        }
        if let Some(text) = d.content.as_deref().filter(|t| !t.is_empty()) {
            let index = self.open_flat(true, emit);
            self.buf.emit(index, DeltaKind::Text, text, emit);
        }
        if let Some(text) = d.refusal.as_deref().filter(|t| !t.is_empty()) {
            self.refusal = true;
            let index = self.open_flat(true, emit);
            self.buf.emit(index, DeltaKind::Text, text, emit);
        }
        for call in d.tool_calls.into_iter().flatten() {
            self.tool_fragment(call, data, emit)?;
        }
        Ok(())
    }

    /// Makes a text (or thinking) block the open one; returns its index.
    fn open_flat(&mut self, text: bool, emit: &mut Emit<'_>) -> usize {
        match self.open {
            Open::Text(i) if text => return i,
            Open::Thinking(i) if !text => return i,
            _ => {}
        }
        self.close_open(emit);
        let index = self.next_index;
        self.next_index += 1;
        emit(&StreamEvent::BlockStart {
            index,
            block: if text {
                BlockStart::Text
            } else {
                BlockStart::Thinking
            },
        });
        self.open = if text {
            Open::Text(index)
        } else {
            Open::Thinking(index)
        };
        index
    }

    fn close_open(&mut self, emit: &mut Emit<'_>) {
        let index = match self.open {
            Open::None => return,
            Open::Text(i) | Open::Thinking(i) => i,
            Open::Call(slot) => {
                let s = &mut self.calls[slot];
                let CallState::Live(i) = s.state else {
                    self.open = Open::None;
                    return;
                };
                s.state = CallState::Done;
                i
            }
        };
        self.open = Open::None;
        emit(&StreamEvent::BlockStop { index });
    }

    /// Closes the open block and sends every buffered call whole.
    fn close_all(&mut self, emit: &mut Emit<'_>) {
        self.close_open(emit);
        let mut waiting: Vec<usize> = (0..self.calls.len())
            .filter(|&i| self.calls[i].state == CallState::Waiting)
            .collect();
        waiting.sort_by_key(|&i| self.calls[i].wire_index);
        for slot in waiting {
            self.open_call(slot, emit);
            self.close_open(emit);
        }
    }

    /// Finds the slot a fragment belongs to, creating it for a new call.
    fn slot_for(&mut self, wire_index: Option<u64>, id: Option<&str>) -> usize {
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            if let Some(i) = self.calls.iter().rposition(|s| s.id == id) {
                return i;
            }
            // A new id: a new call, unless a call at this index has no id yet.
            if let Some(i) = self
                .calls
                .iter()
                .rposition(|s| Some(s.wire_index) == wire_index && s.id.is_empty())
            {
                return i;
            }
        } else {
            let found = match wire_index {
                Some(w) => self.calls.iter().rposition(|s| s.wire_index == w),
                None => self.calls.len().checked_sub(1),
            };
            if let Some(i) = found {
                return i;
            }
        }
        self.calls.push(CallSlot {
            wire_index: wire_index.unwrap_or(self.calls.len() as u64),
            id: String::new(),
            name: String::new(),
            args: String::new(),
            state: CallState::Waiting,
            complete: None,
        });
        self.calls.len() - 1
    }

    fn tool_fragment(
        &mut self,
        call: ToolCallDelta<'_>,
        data: &[u8],
        emit: &mut Emit<'_>,
    ) -> Result<(), StreamFault> {
        let slot = self.slot_for(call.index, call.id.as_deref());
        let (name, args) = match &call.function {
            Some(f) => (f.name.as_deref(), f.arguments.as_deref()),
            None => (None, None),
        };
        let args = args.unwrap_or_default();
        let s = &mut self.calls[slot];
        if s.state == CallState::Done {
            if args.trim().is_empty() {
                return Ok(());
            }
            return Err(malformed(
                F,
                "tool call arguments continued after the call was closed",
                data,
            ));
        }
        if s.id.is_empty() {
            if let Some(id) = call.id.as_deref() {
                s.id.push_str(id);
            }
        }
        if s.name.is_empty() {
            if let Some(name) = name {
                s.name.push_str(name);
            }
        }
        if !args.is_empty() {
            s.args.push_str(args);
            s.complete = None;
        }
        match s.state {
            CallState::Live(index) => {
                if !args.is_empty() {
                    self.buf.emit(index, DeltaKind::ToolArguments, args, emit);
                }
            }
            CallState::Waiting => {
                if !self.calls[slot].name.is_empty() {
                    let can_open = match self.open {
                        Open::None | Open::Text(_) | Open::Thinking(_) => true,
                        Open::Call(live) => self.calls[live].is_complete(),
                    };
                    if can_open {
                        self.close_open(emit);
                        self.open_call(slot, emit);
                    }
                }
            }
            CallState::Done => {}
        }
        Ok(())
    }

    /// Opens a waiting call as the live block, sending its buffered arguments.
    fn open_call(&mut self, slot: usize, emit: &mut Emit<'_>) {
        let index = self.next_index;
        self.next_index += 1;
        let s = &mut self.calls[slot];
        if s.id.is_empty() {
            s.id = ids::stable_id(
                "call_",
                &[
                    self.message_id.as_bytes(),
                    s.wire_index.to_string().as_bytes(),
                ],
            );
        }
        emit(&StreamEvent::BlockStart {
            index,
            block: BlockStart::ToolCall {
                id: s.id.clone(),
                name: s.name.clone(),
            },
        });
        if !s.args.is_empty() {
            self.buf
                .emit(index, DeltaKind::ToolArguments, &s.args, emit);
        }
        s.state = CallState::Live(index);
        self.open = Open::Call(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::stream::BlockDelta;

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

    /// `input` parsed twice: as it comes, and with the repeated-chunk
    /// shortcut forgotten before every chunk (each parsed in full).
    fn parse_both(input: &str) -> [(Vec<StreamEvent>, Result<(), StreamFault>); 2] {
        [false, true].map(|full| {
            let mut p = Parser::new();
            crate::protocol::common::support::parse_all(input.as_bytes(), &mut |event, emit| {
                match event {
                    Some(e) => {
                        if full {
                            p.repeat.clear();
                        }
                        p.push(e, emit)
                    }
                    None => p.finish(emit),
                }
            })
        })
    }

    proptest::proptest! {
        /// Chunks that repeat the last but for a text (of each kind, some
        /// with escapes or empty), among ones that do more (a finish, usage,
        /// a tool call, two texts, another id): the shortcut changes nothing.
        #[test]
        fn repeated_chunks_read_as_parsed_ones(
            chunks in proptest::collection::vec(
                (
                    proptest::prop_oneof![2 => proptest::strategy::Just(0usize), 1 => 0usize..8],
                    proptest::prop_oneof![
                        4 => "[a-z \u{e9}]{0,5}",
                        1 => "([a-z]|\\\\n|\\\\\"){0,3}",
                    ],
                ),
                1..24,
            ),
        ) {
            let mut input = String::new();
            for (shape, text) in chunks {
                let delta = match shape {
                    0..=2 => format!(r#"{{"content":"{text}"}}"#),
                    3 => format!(r#"{{"reasoning_content":"{text}"}}"#),
                    4 => format!(r#"{{"refusal":"{text}","content":null}}"#),
                    5 => format!(r#"{{"content":"{text}","reasoning":"r"}}"#),
                    6 => format!(r#"{{"tool_calls":[{{"index":0,"id":"t","function":{{"name":"f","arguments":"{text}"}}}}]}}"#),
                    _ => format!(r#"{{"content":"{text}"}},"finish_reason":"stop""#),
                };
                let id = if shape == 2 { "c2" } else { "c1" };
                input.push_str(&format!(
                    "data: {{\"id\":\"{id}\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta}}}]}}\n\n"
                ));
            }
            input.push_str("data: [DONE]\n\n");
            let [quick, full] = parse_both(&input);
            proptest::prop_assert_eq!(quick, full, "{}", input);
        }
    }

    fn call(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> String {
        let mut c = serde_json::json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            c["id"] = id.into();
        }
        if let Some(name) = name {
            c["function"]["name"] = name.into();
        }
        format!("data: {{\"id\":\"c1\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{c}]}}}}]}}\n\n")
    }

    fn starts(events: &[StreamEvent]) -> Vec<(String, String)> {
        events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::BlockStart {
                    block: BlockStart::ToolCall { id, name },
                    ..
                } => Some((id.clone(), name.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_call_named_late_is_buffered_and_a_missing_id_is_made_up() {
        let input = [
            call(0, None, None, "{\"a\":"),
            call(0, None, Some("f"), " 1}"),
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n".into(),
        ]
        .concat();
        let (events, r) = parse(&input);
        assert_eq!(r, Ok(()));
        let s = starts(&events);
        assert_eq!(s.len(), 1);
        assert!(s[0].0.starts_with("call_") && s[0].0.len() == 21, "{s:?}");
        assert!(events.contains(&StreamEvent::BlockDelta {
            index: 0,
            delta: BlockDelta::ToolArguments("{\"a\": 1}".into())
        }));
    }

    #[test]
    fn arguments_after_a_call_was_closed_are_malformed() {
        let input = [
            call(0, Some("x"), Some("f"), "{\"a\":"),
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n".into(),
            call(0, None, None, "1}"),
        ]
        .concat();
        let (_, r) = parse(&input);
        assert!(matches!(r, Err(StreamFault::Malformed(_))), "{r:?}");
    }

    #[test]
    fn an_incomplete_live_call_keeps_others_buffered_until_done() {
        let input = [
            call(0, Some("a"), Some("f"), "{\"x\":"),
            call(1, Some("b"), Some("g"), "{}"),
            call(0, None, None, "1}"),
            "data: [DONE]\n\n".into(),
        ]
        .concat();
        let (events, r) = parse(&input);
        assert_eq!(r, Ok(()));
        assert_eq!(
            starts(&events),
            [("a".into(), "f".into()), ("b".into(), "g".into())]
        );
        let mut checker = crate::ir::stream::GrammarChecker::new();
        for e in &events {
            assert_eq!(checker.push(e), Ok(()), "{e:?}");
        }
        assert!(checker.is_done());
    }

    #[test]
    fn a_stream_without_done_is_truncated_only_before_its_finish_reason() {
        let (_, r) = parse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n");
        assert_eq!(r, Err(StreamFault::Truncated));
        let (events, r) = parse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n");
        assert_eq!(r, Ok(()));
        assert!(matches!(events.last(), Some(StreamEvent::MessageStop)));
    }
}
