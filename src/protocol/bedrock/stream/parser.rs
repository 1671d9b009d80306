//! Bedrock ConverseStream parser: upstream events → canonical [`StreamEvent`]s.
//!
//! `messageStart` starts the message; text and reasoning blocks start with
//! their first `contentBlockDelta` (a tool call with its
//! `contentBlockStart`), and a delta for a new `contentBlockIndex` closes
//! the open block; `contentBlockStop` closes it; `messageStop` gives the
//! stop reason and `metadata` the usage, which ends the stream. An event
//! whose name ends in `Exception` (`throttlingException`,
//! `modelStreamErrorException`, `validationException`, …) is the upstream's
//! in-band error. A delta that does not fit the open block is a malformed stream.

use super::super::response::{decode_stop_reason, decode_usage};
use super::super::wire::{
    event, BlockDeltaEvent, BlockStartEvent, BlockStopEvent, MessageStopEvent, MetadataEvent,
};
use crate::family::Family;
use crate::ir::stream::{
    BlockStart, MessageDelta, MessageStart, StreamError, StreamErrorKind, StreamEvent,
};
use crate::ir::Opaque;
use crate::protocol::common::framing::{check_utf8, StreamFault};
use crate::protocol::common::support::{malformed, unreadable, DeltaBuf, DeltaKind, Emit};
use crate::sse::SseEvent;
use crate::util::serde_str::opt_str;
use serde::Deserialize;
use std::borrow::Cow;

const F: Family = Family::Bedrock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    Call,
    /// Whole at its start (redacted reasoning, unknown starts).
    Whole,
}

#[derive(Debug, Clone, Copy)]
struct OpenBlock {
    upstream: usize,
    index: usize,
    kind: Kind,
}

#[derive(Deserialize)]
struct ExceptionPayload<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    message: Option<Cow<'a, str>>,
}

/// The canonical kind of a stream exception (the stream union's member names).
fn exception_kind(name: &str) -> StreamErrorKind {
    match name {
        "throttlingException" => StreamErrorKind::RateLimited,
        "serviceUnavailableException" => StreamErrorKind::Overloaded,
        "validationException" => StreamErrorKind::InvalidRequest,
        "accessDeniedException" => StreamErrorKind::Permission,
        "resourceNotFoundException" => StreamErrorKind::NotFound,
        "modelTimeoutException" => StreamErrorKind::Timeout,
        _ => StreamErrorKind::Api,
    }
}

/// Upstream ConverseStream events → canonical events.
#[derive(Debug, Default)]
pub struct Parser {
    started: bool,
    done: bool,
    /// `messageStop` gave the stop reason: the answer is all there.
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

    /// True once `metadata` (or an exception) has been read.
    pub fn is_complete(&self) -> bool {
        self.done
    }

