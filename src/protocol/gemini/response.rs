//! Gemini generateContent non-streaming response codec: wire JSON ⇄ canonical response.
//!
//! Decoding takes the first candidate. Function calls get ids (Gemini's own,
//! or stable synthetic ones) that also carry the part's thought signature, so
//! a client of another protocol hands it back on the next turn (see
//! [`super::request::embed_signature`]). `STOP` with function calls is read
//! as [`StopReason::ToolUse`]. Usage is normalised: canonical output tokens
//! include thought tokens, which Gemini reports apart.

use super::request::{decode_part, embed_signature, encode_part, synthetic_call_id};
use super::wire::{GenerateContentResponse, UsageMetadata};
use crate::family::Family;
use crate::ir::{deep_merge, Block, ChatResponse, Extra, StopReason, Usage};
use crate::protocol::common::json::{nested, parse_response, take_nested};
use crate::protocol::common::TranslateError;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

const F: Family = Family::Gemini;

/// Finish reasons that mean "withheld by a filter".
const FILTER_REASONS: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
];

/// Decodes a Gemini `GenerateContentResponse` body.
pub fn decode(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let wire: GenerateContentResponse = parse_response(F, body)?;
    from_wire(wire)
}

/// Converts a parsed `GenerateContentResponse` into the canonical response.
pub fn from_wire(wire: GenerateContentResponse) -> Result<ChatResponse, TranslateError> {
    let response_id = wire.response_id.clone().unwrap_or_default();
    let mut resp = ChatResponse {
        id: response_id.clone(),
        model: wire.model_version.unwrap_or_default(),
        created: None,
        usage: wire.usage_metadata.map(decode_usage),
        extra: Extra::new(F, wire.extra),
        ..ChatResponse::default()
    };
    let Some(candidate) = wire.candidates.into_iter().next() else {
        // No candidate: the prompt itself was blocked.
        let block_reason = resp
            .extra
            .get(F, "promptFeedback")
            .and_then(|p| p.get("blockReason"))
            .and_then(Value::as_str)
            .map(str::to_string);
        resp.stop_reason = block_reason.map(|r| StopReason::ContentFilter(Some(r)));
        return Ok(resp);
    };
    let mut choice_extra = candidate.extra;
    let mut has_calls = false;
    if let Some(content) = candidate.content {
        let mut content_extra = content.extra;
        if let Some(role) = content.role.filter(|r| r != "model") {
            content_extra.insert("role".into(), json!(role));
        }
        choice_extra.extend(nested("content", content_extra));
        for (pi, part) in content.parts.into_iter().enumerate() {
            let mut block = decode_part(part, &format!("candidates[0].content.parts[{pi}]"))
                .map_err(|e| e.into_upstream(F))?;
            if let Block::ToolCall(call) = &mut block {
                has_calls = true;
                if call.id.is_empty() {
                    call.id = synthetic_call_id(&response_id, pi, &call.name, &call.arguments);
                }
                if let Some(sig) = &call.signature {
                    call.id = embed_signature(&call.id, sig);
                }
            }
            resp.content.push(block);
        }
    }
    resp.stop_reason = candidate
        .finish_reason
        .map(|r| decode_finish_reason(&r, has_calls));
    resp.choice_extra = Extra::new(F, choice_extra);
    Ok(resp)
}

/// Maps a Gemini `finishReason` to the canonical stop reason. Gemini says
/// `STOP` after function calls too: `has_calls` makes that [`StopReason::ToolUse`].
pub fn decode_finish_reason(reason: &str, has_calls: bool) -> StopReason {
    match reason {
        "STOP" if has_calls => StopReason::ToolUse,
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        "SAFETY" => StopReason::ContentFilter(None),
        r if FILTER_REASONS.contains(&r) => StopReason::ContentFilter(Some(r.to_string())),
        other => StopReason::Other(other.to_string()),
    }
}

