//! Anthropic Messages stream encoder: canonical [`StreamEvent`]s → the bytes a client reads.
//!
//! `message_start` (a message with the client's model name, empty content,
//! null stop reason and the usage known so far), then per block
//! `content_block_start` / `content_block_delta` / `content_block_stop`
//! numbered from 0, a `ping` after the first block start as Anthropic sends,
//! and at the end one `message_delta` with the stop reason and the whole
//! usage, then `message_stop`. Blocks an assistant message cannot hold
//! (images, other families' opaque blocks) are dropped and the rest
//! renumbered; signatures are passed on for thinking blocks only (Gemini's
//! signatures on tool calls travel inside the call id).

use super::Kind;
use crate::family::Family;
use crate::ir::stream::{merge_usage, BlockDelta, BlockStart, MessageStart, StreamEvent};
use crate::ir::{StopReason, Usage};
use crate::protocol::anthropic::response::{encode_stop_reason, encode_usage};
use crate::protocol::common::support::{error_body, fresh_id, json_str, json_u64, json_value};

const F: Family = Family::Anthropic;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    None,
    /// An open client block of this kind at this client index.
    Open(Kind, usize),
    /// A block the client cannot receive.
    Dropped,
}

/// Canonical events → Anthropic SSE events.
#[derive(Debug)]
pub struct Encoder {
    model: String,
    started: bool,
    ended: bool,
    next_index: usize,
    open: Out,
    /// The last frame written was a `ping`.
    last_ping: bool,
    pinged: bool,
    stop: Option<StopReason>,
    usage: Option<Usage>,
}

impl Encoder {
    /// An encoder naming the model `client_model` (the bare model id).
    pub fn new(client_model: &str) -> Self {
        Encoder {
            model: client_model.to_string(),
            started: false,
            ended: false,
            next_index: 0,
            open: Out::None,
            last_ping: false,
            pinged: false,
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
            StreamEvent::MessageStart(start) => self.start(start, out),
            StreamEvent::BlockStart { block, .. } => {
                self.ensure_started(out);
                self.block_start(block, out);
            }
            StreamEvent::BlockDelta { delta, .. } => {
                let Out::Open(kind, index) = self.open else {
                    return;
                };
                let (name, field, text): (&[u8], &[u8], &str) = match (kind, delta) {
                    (Kind::Text, BlockDelta::Text(t)) => (b"text_delta", b"text", t),
                    (Kind::Thinking, BlockDelta::Thinking(t)) => {
                        (b"thinking_delta", b"thinking", t)
                    }
                    (Kind::Thinking, BlockDelta::Signature(s)) => {
                        (b"signature_delta", b"signature", s)
                    }
                    (Kind::Call, BlockDelta::ToolArguments(a)) => {
                        (b"input_json_delta", b"partial_json", a)
                    }
                    _ => return,
                };
                if text.is_empty() {
                    return;
                }
                self.frame_head(out, "content_block_delta");
                out.extend_from_slice(b"{\"type\":\"content_block_delta\",\"index\":");
                json_u64(out, index as u64);
                out.extend_from_slice(b",\"delta\":{\"type\":\"");
                out.extend_from_slice(name);
                out.extend_from_slice(b"\",\"");
                out.extend_from_slice(field);
                out.extend_from_slice(b"\":");
                json_str(out, text);
                out.extend_from_slice(b"}}\n\n");
            }
            StreamEvent::BlockStop { .. } => {
                if let Out::Open(_, index) = self.open {
                    self.stop_block(index, out);
                }
                self.open = Out::None;
            }
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
                if let Out::Open(_, index) = self.open {
                    self.stop_block(index, out);
                }
                let (reason, sequence) =
                    encode_stop_reason(self.stop.as_ref().unwrap_or(&StopReason::EndTurn));
                self.frame_head(out, "message_delta");
                out.extend_from_slice(b"{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":");
                json_str(out, &reason);
                out.extend_from_slice(b",\"stop_sequence\":");
                match &sequence {
                    Some(s) => json_str(out, s),
                    None => out.extend_from_slice(b"null"),
                }
                out.extend_from_slice(b"},\"usage\":");
                let usage = self.usage.take().unwrap_or_default();
                json_value(out, &encode_usage(&usage));
                out.extend_from_slice(b"}\n\n");
                self.frame_head(out, "message_stop");
                out.extend_from_slice(b"{\"type\":\"message_stop\"}\n\n");
                self.ended = true;
            }
            StreamEvent::Ping => {
                if self.started && !self.last_ping {
                    self.ping(out);
                }
            }
            StreamEvent::Error(e) => self.fail(
                &error_body(F, e, crate::protocol::anthropic::error::error_body),
                out,
            ),
        }
    }

