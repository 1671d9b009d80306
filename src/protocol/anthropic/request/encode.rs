//! Anthropic Messages request encoding: the canonical request → an upstream wire body.
//!
//! Hoists every system prompt into `system`, merges consecutive same-role
//! messages (Anthropic wants alternation), puts `tool_result` blocks first in
//! their user message, drops empty text blocks and unsigned thinking
//! (Anthropic rejects both), supplies `max_tokens` from the catalog when the
//! client gave none, and expresses `response_format` as Anthropic's
//! `output_config.format` where the model enforces schemas, else as an
//! appended system instruction (`structured.rs`).
//! Reasoning with a budget is written as `thinking: enabled`, without a
//! budget as `adaptive`, and an effort level as `output_config.effort`.

use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::{
    anthropic_effort, deep_merge, Block, ChatRequest, Extra, ImageSource, Reasoning, Role,
    TextBlock, Tool, ToolChoice,
};
use crate::protocol::anthropic::request::structured::{self, Shape};
use crate::protocol::anthropic::wire::{
    MessagesRequest, Metadata, ToolChoice as WireToolChoice, ToolDef,
};
use crate::protocol::common::json::{take_nested, to_value};
use crate::protocol::common::report::{self, Param};
use crate::protocol::common::{EncodeOptions, TranslateError};
use serde_json::{json, Map, Value};

const F: Family = Family::Anthropic;

/// Adds an IR object's Anthropic extra fields to its encoded wire value.
fn merged(mut value: Value, extra: &Extra) -> Value {
    if let (Value::Object(obj), Some(fields)) = (&mut value, extra.for_family(F)) {
        deep_merge(obj, fields);
    }
    value
}

fn with_cache(mut value: Value, cache_control: Option<&Value>) -> Value {
    if let (Value::Object(obj), Some(cc)) = (&mut value, cache_control) {
        obj.insert("cache_control".into(), cc.clone());
    }
    value
}

fn text_block(t: &TextBlock) -> Value {
    merged(
        with_cache(
            json!({"type": "text", "text": t.text}),
            t.cache_control.as_ref(),
        ),
        &t.extra,
    )
}

fn describe(block: &Block) -> String {
    match block {
        Block::Opaque(o) => format!("{} \"{}\"", o.origin, o.kind),
        other => other.kind().to_string(),
    }
}

