//! OpenAI chat-completions non-streaming response codec: wire JSON ⇄ canonical response.
//!
//! Decoding takes the first choice: `reasoning_content` becomes a thinking
//! block, `content` text blocks, `tool_calls` tool-call blocks, a `refusal`
//! a text block with [`StopReason::Refusal`]. Encoding joins text blocks into
//! `content`, thinking into `reasoning_content`; signatures, redacted thinking,
//! images and foreign opaque blocks have no place in a chat completion and are
//! dropped.

use super::request::decode_content;
use super::wire::{
    ChatCompletion, CompletionTokensDetails, PromptTokensDetails, Usage as WireUsage,
};
use crate::family::Family;
use crate::ir::stream::{arguments_text, parse_arguments};
use crate::ir::{
    deep_merge, ids, Block, ChatResponse, Extra, StopReason, ThinkingBlock, ToolCall, Usage,
};
use crate::protocol::common::json::{nested, parse_response, take_nested};
use crate::protocol::common::TranslateError;
use serde_json::{json, Map, Value};
use std::time::{SystemTime, UNIX_EPOCH};

const F: Family = Family::OpenAi;

/// Decodes an OpenAI `chat.completion` body.
pub fn decode(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let wire: ChatCompletion = parse_response(F, body)?;
    from_wire(wire)
}

/// Converts a parsed `chat.completion` into the canonical response.
pub fn from_wire(wire: ChatCompletion) -> Result<ChatResponse, TranslateError> {
    let mut resp = ChatResponse {
        id: wire.id,
        model: wire.model,
        created: Some(wire.created),
        usage: wire.usage.map(decode_usage),
        extra: Extra::new(F, wire.extra),
        ..ChatResponse::default()
    };
    let Some(choice) = wire.choices.into_iter().next() else {
        return Ok(resp);
    };
    let message = choice.message;
    if let Some(reasoning) = message.reasoning_content {
        resp.content.push(Block::Thinking(ThinkingBlock {
            text: reasoning,
            ..ThinkingBlock::default()
        }));
    }
    if let Some(content) = message.content.flatten() {
        resp.content
            .extend(decode_content(content, "choices[0].message").map_err(|e| e.into_upstream(F))?);
    }
    let refusal = message
        .extra
        .get("refusal")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(text) = &refusal {
        resp.content.push(Block::text(text.clone()));
    }
    let mut has_calls = false;
    for call in message.tool_calls.unwrap_or_default() {
        has_calls = true;
        let mut extra = call.extra;
        extra.extend(nested("function", call.function.extra));
        resp.content.push(Block::ToolCall(ToolCall {
            id: call.id,
            name: call.function.name,
            arguments: parse_arguments(&call.function.arguments),
            signature: None,
            cache_control: None,
            extra: Extra::new(F, extra),
        }));
    }
    resp.stop_reason = choice.finish_reason.map(|r| match r.as_str() {
        "stop" if refusal.is_some() => StopReason::Refusal,
        "stop" if has_calls => StopReason::ToolUse,
        _ => decode_finish_reason(&r),
    });
    let mut choice_extra = choice.extra;
    choice_extra.extend(nested("message", message.extra));
    resp.choice_extra = Extra::new(F, choice_extra);
    Ok(resp)
}

/// Maps an OpenAI `finish_reason` to the canonical stop reason.
pub fn decode_finish_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        "tool_calls" => StopReason::ToolUse,
        "content_filter" => StopReason::ContentFilter(None),
        other => StopReason::Other(other.to_string()),
    }
}

/// Maps a canonical stop reason to an OpenAI `finish_reason`.
pub fn encode_finish_reason(reason: &StopReason) -> String {
    match reason {
        StopReason::EndTurn
        | StopReason::StopSequence(_)
        | StopReason::Refusal
        | StopReason::PauseTurn => "stop".into(),
        StopReason::MaxTokens => "length".into(),
        StopReason::ToolUse => "tool_calls".into(),
        StopReason::ContentFilter(_) => "content_filter".into(),
        StopReason::Other(raw) if raw.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
            raw.clone()
        }
        StopReason::Other(_) => "stop".into(),
    }
}

/// Maps OpenAI usage to canonical usage (DeepSeek's `prompt_cache_hit_tokens`
/// and a top-level `cached_tokens` are read when `prompt_tokens_details` is absent).
pub fn decode_usage(u: WireUsage) -> Usage {
    let mut extra = u.extra;
    let mut cache_read = None;
    let mut cache_write = None;
    let mut reasoning = None;
    if let Some(d) = u.prompt_tokens_details {
        cache_read = d.cached_tokens;
        cache_write = d.cache_write_tokens;
        extra.extend(nested("prompt_tokens_details", d.extra));
    }
    if let Some(d) = u.completion_tokens_details {
        reasoning = d.reasoning_tokens;
        extra.extend(nested("completion_tokens_details", d.extra));
    }
    if cache_read.is_none() {
        cache_read = ["prompt_cache_hit_tokens", "cached_tokens"]
            .iter()
            .find_map(|k| extra.get(*k).and_then(Value::as_u64));
    }
    Usage {
        input_tokens: u.prompt_tokens,
        output_tokens: u.completion_tokens,
        total_tokens: u.total_tokens,
        cache_read_tokens: cache_read,
        cache_creation_tokens: cache_write,
        cache_write_1h_tokens: None,
        reasoning_tokens: reasoning,
        extra: Extra::new(F, extra),
    }
}

