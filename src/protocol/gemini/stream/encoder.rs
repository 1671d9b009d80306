//! Gemini stream encoder: canonical [`StreamEvent`]s → the bytes a client reads.
//!
//! One `GenerateContentResponse` per canonical delta: text as `{"text"}`
//! parts, thinking as `{"text","thought":true}`, a signature as an empty part
//! carrying `thoughtSignature`; a tool call's argument fragments are held
//! until the call is complete and sent as one `functionCall {name, args}`
//! part. The last chunk has the `finishReason` and `usageMetadata`. Every
//! chunk carries `modelVersion` (the client's model name) and `responseId`.

use crate::family::Family;
use crate::ir::stream::{merge_usage, parse_arguments, BlockDelta, BlockStart, StreamEvent};
use crate::ir::{ImageSource, StopReason, Usage};
use crate::protocol::common::framing::Framing;
use crate::protocol::common::support::{error_body, json_str, json_value};
use crate::protocol::gemini::request::{split_call_id, wire_call_id};
use crate::protocol::gemini::response::{encode_finish_reason, encode_usage};
use serde_json::value::RawValue;
use serde_json::{json, Value};

const F: Family = Family::Gemini;

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
            // Gemini clients get SSE or the array (the Bedrock framings are
            // never asked of this encoder).
            Framing::Sse | Framing::EventStream | Framing::BedrockChunks => {
                out.extend_from_slice(b"data: ")
            }
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
