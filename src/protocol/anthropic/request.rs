//! Anthropic Messages request codec: wire JSON ⇄ canonical request.
//!
//! - `system` (string or text blocks) becomes one [`SystemPrompt`], and each
//!   `{"role":"system"}` message inside `messages` (Claude Code's
//!   mid-conversation system prompts) one more at its position; content
//!   blocks map one to one onto IR blocks (server-tool and document blocks
//!   become opaque blocks forwarded to Anthropic upstreams only).
//! - `thinking` (`enabled` + budget, `adaptive`, `disabled`) and
//!   `output_config.effort` become the canonical [`Reasoning`]; encoding
//!   writes a budget as `enabled`, reasoning without a budget as `adaptive`,
//!   and an effort level as `output_config.effort`.
//! - Encoding hoists every system prompt into `system`, merges consecutive
//!   same-role messages (Anthropic wants alternation), puts `tool_result`
//!   blocks first in their user message, drops empty text blocks and
//!   unsigned thinking (Anthropic rejects both), supplies `max_tokens` from
//!   the catalog when the client gave none, and expresses `response_format`
//!   as an appended system instruction (works with every Anthropic-compatible
//!   upstream; Anthropic's own `output_config.format` is only used when the
//!   client itself sent it).

use super::wire::{
    ContentBlock, Message as WireMessage, MessagesRequest, Metadata, Source, Thinking,
    ToolChoice as WireToolChoice, ToolDef,
};
use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::{
    anthropic_effort, deep_merge, Block, ChatRequest, Extra, FunctionTool, ImageBlock, ImageSource,
    JsonSchemaFormat, Message, Opaque, Reasoning, RedactedThinkingBlock, ResponseFormat, Role,
    SystemPrompt, SystemRole, TextBlock, ThinkingBlock, Tool, ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::common::json::{nested, parse_request, take_nested, to_value, StringOr};
use crate::protocol::common::report::{self, Param};
use crate::protocol::common::{DecodeContext, EncodeOptions, TranslateError};
use serde_json::{json, Map, Value};

const F: Family = Family::Anthropic;

/// Decodes an Anthropic request body.
pub fn decode(body: &[u8], ctx: &DecodeContext<'_>) -> Result<ChatRequest, TranslateError> {
    let wire: MessagesRequest = parse_request(F, body)?;
    from_wire(wire, ctx)
}

/// Converts a parsed Anthropic request into the canonical request.
pub fn from_wire(
    wire: MessagesRequest,
    ctx: &DecodeContext<'_>,
) -> Result<ChatRequest, TranslateError> {
    let mut extra = wire.extra;
    let mut req = ChatRequest {
        model: ctx.model.map_or(wire.model, str::to_string),
        ..ChatRequest::default()
    };

    if let Some(system) = wire.system {
        req.system.push(SystemPrompt {
            role: SystemRole::System,
            content: decode_system(system, "system")?,
            position: 0,
            extra: Extra::default(),
        });
    }

    for (i, msg) in wire.messages.into_iter().enumerate() {
        if msg.role == "system" {
            // A system message inside the conversation (Claude Code's
            // mid-conversation system prompts): kept in place.
            let content = decode_system(msg.content, &format!("messages[{i}].content"))?;
            if !content.is_empty() {
                req.system.push(SystemPrompt {
                    role: SystemRole::System,
                    content,
                    position: req.messages.len(),
                    extra: Extra::new(F, msg.extra),
                });
            }
            continue;
        }
        req.messages.push(decode_message(msg, i)?);
    }
    req.resolve_tool_result_names();

    for (i, tool) in wire.tools.unwrap_or_default().into_iter().enumerate() {
        req.tools.push(decode_tool(tool, i)?);
    }
    if let Some(choice) = wire.tool_choice {
        let (tc, parallel) = decode_tool_choice(choice, &mut extra)?;
        req.tool_choice = Some(tc);
        req.parallel_tool_calls = parallel;
    }
    if let Some(thinking) = wire.thinking {
        req.reasoning = Some(decode_thinking(thinking));
    }
    if let Some(effort) = take_effort(&mut extra) {
        req.reasoning.get_or_insert_with(Reasoning::default).effort = Some(effort);
    }
    if let Some(Metadata {
        user_id,
        extra: md_extra,
    }) = wire.metadata
    {
        req.user = user_id;
        if !md_extra.is_empty() {
            extra.insert("metadata".into(), Value::Object(md_extra));
        }
    }

    // Structured outputs (`output_config.format`, beta `output_format`): read
    // into the IR, kept verbatim in the extra fields for Anthropic upstreams.
    let format = extra
        .get("output_config")
        .and_then(|c| c.get("format"))
        .or_else(|| extra.get("output_format"));
    if let Some(format) = format {
        if format.get("type").and_then(Value::as_str) == Some("json_schema") {
            req.response_format = Some(ResponseFormat::JsonSchema(JsonSchemaFormat {
                schema: format.get("schema").cloned().unwrap_or_else(|| json!({})),
                ..JsonSchemaFormat::default()
            }));
        }
    }

    let s = &mut req.sampling;
    s.max_tokens = wire.max_tokens;
    s.stop = wire.stop_sequences.unwrap_or_default();
    s.temperature = wire.temperature;
    s.top_p = wire.top_p;
    s.top_k = wire.top_k;
    req.stream = wire.stream.unwrap_or(false) || ctx.stream;
    req.extra = Extra::new(F, extra);
    req.source = Some(F);
    Ok(req)
}

/// Takes `output_config.effort` (a string) out of the unknown fields, lowercase;
/// an `output_config` left empty goes too.
fn take_effort(extra: &mut Map<String, Value>) -> Option<String> {
    let config = extra.get_mut("output_config")?.as_object_mut()?;
    let effort = config.get("effort")?.as_str()?.to_ascii_lowercase();
    config.remove("effort");
    if config.is_empty() {
        extra.remove("output_config");
    }
    Some(effort)
}

/// A system prompt (top-level `system` or a `system` message's content): text blocks only.
fn decode_system(
    content: StringOr<ContentBlock>,
    param: &str,
) -> Result<Vec<TextBlock>, TranslateError> {
    match content {
        StringOr::String(text) => Ok(vec![TextBlock::new(text)]),
        StringOr::List(blocks) => {
            let mut out = Vec::new();
            for (j, block) in blocks.into_iter().enumerate() {
                match decode_block(block, &format!("{param}[{j}]"))? {
                    Block::Text(t) => out.push(t),
                    other => {
                        return Err(TranslateError::invalid(
                            format!("{param}[{j}]"),
                            format!("system blocks must be text, not {}", other.kind()),
                        ))
                    }
                }
            }
            Ok(out)
        }
    }
}

fn decode_message(msg: WireMessage, i: usize) -> Result<Message, TranslateError> {
    let role = match msg.role.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            return Err(TranslateError::invalid(
                format!("messages[{i}].role"),
                format!("unknown message role \"{other}\" (expected user, assistant or system)"),
            ))
        }
    };
    let content = decode_content(msg.content, &format!("messages[{i}]"))?;
    Ok(Message {
        role,
        content,
        extra: Extra::new(F, msg.extra),
    })
}

