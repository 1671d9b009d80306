//! What a cross-protocol translation could not carry, named the way the client spelled it.
//!
//! Encoders call [`dropped`] for each canonical setting the target protocol has
//! no counterpart for, and [`foreign_extras`] once for the unknown fields of
//! another family that ride along in the canonical request; both record into
//! the request's [`Adjustments`] (docs/api.md "Adapt or refuse": nothing is silently lost).

use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::{Block, ChatRequest, Extra, ResponseFormat, Tool};
use serde_json::{Map, Value};

/// A canonical setting, for naming it in the client's own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param {
    User,
    Reasoning,
    Effort,
    TopK,
    Seed,
    PresencePenalty,
    FrequencyPenalty,
    ParallelToolCalls,
    Temperature,
    TopP,
    Strict,
    CacheControl,
    Stop,
    ResponseFormat,
    ToolChoice,
}

/// The client's name for `param` (the request's source protocol decides).
pub(crate) fn client_name(source: Option<Family>, param: Param) -> &'static str {
    use Family::{Anthropic, Bedrock, Gemini, OpenAi, Responses};
    match (param, source.unwrap_or(OpenAi)) {
        (Param::Reasoning | Param::Effort, Bedrock) => "additionalModelRequestFields.thinking",
        (Param::TopK, Bedrock) => "additionalModelRequestFields.top_k",
        (Param::Temperature, Bedrock) => "inferenceConfig.temperature",
        (Param::TopP, Bedrock) => "inferenceConfig.topP",
        (Param::Stop, Bedrock) => "inferenceConfig.stopSequences",
        (Param::Strict, Bedrock) => "toolConfig.tools[].toolSpec.strict",
        (Param::CacheControl, Bedrock) => "cachePoint",
        (Param::ToolChoice, Bedrock) => "toolConfig.toolChoice",
        (Param::ToolChoice, Gemini) => "toolConfig.functionCallingConfig.mode",
        (Param::ToolChoice, _) => "tool_choice",
        (Param::User, Anthropic) => "metadata.user_id",
        (Param::User, _) => "user",
        (Param::Reasoning, Anthropic) => "thinking",
        (Param::Reasoning, Gemini) => "generationConfig.thinkingConfig",
        (Param::Reasoning | Param::Effort, OpenAi) => "reasoning_effort",
        (Param::Reasoning, Responses) => "reasoning",
        (Param::Effort, Responses) => "reasoning.effort",
        (Param::Effort, Anthropic) => "output_config.effort",
        (Param::Effort, Gemini) => "generationConfig.thinkingConfig.thinkingLevel",
        (Param::TopK, Gemini) => "generationConfig.topK",
        (Param::TopK, _) => "top_k",
        (Param::Seed, Gemini) => "generationConfig.seed",
        (Param::Seed, _) => "seed",
        (Param::PresencePenalty, Gemini) => "generationConfig.presencePenalty",
        (Param::PresencePenalty, _) => "presence_penalty",
        (Param::FrequencyPenalty, Gemini) => "generationConfig.frequencyPenalty",
        (Param::FrequencyPenalty, _) => "frequency_penalty",
        (Param::ParallelToolCalls, Anthropic) => "tool_choice.disable_parallel_tool_use",
        (Param::ParallelToolCalls, _) => "parallel_tool_calls",
        (Param::Temperature, Gemini) => "generationConfig.temperature",
        (Param::Temperature, _) => "temperature",
        (Param::TopP, Gemini) => "generationConfig.topP",
        (Param::TopP, _) => "top_p",
        (Param::Strict, Responses | Anthropic) => "tools[].strict",
        (Param::Strict, _) => "tools[].function.strict",
        (Param::CacheControl, _) => "cache_control",
        (Param::Stop, Anthropic) => "stop_sequences",
        (Param::Stop, Gemini) => "generationConfig.stopSequences",
        (Param::Stop, _) => "stop",
        (Param::ResponseFormat, Anthropic) => "output_config.format",
        (Param::ResponseFormat, Gemini) => "generationConfig.responseSchema",
        (Param::ResponseFormat, Responses) => "text.format",
        (Param::ResponseFormat, _) => "response_format",
    }
}

