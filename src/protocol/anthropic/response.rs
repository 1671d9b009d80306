//! Anthropic Messages non-streaming response codec: wire JSON ⇄ canonical response.
//!
//! Content blocks map one to one. Usage is normalised: the canonical input
//! count includes cache reads and writes, which Anthropic reports apart.

use super::request::{decode_block, encode_block};
use super::wire::{MessagesResponse, Usage as WireUsage};
use crate::family::Family;
use crate::ir::{deep_merge, Block, ChatResponse, Extra, StopReason, Usage};
use crate::protocol::common::json::parse_response;
use crate::protocol::common::TranslateError;
use crate::protocol::openai::response::fallback_id;
use serde_json::{json, Map, Value};

const F: Family = Family::Anthropic;

/// Decodes an Anthropic `message` body.
pub fn decode(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let wire: MessagesResponse = parse_response(F, body)?;
    from_wire(wire)
}

/// Converts a parsed Anthropic `message` into the canonical response.
pub fn from_wire(wire: MessagesResponse) -> Result<ChatResponse, TranslateError> {
    let mut content = Vec::new();
    for (j, block) in wire.content.into_iter().enumerate() {
        content
            .push(decode_block(block, &format!("content[{j}]")).map_err(|e| e.into_upstream(F))?);
    }
    let stop_reason = wire
        .stop_reason
        .map(|r| decode_stop_reason(&r, wire.stop_sequence));
    Ok(ChatResponse {
        id: wire.id,
        model: wire.model,
        created: None,
        content,
        stop_reason,
        usage: wire.usage.map(decode_usage),
        extra: Extra::new(F, wire.extra),
        choice_extra: Extra::default(),
    })
}

/// Maps an Anthropic `stop_reason` (and `stop_sequence`) to the canonical stop reason.
pub fn decode_stop_reason(reason: &str, stop_sequence: Option<String>) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence(stop_sequence),
        "tool_use" => StopReason::ToolUse,
        "refusal" => StopReason::Refusal,
        "pause_turn" => StopReason::PauseTurn,
        other => StopReason::Other(other.to_string()),
    }
}

/// Maps a canonical stop reason to Anthropic's `stop_reason` and `stop_sequence`.
pub fn encode_stop_reason(reason: &StopReason) -> (String, Option<String>) {
    let r = match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence(seq) => return ("stop_sequence".into(), seq.clone()),
        StopReason::ToolUse => "tool_use",
        StopReason::ContentFilter(_) | StopReason::Refusal => "refusal",
        StopReason::PauseTurn => "pause_turn",
        StopReason::Other(raw) if raw.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
            return (raw.clone(), None)
        }
        StopReason::Other(_) => "end_turn",
    };
    (r.into(), None)
}

/// Maps Anthropic usage to canonical usage: the input is `input_tokens`
/// (uncached) plus the cache reads and writes; the one-hour part of the
/// writes is `cache_creation.ephemeral_1h_input_tokens` (the breakdown is
/// kept as an unknown field too, for an Anthropic client).
pub fn decode_usage(u: WireUsage) -> Usage {
    let cache_read = u.cache_read_input_tokens;
    let cache_creation = u.cache_creation_input_tokens;
    let split = |k: &str| {
        u.extra
            .get("cache_creation")
            .and_then(|c| c.get(k))
            .and_then(Value::as_u64)
    };
    // The total, when only the breakdown was given.
    let cache_creation = cache_creation.or_else(|| {
        match (
            split("ephemeral_5m_input_tokens"),
            split("ephemeral_1h_input_tokens"),
        ) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        }
    });
    let write_1h = split("ephemeral_1h_input_tokens");
    Usage {
        input_tokens: u
            .input_tokens
            .saturating_add(cache_read.unwrap_or(0))
            .saturating_add(cache_creation.unwrap_or(0)),
        output_tokens: u.output_tokens,
        total_tokens: None,
        cache_read_tokens: cache_read,
        cache_creation_tokens: cache_creation,
        cache_write_1h_tokens: write_1h,
        reasoning_tokens: None,
        extra: Extra::new(F, u.extra),
    }
}