fn decode_content(
    content: StringOr<ContentBlock>,
    param: &str,
) -> Result<Vec<Block>, TranslateError> {
    match content {
        StringOr::String(text) => Ok(vec![Block::text(text)]),
        StringOr::List(blocks) => blocks
            .into_iter()
            .enumerate()
            .map(|(j, b)| decode_block(b, &format!("{param}.content[{j}]")))
            .collect(),
    }
}

fn missing(param: &str, kind: &str, field: &str) -> TranslateError {
    TranslateError::invalid(
        param.to_string(),
        format!("a \"{kind}\" block is missing its \"{field}\" field"),
    )
}

/// Decodes one Anthropic content block (request or response side).
pub(crate) fn decode_block(b: ContentBlock, param: &str) -> Result<Block, TranslateError> {
    let kind = b.kind.clone();
    match kind.as_str() {
        "text" => {
            let Some(text) = b.text else {
                return Err(missing(param, &kind, "text"));
            };
            Ok(Block::Text(TextBlock {
                text,
                cache_control: b.cache_control,
                signature: None,
                extra: Extra::new(F, b.extra),
            }))
        }
        "image" => {
            let Some(source) = b.source.clone() else {
                return Err(missing(param, &kind, "source"));
            };
            let Source {
                kind: source_kind,
                media_type,
                data,
                url,
                extra: source_extra,
            } = source;
            let src = match (source_kind.as_str(), media_type, data, url) {
                ("base64", Some(media_type), Some(data), _) => {
                    ImageSource::Base64 { media_type, data }
                }
                ("url", _, _, Some(url)) => ImageSource::Url {
                    url,
                    media_type: None,
                },
                ("base64" | "url", ..) => {
                    return Err(TranslateError::invalid(
                        format!("{param}.source"),
                        format!("an image source of type \"{source_kind}\" is incomplete"),
                    ))
                }
                _ => return opaque(b),
            };
            let mut extra = b.extra;
            extra.extend(nested("source", source_extra));
            Ok(Block::Image(ImageBlock {
                source: src,
                detail: None,
                cache_control: b.cache_control,
                extra: Extra::new(F, extra),
            }))
        }
        "tool_use" => {
            let (Some(id), Some(name)) = (b.id, b.name) else {
                return Err(missing(param, &kind, "id/name"));
            };
            Ok(Block::ToolCall(ToolCall {
                id,
                name,
                arguments: b.input.unwrap_or_else(|| json!({})),
                signature: None,
                cache_control: b.cache_control,
                extra: Extra::new(F, b.extra),
            }))
        }
        "tool_result" => {
            let Some(call_id) = b.tool_use_id else {
                return Err(missing(param, &kind, "tool_use_id"));
            };
            let content = match b.content {
                None => Vec::new(),
                Some(c) => decode_content(c, param)?,
            };
            Ok(Block::ToolResult(ToolResult {
                call_id,
                name: None,
                content,
                is_error: b.is_error,
                cache_control: b.cache_control,
                extra: Extra::new(F, b.extra),
            }))
        }
        "thinking" => {
            let Some(text) = b.thinking else {
                return Err(missing(param, &kind, "thinking"));
            };
            Ok(Block::Thinking(ThinkingBlock {
                text,
                signature: b.signature.filter(|s| !s.is_empty()),
                extra: Extra::new(F, b.extra),
            }))
        }
        "redacted_thinking" => {
            let Some(data) = b.data else {
                return Err(missing(param, &kind, "data"));
            };
            Ok(Block::RedactedThinking(RedactedThinkingBlock {
                data,
                extra: Extra::new(F, b.extra),
            }))
        }
        _ => opaque(b),
    }
}