/// Records that the target cannot carry `param`.
pub(crate) fn dropped(req: &ChatRequest, param: Param, adj: &mut Adjustments) {
    // An OpenAI client may have named its end user `safety_identifier` only.
    let said_safety_identifier = param == Param::User
        && matches!(req.source, Some(Family::OpenAi | Family::Responses))
        && req
            .extra
            .for_family(req.source.unwrap_or(Family::OpenAi))
            .and_then(|m| m.get("safety_identifier"))
            .and_then(Value::as_str)
            .is_some_and(|s| Some(s) == req.user.as_deref());
    if said_safety_identifier {
        adj.drop_field("safety_identifier");
        return;
    }
    adj.drop_field(client_name(req.source, param));
}

/// Wire objects whose unknown fields the decoders nest under their own key
/// (`generationConfig.responseModalities`, `function.x`, …): reported one level down.
const CONTAINERS: &[&str] = &[
    "generationConfig",
    "generation_config",
    "toolConfig",
    "tool_config",
    "functionCallingConfig",
    "function_calling_config",
    "thinkingConfig",
    "thinking_config",
    "stream_options",
    "response_format",
    "json_schema",
    "metadata",
    "tool_choice",
    "output_config",
    "function",
    "image_url",
    "source",
    "functionCall",
    "functionResponse",
    "inlineData",
    "fileData",
    "text",
    "inferenceConfig",
    "additionalModelRequestFields",
    "toolSpec",
    "toolUse",
    "toolResult",
    "image",
    "reasoningContent",
];

/// Fields the decoders keep in `extra` as notes for their own encoder, not
/// as client fields another protocol loses (full dotted paths).
fn is_note(origin: Family, path: &str, value: &Value, req: &ChatRequest) -> bool {
    match origin {
        // The client's choice of max-tokens field name; the value is in the IR.
        Family::OpenAi => {
            matches!(path, "max_completion_tokens" | "max_tokens")
                || (path == "safety_identifier" && value.as_str() == req.user.as_deref())
        }
        // Structured outputs are read into `response_format`; the effort into
        // `reasoning`; `type: custom` is what a tool without a type is.
        Family::Anthropic => {
            matches!(
                path,
                "output_config.format" | "output_format" | "output_config.effort"
            ) || (path == "tools[].type" && value.as_str() == Some("custom"))
        }
        Family::Gemini => {
            // Gemini marks: the legacy `function` role, `thought: false`,
            // a `functionResponse.response` kept as written (its text is in
            // the IR), and thought signatures (reasoning state only Gemini
            // can verify);
            // JSON Schemas and the thinking level, read into the IR.
            path.ends_with(".role")
                || path.ends_with(".thought")
                || path.ends_with("functionResponse.response")
                || path.ends_with("thoughtSignature")
                || path.ends_with("thought_signature")
                || path == "tools[].parametersJsonSchema"
                || path == "generationConfig.thinkingConfig.thinkingLevel"
                || (path == "generationConfig.responseJsonSchema"
                    && matches!(req.response_format, Some(ResponseFormat::JsonSchema(_))))
        }
        // Converse: nothing is a note but an empty value.
        Family::Bedrock => value.is_null(),
        // Settings for a Responses upstream only (the gateway keeps no state
        // and asks for encrypted reasoning itself), the summary wish (read into
        // `reasoning.include_thoughts`), item bookkeeping (ids, status, phase,
        // part types), what a custom tool is (a function of one string), and
        // fields that say nothing (null, empty, background off).
        Family::Responses => {
            value.is_null()
                || value.as_object().is_some_and(serde_json::Map::is_empty)
                || value.as_array().is_some_and(Vec::is_empty)
                || (path == "background" && value == &Value::Bool(false))
                || matches!(
                    path,
                    "store"
                        | "include"
                        | "stream_options"
                        | "reasoning.summary"
                        | "reasoning.generate_summary"
                )
                || (path == "safety_identifier" && value.as_str() == req.user.as_deref())
                || (path.starts_with("input[]")
                    && (path.ends_with(".id")
                        || path.ends_with(".status")
                        || path.ends_with(".phase")
                        || path.ends_with(".type")
                        || path.ends_with(".annotations")
                        || path.ends_with(".logprobs")))
                || path == "system.id"
                || path == "system.type"
                || path == "system[].type"
                || (path == "tools[].type" && value.as_str() == Some("custom"))
                || (path == "tools[].format"
                    && value.get("type").and_then(Value::as_str) == Some("text"))
        }
    }
}

