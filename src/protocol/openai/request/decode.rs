//! OpenAI chat request decoding: a client's wire body → the canonical request.
//!
//! `system`/`developer` messages anywhere become [`SystemPrompt`]s that
//! remember their position; `tool` messages become user messages holding one
//! [`ToolResult`]; `reasoning_content` on assistant messages becomes a
//! [`ThinkingBlock`].

use crate::family::Family;
use crate::ir::media::parse_data_url;
use crate::ir::stream::parse_arguments;
use crate::ir::{
    Block, ChatRequest, Extra, FunctionTool, ImageBlock, ImageSource, JsonSchemaFormat, Message,
    Opaque, Reasoning, ResponseFormat, Role, SystemPrompt, SystemRole, TextBlock, ThinkingBlock,
    Tool, ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::common::json::{nested, parse_request, to_value, StringOr};
use crate::protocol::common::{DecodeContext, TranslateError};
use crate::protocol::openai::wire::{
    ChatCompletionRequest, Content, ContentPart, ImageUrl, Message as WireMessage,
    ResponseFormat as WireResponseFormat, StreamOptions, ToolCall as WireToolCall, ToolDef,
};
use serde_json::{json, Map, Value};

const F: Family = Family::OpenAi;

/// Decodes an OpenAI request body.
pub fn decode(body: &[u8], ctx: &DecodeContext<'_>) -> Result<ChatRequest, TranslateError> {
    let wire: ChatCompletionRequest = parse_request(F, body)?;
    from_wire(wire, ctx)
}

/// Converts a parsed OpenAI request into the canonical request.
pub fn from_wire(
    wire: ChatCompletionRequest,
    ctx: &DecodeContext<'_>,
) -> Result<ChatRequest, TranslateError> {
    let mut extra = wire.extra;
    let mut req = ChatRequest {
        model: ctx.model.map_or(wire.model, str::to_string),
        ..ChatRequest::default()
    };

    for (i, msg) in wire.messages.into_iter().enumerate() {
        decode_message(&mut req, i, msg)?;
    }
    req.resolve_tool_result_names();

    if let Some(tools) = wire.tools {
        for (i, tool) in tools.into_iter().enumerate() {
            req.tools.push(decode_tool(tool, i)?);
        }
    }
    if let Some(choice) = wire.tool_choice {
        req.tool_choice = Some(decode_tool_choice(&choice)?);
    }
    req.parallel_tool_calls = wire.parallel_tool_calls;
    if let Some(rf) = wire.response_format {
        let (format, rf_extra) = decode_response_format(rf)?;
        req.response_format = Some(format);
        if !rf_extra.is_empty() {
            extra.insert("response_format".into(), Value::Object(rf_extra));
        }
    }

    let s = &mut req.sampling;
    s.temperature = wire.temperature;
    s.top_p = wire.top_p;
    s.max_tokens = wire.max_completion_tokens.or(wire.max_tokens);
    if let Some(n) = wire.max_completion_tokens {
        // Remember the field name the client used (the encoder writes the value from the IR).
        extra.insert("max_completion_tokens".into(), json!(n));
        if let Some(legacy) = wire.max_tokens {
            extra.insert("max_tokens".into(), json!(legacy));
        }
    }
    s.stop = match wire.stop {
        None => Vec::new(),
        Some(StringOr::String(one)) => vec![one],
        Some(StringOr::List(list)) => list,
    };
    s.seed = wire.seed;
    s.presence_penalty = wire.presence_penalty;
    s.frequency_penalty = wire.frequency_penalty;
    s.candidate_count = wire.n;
    // `safety_identifier` is OpenAI's newer name for the end-user id (kept
    // verbatim for OpenAI upstreams; `user` wins when both are given).
    req.user = wire.user.or_else(|| {
        extra
            .get("safety_identifier")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    if let Some(effort) = wire.reasoning_effort {
        let effort = effort.to_ascii_lowercase();
        req.reasoning = Some(Reasoning {
            enabled: Some(effort != "none"),
            effort: Some(effort),
            ..Reasoning::default()
        });
    }
    req.stream = wire.stream.unwrap_or(false) || ctx.stream;
    if let Some(StreamOptions {
        include_usage,
        extra: so_extra,
    }) = wire.stream_options
    {
        req.stream_include_usage = include_usage;
        if !so_extra.is_empty() {
            extra.insert("stream_options".into(), Value::Object(so_extra));
        }
    }
    req.extra = Extra::new(F, extra);
    req.source = Some(F);
    Ok(req)
}

fn decode_message(req: &mut ChatRequest, i: usize, msg: WireMessage) -> Result<(), TranslateError> {
    let param = format!("messages[{i}]");
    match msg.role.as_str() {
        "system" | "developer" => {
            let role = if msg.role == "system" {
                SystemRole::System
            } else {
                SystemRole::Developer
            };
            let content = match msg.content.flatten() {
                None => Vec::new(),
                Some(c) => decode_text_only(c, &param)?,
            };
            req.system.push(SystemPrompt {
                role,
                content,
                position: req.messages.len(),
                extra: Extra::new(F, msg.extra),
            });
        }
        "user" => {
            let content = match msg.content.flatten() {
                None => Vec::new(),
                Some(c) => decode_content(c, &param)?,
            };
            req.messages.push(Message {
                role: Role::User,
                content,
                extra: Extra::new(F, msg.extra),
            });
        }
        "assistant" => {
            let mut content = Vec::new();
            if let Some(reasoning) = msg.reasoning_content {
                content.push(Block::Thinking(ThinkingBlock {
                    text: reasoning,
                    ..ThinkingBlock::default()
                }));
            }
            if let Some(c) = msg.content.flatten() {
                content.extend(decode_content(c, &param)?);
            }
            for (j, call) in msg.tool_calls.unwrap_or_default().into_iter().enumerate() {
                content.push(Block::ToolCall(decode_tool_call(
                    call,
                    &format!("{param}.tool_calls[{j}]"),
                )?));
            }
            req.messages.push(Message {
                role: Role::Assistant,
                content,
                extra: Extra::new(F, msg.extra),
            });
        }
        "tool" => {
            let Some(call_id) = msg.tool_call_id else {
                return Err(TranslateError::invalid(
                    format!("{param}.tool_call_id"),
                    "a tool message needs a tool_call_id",
                ));
            };
            let content = match msg.content.flatten() {
                None => Vec::new(),
                Some(c) => decode_content(c, &param)?,
            };
            req.messages.push(Message::new(
                Role::User,
                vec![Block::ToolResult(ToolResult {
                    call_id,
                    name: None,
                    content,
                    is_error: None,
                    cache_control: None,
                    extra: Extra::new(F, msg.extra),
                })],
            ));
        }
        "function" => {
            return Err(TranslateError::unsupported(
                format!("{param}.role"),
                "the deprecated \"function\" role is not supported; send tool results as \"tool\" messages",
            ))
        }
        other => {
            return Err(TranslateError::invalid(
                format!("{param}.role"),
                format!("unknown message role \"{other}\""),
            ))
        }
    }
    Ok(())
}

fn decode_text_only(content: Content, param: &str) -> Result<Vec<TextBlock>, TranslateError> {
    let mut out = Vec::new();
    for (j, block) in decode_content(content, param)?.into_iter().enumerate() {
        match block {
            Block::Text(t) => out.push(t),
            other => {
                return Err(TranslateError::invalid(
                    format!("{param}.content[{j}]"),
                    format!("a system message can only hold text, not {}", other.kind()),
                ))
            }
        }
    }
    Ok(out)
}

/// Decodes message content (a string or parts) into blocks.
pub(crate) fn decode_content(content: Content, param: &str) -> Result<Vec<Block>, TranslateError> {
    match content {
        StringOr::String(text) => Ok(vec![Block::text(text)]),
        StringOr::List(parts) => parts
            .into_iter()
            .enumerate()
            .map(|(j, part)| decode_part(part, &format!("{param}.content[{j}]")))
            .collect(),
    }
}

fn decode_part(part: ContentPart, param: &str) -> Result<Block, TranslateError> {
    match (
        part.kind.as_str(),
        &part.text,
        &part.image_url,
        &part.refusal,
    ) {
        ("text", Some(_), _, _) => Ok(Block::Text(TextBlock {
            text: part.text.unwrap_or_default(),
            extra: Extra::new(F, part.extra),
            ..TextBlock::default()
        })),
        ("refusal", _, _, Some(_)) => Ok(Block::text(part.refusal.unwrap_or_default())),
        ("image_url", _, Some(_), _) => {
            let ImageUrl {
                url,
                detail,
                extra: url_extra,
            } = part.image_url.unwrap_or_default();
            let source = match parse_data_url(&url) {
                None => ImageSource::Url {
                    url,
                    media_type: None,
                },
                Some(Ok((media_type, data))) => ImageSource::Base64 { media_type, data },
                Some(Err(why)) => {
                    return Err(TranslateError::invalid(
                        format!("{param}.image_url.url"),
                        format!("unusable image data URL: {why}"),
                    ))
                }
            };
            let mut extra = part.extra;
            extra.extend(nested("image_url", url_extra));
            Ok(Block::Image(ImageBlock {
                source,
                detail,
                cache_control: None,
                extra: Extra::new(F, extra),
            }))
        }
        ("text" | "refusal" | "image_url", ..) => Err(TranslateError::invalid(
            param.to_string(),
            format!(
                "a \"{}\" part is missing its \"{}\" field",
                part.kind, part.kind
            ),
        )),
        _ => {
            let kind = part.kind.clone();
            Ok(Block::Opaque(Opaque {
                origin: F,
                kind,
                value: to_value(&part)?,
            }))
        }
    }
}

fn decode_tool_call(call: WireToolCall, param: &str) -> Result<ToolCall, TranslateError> {
    if call.kind != "function" {
        return Err(TranslateError::unsupported(
            format!("{param}.type"),
            format!("tool calls of type \"{}\" are not supported", call.kind),
        ));
    }
    let mut extra = call.extra;
    extra.extend(nested("function", call.function.extra));
    Ok(ToolCall {
        id: call.id,
        name: call.function.name,
        arguments: parse_arguments(&call.function.arguments),
        signature: None,
        cache_control: None,
        extra: Extra::new(F, extra),
    })
}

fn decode_tool(tool: ToolDef, i: usize) -> Result<Tool, TranslateError> {
    match (tool.kind.as_str(), &tool.function) {
        ("function", Some(_)) => {
            let def = tool.function.unwrap_or_default();
            let mut extra = tool.extra;
            extra.extend(nested("function", def.extra));
            Ok(Tool::Function(FunctionTool {
                name: def.name,
                description: def.description,
                parameters: def.parameters,
                strict: def.strict,
                cache_control: None,
                extra: Extra::new(F, extra),
            }))
        }
        ("function", None) => Err(TranslateError::invalid(
            format!("tools[{i}].function"),
            "a function tool needs a \"function\" object",
        )),
        (kind, _) => Ok(Tool::Opaque(Opaque {
            origin: F,
            kind: kind.to_string(),
            value: to_value(&tool)?,
        })),
    }
}

fn function_name(v: &Value) -> Option<String> {
    v.get("function")?.get("name")?.as_str().map(str::to_string)
}

fn decode_tool_choice(choice: &Value) -> Result<ToolChoice, TranslateError> {
    let bad = |why: &str| TranslateError::invalid("tool_choice".to_string(), why.to_string());
    match choice {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(bad(&format!(
                "unknown tool_choice \"{other}\" (expected auto, none, required or an object)"
            ))),
        },
        Value::Object(obj) => match obj.get("type").and_then(Value::as_str) {
            Some("function") => function_name(choice)
                .map(ToolChoice::Tool)
                .ok_or_else(|| bad("tool_choice.function.name is missing")),
            Some("allowed_tools") => {
                let allowed = obj.get("allowed_tools");
                let required = match allowed.and_then(|a| a.get("mode")).and_then(Value::as_str) {
                    Some("required") => true,
                    Some("auto") | None => false,
                    Some(other) => {
                        return Err(bad(&format!("unknown allowed_tools mode \"{other}\"")))
                    }
                };
                let names = allowed
                    .and_then(|a| a.get("tools"))
                    .and_then(Value::as_array)
                    .map(|tools| tools.iter().filter_map(function_name).collect())
                    .unwrap_or_default();
                Ok(ToolChoice::Allowed { required, names })
            }
            _ => Err(bad(
                "unsupported tool_choice object (expected type \"function\" or \"allowed_tools\")",
            )),
        },
        _ => Err(bad("tool_choice must be a string or an object")),
    }
}

fn decode_response_format(
    rf: WireResponseFormat,
) -> Result<(ResponseFormat, Map<String, Value>), TranslateError> {
    let mut extra = rf.extra;
    let format = match rf.kind.as_str() {
        "text" => ResponseFormat::Text,
        "json_object" => ResponseFormat::JsonObject,
        "json_schema" => {
            let Some(js) = rf.json_schema else {
                return Err(TranslateError::invalid(
                    "response_format.json_schema".to_string(),
                    "a json_schema response_format needs a \"json_schema\" object",
                ));
            };
            extra.extend(nested("json_schema", js.extra));
            ResponseFormat::JsonSchema(JsonSchemaFormat {
                name: Some(js.name),
                description: js.description,
                schema: js.schema.unwrap_or_else(|| json!({})),
                strict: js.strict,
            })
        }
        other => {
            return Err(TranslateError::invalid(
                "response_format.type".to_string(),
                format!("unknown response_format type \"{other}\""),
            ))
        }
    };
    Ok((format, extra))
}
