//! Bedrock Converse request decoding: a client's Converse body → the
//! canonical request. The model and the stream flag come from the path
//! ([`DecodeContext`]). A `cachePoint` block marks the block before it (the
//! canonical `cache_control`); `document`, `video`, `guardContent` and
//! other blocks with no canonical form are kept whole as Bedrock blocks.
//! `additionalModelRequestFields` is read for `top_k` and `thinking` /
//! `reasoning_config`; the rest of it rides along for a Bedrock upstream.

use crate::family::Family;
use crate::ir::{
    Block, ChatRequest, Extra, FunctionTool, ImageBlock, ImageSource, Message, Opaque, Reasoning,
    RedactedThinkingBlock, Role, SystemPrompt, SystemRole, TextBlock, ThinkingBlock, Tool,
    ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::bedrock::wire::{
    ContentBlock, ConverseRequest, Image, ToolConfig, ToolResultContent,
};
use crate::protocol::common::json::{nested, parse_request, to_value};
use crate::protocol::common::{DecodeContext, TranslateError};
use serde_json::{json, Map, Value};

const F: Family = Family::Bedrock;

/// The `cache_control` a `cachePoint` stands for.
pub(crate) fn cache_mark() -> Value {
    json!({"type": "ephemeral"})
}

/// Decodes a Converse request body; model and stream come from the path.
pub fn decode(body: &[u8], ctx: &DecodeContext<'_>) -> Result<ChatRequest, TranslateError> {
    let wire: ConverseRequest = parse_request(F, body)?;
    from_wire(wire, ctx)
}

/// Converts a parsed Converse request into the canonical request.
pub fn from_wire(
    wire: ConverseRequest,
    ctx: &DecodeContext<'_>,
) -> Result<ChatRequest, TranslateError> {
    let mut extra = wire.extra;
    let mut req = ChatRequest {
        model: ctx.model.unwrap_or_default().to_string(),
        stream: ctx.stream,
        ..ChatRequest::default()
    };
    if let Some(system) = wire.system {
        let mut content: Vec<TextBlock> = Vec::new();
        for (j, block) in system.into_iter().enumerate() {
            if let Some(text) = block.text {
                content.push(TextBlock {
                    text,
                    extra: Extra::new(F, block.extra),
                    ..TextBlock::default()
                });
            } else if block.cache_point.is_some() {
                if let Some(last) = content.last_mut() {
                    last.cache_control = Some(cache_mark());
                }
            } else {
                return Err(TranslateError::unsupported(
                    format!("system[{j}]"),
                    "only text and cachePoint system blocks can be sent to a model of another protocol",
                ));
            }
        }
        req.system.push(SystemPrompt {
            role: SystemRole::System,
            content,
            position: 0,
            extra: Extra::default(),
        });
    }
    for (i, msg) in wire.messages.into_iter().enumerate() {
        let role = match msg.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(TranslateError::invalid(
                    format!("messages[{i}].role"),
                    format!("unknown role \"{other}\" (expected user or assistant)"),
                ))
            }
        };
        let mut blocks: Vec<Block> = Vec::new();
        for (j, block) in msg.content.into_iter().enumerate() {
            let param = format!("messages[{i}].content[{j}]");
            if block.cache_point.is_some() {
                mark_last(&mut blocks);
                continue;
            }
            blocks.push(decode_block(block, &param)?);
        }
        req.messages.push(Message {
            role,
            content: blocks,
            extra: Extra::new(F, msg.extra),
        });
    }
    if let Some(c) = wire.inference_config {
        req.sampling.max_tokens = c.max_tokens;
        req.sampling.temperature = c.temperature;
        req.sampling.top_p = c.top_p;
        req.sampling.stop = c.stop_sequences.unwrap_or_default();
        if !c.extra.is_empty() {
            extra.insert("inferenceConfig".into(), Value::Object(c.extra));
        }
    }
    if let Some(tc) = wire.tool_config {
        decode_tools(tc, &mut req, &mut extra)?;
    }
    if let Some(mut fields) = wire.additional_model_request_fields {
        if let Some(k) = fields.get("top_k").and_then(Value::as_u64) {
            req.sampling.top_k = Some(k);
            fields.remove("top_k");
        }
        for key in ["thinking", "reasoning_config"] {
            if let Some(t) = fields.get(key) {
                if let Some(r) = decode_thinking(t) {
                    req.reasoning = Some(r);
                    fields.remove(key);
                }
            }
        }
        if !fields.is_empty() {
            extra.insert("additionalModelRequestFields".into(), Value::Object(fields));
        }
    }
    req.extra = Extra::new(F, extra);
    req.source = Some(F);
    Ok(req)
}