    /// Reads one event.
    pub fn push(&mut self, ev: &SseEvent<'_>, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        let text = check_utf8(ev.event, ev.data)?;
        if self.done {
            return Ok(());
        }
        let data = ev.data;
        let name = ev.event_str().unwrap_or_default();
        if name.ends_with("Exception") {
            self.done = true;
            let p: Option<ExceptionPayload<'_>> = serde_json::from_str(text).ok();
            let message = p
                .and_then(|p| p.message)
                .map_or_else(|| name.to_string(), Cow::into_owned);
            emit(&StreamEvent::Error(StreamError {
                kind: exception_kind(name),
                message,
            }));
            return Ok(());
        }
        if name.is_empty() {
            // Every event-stream message names its type.
            return Err(unreadable(F, "an event without an event type", data));
        }
        if !self.started && name != event::MESSAGE_START {
            return Err(malformed(F, &format!("{name} before messageStart"), data));
        }
        let bad = |e: serde_json::Error| unreadable(F, &format!("invalid {name} ({e})"), data);
        match name {
            event::MESSAGE_START => {
                if self.started {
                    return Err(malformed(F, "a second messageStart", data));
                }
                self.started = true;
                emit(&StreamEvent::MessageStart(MessageStart::default()));
            }
            event::BLOCK_START => {
                let e: BlockStartEvent = serde_json::from_str(text).map_err(bad)?;
                self.close(emit);
                let (block, kind) = match e.start.tool_use {
                    Some(t) => (
                        BlockStart::ToolCall {
                            id: t.tool_use_id,
                            name: t.name,
                        },
                        Kind::Call,
                    ),
                    None => {
                        let kind = e.start.extra.keys().next().cloned().unwrap_or_default();
                        (
                            BlockStart::Opaque(Opaque {
                                origin: F,
                                kind,
                                value: serde_json::Value::Object(e.start.extra),
                            }),
                            Kind::Whole,
                        )
                    }
                };
                self.open_block(e.content_block_index, block, kind, emit);
            }
            event::BLOCK_DELTA => {
                let e: BlockDeltaEvent = serde_json::from_str(text).map_err(bad)?;
                self.delta(e, data, emit)?;
            }
            event::BLOCK_STOP => {
                let e: BlockStopEvent = serde_json::from_str(text).map_err(bad)?;
                match self.open {
                    Some(open) if open.upstream == e.content_block_index => self.close(emit),
                    // A stop for a block that never had a delta (an empty text block).
                    None => {}
                    Some(_) => return Err(malformed(F, "stop for a block that is not open", data)),
                }
            }
            event::MESSAGE_STOP => {
                let e: MessageStopEvent = serde_json::from_str(text).map_err(bad)?;
                self.close(emit);
                self.stop_seen = true;
                emit(&StreamEvent::MessageDelta(MessageDelta {
                    stop_reason: Some(decode_stop_reason(&e.stop_reason)),
                    usage: None,
                }));
            }
            event::METADATA => {
                let e: MetadataEvent = serde_json::from_str(text).map_err(bad)?;
                self.close(emit);
                if let Some(u) = e.usage {
                    emit(&StreamEvent::MessageDelta(MessageDelta {
                        stop_reason: None,
                        usage: Some(decode_usage(&u)),
                    }));
                }
                self.done = true;
                emit(&StreamEvent::MessageStop);
            }
            // Event types added after this code was written carry nothing we know.
            _ => {}
        }
        Ok(())
    }

    /// Called at the end of the upstream stream: one whose `messageStop`
    /// came is complete without its `metadata` (no usage); else truncated.
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

    fn open_block(&mut self, upstream: usize, block: BlockStart, kind: Kind, emit: &mut Emit<'_>) {
        let index = self.next_index;
        self.next_index += 1;
        emit(&StreamEvent::BlockStart { index, block });
        self.open = Some(OpenBlock {
            upstream,
            index,
            kind,
        });
    }

