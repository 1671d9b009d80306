//! OpenAI Responses non-streaming response codec: wire JSON ⇄ canonical response.
//!
//! Decoding reads the output items in order: `message` parts are text blocks
//! (a `refusal` part makes the stop reason [`StopReason::Refusal`]),
//! `function_call` and `custom_tool_call` tool calls (a custom call's input
//! under [`CUSTOM_INPUT_KEY`]), `reasoning` thinking blocks whose signature
//! packs the item id with its `encrypted_content` ([`crate::ir::signature`]);
//! other items are kept opaque. `status` and `incomplete_details.reason` give
//! the stop reason; a `failed` response is an upstream error.
//!
//! Encoding writes a `response` object with every field the official SDKs
//! read (request echoes the canonical response does not know get the API's
//! defaults): consecutive text blocks form one `message` item, thinking a
//! `reasoning` item (its summary, and its signature in `encrypted_content`:
//! a packed item unpacked, an Anthropic / Gemini signature behind
//! [`FOREIGN_SIGNATURE_PREFIX`]), tool calls `function_call` items, or
//! `custom_tool_call` items when their arguments have the custom shape; a
//! call of a namespaced tool the client declared gets its `namespace` and
//! the tool's own `name` back ([`encode_named`], `super::namespace`).
//! Item ids are derived from the response id and the item's position.
//!
//! [`CUSTOM_INPUT_KEY`]: super::request::CUSTOM_INPUT_KEY

use super::namespace::Namespaces;
use super::request::{custom_arguments, custom_input, decode_reasoning_item};
use super::wire::{InputDetails, Item, OutputDetails, Part, ResponseObject, Usage as WireUsage};
use crate::family::Family;
use crate::ir::signature::{
    unwrap_reasoning_item, FOREIGN_REDACTED_PREFIX, FOREIGN_SIGNATURE_PREFIX,
};
use crate::ir::stream::{arguments_text, parse_arguments};
use crate::ir::{
    deep_merge, ids, Block, ChatResponse, Extra, Opaque, StopReason, TextBlock, ThinkingBlock,
    ToolCall, Usage,
};
use crate::protocol::common::json::{nested, parse_response, take_nested, to_value, StringOr};
use crate::protocol::common::TranslateError;
use serde_json::{json, Map, Value};
use std::time::{SystemTime, UNIX_EPOCH};

const F: Family = Family::Responses;

/// Decodes a Responses `response` body.
pub fn decode(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let wire: ResponseObject = parse_response(F, body)?;
    from_wire(wire)
}

/// The message of a failed response's `error` object.
pub(crate) fn failure_message(error: &Value) -> String {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the response failed");
    match error.get("code").and_then(Value::as_str) {
        Some(code) => format!("{code}: {message}"),
        None => message.to_string(),
    }
}

/// Converts a parsed `response` object into the canonical response.
pub fn from_wire(wire: ResponseObject) -> Result<ChatResponse, TranslateError> {
    if let Some(error) = wire.error.as_ref().filter(|e| !e.is_null()) {
        return Err(TranslateError::upstream(format!(
            "the upstream response failed: {}",
            failure_message(error)
        )));
    }
    let mut resp = ChatResponse {
        id: wire.id,
        model: wire.model,
        created: wire.created_at.map(|t| t as u64),
        usage: wire.usage.map(decode_usage),
        ..ChatResponse::default()
    };
    let mut refusal = false;
    let mut has_calls = false;
    for (i, item) in wire.output.into_iter().enumerate() {
        decode_output_item(item, i, &mut resp.content, &mut refusal, &mut has_calls)?;
    }
    resp.stop_reason = decode_status(
        wire.status.as_deref(),
        wire.incomplete_details.as_ref(),
        refusal,
        has_calls,
    );
    let mut extra = wire.extra;
    if let Some(details) = wire.incomplete_details.filter(|d| !d.is_null()) {
        extra.insert("incomplete_details".into(), details);
    }
    if let Some(status) = wire.status {
        if !matches!(status.as_str(), "completed" | "incomplete") {
            extra.insert("status".into(), json!(status));
        }
    }
    resp.extra = Extra::new(F, extra);
    Ok(resp)
}

/// The canonical stop reason for a response `status` and `incomplete_details`.
pub(crate) fn decode_status(
    status: Option<&str>,
    incomplete: Option<&Value>,
    refusal: bool,
    has_calls: bool,
) -> Option<StopReason> {
    match status? {
        "completed" if refusal => Some(StopReason::Refusal),
        "completed" if has_calls => Some(StopReason::ToolUse),
        "completed" => Some(StopReason::EndTurn),
        "incomplete" => {
            let reason = incomplete
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str);
            Some(match reason {
                Some("max_output_tokens") | None => StopReason::MaxTokens,
                Some("content_filter") => StopReason::ContentFilter(None),
                Some(other) => StopReason::Other(other.to_string()),
            })
        }
        other => Some(StopReason::Other(other.to_string())),
    }
}