    /// Forwards an upstream comment (keep-alive).
    pub fn comment(&mut self, text: &[u8], out: &mut Vec<u8>) {
        if !self.ended {
            crate::sse::encode_comment(out, text);
        }
    }

    /// Ends the stream with an `error` event carrying `error_body`
    /// (`{"type":"error","error":{…}}`).
    pub fn fail(&mut self, error_body: &[u8], out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        crate::sse::encode_event(out, Some("error"), error_body);
        self.ended = true;
    }

    /// Writes `event: NAME\ndata: ` (the caller writes the JSON and `\n\n`).
    fn frame_head(&mut self, out: &mut Vec<u8>, name: &str) {
        self.last_ping = false;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\ndata: ");
    }

    fn ping(&mut self, out: &mut Vec<u8>) {
        self.frame_head(out, "ping");
        out.extend_from_slice(b"{\"type\":\"ping\"}\n\n");
        self.last_ping = true;
        self.pinged = true;
    }

    fn start(&mut self, start: &MessageStart, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let id = if start.id.is_empty() {
            fresh_id("msg_")
        } else {
            start.id.clone()
        };
        if let Some(u) = &start.usage {
            self.usage = Some(merge_usage(self.usage.take(), u));
        }
        self.frame_head(out, "message_start");
        out.extend_from_slice(b"{\"type\":\"message_start\",\"message\":{\"id\":");
        json_str(out, &id);
        out.extend_from_slice(b",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
        json_str(out, &self.model);
        out.extend_from_slice(
            b",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":",
        );
        let usage = start.usage.clone().unwrap_or_default();
        json_value(out, &encode_usage(&usage));
        out.extend_from_slice(b"}}\n\n");
    }

    fn ensure_started(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.start(&MessageStart::default(), out);
        }
    }

    fn block_start(&mut self, block: &BlockStart, out: &mut Vec<u8>) {
        if let Out::Open(_, index) = self.open {
            self.stop_block(index, out);
        }
        let index = self.next_index;
        let head = |this: &mut Self, out: &mut Vec<u8>| {
            this.frame_head(out, "content_block_start");
            out.extend_from_slice(b"{\"type\":\"content_block_start\",\"index\":");
            json_u64(out, index as u64);
            out.extend_from_slice(b",\"content_block\":");
        };
        let kind = match block {
            BlockStart::Text => {
                head(self, out);
                out.extend_from_slice(b"{\"type\":\"text\",\"text\":\"\"}");
                Kind::Text
            }
            BlockStart::Thinking => {
                head(self, out);
                out.extend_from_slice(
                    b"{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}",
                );
                Kind::Thinking
            }
            BlockStart::RedactedThinking { data } => {
                head(self, out);
                out.extend_from_slice(b"{\"type\":\"redacted_thinking\",\"data\":");
                json_str(out, data);
                out.push(b'}');
                Kind::Whole
            }
            BlockStart::ToolCall { id, name } => {
                head(self, out);
                out.extend_from_slice(b"{\"type\":\"tool_use\",\"id\":");
                if id.is_empty() {
                    json_str(out, &fresh_id("toolu_"));
                } else {
                    json_str(out, id);
                }
                out.extend_from_slice(b",\"name\":");
                json_str(out, name);
                out.extend_from_slice(b",\"input\":{}}");
                Kind::Call
            }
            BlockStart::Opaque(o) if o.origin == F => {
                head(self, out);
                json_value(out, &o.value);
                Kind::Whole
            }
            BlockStart::Image(_) | BlockStart::Opaque(_) => {
                self.open = Out::Dropped;
                return;
            }
        };
        out.extend_from_slice(b"}\n\n");
        self.next_index += 1;
        self.open = Out::Open(kind, index);
        if !self.pinged {
            self.ping(out);
        }
    }

    fn stop_block(&mut self, index: usize, out: &mut Vec<u8>) {
        self.frame_head(out, "content_block_stop");
        out.extend_from_slice(b"{\"type\":\"content_block_stop\",\"index\":");
        json_u64(out, index as u64);
        out.extend_from_slice(b"}\n\n");
        self.open = Out::None;
    }
}
