//! Responses stream encoder: canonical [`StreamEvent`]s → the events a client reads.
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
//! event followed by `response.failed`. A call of a namespaced tool the
//! client declared ([`Encoder::set_namespaces`]) names its `namespace` and
//! the tool's own `name` in every item and event.

use super::custom_input::{custom_prefix, Prefix, Unescape};
use crate::family::Family;
use crate::ir::stream::{
    merge_usage, parse_arguments, BlockDelta, BlockStart, MessageStart, StreamEvent,
};
use crate::ir::{Extra, StopReason, ThinkingBlock, ToolCall, Usage};
use crate::protocol::common::support::{error_body, json_str, json_u64, json_value};
use crate::protocol::responses::envelope::Envelope;
use crate::protocol::responses::namespace::Namespaces;
use crate::protocol::responses::request::custom_input;
use crate::protocol::responses::response::{
    call_item, encode_status, encode_usage, item_id, reasoning_item, redacted_item, response_id,
    ENVELOPE_DEFAULTS,
};
use serde_json::Value;

const F: Family = Family::Responses;

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
    /// `,"item_id":…,"output_index":…` of the open item, written at its
    /// first event and copied into the rest (empty: not written yet).
    item_ref: Vec<u8>,
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
    /// The client's namespaced tools, by the flat names the upstream calls.
    names: Namespaces,
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
            item_ref: Vec::new(),
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
            names: Namespaces::default(),
        }
    }

    /// The namespaced tools the client's request declared: their calls
    /// are written with `namespace` and the tool's own name.
    pub fn set_namespaces(&mut self, names: Namespaces) {
        self.names = names;
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

    /// Goes on from a passed-through stream the client has: its response
    /// id (when known) and the next sequence number, so the events this
    /// encoder adds continue the client's numbering.
    pub fn continue_from(&mut self, id: Option<&str>, next_seq: u64) {
        if let Some(id) = id {
            self.id = id.to_string();
        }
        self.seq = next_seq;
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
    fn item_ref(&mut self, out: &mut Vec<u8>) {
        if self.item_ref.is_empty() {
            self.item_ref.extend_from_slice(b",\"item_id\":");
            json_str(&mut self.item_ref, &self.item_id);
            self.item_ref.extend_from_slice(b",\"output_index\":");
            json_u64(&mut self.item_ref, self.output_index as u64);
        }
        out.extend_from_slice(&self.item_ref);
    }

    /// Names the open item (its reference is written afresh).
    fn set_item_id(&mut self, prefix: &str) {
        self.item_id = item_id(prefix, &self.id, self.output_index);
        self.item_ref.clear();
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
        let mut json = Vec::new();
        json_value(&mut json, item);
        self.item_added_json(out, &json);
    }

    /// [`Self::item_added`] of an item already written as JSON.
    fn item_added_json(&mut self, out: &mut Vec<u8>, item: &[u8]) {
        self.begin(out, "response.output_item.added");
        out.extend_from_slice(b",\"output_index\":");
        json_u64(out, self.output_index as u64);
        out.extend_from_slice(b",\"item\":");
        out.extend_from_slice(item);
        Self::end(out);
    }

    /// `response.output_item.done` for `item`, which joins the output.
    fn item_done(&mut self, out: &mut Vec<u8>, item: &Value) {
        let mut json = Vec::new();
        json_value(&mut json, item);
        self.item_done_json(out, &json);
    }

    /// [`Self::item_done`] of an item already written as JSON.
    fn item_done_json(&mut self, out: &mut Vec<u8>, item: &[u8]) {
        self.begin(out, "response.output_item.done");
        out.extend_from_slice(b",\"output_index\":");
        json_u64(out, self.output_index as u64);
        out.extend_from_slice(b",\"item\":");
        out.extend_from_slice(item);
        if !self.output.is_empty() {
            self.output.push(b',');
        }
        self.output.extend_from_slice(item);
        Self::end(out);
        self.output_index += 1;
        self.item_ref.clear();
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
                self.set_item_id("msg_");
                let item = message_item(&self.item_id, "in_progress", None);
                self.item_added_json(out, &item);
                self.begin(out, "response.content_part.added");
                self.item_ref(out);
                out.extend_from_slice(b",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"\"}");
                Self::end(out);
                self.open = Out::Text;
            }
            BlockStart::Thinking => {
                self.set_item_id("rs_");
                // As serde_json writes an object: its keys in order.
                let mut item = b"{\"id\":".to_vec();
                json_str(&mut item, &self.item_id);
                item.extend_from_slice(b",\"summary\":[],\"type\":\"reasoning\"}");
                self.item_added_json(out, &item);
                self.open = Out::Thinking {
                    summary_open: false,
                };
            }
            BlockStart::RedactedThinking { data } => {
                self.set_item_id("rs_");
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
        self.set_item_id(prefix);
        let (namespace, name) = match self.names.split(&self.name) {
            Some((ns, name)) => (Some(ns), name),
            None => (None, self.name.as_str()),
        };
        let mut item = if custom {
            serde_json::json!({"id": self.item_id, "type": "custom_tool_call", "status": "in_progress",
                "call_id": self.call_id, "input": "", "name": name})
        } else {
            serde_json::json!({"id": self.item_id, "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": self.call_id, "name": name})
        };
        if let Some(ns) = namespace {
            item["namespace"] = Value::String(ns.to_string());
        }
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
                // The text escaped once, copied into the part and the item.
                let text = out.len();
                json_str(out, &self.text);
                let text = text..out.len();
                out.extend_from_slice(b",\"logprobs\":[]");
                Self::end(out);
                // As serde_json writes an object: its keys in order.
                let mut part = b"{\"annotations\":[],\"logprobs\":[],\"text\":".to_vec();
                part.extend_from_slice(&out[text]);
                part.extend_from_slice(b",\"type\":\"output_text\"}");
                self.begin(out, "response.content_part.done");
                self.item_ref(out);
                out.extend_from_slice(b",\"content_index\":0,\"part\":");
                out.extend_from_slice(&part);
                Self::end(out);
                let item = message_item(&self.item_id, "completed", Some(&part));
                self.item_done_json(out, &item);
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
            Out::Call(mode) => self.call_done(mode, out),
        }
        self.text.clear();
        self.raw.clear();
    }

    /// The open tool call's done events and item.
    fn call_done(&mut self, mode: CallMode, out: &mut Vec<u8>) {
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
                    None => crate::protocol::responses::request::custom_arguments(&self.text),
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
            let name = self.names.split(&call.name).map_or(&*call.name, |(_, n)| n);
            json_str(out, name);
            out.extend_from_slice(b",\"arguments\":");
            json_str(out, &self.text);
            Self::end(out);
        }
        let mut item = call_item(&call, &self.item_id, "completed", &self.names);
        if !custom {
            // The arguments exactly as streamed.
            item["arguments"] = Value::String(std::mem::take(&mut self.text));
        }
        self.item_done(out, &item);
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

/// An assistant `message` item with `status` and the one `part` (JSON)
/// or none, its keys in the order serde_json writes an object's.
fn message_item(id: &str, status: &str, part: Option<&[u8]>) -> Vec<u8> {
    let mut item = b"{\"content\":[".to_vec();
    item.extend_from_slice(part.unwrap_or_default());
    item.extend_from_slice(b"],\"id\":");
    json_str(&mut item, id);
    item.extend_from_slice(b",\"role\":\"assistant\",\"status\":\"");
    item.extend_from_slice(status.as_bytes());
    item.extend_from_slice(b"\",\"type\":\"message\"}");
    item
}
