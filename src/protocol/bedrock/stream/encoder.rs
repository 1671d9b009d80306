//! Bedrock ConverseStream encoder: canonical [`StreamEvent`]s → the
//! event-stream messages a Converse client reads (E21).
//!
//! `messageStart {"role":"assistant"}`; per block, numbered from 0 as the
//! client receives them: a tool call's `contentBlockStart`, then
//! `contentBlockDelta`s (`text`, `toolUse.input`, `reasoningContent.text` /
//! `.signature` / `.redactedContent`) and `contentBlockStop`; at the end
//! `messageStop` with the stop reason, then `metadata` with the usage and
//! metrics, as Bedrock ends its streams. Blocks a Converse answer cannot
//! hold (images, other families' opaque blocks) are dropped. An error is an
//! exception message (`:message-type: exception`): the upstream's own kind
//! when it sent one, else `modelStreamErrorException` (the stream failed).

use crate::eventstream::encode;
use crate::ir::stream::{merge_usage, BlockDelta, BlockStart, StreamEvent};
use crate::ir::{StopReason, Usage};
use crate::protocol::bedrock::error::stream_exception_type;
use crate::protocol::bedrock::response::{encode_stop_reason, encode_usage};
use crate::protocol::bedrock::wire::event;
use crate::protocol::common::support::{gateway_error, json_str, json_u64, json_value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    Call,
    Whole,
}

/// Canonical events → Converse event-stream messages.
#[derive(Debug, Default)]
pub struct Encoder {
    started: bool,
    ended: bool,
    next_index: usize,
    /// The open client block (kind, index), or None.
    open: Option<(Kind, usize)>,
    stop: Option<StopReason>,
    usage: Option<Usage>,
    /// A payload being written (kept to reuse its allocation).
    payload: Vec<u8>,
}

impl Encoder {
    /// An encoder (Converse answers carry no model name).
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the stream has been ended (normally or with an exception).
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    fn emit(&mut self, name: &str, out: &mut Vec<u8>) {
        encode::event(out, name, &self.payload);
        self.payload.clear();
    }

    fn ensure_started(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            self.payload.clear();
            self.payload.extend_from_slice(br#"{"role":"assistant"}"#);
            self.emit(event::MESSAGE_START, out);
        }
    }

    fn index_head(&mut self, index: usize) {
        self.payload.clear();
        self.payload.extend_from_slice(b"{\"contentBlockIndex\":");
        json_u64(&mut self.payload, index as u64);
    }

    fn delta(
        &mut self,
        index: usize,
        body: &[u8],
        field: &[u8],
        text: &str,
        tail: &[u8],
        out: &mut Vec<u8>,
    ) {
        self.index_head(index);
        self.payload.extend_from_slice(b",\"delta\":");
        self.payload.extend_from_slice(body);
        self.payload.extend_from_slice(field);
        json_str(&mut self.payload, text);
        self.payload.extend_from_slice(tail);
        self.payload.push(b'}');
        self.emit(event::BLOCK_DELTA, out);
    }

