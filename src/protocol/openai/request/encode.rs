//! OpenAI chat request encoding: the canonical request → an upstream wire body.
//!
//! Puts system prompts back at their positions, turns every tool result into
//! a `tool` message (before any other content of that user turn), and drops
//! what chat-completions cannot carry when that is harmless (cache marks,
//! thinking signatures, redacted thinking); images inside tool results and
//! foreign opaque parts are refused.

use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::media::data_url;
use crate::ir::stream::arguments_text;
use crate::ir::{
    self, deep_merge, Block, ChatRequest, Extra, ImageSource, Message, Reasoning, ResponseFormat,
    Role, SystemPrompt, SystemRole, TextBlock, Tool, ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::common::json::{take_nested, to_value, StringOr};
use crate::protocol::common::report::{self, Param};
use crate::protocol::common::strict;
use crate::protocol::common::{EncodeOptions, TranslateError};
use crate::protocol::openai::wire::{
    ChatCompletionRequest, FunctionDef, JsonSchema, ResponseFormat as WireResponseFormat,
    StreamOptions, ToolDef,
};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

const F: Family = Family::OpenAi;

/// Encodes the canonical request as an OpenAI request body; what
/// chat-completions cannot carry is recorded in `adj`.
pub fn encode(
    req: &ChatRequest,
    opts: &EncodeOptions<'_>,
    adj: &mut Adjustments,
) -> Result<Value, TranslateError> {
    let mut extra = req.extra.to_map(F);
    let mut messages = Vec::new();
    let mut systems = req.system.iter().peekable();
    for (i, msg) in req.messages.iter().enumerate() {
        let mut pending = Vec::new();
        while let Some(sp) = systems.next_if(|sp| sp.position <= i) {
            pending.push(encode_system(sp));
        }
        let mut encoded = Vec::new();
        encode_message(msg, i, &mut encoded)?;
        // `tool` messages must follow the assistant's tool calls directly: a
        // system message placed before the results goes after them.
        let results = encoded
            .iter()
            .take_while(|m| m.get("role") == Some(&json!("tool")))
            .count();
        let mut encoded = encoded.into_iter();
        messages.extend(encoded.by_ref().take(results));
        messages.extend(pending);
        messages.extend(encoded);
    }
    messages.extend(systems.map(encode_system));

    let mut tools = Vec::new();
    for (i, tool) in req.tools.iter().enumerate() {
        tools.push(encode_tool(tool, i)?);
    }
    strict_tools(req, &mut tools, adj);

    let s = &req.sampling;
    let use_completion_field = extra.remove("max_completion_tokens").is_some();
    let (max_tokens, max_completion_tokens) = if use_completion_field {
        (None, s.max_tokens)
    } else {
        (s.max_tokens, None)
    };
    let reasoning_effort = req
        .reasoning
        .as_ref()
        .and_then(|r| encode_effort(r, req, adj));
    if s.top_k.is_some() {
        report::dropped(req, Param::TopK, adj);
    }
    // The end-user id goes to `user`, unless the client said it as `safety_identifier`.
    let user = req
        .user
        .as_deref()
        .filter(|u| {
            req.extra
                .get(F, "safety_identifier")
                .and_then(Value::as_str)
                != Some(*u)
        })
        .map(openai_user);

    let mut so_extra = take_nested(&mut extra, "stream_options");
    let stream_options = if opts.stream {
        // Always ask for usage so the gateway can meter the stream.
        so_extra.remove("include_usage");
        Some(StreamOptions {
            include_usage: Some(true),
            extra: so_extra,
        })
    } else {
        None
    };

    let wire = ChatCompletionRequest {
        model: opts.upstream_model.to_string(),
        messages: Vec::new(),
        temperature: s.temperature,
        top_p: s.top_p,
        max_tokens,
        max_completion_tokens,
        stream: opts.stream.then_some(true),
        stream_options,
        stop: (!s.stop.is_empty()).then(|| StringOr::List(s.stop.clone())),
        tools: (!tools.is_empty()).then_some(tools),
        tool_choice: req.tool_choice.as_ref().map(encode_tool_choice),
        parallel_tool_calls: req.parallel_tool_calls,
        response_format: req
            .response_format
            .as_ref()
            .map(|rf| encode_response_format(rf, req.source)),
        n: s.candidate_count,
        seed: s.seed,
        presence_penalty: s.presence_penalty,
        frequency_penalty: s.frequency_penalty,
        user,
        reasoning_effort,
        extra: Map::new(),
    };
    let mut out = to_value(&wire)?;
    if let Value::Object(obj) = &mut out {
        obj.insert("messages".into(), Value::Array(messages));
        deep_merge(obj, &extra);
    }
    Ok(out)
}

/// `reasoning_effort` for canonical reasoning settings: an effort level in
/// the levels every OpenAI reasoning model takes ([`ir::openai_effort`]:
/// `minimal` is `low`, `xhigh` and `max` are `high`); a fixed budget by the
/// thresholds of [`ir::budget_to_effort`]; reasoning on without either
/// (Anthropic `adaptive`, a dynamic Gemini budget) is `medium`. Reasoning
/// turned off is `none` only when the client said `none` itself (models
/// before gpt-5.1 refuse it); otherwise it is left out and reported.
pub(crate) fn encode_effort(
    r: &Reasoning,
    req: &ChatRequest,
    adj: &mut Adjustments,
) -> Option<String> {
    if r.is_off() {
        match r.effort.as_deref() {
            Some("none") => return Some("none".into()),
            // An effort for the answer with thinking off (Anthropic): no counterpart.
            Some(_) => report::dropped(req, Param::Effort, adj),
            None => {}
        }
        report::dropped(req, Param::Reasoning, adj);
        return None;
    }
    if let Some(effort) = r.effort.as_deref() {
        if let Some(level) = ir::openai_effort(effort) {
            return Some(level.into());
        }
        report::dropped(req, Param::Effort, adj);
    }
    if let Some(budget) = r.fixed_budget() {
        return Some(ir::budget_to_effort(budget).to_string());
    }
    r.is_on().then(|| "medium".to_string())
}

/// The longest end-user id OpenAI takes.
const MAX_USER_CHARS: usize = 64;

/// An end-user id OpenAI accepts: as is when short enough, else its SHA-256
/// in hex (64 characters; stable per user, as OpenAI suggests for long or
/// identifying ids such as Claude Code's `metadata.user_id`).
pub(crate) fn openai_user(user: &str) -> String {
    if user.chars().count() <= MAX_USER_CHARS {
        return user.to_string();
    }
    crate::util::hex::encode(&Sha256::digest(user.as_bytes()))
}

/// Adds an IR object's OpenAI extra fields to its encoded wire value.
fn merged(value: Value, extra: &Extra) -> Value {
    let mut value = value;
    if let (Value::Object(obj), Some(fields)) = (&mut value, extra.for_family(F)) {
        deep_merge(obj, fields);
    }
    value
}

fn encode_system(sp: &SystemPrompt) -> Value {
    let role = match sp.role {
        SystemRole::System => "system",
        SystemRole::Developer => "developer",
    };
    let content = if let [only] = sp.content.as_slice() {
        if only.extra.for_family(F).is_none() {
            json!(only.text)
        } else {
            json!([text_part(only)])
        }
    } else {
        Value::Array(sp.content.iter().map(text_part).collect())
    };
    merged(json!({"role": role, "content": content}), &sp.extra)
}

fn text_part(t: &TextBlock) -> Value {
    merged(json!({"type": "text", "text": t.text}), &t.extra)
}

fn unsupported_block(param: &str, block: &Block, where_: &str) -> TranslateError {
    TranslateError::unsupported(
        param.to_string(),
        format!(
            "{} content cannot be expressed in an OpenAI {where_}",
            describe(block)
        ),
    )
}

fn describe(block: &Block) -> String {
    match block {
        Block::Opaque(o) => format!("{} \"{}\"", o.origin, o.kind),
        other => other.kind().to_string(),
    }
}

/// Encodes one content block as an OpenAI content part (text, image, or an
/// OpenAI-native opaque part).
fn encode_part(block: &Block, param: &str, where_: &str) -> Result<Value, TranslateError> {
    match block {
        Block::Text(t) => Ok(text_part(t)),
        Block::Image(img) => {
            let url = match &img.source {
                ImageSource::Base64 { media_type, data } => {
                    data_url(media_type, &crate::util::base64::to_standard(data))
                }
                ImageSource::Url { url, .. } => url.clone(),
            };
            let mut image_url = json!({"url": url});
            if let Some(detail) = &img.detail {
                image_url["detail"] = json!(detail);
            }
            Ok(merged(
                json!({"type": "image_url", "image_url": image_url}),
                &img.extra,
            ))
        }
        Block::Opaque(o) if o.origin == F => Ok(o.value.clone()),
        other => Err(unsupported_block(param, other, where_)),
    }
}

/// Content value: a bare string for one text block without extras, else parts.
fn encode_content(blocks: &[&Block], param: &str, where_: &str) -> Result<Value, TranslateError> {
    if let [Block::Text(t)] = blocks {
        if t.extra.for_family(F).is_none() {
            return Ok(json!(t.text));
        }
    }
    let mut parts = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        parts.push(encode_part(
            block,
            &format!("{param}.content[{j}]"),
            where_,
        )?);
    }
    Ok(Value::Array(parts))
}