fn opaque(b: ContentBlock) -> Result<Block, TranslateError> {
    Ok(Block::Opaque(Opaque {
        origin: F,
        kind: b.kind.clone(),
        value: to_value(&b)?,
    }))
}

fn decode_tool(tool: ToolDef, i: usize) -> Result<Tool, TranslateError> {
    match tool.kind.as_deref() {
        None | Some("custom") => {
            if tool.name.is_empty() {
                return Err(TranslateError::invalid(
                    format!("tools[{i}].name"),
                    "a tool needs a name",
                ));
            }
            let mut extra = tool.extra;
            if let Some(kind) = tool.kind {
                extra.insert("type".into(), json!(kind));
            }
            Ok(Tool::Function(FunctionTool {
                name: tool.name,
                description: tool.description,
                parameters: tool.input_schema,
                strict: None,
                cache_control: tool.cache_control,
                extra: Extra::new(F, extra),
            }))
        }
        Some(kind) => Ok(Tool::Opaque(Opaque {
            origin: F,
            kind: kind.to_string(),
            value: to_value(&tool)?,
        })),
    }
}

fn decode_tool_choice(
    choice: WireToolChoice,
    extra: &mut Map<String, Value>,
) -> Result<(ToolChoice, Option<bool>), TranslateError> {
    let tc = match choice.kind.as_str() {
        "auto" => ToolChoice::Auto,
        "any" => ToolChoice::Required,
        "none" => ToolChoice::None,
        "tool" => match choice.name {
            Some(name) => ToolChoice::Tool(name),
            None => {
                return Err(TranslateError::invalid(
                    "tool_choice.name".to_string(),
                    "tool_choice of type \"tool\" needs a name",
                ))
            }
        },
        other => {
            return Err(TranslateError::invalid(
                "tool_choice.type".to_string(),
                format!("unknown tool_choice type \"{other}\" (expected auto, any, tool or none)"),
            ))
        }
    };
    if !choice.extra.is_empty() {
        extra.insert("tool_choice".into(), Value::Object(choice.extra));
    }
    Ok((tc, choice.disable_parallel_tool_use.map(|d| !d)))
}