/// Maps a canonical stop reason to a Gemini `finishReason`.
pub fn encode_finish_reason(reason: &StopReason) -> String {
    let upper = |s: &str| s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
    match reason {
        StopReason::EndTurn
        | StopReason::StopSequence(_)
        | StopReason::ToolUse
        | StopReason::PauseTurn => "STOP".into(),
        StopReason::MaxTokens => "MAX_TOKENS".into(),
        StopReason::ContentFilter(Some(raw)) if upper(raw) => raw.clone(),
        StopReason::ContentFilter(_) | StopReason::Refusal => "SAFETY".into(),
        StopReason::Other(raw) if upper(raw) => raw.clone(),
        StopReason::Other(_) => "OTHER".into(),
    }
}

/// Maps Gemini usage to canonical usage.
pub fn decode_usage(u: UsageMetadata) -> Usage {
    let thoughts = u.thoughts_token_count;
    Usage {
        input_tokens: u.prompt_token_count.unwrap_or(0),
        output_tokens: u
            .candidates_token_count
            .unwrap_or(0)
            .saturating_add(thoughts.unwrap_or(0)),
        total_tokens: u.total_token_count,
        cache_read_tokens: u.cached_content_token_count,
        cache_creation_tokens: None,
        cache_write_1h_tokens: None,
        reasoning_tokens: thoughts,
        extra: Extra::new(F, u.extra),
    }
}

/// Maps canonical usage to Gemini usage (thought tokens apart from candidates).
pub fn encode_usage(u: &Usage) -> UsageMetadata {
    UsageMetadata {
        prompt_token_count: Some(u.input_tokens),
        candidates_token_count: Some(
            u.output_tokens
                .saturating_sub(u.reasoning_tokens.unwrap_or(0)),
        ),
        total_token_count: Some(u.total()),
        cached_content_token_count: u.cache_read_tokens,
        thoughts_token_count: u.reasoning_tokens,
        extra: u.extra.to_map(F),
    }
}

/// Encodes the canonical response as a Gemini `GenerateContentResponse` body.
pub fn encode(resp: &ChatResponse, client_model: &str) -> Result<Value, TranslateError> {
    let no_names = HashMap::new();
    let mut parts = Vec::new();
    for (j, block) in resp.content.iter().enumerate() {
        let param = format!("content[{j}]");
        let part = match block {
            Block::ToolCall(c) if !c.arguments.is_object() => {
                // Invalid JSON from the model: hand the raw text over in an object.
                let mut fixed = c.clone();
                fixed.arguments = json!({"raw_arguments": c.arguments});
                encode_part(&Block::ToolCall(fixed), &param, &no_names)
            }
            Block::ToolResult(_) => Ok(None),
            Block::Opaque(o) if o.origin != F => Ok(None),
            Block::Text(t) if t.text.is_empty() && t.signature.is_none() => Ok(None),
            other => encode_part(other, &param, &no_names),
        }
        .map_err(|e| e.into_upstream(F))?;
        parts.extend(part);
    }

    let mut out = Map::new();
    let blocked = resp.content.is_empty()
        && resp
            .extra
            .get(F, "promptFeedback")
            .and_then(|p| p.get("blockReason"))
            .is_some();
    if !blocked {
        let mut choice_extra = resp.choice_extra.to_map(F);
        let content_extra = take_nested(&mut choice_extra, "content");
        let mut content = Map::new();
        content.insert("role".into(), json!("model"));
        content.insert("parts".into(), Value::Array(parts));
        deep_merge(&mut content, &content_extra);
        let mut candidate = Map::new();
        candidate.insert("content".into(), Value::Object(content));
        if let Some(reason) = &resp.stop_reason {
            candidate.insert("finishReason".into(), json!(encode_finish_reason(reason)));
        }
        deep_merge(&mut candidate, &choice_extra);
        out.insert("candidates".into(), json!([Value::Object(candidate)]));
    }
    if let Some(usage) = &resp.usage {
        out.insert(
            "usageMetadata".into(),
            serde_json::to_value(encode_usage(usage))
                .map_err(|e| TranslateError::upstream(format!("could not serialize usage: {e}")))?,
        );
    }
    out.insert("modelVersion".into(), json!(client_model));
    if !resp.id.is_empty() {
        out.insert("responseId".into(), json!(resp.id));
    }
    if let Some(extra) = resp.extra.for_family(F) {
        deep_merge(&mut out, extra);
    }
    Ok(Value::Object(out))
}