/// Maps canonical usage to OpenAI usage.
pub fn encode_usage(u: &Usage) -> WireUsage {
    let mut extra = u.extra.to_map(F);
    let prompt_extra = take_nested(&mut extra, "prompt_tokens_details");
    let completion_extra = take_nested(&mut extra, "completion_tokens_details");
    // Cache writes have no field of OpenAI's own: written (as OpenRouter
    // does) only when there were some.
    let cache_write = u.cache_creation_tokens.filter(|n| *n > 0);
    WireUsage {
        prompt_tokens: u.input_tokens,
        completion_tokens: u.output_tokens,
        total_tokens: Some(u.total()),
        prompt_tokens_details: (u.cache_read_tokens.is_some()
            || cache_write.is_some()
            || !prompt_extra.is_empty())
        .then_some(PromptTokensDetails {
            cached_tokens: u.cache_read_tokens,
            cache_write_tokens: cache_write,
            extra: prompt_extra,
        }),
        completion_tokens_details: (u.reasoning_tokens.is_some() || !completion_extra.is_empty())
            .then_some(CompletionTokensDetails {
                reasoning_tokens: u.reasoning_tokens,
                extra: completion_extra,
            }),
        extra,
    }
}

/// A response id derived from the content when the upstream gave none.
pub(crate) fn fallback_id(prefix: &str, resp: &ChatResponse) -> String {
    let fingerprint = format!("{:?}", resp.content);
    ids::stable_id(prefix, &[resp.model.as_bytes(), fingerprint.as_bytes()])
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// Encodes the canonical response as an OpenAI `chat.completion` body.
pub fn encode(resp: &ChatResponse, client_model: &str) -> Result<Value, TranslateError> {
    let mut text: Option<String> = None;
    let mut reasoning: Option<String> = None;
    let mut calls = Vec::new();
    for block in &resp.content {
        match block {
            Block::Text(t) => text.get_or_insert_with(String::new).push_str(&t.text),
            Block::Thinking(t) => reasoning.get_or_insert_with(String::new).push_str(&t.text),
            Block::ToolCall(c) => {
                let mut call = json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": arguments_text(&c.arguments)},
                });
                if let (Value::Object(obj), Some(extra)) = (&mut call, c.extra.for_family(F)) {
                    deep_merge(obj, extra);
                }
                calls.push(call);
            }
            // No place in a chat completion for these.
            Block::RedactedThinking(_)
            | Block::Image(_)
            | Block::ToolResult(_)
            | Block::Opaque(_) => {}
        }
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    if resp.stop_reason == Some(StopReason::Refusal) {
        message.insert("content".into(), Value::Null);
        message.insert("refusal".into(), json!(text.unwrap_or_default()));
    } else {
        message.insert("content".into(), text.map_or(Value::Null, Value::String));
    }
    if let Some(r) = reasoning {
        message.insert("reasoning_content".into(), json!(r));
    }
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }

    let mut choice_extra = resp.choice_extra.to_map(F);
    if let Some(Value::Object(message_extra)) = choice_extra.remove("message") {
        deep_merge(&mut message, &message_extra);
    }
    let mut choice = Map::new();
    choice.insert("index".into(), json!(0));
    choice.insert("message".into(), Value::Object(message));
    choice.insert(
        "finish_reason".into(),
        resp.stop_reason
            .as_ref()
            .map_or(Value::Null, |r| json!(encode_finish_reason(r))),
    );
    deep_merge(&mut choice, &choice_extra);

    let mut out = Map::new();
    let id = if resp.id.is_empty() {
        fallback_id("chatcmpl-", resp)
    } else {
        resp.id.clone()
    };
    out.insert("id".into(), json!(id));
    out.insert("object".into(), json!("chat.completion"));
    out.insert("created".into(), json!(resp.created.unwrap_or_else(now)));
    out.insert("model".into(), json!(client_model));
    out.insert("choices".into(), json!([Value::Object(choice)]));
    if let Some(usage) = &resp.usage {
        out.insert(
            "usage".into(),
            serde_json::to_value(encode_usage(usage))
                .map_err(|e| TranslateError::upstream(format!("could not serialize usage: {e}")))?,
        );
    }
    if let Some(extra) = resp.extra.for_family(F) {
        deep_merge(&mut out, extra);
    }
    Ok(Value::Object(out))
}