    /// Writes what `event` means for the client.
    pub fn event(&mut self, ev: &StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match ev {
            StreamEvent::MessageStart(s) => {
                self.ensure_started(out);
                if let Some(u) = &s.usage {
                    self.usage = Some(merge_usage(self.usage.take(), u));
                }
            }
            StreamEvent::BlockStart { block, .. } => {
                self.ensure_started(out);
                self.close(out);
                let kind = match block {
                    BlockStart::Text => Kind::Text,
                    BlockStart::Thinking => Kind::Thinking,
                    BlockStart::ToolCall { .. } => Kind::Call,
                    BlockStart::RedactedThinking { .. } => Kind::Whole,
                    BlockStart::Image(_) | BlockStart::Opaque(_) => return,
                };
                let index = self.next_index;
                self.next_index += 1;
                self.open = Some((kind, index));
                match block {
                    BlockStart::ToolCall { id, name } => {
                        self.index_head(index);
                        self.payload
                            .extend_from_slice(b",\"start\":{\"toolUse\":{\"toolUseId\":");
                        json_str(&mut self.payload, id);
                        self.payload.extend_from_slice(b",\"name\":");
                        json_str(&mut self.payload, name);
                        self.payload.extend_from_slice(b"}}}");
                        self.emit(event::BLOCK_START, out);
                    }
                    BlockStart::RedactedThinking { data } => self.delta(
                        index,
                        b"{\"reasoningContent\":{",
                        b"\"redactedContent\":",
                        data,
                        b"}}",
                        out,
                    ),
                    _ => {}
                }
            }
            StreamEvent::BlockDelta { delta, .. } => {
                let Some((kind, index)) = self.open else {
                    return;
                };
                match (kind, delta) {
                    (Kind::Text, BlockDelta::Text(t)) if !t.is_empty() => {
                        self.delta(index, b"{", b"\"text\":", t, b"}", out)
                    }
                    (Kind::Thinking, BlockDelta::Thinking(t)) if !t.is_empty() => self.delta(
                        index,
                        b"{\"reasoningContent\":{",
                        b"\"text\":",
                        t,
                        b"}}",
                        out,
                    ),
                    (Kind::Thinking, BlockDelta::Signature(s)) if !s.is_empty() => self.delta(
                        index,
                        b"{\"reasoningContent\":{",
                        b"\"signature\":",
                        s,
                        b"}}",
                        out,
                    ),
                    (Kind::Call, BlockDelta::ToolArguments(a)) if !a.is_empty() => {
                        self.delta(index, b"{\"toolUse\":{", b"\"input\":", a, b"}}", out)
                    }
                    _ => {}
                }
            }
            StreamEvent::BlockStop { .. } => self.close(out),
            StreamEvent::MessageDelta(d) => {
                if let Some(r) = &d.stop_reason {
                    self.stop = Some(r.clone());
                }
                if let Some(u) = &d.usage {
                    self.usage = Some(merge_usage(self.usage.take(), u));
                }
            }
            StreamEvent::MessageStop => self.finish(out),
            StreamEvent::Ping => {}
            StreamEvent::Error(e) => {
                let g = gateway_error(crate::family::Family::Bedrock, e);
                let body = crate::protocol::bedrock::error::error_body(&g);
                self.exception(stream_exception_type(&g), &body, out);
            }
        }
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if let Some((_, index)) = self.open.take() {
            self.index_head(index);
            self.payload.push(b'}');
            self.emit(event::BLOCK_STOP, out);
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        self.ensure_started(out);
        self.close(out);
        self.payload.clear();
        self.payload.extend_from_slice(b"{\"stopReason\":");
        json_str(&mut self.payload, encode_stop_reason(self.stop.as_ref()));
        self.payload.push(b'}');
        self.emit(event::MESSAGE_STOP, out);
        let usage = self.usage.as_ref().map(encode_usage).unwrap_or_default();
        self.payload.clear();
        self.payload.extend_from_slice(b"{\"usage\":");
        json_value(&mut self.payload, &usage);
        self.payload
            .extend_from_slice(b",\"metrics\":{\"latencyMs\":0}}");
        self.emit(event::METADATA, out);
        self.ended = true;
    }

    fn exception(&mut self, kind: &str, body: &[u8], out: &mut Vec<u8>) {
        encode::exception(out, kind, body);
        self.ended = true;
    }

    /// Upstream comments (keep-alives) have no event-stream form.
    pub fn comment(&mut self, _text: &[u8], _out: &mut Vec<u8>) {}

    /// Ends the stream with an exception carrying `error_body` (the
    /// gateway's `{"message": …}`): the stream failed mid-answer.
    pub fn fail(&mut self, error_body: &[u8], out: &mut Vec<u8>) {
        if !self.ended {
            self.exception("modelStreamErrorException", error_body, out);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ir::stream::{MessageDelta, MessageStart, StreamError, StreamErrorKind};

    /// The messages in `bytes`: (`:message-type`, type header, payload).
    pub(crate) fn messages(mut bytes: &[u8]) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let len = u32::from_be_bytes(bytes[0..4].try_into().unwrap()) as usize;
            let m = aws_smithy_eventstream::frame::read_message_from(&bytes[..len]).unwrap();
            let h = |n: &str| {
                m.headers()
                    .iter()
                    .find(|h| h.name().as_str() == n)
                    .map(|h| h.value().as_string().unwrap().as_str().to_string())
                    .unwrap_or_default()
            };
            let kind = h(":message-type");
            let name = if kind == "event" {
                h(":event-type")
            } else {
                h(":exception-type")
            };
            out.push((kind, name, String::from_utf8(m.payload().to_vec()).unwrap()));
            bytes = &bytes[len..];
        }
        out
    }

    #[test]
    fn a_stream_ends_with_stop_then_metadata() {
        let mut e = Encoder::new();
        let mut out = Vec::new();
        for ev in [
            StreamEvent::MessageStart(MessageStart::default()),
            StreamEvent::BlockStart {
                index: 0,
                block: BlockStart::Text,
            },
            StreamEvent::BlockDelta {
                index: 0,
                delta: BlockDelta::Text("Hi".into()),
            },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::BlockStart {
                index: 1,
                block: BlockStart::ToolCall {
                    id: "t".into(),
                    name: "f".into(),
                },
            },
            StreamEvent::BlockDelta {
                index: 1,
                delta: BlockDelta::ToolArguments("{}".into()),
            },
            StreamEvent::BlockStop { index: 1 },
            StreamEvent::MessageDelta(MessageDelta {
                stop_reason: Some(StopReason::ToolUse),
                usage: Some(Usage {
                    input_tokens: 3,
                    output_tokens: 2,
                    ..Usage::default()
                }),
            }),
            StreamEvent::MessageStop,
        ] {
            e.event(&ev, &mut out);
        }
        assert!(e.is_ended());
        let m = messages(&out);
        let names: Vec<&str> = m.iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "messageStart",
                "contentBlockDelta",
                "contentBlockStop",
                "contentBlockStart",
                "contentBlockDelta",
                "contentBlockStop",
                "messageStop",
                "metadata"
            ]
        );
        assert_eq!(m[1].2, r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#);
        assert_eq!(
            m[3].2,
            r#"{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}"#
        );
        assert_eq!(
            m[4].2,
            r#"{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{}"}}}"#
        );
        assert_eq!(m[6].2, r#"{"stopReason":"tool_use"}"#);
        assert_eq!(
            m[7].2,
            r#"{"usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5},"metrics":{"latencyMs":0}}"#
        );
    }

    #[test]
    fn errors_are_exceptions() {
        let mut e = Encoder::new();
        let mut out = Vec::new();
        e.event(
            &StreamEvent::MessageStart(MessageStart::default()),
            &mut out,
        );
        e.event(
            &StreamEvent::Error(StreamError {
                kind: StreamErrorKind::RateLimited,
                message: "slow".into(),
            }),
            &mut out,
        );
        let m = messages(&out);
        assert_eq!(
            m[1],
            (
                "exception".into(),
                "throttlingException".into(),
                r#"{"message":"slow"}"#.into()
            )
        );
        let mut e = Encoder::new();
        let mut out = Vec::new();
        e.fail(br#"{"message":"cut"}"#, &mut out);
        assert_eq!(messages(&out)[0].1, "modelStreamErrorException");
        assert!(e.is_ended());
    }
}