    fn delta(
        &mut self,
        e: BlockDeltaEvent,
        data: &[u8],
        emit: &mut Emit<'_>,
    ) -> Result<(), StreamFault> {
        let d = e.delta;
        let (kind, text) = if let Some(t) = d.text {
            (DeltaKind::Text, t)
        } else if let Some(u) = d.tool_use {
            (DeltaKind::ToolArguments, u.input)
        } else if let Some(r) = d.reasoning_content {
            if let Some(t) = r.text {
                (DeltaKind::Thinking, t)
            } else if let Some(s) = r.signature {
                (DeltaKind::Signature, s)
            } else if let Some(data) = r.redacted_content {
                self.close(emit);
                self.open_block(
                    e.content_block_index,
                    BlockStart::RedactedThinking { data },
                    Kind::Whole,
                    emit,
                );
                return Ok(());
            } else {
                return Ok(());
            }
        } else {
            // Delta kinds added later (citations, …).
            return Ok(());
        };
        let same = self.open.filter(|o| o.upstream == e.content_block_index);
        let open = match same {
            Some(open) => open,
            None => {
                let (block, k) = match kind {
                    DeltaKind::Text => (BlockStart::Text, Kind::Text),
                    DeltaKind::Thinking | DeltaKind::Signature => {
                        (BlockStart::Thinking, Kind::Thinking)
                    }
                    DeltaKind::ToolArguments => {
                        return Err(malformed(F, "toolUse input before its block start", data))
                    }
                };
                self.close(emit);
                self.open_block(e.content_block_index, block, k, emit);
                self.open
                    .ok_or_else(|| malformed(F, "no open block", data))?
            }
        };
        let fits = matches!(
            (kind, open.kind),
            (DeltaKind::Text, Kind::Text)
                | (DeltaKind::Thinking, Kind::Thinking)
                | (DeltaKind::ToolArguments, Kind::Call)
                | (DeltaKind::Signature, Kind::Thinking)
                | (_, Kind::Whole)
        );
        if !fits {
            return Err(malformed(F, "delta does not fit the open block", data));
        }
        if open.kind != Kind::Whole && !text.is_empty() {
            self.buf.emit(open.index, kind, &text, emit);
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ir::stream::BlockDelta;
    use crate::ir::StopReason;

    fn run(events: &[(&str, &str)]) -> (Vec<StreamEvent>, Result<(), StreamFault>) {
        let mut p = Parser::new();
        let mut out = Vec::new();
        let mut emit = |e: &StreamEvent| out.push(e.clone());
        for (name, data) in events {
            let ev = SseEvent {
                event: Some(name.as_bytes()),
                data: data.as_bytes(),
                id: None,
                retry: None,
                one_line: false,
            };
            if let Err(e) = p.push(&ev, &mut emit) {
                return (out, Err(e));
            }
        }
        let r = p.finish(&mut emit);
        (out, r)
    }

    #[test]
    fn a_whole_stream() {
        let (events, r) = run(&[
            ("messageStart", r#"{"role":"assistant"}"#),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hm"}}}"#,
            ),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"s"}}}"#,
            ),
            ("contentBlockStop", r#"{"contentBlockIndex":0}"#),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":1,"delta":{"text":"Hi"}}"#,
            ),
            ("contentBlockStop", r#"{"contentBlockIndex":1}"#),
            (
                "contentBlockStart",
                r#"{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}"#,
            ),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"a\":"}}}"#,
            ),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"1}"}}}"#,
            ),
            ("contentBlockStop", r#"{"contentBlockIndex":2}"#),
            ("messageStop", r#"{"stopReason":"tool_use"}"#),
            (
                "metadata",
                r#"{"usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7},"metrics":{"latencyMs":5}}"#,
            ),
        ]);
        assert_eq!(r, Ok(()));
        let mut checker = crate::ir::stream::GrammarChecker::new();
        for e in &events {
            checker.push(e).unwrap();
        }
        assert!(checker.is_done());
        assert!(events.contains(&StreamEvent::BlockDelta {
            index: 1,
            delta: BlockDelta::Text("Hi".into())
        }));
        assert!(events.contains(&StreamEvent::MessageDelta(MessageDelta {
            stop_reason: Some(StopReason::ToolUse),
            usage: None
        })));
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop));
    }

    #[test]
    fn exceptions_are_in_band_errors() {
        let (events, r) = run(&[
            ("messageStart", r#"{"role":"assistant"}"#),
            ("throttlingException", r#"{"message":"Too many requests"}"#),
        ]);
        assert_eq!(r, Ok(()));
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Error(StreamError {
                kind: StreamErrorKind::RateLimited,
                message: "Too many requests".into()
            }))
        );
    }

    #[test]
    fn hostile_input_is_a_fault() {
        let (_, r) = run(&[(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"x"}}"#,
        )]);
        assert!(matches!(r, Err(StreamFault::Malformed(_))));
        let (_, r) = run(&[("messageStart", "{}"), ("contentBlockDelta", "not json")]);
        assert!(matches!(r, Err(StreamFault::Unreadable(_))));
        let (_, r) = run(&[
            ("messageStart", "{}"),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{"}}}"#,
            ),
        ]);
        assert!(matches!(r, Err(StreamFault::Malformed(_))));
        let (_, r) = run(&[
            ("messageStart", "{}"),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"text":"x"}}"#,
            ),
        ]);
        assert_eq!(r, Err(StreamFault::Truncated));
    }
}
