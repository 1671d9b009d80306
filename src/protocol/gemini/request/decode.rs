//! Gemini request decoding: a client's generateContent body → the canonical request.
//!
//! The model and the stream flag come from the path ([`DecodeContext`]).
//! `functionCall` parts without an id get a stable synthetic id from their
//! position and name; `functionResponse` parts without an id are matched to
//! the earliest unanswered call of the same name.

use super::call_id::synthetic_call_id;
use super::function_response;
use super::schema::from_gemini_schema;
use crate::family::Family;
use crate::ir::media::guess_media_type;
use crate::ir::{
    Block, ChatRequest, Extra, FunctionTool, ImageBlock, ImageSource, JsonSchemaFormat, Message,
    Opaque, Reasoning, ResponseFormat, Role, SystemPrompt, SystemRole, TextBlock, ThinkingBlock,
    Tool, ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::common::json::{nested, parse_request, to_value};
use crate::protocol::common::{DecodeContext, TranslateError};
use crate::protocol::gemini::wire::{
    Content, GenerateContentRequest, GenerationConfig, Part, Tool as WireTool,
};
use serde_json::{json, Map, Value};

const F: Family = Family::Gemini;

fn is_image(mime: &str) -> bool {
    mime.to_ascii_lowercase().starts_with("image/")
}

fn opaque_part(part: &Part, kind: &str) -> Result<Block, TranslateError> {
    Ok(Block::Opaque(Opaque {
        origin: F,
        kind: kind.to_string(),
        value: to_value(part)?,
    }))
}

/// Decodes one part. Tool call ids and tool result call ids are taken from
/// the wire and left empty when the wire has none (callers assign them).
pub(crate) fn decode_part(part: Part, param: &str) -> Result<Block, TranslateError> {
    let mut extra = part.extra.clone();
    if let Some(fc) = part.function_call {
        extra.extend(nested("functionCall", fc.extra));
        if fc.name.is_empty() {
            return Err(TranslateError::invalid(
                format!("{param}.functionCall.name"),
                "a functionCall needs a name",
            ));
        }
        return Ok(Block::ToolCall(ToolCall {
            id: fc.id.unwrap_or_default(),
            name: fc.name,
            arguments: fc.args.unwrap_or_else(|| json!({})),
            signature: part.thought_signature,
            cache_control: None,
            extra: Extra::new(F, extra),
        }));
    }
    if let Some(fr) = part.function_response {
        extra.extend(nested("functionResponse", fr.extra));
        if let Some(sig) = part.thought_signature {
            extra.insert("thoughtSignature".into(), json!(sig));
        }
        let response = fr.response.unwrap_or_else(|| json!({}));
        let (text, is_error) = function_response::unwrap(&response);
        if function_response::wrap(&text, is_error) != response {
            // Kept for a Gemini upstream only (`{"result": …}`): the rule
            // writes it back under another key.
            let fr_extra = extra
                .entry("functionResponse")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = fr_extra {
                m.insert("response".into(), response);
            }
        }
        return Ok(Block::ToolResult(ToolResult {
            call_id: fr.id.unwrap_or_default(),
            name: Some(fr.name),
            content: vec![Block::text(text)],
            is_error: is_error.then_some(true),
            cache_control: None,
            extra: Extra::new(F, extra),
        }));
    }
    if let Some(blob) = &part.inline_data {
        if !is_image(&blob.mime_type) {
            return opaque_part(&part, "inlineData");
        }
        let blob = blob.clone();
        extra.extend(nested("inlineData", blob.extra));
        if let Some(sig) = part.thought_signature {
            extra.insert("thoughtSignature".into(), json!(sig));
        }
        return Ok(Block::Image(ImageBlock {
            source: ImageSource::Base64 {
                media_type: blob.mime_type,
                data: blob.data,
            },
            detail: None,
            cache_control: None,
            extra: Extra::new(F, extra),
        }));
    }
    if let Some(file) = &part.file_data {
        let guessed = file
            .mime_type
            .clone()
            .or_else(|| guess_media_type(&file.file_uri).map(str::to_string));
        if !guessed.as_deref().is_some_and(is_image) {
            return opaque_part(&part, "fileData");
        }
        let file = file.clone();
        extra.extend(nested("fileData", file.extra));
        if let Some(sig) = part.thought_signature {
            extra.insert("thoughtSignature".into(), json!(sig));
        }
        return Ok(Block::Image(ImageBlock {
            source: ImageSource::Url {
                url: file.file_uri,
                media_type: file.mime_type,
            },
            detail: None,
            cache_control: None,
            extra: Extra::new(F, extra),
        }));
    }
    if let Some(text) = part.text {
        if part.thought == Some(true) {
            return Ok(Block::Thinking(ThinkingBlock {
                text,
                signature: part.thought_signature,
                extra: Extra::new(F, extra),
            }));
        }
        if let Some(flag) = part.thought {
            extra.insert("thought".into(), json!(flag));
        }
        return Ok(Block::Text(TextBlock {
            text,
            cache_control: None,
            signature: part.thought_signature,
            extra: Extra::new(F, extra),
        }));
    }
    if extra.is_empty() {
        // A part carrying only a signature (or nothing): empty text.
        return Ok(Block::Text(TextBlock {
            text: String::new(),
            cache_control: None,
            signature: part.thought_signature,
            extra: Extra::default(),
        }));
    }
    let kind = extra.keys().next().cloned().unwrap_or_default();
    opaque_part(&part, &kind)
}

fn decode_role(role: Option<&str>, param: &str) -> Result<Role, TranslateError> {
    match role {
        None | Some("user" | "function") => Ok(Role::User),
        Some("model") => Ok(Role::Assistant),
        Some(other) => Err(TranslateError::invalid(
            format!("{param}.role"),
            format!("unknown role \"{other}\" (expected user or model)"),
        )),
    }
}

/// Decodes a Gemini request body; model and stream come from the path.
pub fn decode(body: &[u8], ctx: &DecodeContext<'_>) -> Result<ChatRequest, TranslateError> {
    let wire: GenerateContentRequest = parse_request(F, body)?;
    from_wire(wire, ctx)
}

/// Converts a parsed Gemini request into the canonical request.
pub fn from_wire(
    wire: GenerateContentRequest,
    ctx: &DecodeContext<'_>,
) -> Result<ChatRequest, TranslateError> {
    let mut extra = wire.extra;
    let mut req = ChatRequest {
        model: ctx.model.unwrap_or_default().to_string(),
        stream: ctx.stream,
        ..ChatRequest::default()
    };

    if let Some(si) = wire.system_instruction {
        let mut content = Vec::new();
        for (j, part) in si.parts.into_iter().enumerate() {
            match decode_part(part, &format!("systemInstruction.parts[{j}]"))? {
                Block::Text(t) => content.push(t),
                other => {
                    return Err(TranslateError::invalid(
                        format!("systemInstruction.parts[{j}]"),
                        format!(
                            "a system instruction can only hold text, not {}",
                            other.kind()
                        ),
                    ))
                }
            }
        }
        let mut si_extra = si.extra;
        if let Some(role) = si.role {
            si_extra.insert("role".into(), json!(role));
        }
        req.system.push(SystemPrompt {
            role: SystemRole::System,
            content,
            position: 0,
            extra: Extra::new(F, si_extra),
        });
    }

    decode_contents(wire.contents, &mut req)?;

    decode_tools(wire.tools.unwrap_or_default(), &mut req)?;

    if let Some(tc) = wire.tool_config {
        let mut tc_extra = tc.extra;
        if let Some(fcc) = tc.function_calling_config {
            let mut fcc_extra = fcc.extra;
            let names = fcc.allowed_function_names.unwrap_or_default();
            let mode = fcc.mode.as_deref().map(str::to_ascii_uppercase);
            req.tool_choice = Some(match (mode.as_deref(), names.as_slice()) {
                (Some("NONE"), _) => ToolChoice::None,
                (Some("ANY"), []) => ToolChoice::Required,
                (Some("ANY"), [one]) => ToolChoice::Tool(one.clone()),
                (Some("ANY"), _) => ToolChoice::Allowed {
                    required: true,
                    names,
                },
                (Some("VALIDATED"), [_, ..]) => ToolChoice::Allowed {
                    required: false,
                    names,
                },
                (Some("AUTO") | None, _) => ToolChoice::Auto,
                (Some(_), _) => {
                    // Unknown or name-less VALIDATED mode: auto, with the raw mode kept for Gemini.
                    if let Some(raw) = fcc.mode.clone() {
                        fcc_extra.insert("mode".into(), json!(raw));
                    }
                    ToolChoice::Auto
                }
            });
            if !fcc_extra.is_empty() {
                tc_extra.insert("functionCallingConfig".into(), Value::Object(fcc_extra));
            }
        }
        if !tc_extra.is_empty() {
            extra.insert("toolConfig".into(), Value::Object(tc_extra));
        }
    }

    if let Some(gc) = wire.generation_config {
        let gc_extra = decode_generation_config(gc, &mut req);
        if !gc_extra.is_empty() {
            extra.insert("generationConfig".into(), Value::Object(gc_extra));
        }
    }
    req.extra = Extra::new(F, extra);
    req.source = Some(F);
    Ok(req)
}

/// The `contents` as canonical messages. Calls without an id get a synthetic
/// one; id-less function responses are matched to the earliest unanswered
/// call of the same name.
fn decode_contents(contents: Vec<Content>, req: &mut ChatRequest) -> Result<(), TranslateError> {
    // Unanswered calls (id, name), to match id-less function responses.
    let mut pending: Vec<(String, String)> = Vec::new();
    for (ci, content) in contents.into_iter().enumerate() {
        let param = format!("contents[{ci}]");
        let role = decode_role(content.role.as_deref(), &param)?;
        let mut msg_extra = content.extra;
        if content.role.as_deref() == Some("function") {
            // The legacy role of function results, kept for Gemini.
            msg_extra.insert("role".into(), json!("function"));
        }
        let mut blocks = Vec::new();
        for (pi, part) in content.parts.into_iter().enumerate() {
            let mut block = decode_part(part, &format!("{param}.parts[{pi}]"))?;
            match &mut block {
                Block::ToolCall(call) => {
                    if call.id.is_empty() {
                        call.id = synthetic_call_id(
                            &format!("request/{ci}"),
                            pi,
                            &call.name,
                            &call.arguments,
                        );
                    }
                    pending.push((call.id.clone(), call.name.clone()));
                }
                Block::ToolResult(result) => {
                    let name = result.name.clone().unwrap_or_default();
                    if result.call_id.is_empty() {
                        match pending.iter().position(|(_, n)| *n == name) {
                            Some(at) => result.call_id = pending.remove(at).0,
                            None => {
                                result.call_id = synthetic_call_id(
                                    &format!("request/{ci}/response"),
                                    pi,
                                    &name,
                                    &Value::Null,
                                );
                            }
                        }
                    } else if let Some(at) =
                        pending.iter().position(|(id, _)| *id == result.call_id)
                    {
                        pending.remove(at);
                    }
                }
                _ => {}
            }
            blocks.push(block);
        }
        req.messages.push(Message {
            role,
            content: blocks,
            extra: Extra::new(F, msg_extra),
        });
    }
    Ok(())
}

/// The `tools`: function declarations become function tools, other tool
/// kinds opaque Gemini tools.
fn decode_tools(tools: Vec<WireTool>, req: &mut ChatRequest) -> Result<(), TranslateError> {
    for (i, tool) in tools.into_iter().enumerate() {
        for mut decl in tool.function_declarations.unwrap_or_default() {
            // google-genai sends declarations in snake_case; the camelCase
            // spelling is kept (Gemini takes both).
            camel_case_keys(&mut decl.extra, SNAKE_DECLARATION_KEYS);
            let parameters = match &decl.parameters {
                Some(p) => Some(from_gemini_schema(p)),
                None => decl.extra.get("parametersJsonSchema").cloned(),
            };
            if decl.name.is_empty() {
                return Err(TranslateError::invalid(
                    format!("tools[{i}].functionDeclarations"),
                    "a function declaration needs a name",
                ));
            }
            req.tools.push(Tool::Function(FunctionTool {
                name: decl.name,
                description: decl.description,
                parameters,
                strict: None,
                cache_control: None,
                extra: Extra::new(F, decl.extra),
            }));
        }
        for (key, value) in tool.extra {
            let mut obj = Map::new();
            obj.insert(key.clone(), value);
            req.tools.push(Tool::Opaque(Opaque {
                origin: F,
                kind: key,
                value: Value::Object(obj),
            }));
        }
    }
    Ok(())
}

/// snake_case spellings of `functionDeclarations[]` fields the wire types keep as unknown fields.
const SNAKE_DECLARATION_KEYS: &[(&str, &str)] = &[
    ("parameters_json_schema", "parametersJsonSchema"),
    ("response_json_schema", "responseJsonSchema"),
];

/// snake_case spellings of `generationConfig` fields kept as unknown fields.
const SNAKE_GENERATION_KEYS: &[(&str, &str)] = &[
    ("response_json_schema", "responseJsonSchema"),
    ("response_modalities", "responseModalities"),
    ("response_logprobs", "responseLogprobs"),
    ("media_resolution", "mediaResolution"),
    ("speech_config", "speechConfig"),
];

/// Renames snake_case keys of `map` to their camelCase spelling (the camelCase
/// one wins when a client sent both).
fn camel_case_keys(map: &mut Map<String, Value>, keys: &[(&str, &str)]) {
    for (snake, camel) in keys {
        if let Some(v) = map.remove(*snake) {
            map.entry(*camel).or_insert(v);
        }
    }
}

/// Fills sampling, response format and reasoning; returns the unknown fields.
fn decode_generation_config(gc: GenerationConfig, req: &mut ChatRequest) -> Map<String, Value> {
    let mut extra = gc.extra;
    camel_case_keys(&mut extra, SNAKE_GENERATION_KEYS);
    let s = &mut req.sampling;
    s.temperature = gc.temperature;
    s.top_p = gc.top_p;
    s.top_k = gc.top_k;
    s.max_tokens = gc.max_output_tokens;
    s.stop = gc.stop_sequences.unwrap_or_default();
    s.candidate_count = gc.candidate_count;
    s.presence_penalty = gc.presence_penalty;
    s.frequency_penalty = gc.frequency_penalty;
    s.seed = gc.seed;

    let json_schema = extra.get("responseJsonSchema").cloned();
    match gc.response_mime_type.as_deref() {
        Some("application/json") => {
            req.response_format = Some(match (gc.response_schema, json_schema) {
                (Some(schema), _) => ResponseFormat::JsonSchema(JsonSchemaFormat {
                    schema: from_gemini_schema(&schema),
                    ..JsonSchemaFormat::default()
                }),
                (None, Some(schema)) => ResponseFormat::JsonSchema(JsonSchemaFormat {
                    schema,
                    ..JsonSchemaFormat::default()
                }),
                (None, None) => ResponseFormat::JsonObject,
            });
        }
        Some("text/plain") if gc.response_schema.is_none() => {
            req.response_format = Some(ResponseFormat::Text);
        }
        Some(other) => {
            // Another output type (e.g. `text/x.enum`): Gemini only, kept verbatim.
            extra.insert("responseMimeType".into(), json!(other));
            if let Some(schema) = gc.response_schema {
                extra.insert("responseSchema".into(), schema);
            }
        }
        None => {
            if let Some(schema) = gc.response_schema {
                extra.insert("responseSchema".into(), schema);
            }
        }
    }

    if let Some(tc) = gc.thinking_config {
        let mut tc_extra = tc.extra;
        camel_case_keys(&mut tc_extra, &[("thinking_level", "thinkingLevel")]);
        // The level stays in the unknown fields (re-emitted for Gemini as
        // sent); the IR reads it as the effort.
        let effort = tc_extra
            .get("thinkingLevel")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
            .filter(|l| l != "thinking_level_unspecified");
        let enabled = match tc.thinking_budget {
            Some(0) => Some(false),
            Some(_) => Some(true),
            None => effort.is_some().then_some(true),
        };
        req.reasoning = Some(Reasoning {
            enabled,
            // -1 ("dynamic": the model decides) is "on without a budget".
            budget_tokens: tc.thinking_budget.filter(|b| *b >= 0),
            effort,
            include_thoughts: tc.include_thoughts,
            extra: Extra::default(),
        });
        if !tc_extra.is_empty() {
            extra.insert("thinkingConfig".into(), Value::Object(tc_extra));
        }
    }
    extra
}
