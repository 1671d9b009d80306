//! Bedrock Converse non-streaming response codec: wire JSON ⇄ canonical
//! response. Usage is normalised as for Anthropic: the canonical input
//! count includes cache reads and writes, which Converse reports apart.
//! Converse answers carry no id or model name.

use super::request::decode::decode_block;
use super::request::encode::encode_block;
use super::wire::{ConverseResponse, TokenUsage};
use crate::family::Family;
use crate::ir::{deep_merge, ChatResponse, Extra, StopReason, Usage};
use crate::protocol::common::json::parse_response;
use crate::protocol::common::TranslateError;
use serde_json::{json, Map, Value};

const F: Family = Family::Bedrock;

/// Decodes a Converse answer.
pub fn decode(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let wire: ConverseResponse = parse_response(F, body)?;
    from_wire(wire)
}

/// Converts a parsed Converse answer into the canonical response.
pub fn from_wire(wire: ConverseResponse) -> Result<ChatResponse, TranslateError> {
    let mut content = Vec::new();
    let message = wire.output.message.unwrap_or_default();
    for (j, block) in message.content.into_iter().enumerate() {
        if block.cache_point.is_some() {
            continue;
        }
        content.push(
            decode_block(block, &format!("output.message.content[{j}]"))
                .map_err(|e| e.into_upstream(F))?,
        );
    }
    let mut extra = wire.extra;
    if let Some(fields) = wire.additional_model_response_fields {
        extra.insert("additionalModelResponseFields".into(), fields);
    }
    Ok(ChatResponse {
        id: String::new(),
        model: String::new(),
        created: None,
        content,
        stop_reason: (!wire.stop_reason.is_empty()).then(|| decode_stop_reason(&wire.stop_reason)),
        usage: wire.usage.map(|u| decode_usage(&u)),
        extra: Extra::new(F, extra),
        choice_extra: Extra::default(),
    })
}

/// Maps a Converse `stopReason` to the canonical stop reason.
pub fn decode_stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence(None),
        "tool_use" => StopReason::ToolUse,
        "guardrail_intervened" | "content_filtered" => {
            StopReason::ContentFilter(Some(reason.to_string()))
        }
        other => StopReason::Other(other.to_string()),
    }
}

/// Maps a canonical stop reason to Converse's `stopReason`.
pub fn encode_stop_reason(reason: Option<&StopReason>) -> &str {
    match reason {
        None | Some(StopReason::EndTurn | StopReason::PauseTurn) => "end_turn",
        Some(StopReason::MaxTokens) => "max_tokens",
        Some(StopReason::StopSequence(_)) => "stop_sequence",
        Some(StopReason::ToolUse) => "tool_use",
        Some(StopReason::ContentFilter(Some(r))) if r == "guardrail_intervened" => {
            "guardrail_intervened"
        }
        Some(StopReason::ContentFilter(_) | StopReason::Refusal) => "content_filtered",
        Some(StopReason::Other(raw)) => match raw.as_str() {
            "malformed_model_output" | "malformed_tool_use" | "model_context_window_exceeded" => {
                raw.as_str()
            }
            _ => "end_turn",
        },
    }
}

/// Converse usage → canonical usage (the input includes the cache's tokens).
pub fn decode_usage(u: &TokenUsage) -> Usage {
    Usage {
        input_tokens: u
            .input_tokens
            .saturating_add(u.cache_read_input_tokens.unwrap_or(0))
            .saturating_add(u.cache_write_input_tokens.unwrap_or(0)),
        output_tokens: u.output_tokens,
        total_tokens: None,
        cache_read_tokens: u.cache_read_input_tokens,
        cache_creation_tokens: u.cache_write_input_tokens,
        cache_write_1h_tokens: None,
        reasoning_tokens: None,
        extra: Extra::default(),
    }
}

/// Canonical usage → Converse usage (uncached input apart from the cache's).
pub fn encode_usage(u: &Usage) -> TokenUsage {
    let input = u
        .input_tokens
        .saturating_sub(u.cache_read_tokens.unwrap_or(0))
        .saturating_sub(u.cache_creation_tokens.unwrap_or(0));
    TokenUsage {
        input_tokens: input,
        output_tokens: u.output_tokens,
        total_tokens: u.input_tokens.saturating_add(u.output_tokens),
        cache_read_input_tokens: u.cache_read_tokens,
        cache_write_input_tokens: u.cache_creation_tokens,
    }
}

/// Encodes the canonical response as a Converse answer (`metrics.latencyMs`
/// is the gateway's own: 0, the upstream's latency being another protocol's).
pub fn encode(resp: &ChatResponse, _client_model: &str) -> Result<Value, TranslateError> {
    let mut content = Vec::new();
    for (j, block) in resp.content.iter().enumerate() {
        encode_block(block, &format!("content[{j}]"), &mut content)
            .map_err(|e| e.into_upstream(F))?;
    }
    let usage = resp.usage.as_ref().map(encode_usage).unwrap_or_default();
    let mut out = Map::new();
    out.insert(
        "output".into(),
        json!({"message": {"role": "assistant", "content": content}}),
    );
    out.insert(
        "stopReason".into(),
        json!(encode_stop_reason(resp.stop_reason.as_ref())),
    );
    out.insert(
        "usage".into(),
        serde_json::to_value(&usage).unwrap_or_default(),
    );
    out.insert("metrics".into(), json!({"latencyMs": 0}));
    if let Some(fields) = resp.extra.for_family(F) {
        deep_merge(&mut out, fields);
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let body = br#"{"output":{"message":{"role":"assistant","content":[
            {"reasoningContent":{"reasoningText":{"text":"hmm","signature":"sig"}}},
            {"text":"Hello"},
            {"toolUse":{"toolUseId":"t1","name":"f","input":{"a":1}}}]}},
            "stopReason":"tool_use",
            "usage":{"inputTokens":10,"outputTokens":5,"totalTokens":19,"cacheReadInputTokens":4},
            "metrics":{"latencyMs":12}}"#;
        let r = decode(body).unwrap();
        assert_eq!(r.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(r.usage.as_ref().unwrap().input_tokens, 14);
        assert_eq!(r.content.len(), 3);
        let out = encode(&r, "m").unwrap();
        assert_eq!(out["stopReason"], "tool_use");
        assert_eq!(
            out["usage"],
            json!({"inputTokens":10,"outputTokens":5,"totalTokens":19,"cacheReadInputTokens":4})
        );
        assert_eq!(
            out["output"]["message"]["content"][2],
            json!({"toolUse":{"toolUseId":"t1","name":"f","input":{"a":1}}})
        );
        assert_eq!(
            out["output"]["message"]["content"][0]["reasoningContent"]["reasoningText"]
                ["signature"],
            "sig"
        );
        // Decoded again, the same canonical response.
        let again = decode(&serde_json::to_vec(&out).unwrap()).unwrap();
        assert_eq!(again.content, r.content);
    }
}
