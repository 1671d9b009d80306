//! Anthropic Messages stream parser: upstream SSE events → canonical [`StreamEvent`]s.
//!
//! Anthropic's events are the canonical grammar's model, so they map one to
//! one: `message_start` (id, model, input usage), `content_block_start`
//! (`text`, `thinking`, `redacted_thinking`, `tool_use`; other block types
//! become opaque blocks, whose deltas are dropped), `content_block_delta`
//! (`text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`;
//! `citations_delta` is dropped), `content_block_stop`, `message_delta`
//! (stop reason, cumulative usage), `message_stop`, `ping` and `error`. The
//! block kind is read from the data's `type`, not from the SSE event name.
//! A delta that does not fit the open block is a malformed stream.

use super::Kind;
use crate::family::Family;
use crate::ir::stream::{BlockStart, MessageDelta, MessageStart, StreamError, StreamEvent};
use crate::ir::{Opaque, Usage};
use crate::protocol::anthropic::response::{decode_stop_reason, decode_usage};
use crate::protocol::anthropic::wire::Usage as WireUsage;
use crate::protocol::common::framing::{check_utf8, StreamFault};
use crate::protocol::common::support::{
    error_kind, malformed, unreadable, DeltaBuf, DeltaKind, Emit,
};
use crate::sse::SseEvent;
use crate::util::serde_str::opt_str;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

const F: Family = Family::Anthropic;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow, rename = "type", default, deserialize_with = "opt_str")]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    index: Option<usize>,
    #[serde(borrow, default)]
    message: Option<StartMessage<'a>>,
    #[serde(borrow, default)]
    content_block: Option<&'a RawValue>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<EventUsage>,
    #[serde(borrow, default)]
    error: Option<ErrorObject<'a>>,
}

#[derive(Deserialize)]
struct StartMessage<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<EventUsage>,
}

#[derive(Deserialize)]
struct BlockWire<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    data: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, rename = "type", default, deserialize_with = "opt_str")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    partial_json: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    stop_sequence: Option<Cow<'a, str>>,
}

/// `usage`, tolerant of absent and `null` counts.
#[derive(Deserialize)]
struct EventUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl EventUsage {
    fn into_canonical(self) -> Usage {
        decode_usage(WireUsage {
            input_tokens: self.input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
            cache_creation_input_tokens: self.cache_creation_input_tokens,
            cache_read_input_tokens: self.cache_read_input_tokens,
            extra: self
                .extra
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .collect(),
        })
    }
}

#[derive(Deserialize)]
struct ErrorObject<'a> {
    #[serde(borrow, rename = "type", default, deserialize_with = "opt_str")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    message: Option<Cow<'a, str>>,
}

#[derive(Debug, Clone, Copy)]
struct OpenBlock {
    upstream: usize,
    index: usize,
    kind: Kind,
}

/// Upstream Anthropic events → canonical events.
#[derive(Debug, Default)]
pub struct Parser {
    started: bool,
    done: bool,
    /// A `message_delta` gave the stop reason: the answer is all there.
    stop_seen: bool,
    open: Option<OpenBlock>,
    next_index: usize,
    buf: DeltaBuf,
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once `message_stop` (or an `error` event) has been read.
    pub fn is_complete(&self) -> bool {
        self.done
    }