fn encode_message(msg: &Message, i: usize, out: &mut Vec<Value>) -> Result<(), TranslateError> {
    let param = format!("messages[{i}]");
    match msg.role {
        Role::User => {
            let mut rest = Vec::new();
            for (j, block) in msg.content.iter().enumerate() {
                match block {
                    Block::ToolResult(r) => {
                        out.push(encode_tool_result(r, &format!("{param}.content[{j}]"))?)
                    }
                    Block::Thinking(_) | Block::RedactedThinking(_) => {}
                    Block::ToolCall(_) => {
                        return Err(TranslateError::invalid(
                            format!("{param}.content[{j}]"),
                            "a user message cannot contain a tool call",
                        ))
                    }
                    other => rest.push(other),
                }
            }
            if !rest.is_empty() || msg.content.is_empty() {
                let content = if rest.is_empty() {
                    json!("")
                } else {
                    encode_content(&rest, &param, "user message")?
                };
                out.push(merged(
                    json!({"role": "user", "content": content}),
                    &msg.extra,
                ));
            }
        }
        Role::Assistant => {
            let mut reasoning: Option<String> = None;
            let mut content = Vec::new();
            let mut calls = Vec::new();
            for (j, block) in msg.content.iter().enumerate() {
                match block {
                    Block::Thinking(t) => {
                        reasoning.get_or_insert_with(String::new).push_str(&t.text)
                    }
                    Block::RedactedThinking(_) => {}
                    Block::ToolCall(c) => calls.push(encode_tool_call(c)),
                    Block::Text(_) => content.push(block),
                    Block::Opaque(o) if o.origin == F => content.push(block),
                    other => {
                        return Err(unsupported_block(
                            &format!("{param}.content[{j}]"),
                            other,
                            "assistant message",
                        ))
                    }
                }
            }
            let mut m = Map::new();
            m.insert("role".into(), json!("assistant"));
            let content = if content.is_empty() {
                if calls.is_empty() {
                    json!("")
                } else {
                    Value::Null
                }
            } else {
                encode_content(&content, &param, "assistant message")?
            };
            m.insert("content".into(), content);
            if let Some(r) = reasoning {
                m.insert("reasoning_content".into(), json!(r));
            }
            if !calls.is_empty() {
                m.insert("tool_calls".into(), Value::Array(calls));
            }
            out.push(merged(Value::Object(m), &msg.extra));
        }
    }
    Ok(())
}