/// Encodes one IR block as an Anthropic content block (`None`: dropped as harmless).
pub(crate) fn encode_block(block: &Block, param: &str) -> Result<Option<Value>, TranslateError> {
    let v = match block {
        Block::Text(t) => {
            if t.text.is_empty() && t.cache_control.is_none() {
                return Ok(None);
            }
            text_block(t)
        }
        Block::Image(img) => {
            let source = match &img.source {
                ImageSource::Base64 { media_type, data } => {
                    let data = crate::util::base64::to_standard(data);
                    json!({"type": "base64", "media_type": media_type, "data": data})
                }
                ImageSource::Url { url, .. } => json!({"type": "url", "url": url}),
            };
            merged(
                with_cache(
                    json!({"type": "image", "source": source}),
                    img.cache_control.as_ref(),
                ),
                &img.extra,
            )
        }
        Block::ToolCall(c) => {
            let Value::Object(_) = &c.arguments else {
                return Err(TranslateError::unsupported(
                    param.to_string(),
                    format!(
                        "the arguments of tool call \"{}\" are not a JSON object, which Anthropic tool_use input requires",
                        c.id
                    ),
                ));
            };
            merged(
                with_cache(
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}),
                    c.cache_control.as_ref(),
                ),
                &c.extra,
            )
        }
        Block::ToolResult(r) => {
            let mut obj = json!({"type": "tool_result", "tool_use_id": r.call_id});
            let mut content = Vec::new();
            for (j, inner) in r.content.iter().enumerate() {
                if matches!(
                    inner,
                    Block::ToolCall(_)
                        | Block::ToolResult(_)
                        | Block::Thinking(_)
                        | Block::RedactedThinking(_)
                ) {
                    return Err(TranslateError::unsupported(
                        format!("{param}.content[{j}]"),
                        format!("a tool result cannot contain {}", describe(inner)),
                    ));
                }
                if let Some(v) = encode_block(inner, &format!("{param}.content[{j}]"))? {
                    content.push(v);
                }
            }
            match r.content.as_slice() {
                [Block::Text(t)] if t.is_plain() => obj["content"] = json!(t.text),
                [] => {}
                _ => obj["content"] = Value::Array(content),
            }
            if let Some(e) = r.is_error {
                obj["is_error"] = json!(e);
            }
            merged(with_cache(obj, r.cache_control.as_ref()), &r.extra)
        }
        Block::Thinking(t) => {
            // Anthropic verifies thinking signatures: unsigned reasoning (from
            // OpenAI-compatible reasoning_content) would be rejected, so it is dropped.
            let Some(signature) = &t.signature else {
                return Ok(None);
            };
            merged(
                json!({"type": "thinking", "thinking": t.text, "signature": signature}),
                &t.extra,
            )
        }
        Block::RedactedThinking(r) => merged(
            json!({"type": "redacted_thinking", "data": r.data}),
            &r.extra,
        ),
        Block::Opaque(o) if o.origin == F => o.value.clone(),
        Block::Opaque(o) => {
            return Err(TranslateError::unsupported(
                param.to_string(),
                format!(
                    "{} content \"{}\" cannot be expressed in Anthropic Messages",
                    o.origin, o.kind
                ),
            ))
        }
    };
    Ok(Some(v))
}

/// One merged Anthropic turn while encoding.
struct Turn {
    role: Role,
    blocks: Vec<Value>,
    extra: Map<String, Value>,
    /// A single plain text block: written as a bare string.
    plain: bool,
}

/// Encodes the canonical request as an Anthropic request body; what Anthropic
/// cannot carry is recorded in `adj`.
pub fn encode(
    req: &ChatRequest,
    opts: &EncodeOptions<'_>,
    adj: &mut Adjustments,
) -> Result<Value, TranslateError> {
    let mut extra = req.extra.to_map(F);
    let s = &req.sampling;
    if let Some(n) = s.candidate_count.filter(|n| *n > 1) {
        return Err(TranslateError::unsupported(
            "n".to_string(),
            format!(
                "{n} answers were asked for (OpenAI n / Gemini candidateCount), but Anthropic Messages returns one answer per request"
            ),
        ));
    }
    let max_tokens = s.max_tokens.unwrap_or(opts.default_max_tokens);

    let client_native = extra
        .get("output_config")
        .is_some_and(|c| c.get("format").is_some())
        || extra.contains_key("output_format");
    let shape = structured::shape(req, client_native, opts.native_structured_output, adj);
    let system = encode_system(req, &shape);

    let messages = encode_messages(req)?;

    let mut tools = Vec::new();
    for (i, tool) in req.tools.iter().enumerate() {
        tools.push(encode_tool(tool, i)?);
    }
    structured::strict_tools(req, &mut tools, opts.native_structured_output, adj);
    let tool_choice = if tools.is_empty() {
        None
    } else {
        encode_tool_choice(
            req.tool_choice.as_ref(),
            req.parallel_tool_calls,
            &mut extra,
        )?
    };

    let metadata_extra = take_nested(&mut extra, "metadata");
    let metadata = (req.user.is_some() || !metadata_extra.is_empty()).then(|| Metadata {
        user_id: req.user.clone(),
        extra: metadata_extra,
    });

    let (mut thinking, effort) = match &req.reasoning {
        Some(r) => encode_reasoning(r, max_tokens, req, adj),
        None => (None, None),
    };
    let mut thinking_on = thinking
        .as_ref()
        .is_some_and(|t| t.get("type") != Some(&json!("disabled")));
    if thinking_on && !tool_loop_keeps_thinking(&messages) {
        // Anthropic rejects thinking when the assistant turn of a tool loop in
        // progress does not start with its (signed) thinking, which clients of
        // other protocols cannot send back: think again from the next turn.
        thinking = None;
        thinking_on = false;
        report::dropped(req, Param::Reasoning, adj);
    }
    let (temperature, top_p, top_k) = encode_sampling(req, thinking_on, adj);
    // `output_config.effort` and `.format`, beside whatever else the client put there.
    let format = match shape {
        Shape::Native(format) => Some(format),
        _ => None,
    };
    for (key, value) in [("effort", effort.map(|e| json!(e))), ("format", format)] {
        let Some(value) = value else { continue };
        let config = extra
            .entry("output_config")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(config) = config {
            config.insert(key.into(), value);
        }
    }

    let wire = MessagesRequest {
        model: opts.upstream_model.to_string(),
        messages: Vec::new(),
        system: None,
        max_tokens: Some(max_tokens),
        stop_sequences: (!s.stop.is_empty()).then(|| s.stop.clone()),
        stream: opts.stream.then_some(true),
        temperature,
        top_p,
        top_k,
        tools: None,
        tool_choice: None,
        thinking: None,
        metadata,
        extra: Map::new(),
    };
    let mut out = to_value(&wire)?;
    if let Value::Object(obj) = &mut out {
        obj.insert("messages".into(), Value::Array(messages));
        if let Some(system) = system {
            obj.insert("system".into(), system);
        }
        if !tools.is_empty() {
            obj.insert("tools".into(), Value::Array(tools));
        }
        if let Some(tc) = tool_choice {
            obj.insert("tool_choice".into(), tc);
        }
        if let Some(t) = thinking {
            obj.insert("thinking".into(), t);
        }
        deep_merge(obj, &extra);
    }
    Ok(out)
}