    /// Reads one SSE event.
    pub fn push(&mut self, event: &SseEvent<'_>, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        let text = check_utf8(event.event, event.data)?;
        if self.done {
            return Ok(());
        }
        let data = event.data;
        let ev: Event<'_> = serde_json::from_str(text)
            .map_err(|e| unreadable(F, &format!("invalid event ({e})"), data))?;
        let kind = match ev.kind.as_deref() {
            Some(k) => k,
            None => event.event_str().unwrap_or_default(),
        };
        if !self.started && !matches!(kind, "message_start" | "error" | "ping") {
            return Err(malformed(F, "event before message_start", data));
        }
        match kind {
            "message_start" => {
                if self.started {
                    return Err(malformed(F, "a second message_start", data));
                }
                self.started = true;
                let m = ev.message;
                emit(&StreamEvent::MessageStart(MessageStart {
                    id: m
                        .as_ref()
                        .and_then(|m| m.id.as_deref())
                        .unwrap_or_default()
                        .to_string(),
                    model: m
                        .as_ref()
                        .and_then(|m| m.model.as_deref())
                        .unwrap_or_default()
                        .to_string(),
                    created: None,
                    usage: m.and_then(|m| m.usage).map(EventUsage::into_canonical),
                }));
            }
            "content_block_start" => {
                let raw = ev
                    .content_block
                    .ok_or_else(|| malformed(F, "content_block_start without a block", data))?;
                self.block_start(ev.index.unwrap_or(self.next_index), raw, data, emit)?;
            }
            "content_block_delta" => {
                let Some(delta) = ev.delta else {
                    return Err(malformed(F, "content_block_delta without a delta", data));
                };
                self.block_delta(ev.index, &delta, data, emit)?;
            }
            "content_block_stop" => match self.open {
                Some(open) if ev.index.is_none_or(|i| i == open.upstream) => {
                    self.close(emit);
                }
                _ => return Err(malformed(F, "stop for a block that is not open", data)),
            },
            "message_delta" => {
                self.close(emit);
                let stop_reason = ev.delta.and_then(|d| {
                    d.stop_reason
                        .map(|r| decode_stop_reason(&r, d.stop_sequence.map(Cow::into_owned)))
                });
                self.stop_seen |= stop_reason.is_some();
                emit(&StreamEvent::MessageDelta(MessageDelta {
                    stop_reason,
                    usage: ev.usage.map(EventUsage::into_canonical),
                }));
            }
            "message_stop" => {
                self.close(emit);
                self.done = true;
                emit(&StreamEvent::MessageStop);
            }
            "ping" if self.started => emit(&StreamEvent::Ping),
            "error" => {
                self.done = true;
                let (kind, message) = match ev.error {
                    Some(e) => (
                        error_kind(e.kind.as_deref().unwrap_or_default()),
                        e.message.map_or_else(String::new, Cow::into_owned),
                    ),
                    None => (error_kind(""), String::from_utf8_lossy(data).into_owned()),
                };
                emit(&StreamEvent::Error(StreamError { kind, message }));
            }
            // Event types added after this code was written carry nothing we know.
            _ => {}
        }
        Ok(())
    }

    /// Called at the end of the upstream stream. A stream whose
    /// `message_delta` gave the stop reason is complete even without
    /// `message_stop`; one that did not is truncated.
    pub fn finish(&mut self, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        if !self.done && self.stop_seen {
            self.close(emit);
            self.done = true;
            emit(&StreamEvent::MessageStop);
        }
        if self.done {
            Ok(())
        } else {
            Err(StreamFault::Truncated)
        }
    }

    fn close(&mut self, emit: &mut Emit<'_>) {
        if let Some(open) = self.open.take() {
            emit(&StreamEvent::BlockStop { index: open.index });
        }
    }

    fn block_start(
        &mut self,
        upstream: usize,
        raw: &RawValue,
        data: &[u8],
        emit: &mut Emit<'_>,
    ) -> Result<(), StreamFault> {
        self.close(emit);
        let b: BlockWire<'_> = serde_json::from_str(raw.get())
            .map_err(|e| malformed(F, &format!("invalid content block ({e})"), data))?;
        let index = self.next_index;
        self.next_index += 1;
        let (block, kind) = match b.kind.as_ref() {
            "text" => (BlockStart::Text, Kind::Text),
            "thinking" => (BlockStart::Thinking, Kind::Thinking),
            "redacted_thinking" => (
                BlockStart::RedactedThinking {
                    data: b.data.as_deref().unwrap_or_default().to_string(),
                },
                Kind::Whole,
            ),
            "tool_use" => (
                BlockStart::ToolCall {
                    id: b.id.as_deref().unwrap_or_default().to_string(),
                    name: b.name.as_deref().unwrap_or_default().to_string(),
                },
                Kind::Call,
            ),
            other => {
                let value: Value = serde_json::from_str(raw.get())
                    .map_err(|e| malformed(F, &format!("invalid content block ({e})"), data))?;
                (
                    BlockStart::Opaque(Opaque {
                        origin: F,
                        kind: other.to_string(),
                        value,
                    }),
                    Kind::Whole,
                )
            }
        };
        emit(&StreamEvent::BlockStart { index, block });
        self.open = Some(OpenBlock {
            upstream,
            index,
            kind,
        });
        // Content given at the start (Anthropic sends it empty) is a first delta.
        match kind {
            Kind::Text => {
                if let Some(t) = b.text.as_deref().filter(|t| !t.is_empty()) {
                    self.buf.emit(index, DeltaKind::Text, t, emit);
                }
            }
            Kind::Thinking => {
                if let Some(t) = b.thinking.as_deref().filter(|t| !t.is_empty()) {
                    self.buf.emit(index, DeltaKind::Thinking, t, emit);
                }
                if let Some(s) = b.signature.as_deref().filter(|s| !s.is_empty()) {
                    self.buf.emit(index, DeltaKind::Signature, s, emit);
                }
            }
            Kind::Call => {
                let input = b.input.map(RawValue::get).unwrap_or_default().trim();
                if !input.is_empty() && !is_empty_object(input) {
                    self.buf.emit(index, DeltaKind::ToolArguments, input, emit);
                }
            }
            Kind::Whole => {}
        }
        Ok(())
    }