/// Item fields kept in the canonical model's extras: everything but the ones read.
fn item_fields(item: &mut Item) -> Map<String, Value> {
    let mut extra = std::mem::take(&mut item.extra);
    if let Some(id) = item.id.take() {
        extra.insert("id".into(), json!(id));
    }
    extra
}

fn decode_output_item(
    mut item: Item,
    i: usize,
    out: &mut Vec<Block>,
    refusal: &mut bool,
    has_calls: &mut bool,
) -> Result<(), TranslateError> {
    let kind = item.kind.clone().unwrap_or_else(|| "message".into());
    match kind.as_str() {
        "message" => {
            let parts = match item.content.take() {
                Some(StringOr::List(parts)) => parts,
                Some(StringOr::String(text)) => vec![Part {
                    kind: "output_text".into(),
                    text: Some(text),
                    ..Part::default()
                }],
                None => Vec::new(),
            };
            item.role = None;
            item.kind = None;
            // The item's own fields (id, status, phase) ride on its first part.
            let mut fields = item_fields(&mut item);
            for (j, part) in parts.into_iter().enumerate() {
                let mut extra = part.extra;
                let text = match part.kind.as_str() {
                    "output_text" | "text" => part.text.unwrap_or_default(),
                    "refusal" => {
                        *refusal = true;
                        extra.insert("type".into(), json!("refusal"));
                        part.refusal.unwrap_or_default()
                    }
                    other => {
                        return Err(TranslateError::upstream(format!(
                            "the upstream responses output[{i}].content[{j}] has an unknown part type \"{other}\""
                        )))
                    }
                };
                if j == 0 {
                    extra.insert("item".into(), Value::Object(std::mem::take(&mut fields)));
                }
                out.push(Block::Text(TextBlock {
                    text,
                    extra: Extra::new(F, extra),
                    ..TextBlock::default()
                }));
            }
        }
        "function_call" | "custom_tool_call" => {
            *has_calls = true;
            let call_id = item.call_id.take().unwrap_or_default();
            let name = item.name.take().unwrap_or_default();
            let arguments = if kind == "custom_tool_call" {
                custom_arguments(item.input.as_deref().unwrap_or_default())
            } else {
                parse_arguments(item.arguments.as_deref().unwrap_or_default())
            };
            out.push(Block::ToolCall(ToolCall {
                id: call_id,
                name,
                arguments,
                signature: None,
                cache_control: None,
                extra: Extra::new(F, item_fields(&mut item)),
            }));
        }
        "reasoning" => out.push(decode_reasoning_item(item)),
        other => out.push(Block::Opaque(Opaque {
            origin: F,
            kind: other.to_string(),
            value: to_value(&item)?,
        })),
    }
    Ok(())
}

/// Maps Responses usage to canonical usage.
pub fn decode_usage(u: WireUsage) -> Usage {
    let mut extra = u.extra;
    let mut cache_read = None;
    let mut cache_write = None;
    let mut reasoning = None;
    if let Some(d) = u.input_tokens_details {
        cache_read = d.cached_tokens;
        cache_write = d.cache_write_tokens;
        extra.extend(nested("input_tokens_details", d.extra));
    }
    if let Some(d) = u.output_tokens_details {
        reasoning = d.reasoning_tokens;
        extra.extend(nested("output_tokens_details", d.extra));
    }
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        total_tokens: u.total_tokens,
        cache_read_tokens: cache_read,
        cache_creation_tokens: cache_write,
        cache_write_1h_tokens: None,
        reasoning_tokens: reasoning,
        extra: Extra::new(F, extra),
    }
}

/// Maps canonical usage to Responses usage (details always present, as the API sends them).
pub fn encode_usage(u: &Usage) -> WireUsage {
    let mut extra = u.extra.to_map(F);
    let input_extra = take_nested(&mut extra, "input_tokens_details");
    let output_extra = take_nested(&mut extra, "output_tokens_details");
    WireUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        total_tokens: Some(u.total()),
        input_tokens_details: Some(InputDetails {
            cached_tokens: Some(u.cache_read_tokens.unwrap_or(0)),
            cache_write_tokens: u.cache_creation_tokens,
            extra: input_extra,
        }),
        output_tokens_details: Some(OutputDetails {
            reasoning_tokens: Some(u.reasoning_tokens.unwrap_or(0)),
            extra: output_extra,
        }),
        extra,
    }
}

// ---------------------------------------------------------------- encoding