fn report_map(
    prefix: &str,
    origin: Family,
    fields: &Map<String, Value>,
    req: &ChatRequest,
    adj: &mut Adjustments,
) {
    for (key, value) in fields {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Object(inner) if CONTAINERS.contains(&key.as_str()) && !inner.is_empty() => {
                report_map(&path, origin, inner, req, adj);
            }
            _ if is_note(origin, &path, value, req) => {}
            _ => adj.drop_field(path),
        }
    }
}

fn report_extra(
    prefix: &str,
    extra: &Extra,
    target: Family,
    req: &ChatRequest,
    adj: &mut Adjustments,
) {
    match extra.origin() {
        Some(origin) if origin != target => report_map(prefix, origin, extra.fields(), req, adj),
        _ => {}
    }
}

/// The wire names of a message list and of a message's content in `family`.
fn names(family: Family) -> (&'static str, &'static str) {
    match family {
        Family::Gemini => ("contents[]", "parts[]"),
        Family::Responses => ("input[]", "content[]"),
        _ => ("messages[]", "content[]"),
    }
}

/// Reports the unknown fields of another family that the canonical request
/// carries (top level, system prompts, messages, content blocks, tools) and
/// that an encoder for `target` leaves out, plus `cache_control` marks when
/// the target is not Anthropic.
pub(crate) fn foreign_extras(req: &ChatRequest, target: Family, adj: &mut Adjustments) {
    report_extra("", &req.extra, target, req, adj);
    let source = req.source.or_else(|| req.extra.origin());
    let (messages, content) = names(source.unwrap_or(target));
    let mut cache = false;
    for sp in &req.system {
        report_extra("system", &sp.extra, target, req, adj);
        for t in &sp.content {
            cache |= t.cache_control.is_some();
            report_extra("system[]", &t.extra, target, req, adj);
        }
    }
    for msg in &req.messages {
        report_extra(messages, &msg.extra, target, req, adj);
        let prefix = format!("{messages}.{content}");
        for block in &msg.content {
            cache |= report_block(&prefix, block, target, req, adj);
        }
    }
    if let Some(r) = &req.reasoning {
        report_extra(
            client_name(req.source, Param::Reasoning),
            &r.extra,
            target,
            req,
            adj,
        );
    }
    for tool in &req.tools {
        if let Tool::Function(f) = tool {
            cache |= f.cache_control.is_some();
            report_extra("tools[]", &f.extra, target, req, adj);
        }
    }
    // Anthropic and Bedrock (`cachePoint`) carry cache marks.
    if cache && !matches!(target, Family::Anthropic | Family::Bedrock) {
        dropped(req, Param::CacheControl, adj);
    }
}