/// Maps canonical usage to Anthropic usage (uncached input apart from cache
/// reads/writes; the writes' 5-minute / one-hour breakdown when known).
pub fn encode_usage(u: &Usage) -> WireUsage {
    let mut extra = u.extra.to_map(F);
    if let (Some(all), Some(h1)) = (u.cache_creation_tokens, u.cache_write_1h_tokens) {
        extra.entry("cache_creation").or_insert_with(|| {
            json!({
                "ephemeral_5m_input_tokens": all.saturating_sub(h1),
                "ephemeral_1h_input_tokens": h1.min(all),
            })
        });
    }
    WireUsage {
        input_tokens: u
            .input_tokens
            .saturating_sub(u.cache_read_tokens.unwrap_or(0))
            .saturating_sub(u.cache_creation_tokens.unwrap_or(0)),
        output_tokens: u.output_tokens,
        cache_creation_input_tokens: u.cache_creation_tokens,
        cache_read_input_tokens: u.cache_read_tokens,
        extra,
    }
}

/// Encodes the canonical response as an Anthropic `message` body.
pub fn encode(resp: &ChatResponse, client_model: &str) -> Result<Value, TranslateError> {
    let mut content = Vec::new();
    for (j, block) in resp.content.iter().enumerate() {
        let param = format!("content[{j}]");
        let encoded = match block {
            // Text is kept even when empty (a response may end with an empty text block).
            Block::Text(t) if t.text.is_empty() => Some(json!({"type": "text", "text": ""})),
            // A client must be able to send thinking back: keep it even unsigned.
            Block::Thinking(t) if t.signature.is_none() => {
                let mut v = json!({"type": "thinking", "thinking": t.text, "signature": ""});
                if let (Value::Object(obj), Some(extra)) = (&mut v, t.extra.for_family(F)) {
                    deep_merge(obj, extra);
                }
                Some(v)
            }
            Block::ToolCall(c) if !c.arguments.is_object() => {
                // Invalid JSON from the model: hand the raw text over in an object.
                let mut fixed = c.clone();
                fixed.arguments = json!({"raw_arguments": c.arguments});
                encode_block(&Block::ToolCall(fixed), &param).map_err(|e| e.into_upstream(F))?
            }
            // Nothing in an assistant message can hold these.
            Block::Image(_) | Block::ToolResult(_) => None,
            Block::Opaque(o) if o.origin != F => None,
            other => encode_block(other, &param).map_err(|e| e.into_upstream(F))?,
        };
        content.extend(encoded);
    }
    let (stop_reason, stop_sequence) = match &resp.stop_reason {
        Some(r) => {
            let (r, s) = encode_stop_reason(r);
            (json!(r), s.map_or(Value::Null, Value::String))
        }
        None => (Value::Null, Value::Null),
    };
    let usage = resp.usage.as_ref().map(encode_usage).unwrap_or_default();
    let mut out = Map::new();
    let id = if resp.id.is_empty() {
        fallback_id("msg_", resp)
    } else {
        resp.id.clone()
    };
    out.insert("id".into(), json!(id));
    out.insert("type".into(), json!("message"));
    out.insert("role".into(), json!("assistant"));
    out.insert("model".into(), json!(client_model));
    out.insert("content".into(), Value::Array(content));
    out.insert("stop_reason".into(), stop_reason);
    out.insert("stop_sequence".into(), stop_sequence);
    out.insert(
        "usage".into(),
        serde_json::to_value(usage)
            .map_err(|e| TranslateError::upstream(format!("could not serialize usage: {e}")))?,
    );
    if let Some(extra) = resp.extra.for_family(F) {
        deep_merge(&mut out, extra);
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn wire(v: Value) -> WireUsage {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn cache_writes_are_input_and_their_one_hour_part_is_kept() {
        let u = decode_usage(wire(json!({
            "input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 30,
            "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20}
        })));
        assert_eq!(u.input_tokens, 140);
        assert_eq!(u.cache_read_tokens, Some(100));
        assert_eq!(u.cache_creation_tokens, Some(30));
        assert_eq!(u.cache_write_1h_tokens, Some(20));
        // Only the breakdown given: its sum is the writes.
        let u = decode_usage(wire(json!({
            "input_tokens": 1, "output_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 2, "ephemeral_1h_input_tokens": 3}
        })));
        assert_eq!((u.input_tokens, u.cache_creation_tokens), (6, Some(5)));
    }

    #[test]
    fn a_usage_from_elsewhere_is_written_without_double_counting() {
        let u = Usage {
            input_tokens: 140,
            output_tokens: 4,
            cache_read_tokens: Some(100),
            cache_creation_tokens: Some(30),
            cache_write_1h_tokens: Some(20),
            ..Usage::default()
        };
        let w = serde_json::to_value(encode_usage(&u)).unwrap();
        assert_eq!(
            w,
            json!({"input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 30,
                "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20}})
        );
    }
}