/// The response id a client sees: the upstream's when it is a `resp_` id,
/// else `resp_` and the upstream's id (or a stable derived one).
pub(crate) fn response_id(id: &str, resp: Option<&ChatResponse>) -> String {
    if id.starts_with("resp_") {
        return id.to_string();
    }
    if id.is_empty() {
        return match resp {
            Some(r) => crate::protocol::openai::response::fallback_id("resp_", r),
            None => crate::protocol::common::support::fresh_id("resp_"),
        };
    }
    format!("resp_{id}")
}

/// An item id derived from the response id and the item's position.
pub(crate) fn item_id(prefix: &str, response_id: &str, index: usize) -> String {
    ids::stable_id(
        prefix,
        &[response_id.as_bytes(), index.to_string().as_bytes()],
    )
}

/// `status` and `incomplete_details` for a stop reason.
pub(crate) fn encode_status(stop: Option<&StopReason>) -> (&'static str, Value) {
    match stop {
        Some(StopReason::MaxTokens) => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some(StopReason::ContentFilter(_)) => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

/// An `output_text` (or `refusal`) part for a text block.
pub(crate) fn text_part(t: &TextBlock, refusal: bool) -> Value {
    let mut extra = t.extra.to_map(F);
    extra.remove("item");
    let refusal = refusal || extra.remove("type").is_some_and(|k| k == "refusal");
    let mut v = if refusal {
        json!({"type": "refusal", "refusal": t.text})
    } else {
        json!({"type": "output_text", "annotations": [], "logprobs": [], "text": t.text})
    };
    if let Value::Object(obj) = &mut v {
        deep_merge(obj, &extra);
    }
    v
}

/// A `message` item holding `parts`; `fields` are the item's own (id, status, phase).
pub(crate) fn message_item(
    id: &str,
    status: &str,
    parts: Vec<Value>,
    fields: Option<&Value>,
) -> Value {
    let mut v = json!({"id": id, "type": "message", "status": status, "content": parts, "role": "assistant"});
    if let (Value::Object(obj), Some(Value::Object(fields))) = (&mut v, fields) {
        deep_merge(obj, fields);
    }
    v
}

/// A `function_call` or `custom_tool_call` item; a call of one of `names`
/// (the client's namespaced tools) carries its `namespace`.
pub(crate) fn call_item(c: &ToolCall, id: &str, status: &str, names: &Namespaces) -> Value {
    let (namespace, name) = match names.split(&c.name) {
        Some((ns, name)) => (Some(ns), name),
        None => (None, c.name.as_str()),
    };
    let mut v = match custom_input(&c.arguments) {
        Some(input) => json!({
            "id": id, "type": "custom_tool_call", "status": status,
            "call_id": c.id, "input": input, "name": name,
        }),
        None => json!({
            "id": id, "type": "function_call", "status": status,
            "arguments": arguments_text(&c.arguments), "call_id": c.id, "name": name,
        }),
    };
    if let (Value::Object(obj), Some(ns)) = (&mut v, namespace) {
        obj.insert("namespace".into(), json!(ns));
    }
    if let (Value::Object(obj), Some(extra)) = (&mut v, c.extra.for_family(F)) {
        deep_merge(obj, extra);
    }
    v
}

/// The id and `encrypted_content` a Responses client gets for a thinking signature.
pub(crate) fn reasoning_state(signature: Option<&str>) -> (Option<String>, Option<String>) {
    let Some(sig) = signature else {
        return (None, None);
    };
    match unwrap_reasoning_item(sig) {
        Some((id, e)) => (Some(id).filter(|i| !i.is_empty()), Some(e)),
        None => (None, Some(format!("{FOREIGN_SIGNATURE_PREFIX}{sig}"))),
    }
}

/// A `reasoning` item for a thinking block.
pub(crate) fn reasoning_item(t: &ThinkingBlock, fallback_id: &str) -> Value {
    let (packed_id, encrypted) = reasoning_state(t.signature.as_deref());
    let own_id = t.extra.get(F, "id").and_then(Value::as_str);
    let id = packed_id.as_deref().or(own_id).unwrap_or(fallback_id);
    let summary = if t.text.is_empty() {
        json!([])
    } else {
        json!([{"type": "summary_text", "text": t.text}])
    };
    let mut v = json!({"id": id, "type": "reasoning", "summary": summary});
    if let Some(e) = encrypted {
        v["encrypted_content"] = json!(e);
    }
    if let (Value::Object(obj), Some(extra)) = (&mut v, t.extra.for_family(F)) {
        deep_merge(obj, extra);
        // Reasoning read from `content` (no summary) goes back there only.
        let from_content = obj
            .get("content")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n\n")
            })
            .is_some_and(|joined| joined == t.text);
        if from_content {
            obj.insert("summary".into(), json!([]));
        }
    }
    v
}