/// Temperature, top_p and top_k for the upstream. With thinking on,
/// Anthropic only accepts the default temperature and top_k, and top_p of at
/// least 0.95. Also reports the sampling settings Anthropic has no field for.
fn encode_sampling(
    req: &ChatRequest,
    thinking_on: bool,
    adj: &mut Adjustments,
) -> (Option<f64>, Option<f64>, Option<u64>) {
    let s = &req.sampling;
    let sampling = if thinking_on {
        if s.temperature.is_some() {
            report::dropped(req, Param::Temperature, adj);
        }
        if s.top_p.is_some_and(|p| p < 0.95) {
            report::dropped(req, Param::TopP, adj);
        }
        if s.top_k.is_some() {
            report::dropped(req, Param::TopK, adj);
        }
        (None, s.top_p.filter(|p| *p >= 0.95), None)
    } else {
        (s.temperature.map(|t| t.min(1.0)), s.top_p, s.top_k)
    };
    for (set, param) in [
        (s.seed.is_some(), Param::Seed),
        (s.presence_penalty.is_some(), Param::PresencePenalty),
        (s.frequency_penalty.is_some(), Param::FrequencyPenalty),
    ] {
        if set {
            report::dropped(req, param, adj);
        }
    }
    sampling
}

/// The `system` field: every system prompt (hoisted), then the
/// response-format instruction when that is the form structured output takes.
fn encode_system(req: &ChatRequest, shape: &Shape) -> Option<Value> {
    let mut system: Vec<&TextBlock> = req.system.iter().flat_map(|sp| sp.content.iter()).collect();
    if system.len() > 1 {
        // Anthropic refuses empty text blocks.
        system.retain(|t| !t.text.is_empty() || t.cache_control.is_some());
    }
    let instruction = match shape {
        Shape::Instruction(text) => Some(TextBlock::new(text.clone())),
        _ => None,
    };
    if let Some(i) = &instruction {
        system.push(i);
    }
    match system.as_slice() {
        [] => None,
        [only] if only.is_plain() => Some(json!(only.text)),
        blocks => Some(Value::Array(blocks.iter().map(|t| text_block(t)).collect())),
    }
}

