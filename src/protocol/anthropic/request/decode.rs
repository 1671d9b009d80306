//! Anthropic Messages request decoding: a client's wire body → the canonical request.
//!
//! `system` (string or text blocks) becomes one [`SystemPrompt`], and each
//! `{"role":"system"}` message inside `messages` (Claude Code's
//! mid-conversation system prompts) one more at its position; content
//! blocks map one to one onto IR blocks (server-tool and document blocks
//! become opaque blocks forwarded to Anthropic upstreams only). `thinking`
//! (`enabled` + budget, `adaptive`, `disabled`) and `output_config.effort`
//! become the canonical [`Reasoning`].

use crate::family::Family;
use crate::ir::{
    Block, ChatRequest, Extra, FunctionTool, ImageBlock, ImageSource, JsonSchemaFormat, Message,
    Opaque, Reasoning, RedactedThinkingBlock, ResponseFormat, Role, SystemPrompt, SystemRole,
    TextBlock, ThinkingBlock, Tool, ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::anthropic::wire::{
    ContentBlock, Message as WireMessage, MessagesRequest, Metadata, Source, Thinking,
    ToolChoice as WireToolChoice, ToolDef,
};
use crate::protocol::common::json::{nested, parse_request, to_value, StringOr};
use crate::protocol::common::{DecodeContext, TranslateError};
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
            // Strict tool use, read like OpenAI's `function.strict`.
            let strict = match extra.remove("strict") {
                Some(Value::Bool(b)) => Some(b),
                Some(other) => {
                    extra.insert("strict".into(), other);
                    None
                }
                None => None,
            };
            Ok(Tool::Function(FunctionTool {
                name: tool.name,
                description: tool.description,
                parameters: tool.input_schema,
                strict,
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