fn decode_thinking(t: Thinking) -> Reasoning {
    let mut extra = t.extra;
    let enabled = match t.kind.as_str() {
        // `adaptive`: the model decides how much to think (no budget).
        "enabled" | "adaptive" => true,
        "disabled" => false,
        other => {
            // A newer mode, kept verbatim for Anthropic upstreams.
            extra.insert("type".into(), json!(other));
            true
        }
    };
    // Anthropic returns thinking blocks unless `display` says they are omitted.
    let shown = extra.get("display").and_then(Value::as_str) != Some("omitted");
    Reasoning {
        enabled: Some(enabled),
        budget_tokens: if t.kind == "adaptive" {
            None
        } else {
            t.budget_tokens
        },
        effort: None,
        include_thoughts: enabled.then_some(shown),
        extra: Extra::new(F, extra),
    }
}

// ---------------------------------------------------------------- encoding

/// The system instruction standing in for `response_format` (Anthropic has none).
pub fn response_format_instruction(rf: &ResponseFormat) -> Option<String> {
    match rf {
        ResponseFormat::Text => None,
        ResponseFormat::JsonObject => Some(
            "Respond with a single valid JSON object and nothing else: no prose, no code fences."
                .into(),
        ),
        ResponseFormat::JsonSchema(js) => Some(format!(
            "Respond with a single valid JSON value and nothing else (no prose, no code fences). \
             It must conform to this JSON Schema:\n{}",
            js.schema
        )),
    }
}

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

    // System: every system prompt (hoisted), then the response-format instruction.
    let mut system: Vec<&TextBlock> = req.system.iter().flat_map(|sp| sp.content.iter()).collect();
    if system.len() > 1 {
        // Anthropic refuses empty text blocks.
        system.retain(|t| !t.text.is_empty() || t.cache_control.is_some());
    }
    let native_format = extra
        .get("output_config")
        .is_some_and(|c| c.get("format").is_some())
        || extra.contains_key("output_format");
    let instruction = req
        .response_format
        .as_ref()
        .filter(|_| !native_format)
        .and_then(response_format_instruction)
        .map(TextBlock::new);
    if let Some(i) = &instruction {
        system.push(i);
    }
    let system = match system.as_slice() {
        [] => None,
        [only] if only.is_plain() => Some(json!(only.text)),
        blocks => Some(Value::Array(blocks.iter().map(|t| text_block(t)).collect())),
    };

    // Messages: encode, drop empties, merge same-role neighbours, tool results first.
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

    let mut tools = Vec::new();
    for (i, tool) in req.tools.iter().enumerate() {
        tools.push(encode_tool(tool, i)?);
    }
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
    // With thinking on, Anthropic only accepts the default temperature and
    // top_k, and top_p of at least 0.95.
    let (temperature, top_p, top_k) = if thinking_on {
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
        (
            req.tools
                .iter()
                .any(|t| matches!(t, Tool::Function(f) if f.strict == Some(true))),
            Param::Strict,
        ),
    ] {
        if set {
            report::dropped(req, param, adj);
        }
    }
    if let Some(effort) = effort {
        // `output_config.effort`, beside whatever else the client put there.
        let config = extra
            .entry("output_config")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(config) = config {
            config.insert("effort".into(), json!(effort));
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