fn encode_tool_call(c: &ToolCall) -> Value {
    merged(
        json!({
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": arguments_text(&c.arguments)},
        }),
        &c.extra,
    )
}

fn encode_tool_result(r: &ToolResult, param: &str) -> Result<Value, TranslateError> {
    let blocks: Vec<&Block> = r.content.iter().collect();
    for (j, block) in blocks.iter().enumerate() {
        if !matches!(block, Block::Text(_)) && !matches!(block, Block::Opaque(o) if o.origin == F) {
            return Err(TranslateError::unsupported(
                format!("{param}.content[{j}]"),
                format!(
                    "a tool result containing {} cannot be expressed in OpenAI (tool messages carry text only)",
                    describe(block)
                ),
            ));
        }
    }
    let content = if blocks.is_empty() {
        json!("")
    } else {
        encode_content(&blocks, param, "tool message")?
    };
    Ok(merged(
        json!({"role": "tool", "tool_call_id": r.call_id, "content": content}),
        &r.extra,
    ))
}

fn encode_tool(tool: &Tool, i: usize) -> Result<ToolDef, TranslateError> {
    match tool {
        Tool::Function(f) => {
            let mut extra = f.extra.to_map(F);
            let function_extra = take_nested(&mut extra, "function");
            Ok(ToolDef {
                kind: "function".into(),
                function: Some(FunctionDef {
                    name: f.name.clone(),
                    description: f.description.clone(),
                    parameters: f.parameters.clone(),
                    strict: f.strict,
                    extra: function_extra,
                }),
                extra,
            })
        }
        Tool::Opaque(o) if o.origin == F => {
            crate::protocol::common::json::from_value(o.value.clone(), "tool")
        }
        Tool::Opaque(o) => Err(TranslateError::unsupported(
            format!("tools[{i}]"),
            format!(
                "the {} tool type \"{}\" cannot be expressed in OpenAI chat-completions",
                o.origin, o.kind
            ),
        )),
    }
}