/// The `messages` field: each message encoded, empties dropped, same-role
/// neighbours merged, tool results first in their message.
fn encode_messages(req: &ChatRequest) -> Result<Vec<Value>, TranslateError> {
    let mut messages: Vec<Turn> = Vec::new();
    for (i, msg) in req.messages.iter().enumerate() {
        let mut blocks = Vec::new();
        for (j, block) in msg.content.iter().enumerate() {
            // An OpenAI reasoning item carried in a signature (ir::signature)
            // is not Anthropic's to verify: left out like unsigned thinking.
            if matches!(block, Block::Thinking(t) if t.signature.as_deref().is_some_and(crate::ir::signature::is_reasoning_item))
            {
                continue;
            }
            if let Some(v) = encode_block(block, &format!("messages[{i}].content[{j}]"))? {
                blocks.push(v);
            }
        }
        if blocks.is_empty() {
            continue;
        }
        let plain = matches!(msg.content.as_slice(), [Block::Text(t)] if t.is_plain());
        let msg_extra = msg.extra.to_map(F);
        match messages.last_mut() {
            Some(prev) if prev.role == msg.role => {
                prev.blocks.extend(blocks);
                deep_merge(&mut prev.extra, &msg_extra);
                prev.plain = false;
            }
            _ => messages.push(Turn {
                role: msg.role,
                blocks,
                extra: msg_extra,
                plain,
            }),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(
            |Turn {
                 role,
                 blocks,
                 extra: msg_extra,
                 plain,
             }| {
                let role = match role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                let content = match blocks.as_slice() {
                    [only] if plain => only.get("text").cloned().unwrap_or(Value::Null),
                    _ => {
                        let (mut results, others): (Vec<Value>, Vec<Value>) = blocks
                            .into_iter()
                            .partition(|b| b.get("type") == Some(&json!("tool_result")));
                        results.extend(others);
                        Value::Array(results)
                    }
                };
                let mut m = json!({"role": role, "content": content});
                if let Value::Object(obj) = &mut m {
                    deep_merge(obj, &msg_extra);
                }
                m
            },
        )
        .collect();
    Ok(messages)
}

/// False when the last assistant turn calls tools without starting with a
/// thinking block (Anthropic then refuses a request with thinking enabled).
fn tool_loop_keeps_thinking(messages: &[Value]) -> bool {
    let Some(last) = messages
        .iter()
        .rev()
        .find(|m| m.get("role") == Some(&json!("assistant")))
    else {
        return true;
    };
    let Some(blocks) = last.get("content").and_then(Value::as_array) else {
        return true;
    };
    let calls_tools = blocks
        .iter()
        .any(|b| b.get("type") == Some(&json!("tool_use")));
    let starts_with_thinking = blocks
        .first()
        .and_then(|b| b.get("type"))
        .is_some_and(|t| t == &json!("thinking") || t == &json!("redacted_thinking"));
    !calls_tools || starts_with_thinking
}

fn encode_tool(tool: &Tool, i: usize) -> Result<Value, TranslateError> {
    match tool {
        Tool::Function(f) => {
            let def = ToolDef {
                kind: None,
                name: f.name.clone(),
                description: f.description.clone(),
                input_schema: Some(
                    f.parameters
                        .clone()
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                ),
                cache_control: f.cache_control.clone(),
                extra: Map::new(),
            };
            Ok(merged(to_value(&def)?, &f.extra))
        }
        Tool::Opaque(o) if o.origin == F => Ok(o.value.clone()),
        Tool::Opaque(o) => Err(TranslateError::unsupported(
            format!("tools[{i}]"),
            format!(
                "the {} tool type \"{}\" cannot be expressed in Anthropic Messages",
                o.origin, o.kind
            ),
        )),
    }
}

fn encode_tool_choice(
    choice: Option<&ToolChoice>,
    parallel: Option<bool>,
    extra: &mut Map<String, Value>,
) -> Result<Option<Value>, TranslateError> {
    let mut wire = match choice {
        None if parallel == Some(false) => WireToolChoice {
            kind: "auto".into(),
            ..WireToolChoice::default()
        },
        None => return Ok(None),
        Some(ToolChoice::Auto) => WireToolChoice {
            kind: "auto".into(),
            ..WireToolChoice::default()
        },
        Some(ToolChoice::None) => WireToolChoice {
            kind: "none".into(),
            ..WireToolChoice::default()
        },
        Some(ToolChoice::Required) => WireToolChoice {
            kind: "any".into(),
            ..WireToolChoice::default()
        },
        Some(ToolChoice::Tool(name)) => WireToolChoice {
            kind: "tool".into(),
            name: Some(name.clone()),
            ..WireToolChoice::default()
        },
        Some(ToolChoice::Allowed { required: true, names }) if names.len() == 1 => WireToolChoice {
            kind: "tool".into(),
            name: names.first().cloned(),
            ..WireToolChoice::default()
        },
        Some(ToolChoice::Allowed { .. }) => {
            return Err(TranslateError::unsupported(
                "tool_choice".to_string(),
                "restricting tool use to a subset of the tools (OpenAI allowed_tools, Gemini allowedFunctionNames) cannot be expressed in Anthropic Messages; send only the allowed tools instead",
            ))
        }
    };
    if wire.kind != "none" {
        wire.disable_parallel_tool_use = parallel.map(|p| !p);
    }
    wire.extra = take_nested(extra, "tool_choice");
    to_value(&wire).map(Some)
}

/// Anthropic `thinking` and `output_config.effort` for canonical reasoning
/// settings:
///
/// - off: `{"type": "disabled"}`;
/// - a fixed budget: `{"type": "enabled", "budget_tokens": N}` with N clamped
///   to Anthropic's 1024 <= N < `max_tokens` (thinking is dropped, and
///   reported, when `max_tokens` leaves no room for it);
/// - on without a budget (OpenAI `reasoning_effort`, Gemini `thinkingLevel`,
///   a dynamic Gemini budget, `includeThoughts`): `{"type": "adaptive"}`;
/// - an effort level goes to `output_config.effort` (`minimal` is `low`).
fn encode_reasoning(
    r: &Reasoning,
    max_tokens: u64,
    req: &ChatRequest,
    adj: &mut Adjustments,
) -> (Option<Value>, Option<&'static str>) {
    let extra = r.extra.to_map(F);
    let effort = r.effort.as_deref().and_then(anthropic_effort);
    if r.effort.is_some() && effort.is_none() && !r.is_off() {
        report::dropped(req, Param::Effort, adj);
    }
    let mut obj = Map::new();
    if r.is_off() {
        obj.insert("type".into(), json!("disabled"));
    } else if extra.contains_key("type") {
        // A newer Anthropic mode, kept verbatim.
        if let Some(b) = r.budget_tokens {
            obj.insert("budget_tokens".into(), json!(b));
        }
    } else if let Some(budget) = r.fixed_budget() {
        let max = i64::try_from(max_tokens).unwrap_or(i64::MAX);
        if max <= 1024 {
            report::dropped(req, Param::Reasoning, adj);
            return (None, effort);
        }
        obj.insert("type".into(), json!("enabled"));
        obj.insert("budget_tokens".into(), json!(budget.clamp(1024, max - 1)));
    } else if r.is_on() || r.include_thoughts == Some(true) {
        obj.insert("type".into(), json!("adaptive"));
    } else {
        // Only an effort level (or nothing): no thinking switch.
        return (None, effort);
    }
    deep_merge(&mut obj, &extra);
    (Some(Value::Object(obj)), effort)
}
