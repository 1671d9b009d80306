//! OpenAI chat stream encoder: canonical [`StreamEvent`]s → the bytes a client reads.
//!
//! A chunk with `delta.role` opens the stream; text is `delta.content`,
//! thinking `delta.reasoning_content`, each tool call an entry of
//! `delta.tool_calls` numbered 0, 1, … (id, type and name in the first
//! fragment, argument text after). Stop reason and usage are held until the
//! message ends: then a chunk with an empty delta and `finish_reason`, a
//! usage chunk with `choices: []` when the client asked for
//! `stream_options.include_usage`, and `data: [DONE]`. Signatures, redacted
//! thinking, images and other families' opaque blocks have no place in a
//! chunk and are dropped.

use crate::family::Family;
use crate::ir::stream::{merge_usage, BlockDelta, BlockStart, MessageStart, StreamEvent};
use crate::ir::{StopReason, Usage};
use crate::protocol::common::support::{error_body, fresh_id, json_str, json_u64, json_value};
use crate::protocol::openai::response::{encode_finish_reason, encode_usage};

const F: Family = Family::OpenAi;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    None,
    Text,
    Thinking,
    /// A tool call with this position in `tool_calls`.
    Call(u64),
    /// A block with no place in a chunk.
    Dropped,
}

/// Canonical events → OpenAI `chat.completion.chunk` SSE frames.
#[derive(Debug)]
pub struct Encoder {
    model: String,
    include_usage: bool,
    created: u64,
    /// `data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,`
    prefix: Vec<u8>,
    started: bool,
    ended: bool,
    open: Out,
    tool_calls: u64,
    stop: Option<StopReason>,
    usage: Option<Usage>,
}

impl Encoder {
    /// An encoder naming the model `client_model` (`provider/model_id`);
    /// `created` is used when the upstream gives no creation time.
    pub fn new(client_model: &str, include_usage: bool, created: u64) -> Self {
        Encoder {
            model: client_model.to_string(),
            include_usage,
            created,
            prefix: Vec::new(),
            started: false,
            ended: false,
            open: Out::None,
            tool_calls: 0,
            stop: None,
            usage: None,
        }
    }

    /// Sets the `created` time used when the upstream gives none.
    pub fn set_created(&mut self, created: u64) {
        self.created = created;
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
                self.open = match block {
                    BlockStart::Text => Out::Text,
                    BlockStart::Thinking => Out::Thinking,
                    BlockStart::ToolCall { id, name } => {
                        let n = self.tool_calls;
                        self.tool_calls += 1;
                        self.begin(out);
                        out.extend_from_slice(b"{\"tool_calls\":[{\"index\":");
                        json_u64(out, n);
                        out.extend_from_slice(b",\"id\":");
                        json_str(out, id);
                        out.extend_from_slice(b",\"type\":\"function\",\"function\":{\"name\":");
                        json_str(out, name);
                        out.extend_from_slice(b",\"arguments\":\"\"}}]}");
                        self.end(out, None);
                        Out::Call(n)
                    }
                    BlockStart::RedactedThinking { .. }
                    | BlockStart::Image(_)
                    | BlockStart::Opaque(_) => Out::Dropped,
                };
            }
            StreamEvent::BlockDelta { delta, .. } => match (self.open, delta) {
                (Out::Text, BlockDelta::Text(t)) if !t.is_empty() => {
                    self.begin(out);
                    out.extend_from_slice(b"{\"content\":");
                    json_str(out, t);
                    out.push(b'}');
                    self.end(out, None);
                }
                (Out::Thinking, BlockDelta::Thinking(t)) if !t.is_empty() => {
                    self.begin(out);
                    out.extend_from_slice(b"{\"reasoning_content\":");
                    json_str(out, t);
                    out.push(b'}');
                    self.end(out, None);
                }
                (Out::Call(n), BlockDelta::ToolArguments(a)) if !a.is_empty() => {
                    self.begin(out);
                    out.extend_from_slice(b"{\"tool_calls\":[{\"index\":");
                    json_u64(out, n);
                    out.extend_from_slice(b",\"function\":{\"arguments\":");
                    json_str(out, a);
                    out.extend_from_slice(b"}}]}");
                    self.end(out, None);
                }
                _ => {}
            },
            StreamEvent::BlockStop { .. } => self.open = Out::None,
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
                let reason =
                    encode_finish_reason(self.stop.as_ref().unwrap_or(&StopReason::EndTurn));
                self.begin(out);
                out.extend_from_slice(b"{}");
                self.end(out, Some(reason.as_str()));
                if self.include_usage {
                    out.extend_from_slice(&self.prefix);
                    out.extend_from_slice(b"\"choices\":[],\"usage\":");
                    let usage = self.usage.take().unwrap_or_default();
                    json_value(out, &encode_usage(&usage));
                    out.extend_from_slice(b"}\n\n");
                }
                out.extend_from_slice(b"data: [DONE]\n\n");
                self.ended = true;
            }
            StreamEvent::Ping => {}
            StreamEvent::Error(e) => self.fail(
                &error_body(F, e, crate::protocol::openai::error::error_body),
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

    /// Ends the stream with `error_body` (`{"error":{…}}`) and no `[DONE]`.
    pub fn fail(&mut self, error_body: &[u8], out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        crate::sse::encode_event(out, None, error_body);
        self.ended = true;
    }

    fn start(&mut self, start: &MessageStart, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        let id = if start.id.is_empty() {
            fresh_id("chatcmpl-")
        } else {
            start.id.clone()
        };
        let created = start.created.unwrap_or(self.created);
        if let Some(u) = &start.usage {
            self.usage = Some(merge_usage(self.usage.take(), u));
        }
        self.prefix.clear();
        self.prefix.extend_from_slice(b"data: {\"id\":");
        json_str(&mut self.prefix, &id);
        self.prefix
            .extend_from_slice(b",\"object\":\"chat.completion.chunk\",\"created\":");
        json_u64(&mut self.prefix, created);
        self.prefix.extend_from_slice(b",\"model\":");
        json_str(&mut self.prefix, &self.model);
        self.prefix.push(b',');
        self.started = true;
        self.begin(out);
        out.extend_from_slice(b"{\"role\":\"assistant\",\"content\":\"\"}");
        self.end(out, None);
    }

    fn ensure_started(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.start(&MessageStart::default(), out);
        }
    }

    /// Writes the frame up to the delta object.
    fn begin(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(b"\"choices\":[{\"index\":0,\"delta\":");
    }

    /// Writes the rest of the frame after the delta object.
    fn end(&self, out: &mut Vec<u8>, finish_reason: Option<&str>) {
        out.extend_from_slice(b",\"finish_reason\":");
        match finish_reason {
            Some(r) => json_str(out, r),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b"}]}\n\n");
    }
}