fn encode_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        ToolChoice::Allowed { required, names } => json!({
            "type": "allowed_tools",
            "allowed_tools": {
                "mode": if *required { "required" } else { "auto" },
                "tools": names.iter().map(|n| json!({"type": "function", "function": {"name": n}})).collect::<Vec<_>>(),
            }
        }),
    }
}

/// Strict function tools: another family's strict flag only where the
/// schema meets OpenAI's rules (`common::strict`), reported when lowered.
fn strict_tools(req: &ChatRequest, tools: &mut [ToolDef], adj: &mut Adjustments) {
    let mut lowered = false;
    for (tool, def) in req.tools.iter().zip(tools.iter_mut()) {
        if let (Tool::Function(f), Some(function)) = (tool, def.function.as_mut()) {
            let params = f.parameters.as_ref();
            function.strict = strict::openai_strict(req.source, f.strict, params);
            lowered |= strict::lowered(req.source, f.strict, params);
        }
    }
    if lowered {
        report::dropped(req, Param::Strict, adj);
    }
}

/// `response_format`; a schema another family enforces (Anthropic
/// `output_config.format`, Gemini `responseSchema`) is asked strict where it
/// meets OpenAI's rules.
fn encode_response_format(rf: &ResponseFormat, source: Option<Family>) -> WireResponseFormat {
    match rf {
        ResponseFormat::Text => WireResponseFormat {
            kind: "text".into(),
            ..WireResponseFormat::default()
        },
        ResponseFormat::JsonObject => WireResponseFormat {
            kind: "json_object".into(),
            ..WireResponseFormat::default()
        },
        ResponseFormat::JsonSchema(js) => WireResponseFormat {
            kind: "json_schema".into(),
            json_schema: Some(JsonSchema {
                name: js.name.clone().unwrap_or_else(|| "response".into()),
                description: js.description.clone(),
                schema: Some(js.schema.clone()),
                strict: strict::openai_strict(source, js.strict.or(Some(true)), Some(&js.schema))
                    .filter(|s| *s || js.strict.is_some()),
                extra: Map::new(),
            }),
            extra: Map::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::openai_user;

    #[test]
    fn long_user_ids_are_hashed_to_what_openai_takes() {
        assert_eq!(openai_user("u-42"), "u-42");
        let long = format!("user_{}_account_x_session_y", "a".repeat(64));
        let hashed = openai_user(&long);
        assert_eq!(hashed.len(), 64);
        assert!(hashed.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(hashed, openai_user(&long));
        assert_ne!(hashed, openai_user(&format!("{long}2")));
    }
}