    fn block_delta(
        &mut self,
        upstream: Option<usize>,
        d: &Delta<'_>,
        data: &[u8],
        emit: &mut Emit<'_>,
    ) -> Result<(), StreamFault> {
        let Some(open) = self
            .open
            .filter(|o| upstream.is_none_or(|i| i == o.upstream))
        else {
            return Err(malformed(F, "delta for a block that is not open", data));
        };
        let index = open.index;
        let (kind, text) = match d.kind.as_deref().unwrap_or_default() {
            "text_delta" => (DeltaKind::Text, d.text.as_deref()),
            "thinking_delta" => (DeltaKind::Thinking, d.thinking.as_deref()),
            "signature_delta" => (DeltaKind::Signature, d.signature.as_deref()),
            "input_json_delta" => (DeltaKind::ToolArguments, d.partial_json.as_deref()),
            // citations_delta and delta types added later.
            _ => return Ok(()),
        };
        let fits = matches!(
            (kind, open.kind),
            (DeltaKind::Text, Kind::Text)
                | (DeltaKind::Thinking, Kind::Thinking)
                | (DeltaKind::ToolArguments, Kind::Call)
                | (
                    DeltaKind::Signature,
                    Kind::Text | Kind::Thinking | Kind::Call
                )
                | (_, Kind::Whole)
        );
        if !fits {
            return Err(malformed(F, "delta does not fit the open block", data));
        }
        if open.kind == Kind::Whole {
            return Ok(());
        }
        if let Some(text) = text.filter(|t| !t.is_empty()) {
            self.buf.emit(index, kind, text, emit);
        }
        Ok(())
    }
}

fn is_empty_object(json: &str) -> bool {
    json.strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .is_some_and(|inner| inner.trim().is_empty())
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

    const START: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":3,\"output_tokens\":null}}}\n\n";

    #[test]
    fn events_before_message_start_are_malformed() {
        let (_, r) = parse(
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        );
        assert!(matches!(r, Err(StreamFault::Malformed(_))));
    }

    #[test]
    fn unknown_blocks_are_opaque_and_unknown_events_ignored() {
        let input = format!(
            "{START}event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{{}}}}}}\n\n\
             event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{}}\"}}}}\n\n\
             event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
             event: future_event\ndata: {{\"type\":\"future_event\"}}\n\n\
             event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
        );
        let (events, r) = parse(&input);
        assert_eq!(r, Ok(()));
        assert!(matches!(
            &events[1],
            StreamEvent::BlockStart { block: BlockStart::Opaque(o), .. } if o.kind == "server_tool_use"
        ));
        assert_eq!(events.len(), 4, "{events:?}");
        assert!(
            matches!(&events[0], StreamEvent::MessageStart(s) if s.usage.as_ref().map(|u| u.input_tokens) == Some(3))
        );
    }

    #[test]
    fn a_stream_without_message_stop_is_truncated() {
        let (_, r) = parse(START);
        assert_eq!(r, Err(StreamFault::Truncated));
    }
}