/// A `reasoning` item for Anthropic redacted thinking (whole when it is added, too).
pub(crate) fn redacted_item(data: &str, id: &str) -> Value {
    json!({"id": id, "type": "reasoning", "summary": [],
        "encrypted_content": format!("{FOREIGN_REDACTED_PREFIX}{data}")})
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// The fields of a `response` object the canonical response does not know,
/// with the API's defaults (the official SDKs read them).
pub(crate) const ENVELOPE_DEFAULTS: &[(&str, &str)] = &[
    ("background", "false"),
    ("instructions", "null"),
    ("max_output_tokens", "null"),
    ("max_tool_calls", "null"),
    ("parallel_tool_calls", "true"),
    ("previous_response_id", "null"),
    ("reasoning", r#"{"effort":null,"summary":null}"#),
    ("service_tier", r#""default""#),
    ("store", "false"),
    ("temperature", "null"),
    ("text", r#"{"format":{"type":"text"}}"#),
    ("tool_choice", r#""auto""#),
    ("tools", "[]"),
    ("top_logprobs", "0"),
    ("top_p", "null"),
    ("truncation", r#""disabled""#),
    ("user", "null"),
    ("metadata", "{}"),
];

/// The output items for the canonical content.
fn encode_output(resp: &ChatResponse, id: &str, status: &str, names: &Namespaces) -> Vec<Value> {
    let refusal = resp.stop_reason == Some(StopReason::Refusal);
    let mut items = Vec::new();
    let mut parts: Vec<Value> = Vec::new();
    let mut fields: Option<Value> = None;
    let flush = |parts: &mut Vec<Value>, fields: &mut Option<Value>, items: &mut Vec<Value>| {
        if !parts.is_empty() {
            let fallback = item_id("msg_", id, items.len());
            items.push(message_item(
                &fallback,
                status,
                std::mem::take(parts),
                fields.take().as_ref(),
            ));
        }
    };
    for block in &resp.content {
        match block {
            Block::Text(t) => {
                // A part carrying its item's fields starts a new item.
                let own = t.extra.get(F, "item");
                if own.is_some() {
                    flush(&mut parts, &mut fields, &mut items);
                    fields = own.cloned();
                }
                parts.push(text_part(t, refusal));
            }
            Block::Thinking(t) => {
                flush(&mut parts, &mut fields, &mut items);
                let fallback = item_id("rs_", id, items.len());
                items.push(reasoning_item(t, &fallback));
            }
            Block::RedactedThinking(r) => {
                flush(&mut parts, &mut fields, &mut items);
                let fallback = item_id("rs_", id, items.len());
                items.push(redacted_item(&r.data, &fallback));
            }
            Block::ToolCall(c) => {
                flush(&mut parts, &mut fields, &mut items);
                let fallback = item_id(
                    if custom_input(&c.arguments).is_some() {
                        "ctc_"
                    } else {
                        "fc_"
                    },
                    id,
                    items.len(),
                );
                items.push(call_item(c, &fallback, "completed", names));
            }
            Block::Opaque(o) if o.origin == F => {
                flush(&mut parts, &mut fields, &mut items);
                items.push(o.value.clone());
            }
            // No place in a response for these.
            Block::Image(_) | Block::ToolResult(_) | Block::Opaque(_) => {}
        }
    }
    flush(&mut parts, &mut fields, &mut items);
    items
}

/// Encodes the canonical response as a Responses `response` body.
pub fn encode(resp: &ChatResponse, client_model: &str) -> Result<Value, TranslateError> {
    encode_named(resp, client_model, &Namespaces::default())
}

/// [`encode`] for a client that declared the namespaced tools `names`.
pub fn encode_named(
    resp: &ChatResponse,
    client_model: &str,
    names: &Namespaces,
) -> Result<Value, TranslateError> {
    let id = response_id(&resp.id, Some(resp));
    let (status, incomplete) = encode_status(resp.stop_reason.as_ref());
    let item_status = if status == "incomplete" {
        "incomplete"
    } else {
        "completed"
    };
    let output = encode_output(resp, &id, item_status, names);
    let mut out = Map::new();
    out.insert("id".into(), json!(id));
    out.insert("object".into(), json!("response"));
    out.insert("created_at".into(), json!(resp.created.unwrap_or_else(now)));
    out.insert("status".into(), json!(status));
    out.insert("error".into(), Value::Null);
    out.insert("incomplete_details".into(), incomplete);
    out.insert("model".into(), json!(client_model));
    out.insert("output".into(), Value::Array(output));
    for (key, value) in ENVELOPE_DEFAULTS {
        out.insert(
            (*key).into(),
            serde_json::from_str(value).unwrap_or(Value::Null),
        );
    }
    out.insert(
        "usage".into(),
        match &resp.usage {
            Some(u) => to_value(&encode_usage(u))?,
            None => Value::Null,
        },
    );
    if let Some(extra) = resp.extra.for_family(F) {
        deep_merge(&mut out, extra);
    }
    Ok(Value::Object(out))
}