/// Reports one block's foreign fields; true when it carries a cache mark.
fn report_block(
    prefix: &str,
    block: &Block,
    target: Family,
    req: &ChatRequest,
    adj: &mut Adjustments,
) -> bool {
    match block {
        Block::Text(t) => {
            report_extra(prefix, &t.extra, target, req, adj);
            t.cache_control.is_some()
        }
        Block::Image(i) => {
            report_extra(prefix, &i.extra, target, req, adj);
            i.cache_control.is_some()
        }
        Block::ToolCall(c) => {
            report_extra(prefix, &c.extra, target, req, adj);
            c.cache_control.is_some()
        }
        Block::ToolResult(r) => {
            report_extra(prefix, &r.extra, target, req, adj);
            let mut cache = r.cache_control.is_some();
            for inner in &r.content {
                cache |= report_block(prefix, inner, target, req, adj);
            }
            cache
        }
        Block::Thinking(_) | Block::RedactedThinking(_) | Block::Opaque(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Message, Role, TextBlock};
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn names_follow_the_client() {
        assert_eq!(
            client_name(Some(Family::Anthropic), Param::User),
            "metadata.user_id"
        );
        assert_eq!(client_name(Some(Family::OpenAi), Param::User), "user");
        assert_eq!(
            client_name(Some(Family::Gemini), Param::Reasoning),
            "generationConfig.thinkingConfig"
        );
        assert_eq!(
            client_name(Some(Family::Anthropic), Param::Effort),
            "output_config.effort"
        );
    }

    #[test]
    fn foreign_fields_are_reported_by_their_client_path() {
        let mut text = TextBlock::new("hi");
        text.cache_control = Some(json!({"type": "ephemeral"}));
        text.extra = Extra::new(Family::Anthropic, map(json!({"citations": []})));
        let req = ChatRequest {
            source: Some(Family::Anthropic),
            messages: vec![Message::new(Role::User, vec![Block::Text(text)])],
            extra: Extra::new(
                Family::Anthropic,
                map(json!({
                    "context_management": {"edits": []},
                    "output_config": {"effort": "high", "format": {"type": "json_schema"}, "task_budget": 5},
                    "metadata": {"tenant": "x"}
                })),
            ),
            ..ChatRequest::default()
        };
        let mut adj = Adjustments::default();
        foreign_extras(&req, Family::OpenAi, &mut adj);
        assert_eq!(
            adj.dropped,
            [
                "context_management",
                "metadata.tenant",
                "output_config.task_budget",
                "messages[].content[].citations",
                "cache_control"
            ]
        );
        // The same family carries them all.
        let mut same = Adjustments::default();
        foreign_extras(&req, Family::Anthropic, &mut same);
        assert!(same.is_empty(), "{same:?}");
    }

    #[test]
    fn responses_bookkeeping_is_not_reported() {
        let req = ChatRequest {
            source: Some(Family::Responses),
            extra: Extra::new(
                Family::Responses,
                map(
                    json!({"store": false, "include": ["reasoning.encrypted_content"],
                    "background": false, "conversation": null, "metadata": {},
                    "text": {"verbosity": "low"}, "truncation": "auto"}),
                ),
            ),
            ..ChatRequest::default()
        };
        let mut adj = Adjustments::default();
        foreign_extras(&req, Family::Anthropic, &mut adj);
        assert_eq!(adj.dropped, ["text.verbosity", "truncation"]);
    }

    #[test]
    fn decoder_notes_are_not_reported() {
        let req = ChatRequest {
            source: Some(Family::OpenAi),
            user: Some("u1".into()),
            extra: Extra::new(
                Family::OpenAi,
                map(
                    json!({"max_completion_tokens": 10, "safety_identifier": "u1", "logit_bias": {}}),
                ),
            ),
            ..ChatRequest::default()
        };
        let mut adj = Adjustments::default();
        foreign_extras(&req, Family::Gemini, &mut adj);
        assert_eq!(adj.dropped, ["logit_bias"]);

        let custom = |kind: &str| ChatRequest {
            source: Some(Family::Anthropic),
            tools: vec![Tool::Function(crate::ir::FunctionTool {
                name: "f".into(),
                extra: Extra::new(Family::Anthropic, map(json!({"type": kind}))),
                ..crate::ir::FunctionTool::default()
            })],
            ..ChatRequest::default()
        };
        let mut adj = Adjustments::default();
        foreign_extras(&custom("custom"), Family::OpenAi, &mut adj);
        assert!(adj.is_empty(), "{adj:?}");
        foreign_extras(&custom("newer"), Family::OpenAi, &mut adj);
        assert_eq!(adj.dropped, ["tools[].type"]);
    }
}