/// `{"type": "enabled"|"disabled"|"adaptive", "budget_tokens": n}` (Claude's
/// form, also `reasoning_config`'s).
fn decode_thinking(v: &Value) -> Option<Reasoning> {
    let kind = v.get("type")?.as_str()?;
    let budget = v.get("budget_tokens").and_then(Value::as_i64);
    match kind {
        "enabled" | "adaptive" => Some(Reasoning {
            enabled: Some(true),
            budget_tokens: budget,
            ..Reasoning::default()
        }),
        "disabled" => Some(Reasoning {
            enabled: Some(false),
            ..Reasoning::default()
        }),
        _ => None,
    }
}

/// Puts a cache mark on the last block that can carry one.
fn mark_last(blocks: &mut [Block]) {
    match blocks.last_mut() {
        Some(Block::Text(t)) => t.cache_control = Some(cache_mark()),
        Some(Block::Image(i)) => i.cache_control = Some(cache_mark()),
        Some(Block::ToolCall(c)) => c.cache_control = Some(cache_mark()),
        Some(Block::ToolResult(r)) => r.cache_control = Some(cache_mark()),
        _ => {}
    }
}

/// An image block as the canonical image (`s3Location` images: kept whole).
fn decode_image(img: Image, param: &str) -> Result<Block, TranslateError> {
    let Some(bytes) = img.source.bytes else {
        return Ok(Block::Opaque(Opaque {
            origin: F,
            kind: "image".into(),
            value: json!({ "image": to_value(&img)? }),
        }));
    };
    if img.format.is_empty() {
        return Err(TranslateError::invalid(
            format!("{param}.image.format"),
            "an image needs a format (png, jpeg, gif or webp)",
        ));
    }
    Ok(Block::Image(ImageBlock {
        source: ImageSource::Base64 {
            media_type: format!("image/{}", img.format.to_ascii_lowercase()),
            data: bytes,
        },
        detail: None,
        cache_control: None,
        extra: Extra::new(F, nested("image", img.extra)),
    }))
}

/// Decodes one content block (not a `cachePoint`).
pub(crate) fn decode_block(block: ContentBlock, param: &str) -> Result<Block, TranslateError> {
    let ContentBlock {
        text,
        image,
        tool_use,
        tool_result,
        reasoning_content,
        cache_point: _,
        extra,
    } = block;
    if let Some(text) = text {
        return Ok(Block::Text(TextBlock {
            text,
            extra: Extra::new(F, extra),
            ..TextBlock::default()
        }));
    }
    if let Some(img) = image {
        return decode_image(img, param);
    }
    if let Some(u) = tool_use {
        if u.name.is_empty() {
            return Err(TranslateError::invalid(
                format!("{param}.toolUse.name"),
                "a toolUse needs a name",
            ));
        }
        return Ok(Block::ToolCall(ToolCall {
            id: u.tool_use_id,
            name: u.name,
            arguments: if u.input.is_null() {
                json!({})
            } else {
                u.input
            },
            signature: None,
            cache_control: None,
            extra: Extra::new(F, nested("toolUse", u.extra)),
        }));
    }
    if let Some(r) = tool_result {
        let mut content = Vec::new();
        for (k, c) in r.content.into_iter().enumerate() {
            content.push(decode_result_content(
                c,
                &format!("{param}.toolResult.content[{k}]"),
            )?);
        }
        return Ok(Block::ToolResult(ToolResult {
            call_id: r.tool_use_id,
            name: None,
            content,
            is_error: (r.status.as_deref() == Some("error")).then_some(true),
            cache_control: None,
            extra: Extra::new(F, nested("toolResult", r.extra)),
        }));
    }
    if let Some(rc) = reasoning_content {
        if let Some(t) = rc.reasoning_text {
            return Ok(Block::Thinking(ThinkingBlock {
                text: t.text,
                signature: t.signature,
                extra: Extra::new(F, nested("reasoningContent", rc.extra)),
            }));
        }
        if let Some(data) = rc.redacted_content {
            return Ok(Block::RedactedThinking(RedactedThinkingBlock {
                data,
                extra: Extra::default(),
            }));
        }
        return Err(TranslateError::invalid(
            format!("{param}.reasoningContent"),
            "reasoningContent needs reasoningText or redactedContent",
        ));
    }
    // `document`, `video`, `guardContent`, `citationsContent`, …: whole.
    let kind = extra
        .keys()
        .next()
        .cloned()
        .ok_or_else(|| TranslateError::invalid(param.to_string(), "an empty content block"))?;
    Ok(Block::Opaque(Opaque {
        origin: F,
        kind,
        value: Value::Object(extra),
    }))
}

/// One block of a `toolResult`'s content: `json` is carried as its text.
fn decode_result_content(c: ToolResultContent, param: &str) -> Result<Block, TranslateError> {
    if let Some(text) = c.text {
        return Ok(Block::text(text));
    }
    if let Some(j) = c.json {
        return Ok(Block::text(j.to_string()));
    }
    if let Some(img) = c.image {
        return decode_image(img, param);
    }
    let kind =
        c.extra.keys().next().cloned().ok_or_else(|| {
            TranslateError::invalid(param.to_string(), "an empty tool result block")
        })?;
    Ok(Block::Opaque(Opaque {
        origin: F,
        kind,
        value: Value::Object(c.extra),
    }))
}

/// `toolConfig`: tool specs become function tools (a `cachePoint` marks
/// the tool before it), other entries Bedrock tools kept whole.
fn decode_tools(
    tc: ToolConfig,
    req: &mut ChatRequest,
    extra: &mut Map<String, Value>,
) -> Result<(), TranslateError> {
    for (i, entry) in tc.tools.into_iter().enumerate() {
        if let Some(spec) = entry.tool_spec {
            if spec.name.is_empty() {
                return Err(TranslateError::invalid(
                    format!("toolConfig.tools[{i}].toolSpec.name"),
                    "a tool needs a name",
                ));
            }
            let mut spec_extra = spec.extra;
            let strict = spec_extra.remove("strict").and_then(|v| v.as_bool());
            req.tools.push(Tool::Function(FunctionTool {
                name: spec.name,
                description: spec.description,
                parameters: spec.input_schema.and_then(|s| s.json),
                strict,
                cache_control: None,
                extra: Extra::new(F, nested("toolSpec", spec_extra)),
            }));
        } else if entry.cache_point.is_some() {
            if let Some(Tool::Function(f)) = req.tools.last_mut() {
                f.cache_control = Some(cache_mark());
            }
        } else {
            let kind = entry.extra.keys().next().cloned().unwrap_or_default();
            req.tools.push(Tool::Opaque(Opaque {
                origin: F,
                kind,
                value: Value::Object(entry.extra),
            }));
        }
    }
    if let Some(choice) = tc.tool_choice {
        req.tool_choice = Some(if let Some(t) = choice.tool {
            ToolChoice::Tool(t.name)
        } else if choice.any.is_some() {
            ToolChoice::Required
        } else if choice.auto.is_some() {
            ToolChoice::Auto
        } else {
            return Err(TranslateError::invalid(
                "toolConfig.toolChoice".to_string(),
                "toolChoice must be one of auto, any or tool",
            ));
        });
    }
    if !tc.extra.is_empty() {
        extra.insert("toolConfig".into(), Value::Object(tc.extra));
    }
    Ok(())
}
