//! Responses request decoding: a client's wire body → the canonical request
//! (always for another family's upstream).
//!
//! - `instructions` is a system prompt at position 0; `system` / `developer`
//!   message items are system prompts at their position.
//! - Items are read in order. Consecutive assistant-side items (assistant
//!   messages, `function_call`, `custom_tool_call`, `reasoning`) form one
//!   assistant turn (a second assistant message item starts a new one);
//!   consecutive tool outputs form one user turn of tool results; every user
//!   message item is a user turn.
//! - `reasoning` items become thinking blocks: the summary (or, without one,
//!   the reasoning text) is the text, and `encrypted_content` the signature,
//!   packed with the item id by [`crate::ir::signature`] (or unwrapped, when
//!   it holds an Anthropic / Gemini signature this gateway gave the client).
//! - `custom` tools (free-form input, e.g. Codex's `apply_patch`) become
//!   function tools taking one string argument named [`CUSTOM_INPUT_KEY`](super::CUSTOM_INPUT_KEY),
//!   their grammar appended to the description; `custom_tool_call` items are
//!   tool calls with arguments `{CUSTOM_INPUT_KEY: input}`, and their outputs
//!   tool results. Response encoders recognise a call by that argument shape
//!   and write `custom_tool_call` items back.
//! - `namespace` tools become their members, flat-named
//!   `{namespace}__{tool}` (`super::flatten`); a `function_call` item or a
//!   `tool_choice` with a `namespace` names the same flat name.
//! - `previous_response_id` is expanded into `input` from the gateway's
//!   stored responses before decoding (`proxy::stored`); one that reaches
//!   the codec is refused. What needs state this gateway does not keep
//!   (`conversation`, `prompt`, `item_reference`, uploaded `file_id`s,
//!   background mode) and built-in tools are refused: a request passed
//!   through to a `responses` upstream is never decoded, so refusing here
//!   only concerns translated requests.
//! - `store`, `include` and `stream_options` are notes for a Responses
//!   upstream only (the gateway always sends `store: false` and asks for
//!   encrypted reasoning); everything else unknown rides in the extras.

use super::custom::{custom_arguments, custom_parameters, format_note};
use super::flatten::{check_unique, members};
use super::reasoning::{carried, joined, Carried};
use crate::family::Family;
use crate::ir::media::parse_data_url;
use crate::ir::stream::parse_arguments;
use crate::ir::{
    Block, ChatRequest, Extra, FunctionTool, ImageBlock, ImageSource, JsonSchemaFormat, Message,
    Opaque, Reasoning, RedactedThinkingBlock, ResponseFormat, Role, SystemPrompt, SystemRole,
    TextBlock, ThinkingBlock, Tool, ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::common::json::{nested, parse_request, to_value, StringOr};
use crate::protocol::common::{DecodeContext, TranslateError};
use crate::protocol::responses::namespace::flat_name;
use crate::protocol::responses::wire::{
    Format, Item, Part, ReasoningConfig, ResponsesRequest, TextConfig, ToolDef,
};
use serde_json::{json, Map, Value};

const F: Family = Family::Responses;

/// Decodes a Responses request body.
pub fn decode(body: &[u8], ctx: &DecodeContext<'_>) -> Result<ChatRequest, TranslateError> {
    let wire: ResponsesRequest = parse_request(F, body)?;
    from_wire(wire, ctx)
}

fn stored_state(param: &str, what: &str) -> TranslateError {
    TranslateError::unsupported(
        param.to_string(),
        format!("{what} needs stored responses, which this gateway does not keep yet"),
    )
}

fn present(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

/// Converts a parsed Responses request into the canonical request.
pub fn from_wire(
    wire: ResponsesRequest,
    ctx: &DecodeContext<'_>,
) -> Result<ChatRequest, TranslateError> {
    if present(wire.previous_response_id.as_ref()) {
        // The proxy expands it into `input` first (proxy::stored); the codec
        // alone has no stored responses to continue.
        return Err(TranslateError::unsupported(
            "previous_response_id".to_string(),
            "previous_response_id is expanded from the gateway's stored responses before translation: the codec alone cannot continue a response",
        ));
    }
    let mut extra = wire.extra;
    if present(extra.get("conversation")) {
        return Err(stored_state("conversation", "a conversation"));
    }
    if extra.get("background") == Some(&json!(true)) {
        return Err(stored_state("background", "background mode"));
    }
    if present(extra.get("prompt")) {
        return Err(TranslateError::unsupported(
            "prompt".to_string(),
            "prompt templates are stored by OpenAI and are only available when the model is served by a responses upstream",
        ));
    }
    let mut req = ChatRequest {
        model: ctx.model.map_or(wire.model, str::to_string),
        ..ChatRequest::default()
    };
    if let Some(text) = wire.instructions {
        req.system.push(SystemPrompt {
            role: SystemRole::System,
            content: vec![TextBlock::new(text)],
            position: 0,
            extra: Extra::default(),
        });
    }
    match wire.input {
        None => {}
        Some(StringOr::String(text)) => {
            req.messages
                .push(Message::new(Role::User, vec![Block::text(text)]));
        }
        Some(StringOr::List(items)) => {
            let mut turns = Turns::default();
            for (i, item) in items.into_iter().enumerate() {
                turns.item(&mut req, item, i)?;
            }
        }
    }
    req.resolve_tool_result_names();

    if let Some(tools) = wire.tools {
        req.tools = decode_tools(tools)?;
    }
    if let Some(choice) = wire.tool_choice {
        req.tool_choice = Some(decode_tool_choice(&choice)?);
    }
    req.parallel_tool_calls = wire.parallel_tool_calls;
    if let Some(TextConfig {
        format,
        extra: mut text_extra,
    }) = wire.text
    {
        if let Some(f) = format {
            let (rf, format_extra) = decode_format(f)?;
            req.response_format = Some(rf);
            text_extra.extend(nested("format", format_extra));
        }
        if !text_extra.is_empty() {
            extra.insert("text".into(), Value::Object(text_extra));
        }
    }
    if let Some(r) = wire.reasoning {
        req.reasoning = decode_reasoning(r);
    }
    let s = &mut req.sampling;
    s.temperature = wire.temperature;
    s.top_p = wire.top_p;
    s.max_tokens = wire.max_output_tokens;
    // `safety_identifier` (kept verbatim for Responses upstreams) names the
    // end user when `user` does not.
    req.user = wire.user.or_else(|| {
        extra
            .get("safety_identifier")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    req.stream = wire.stream.unwrap_or(false) || ctx.stream;
    req.extra = Extra::new(F, extra);
    req.source = Some(F);
    Ok(req)
}

fn decode_reasoning(r: ReasoningConfig) -> Option<Reasoning> {
    let mut extra = r.extra;
    let summary = r.summary.or_else(|| {
        extra
            .get("generate_summary")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    if let Some(s) = &summary {
        extra.insert("summary".into(), json!(s));
    }
    let effort = r.effort.map(|e| e.to_ascii_lowercase());
    if effort.is_none() && summary.is_none() && extra.is_empty() {
        return None;
    }
    Some(Reasoning {
        enabled: effort.as_deref().map(|e| e != "none"),
        budget_tokens: None,
        effort,
        include_thoughts: summary.is_some().then_some(true),
        extra: Extra::new(F, extra),
    })
}

/// Groups items into canonical turns.
#[derive(Default)]
struct Turns {
    /// The assistant turn being built: its message index, and whether it has
    /// a message item already.
    assistant: Option<(usize, bool)>,
    /// The user turn of tool results being built.
    results: Option<usize>,
}

/// Which side of the conversation an item belongs to.
fn is_output_kind(kind: &str) -> bool {
    kind.ends_with("_output") || kind == "mcp_approval_response"
}

impl Turns {
    fn item(&mut self, req: &mut ChatRequest, item: Item, i: usize) -> Result<(), TranslateError> {
        let param = format!("input[{i}]");
        let kind = item.kind.clone().unwrap_or_else(|| "message".into());
        match kind.as_str() {
            "message" => self.message(req, item, &param),
            "function_call" | "custom_tool_call" => {
                let block = decode_call(item, &kind, &param)?;
                self.assistant_block(req, block);
                Ok(())
            }
            "reasoning" => {
                let block = decode_reasoning_item(item);
                self.assistant_block(req, block);
                Ok(())
            }
            "function_call_output" | "custom_tool_call_output" => {
                let block = decode_call_output(item, &param)?;
                self.assistant = None;
                match self.results {
                    Some(m) => req.messages[m].content.push(block),
                    None => {
                        self.results = Some(req.messages.len());
                        req.messages.push(Message::new(Role::User, vec![block]));
                    }
                }
                Ok(())
            }
            "item_reference" => Err(stored_state(&param, "an item_reference")),
            other => {
                // Items of built-in tools and other Responses-only items: kept
                // for a Responses upstream, refused by the other encoders.
                let block = Block::Opaque(Opaque {
                    origin: F,
                    kind: other.to_string(),
                    value: to_value(&item)?,
                });
                if is_output_kind(other) {
                    self.assistant = None;
                    self.results = None;
                    req.messages.push(Message::new(Role::User, vec![block]));
                } else {
                    self.assistant_block(req, block);
                }
                Ok(())
            }
        }
    }

    fn assistant_block(&mut self, req: &mut ChatRequest, block: Block) {
        self.results = None;
        match self.assistant {
            Some((m, _)) => req.messages[m].content.push(block),
            None => {
                self.assistant = Some((req.messages.len(), false));
                req.messages
                    .push(Message::new(Role::Assistant, vec![block]));
            }
        }
    }

    fn message(
        &mut self,
        req: &mut ChatRequest,
        item: Item,
        param: &str,
    ) -> Result<(), TranslateError> {
        let Item {
            kind,
            id,
            role,
            content,
            extra: item_extra,
            ..
        } = item;
        let mut extra = item_extra;
        if let Some(kind) = kind {
            extra.insert("type".into(), json!(kind));
        }
        if let Some(id) = id {
            extra.insert("id".into(), json!(id));
        }
        let role = role.unwrap_or_default();
        let content = content.unwrap_or(StringOr::String(String::new()));
        match role.as_str() {
            "system" | "developer" => {
                self.assistant = None;
                self.results = None;
                let mut texts = Vec::new();
                for (j, block) in decode_content(content, param)?.into_iter().enumerate() {
                    match block {
                        Block::Text(t) => texts.push(t),
                        other => {
                            return Err(TranslateError::invalid(
                                format!("{param}.content[{j}]"),
                                format!(
                                    "a {role} message can only hold text, not {}",
                                    other.kind()
                                ),
                            ))
                        }
                    }
                }
                req.system.push(SystemPrompt {
                    role: if role == "system" {
                        SystemRole::System
                    } else {
                        SystemRole::Developer
                    },
                    content: texts,
                    position: req.messages.len(),
                    extra: Extra::new(F, extra),
                });
            }
            "user" => {
                self.assistant = None;
                self.results = None;
                let blocks = decode_content(content, param)?;
                req.messages.push(Message {
                    role: Role::User,
                    content: blocks,
                    extra: Extra::new(F, extra),
                });
            }
            "assistant" => {
                self.results = None;
                let blocks = decode_content(content, param)?;
                match self.assistant {
                    Some((m, false)) if req.messages[m].extra.is_empty() => {
                        let msg = &mut req.messages[m];
                        msg.content.extend(blocks);
                        msg.extra = Extra::new(F, extra);
                        self.assistant = Some((m, true));
                    }
                    _ => {
                        self.assistant = Some((req.messages.len(), true));
                        req.messages.push(Message {
                            role: Role::Assistant,
                            content: blocks,
                            extra: Extra::new(F, extra),
                        });
                    }
                }
            }
            other => {
                return Err(TranslateError::invalid(
                    format!("{param}.role"),
                    format!(
                        "unknown message role \"{other}\" (expected user, assistant, system or developer)"
                    ),
                ))
            }
        }
        Ok(())
    }
}

/// Decodes message content (a string or parts) into blocks.
fn decode_content(content: StringOr<Part>, param: &str) -> Result<Vec<Block>, TranslateError> {
    match content {
        StringOr::String(text) => Ok(vec![Block::text(text)]),
        StringOr::List(parts) => parts
            .into_iter()
            .enumerate()
            .map(|(j, part)| decode_part(part, &format!("{param}.content[{j}]")))
            .collect(),
    }
}

fn missing(param: &str, kind: &str, field: &str) -> TranslateError {
    TranslateError::invalid(
        param.to_string(),
        format!("an \"{kind}\" part is missing its \"{field}\" field"),
    )
}

fn uploaded_file(param: &str) -> TranslateError {
    TranslateError::unsupported(
        format!("{param}.file_id"),
        "uploaded files (file_id) are only available when the model is served by a responses upstream; send the data inline instead",
    )
}

/// Decodes one content part.
pub(crate) fn decode_part(part: Part, param: &str) -> Result<Block, TranslateError> {
    let kind = part.kind.clone();
    match kind.as_str() {
        "input_text" | "output_text" | "text" => {
            let Some(text) = part.text else {
                return Err(missing(param, &kind, "text"));
            };
            let mut extra = part.extra;
            if kind != "input_text" {
                extra.insert("type".into(), json!(kind));
            }
            Ok(Block::Text(TextBlock {
                text,
                extra: Extra::new(F, extra),
                ..TextBlock::default()
            }))
        }
        "refusal" => {
            let Some(text) = part.refusal else {
                return Err(missing(param, &kind, "refusal"));
            };
            let mut extra = part.extra;
            extra.insert("type".into(), json!("refusal"));
            Ok(Block::Text(TextBlock {
                text,
                extra: Extra::new(F, extra),
                ..TextBlock::default()
            }))
        }
        "input_image" => {
            if part.file_id.is_some() {
                return Err(uploaded_file(param));
            }
            let Some(url) = part.image_url else {
                return Err(missing(param, &kind, "image_url"));
            };
            let source = match parse_data_url(&url) {
                None => ImageSource::Url {
                    url,
                    media_type: None,
                },
                Some(Ok((media_type, data))) => ImageSource::Base64 { media_type, data },
                Some(Err(why)) => {
                    return Err(TranslateError::invalid(
                        format!("{param}.image_url"),
                        format!("unusable image data URL: {why}"),
                    ))
                }
            };
            Ok(Block::Image(ImageBlock {
                source,
                detail: part.detail,
                cache_control: None,
                extra: Extra::new(F, part.extra),
            }))
        }
        "input_file" => {
            if part.file_id.is_some() {
                return Err(uploaded_file(param));
            }
            // An image sent as a file is an image; any other document has no
            // canonical form (other encoders refuse it by name).
            if let Some(Some(Ok((media_type, data)))) = part
                .extra
                .get("file_data")
                .and_then(Value::as_str)
                .map(parse_data_url)
            {
                if media_type.starts_with("image/") && part.extra.len() <= 2 {
                    return Ok(Block::Image(ImageBlock {
                        source: ImageSource::Base64 { media_type, data },
                        detail: part.detail,
                        cache_control: None,
                        extra: Extra::default(),
                    }));
                }
            }
            Ok(Block::Opaque(Opaque {
                origin: F,
                kind,
                value: to_value(&part)?,
            }))
        }
        _ => Ok(Block::Opaque(Opaque {
            origin: F,
            kind,
            value: to_value(&part)?,
        })),
    }
}

/// Item fields other than the ones read into the canonical model.
fn item_extra(item: &mut Item) -> Map<String, Value> {
    let mut extra = std::mem::take(&mut item.extra);
    if let Some(id) = item.id.take() {
        extra.insert("id".into(), json!(id));
    }
    extra
}

fn decode_call(mut item: Item, kind: &str, param: &str) -> Result<Block, TranslateError> {
    let Some(call_id) = item.call_id.take() else {
        return Err(TranslateError::invalid(
            format!("{param}.call_id"),
            format!("a {kind} item needs a call_id"),
        ));
    };
    let Some(name) = item.name.take() else {
        return Err(TranslateError::invalid(
            format!("{param}.name"),
            format!("a {kind} item needs a name"),
        ));
    };
    let arguments = if kind == "custom_tool_call" {
        custom_arguments(item.input.as_deref().unwrap_or_default())
    } else {
        parse_arguments(item.arguments.as_deref().unwrap_or_default())
    };
    // A call of a namespace's tool, under the flat name its tool has.
    let name = match item.extra.remove("namespace") {
        Some(Value::String(ns)) => flat_name(&ns, &name),
        None | Some(Value::Null) => name,
        Some(other) => {
            item.extra.insert("namespace".into(), other);
            name
        }
    };
    Ok(Block::ToolCall(ToolCall {
        id: call_id,
        name,
        arguments,
        signature: None,
        cache_control: None,
        extra: Extra::new(F, item_extra(&mut item)),
    }))
}

fn decode_call_output(mut item: Item, param: &str) -> Result<Block, TranslateError> {
    let Some(call_id) = item.call_id.take() else {
        return Err(TranslateError::invalid(
            format!("{param}.call_id"),
            "a tool call output item needs a call_id",
        ));
    };
    let content = match item.output.take() {
        None => Vec::new(),
        Some(StringOr::String(text)) => vec![Block::text(text)],
        Some(StringOr::List(parts)) => parts
            .into_iter()
            .enumerate()
            .map(|(j, p)| decode_part(p, &format!("{param}.output[{j}]")))
            .collect::<Result<_, _>>()?,
    };
    Ok(Block::ToolResult(ToolResult {
        call_id,
        name: None,
        content,
        is_error: None,
        cache_control: None,
        extra: Extra::new(F, item_extra(&mut item)),
    }))
}

/// A `reasoning` item (input or output) as a thinking block.
pub(crate) fn decode_reasoning_item(mut item: Item) -> Block {
    let summary = item.summary.take().unwrap_or_default();
    let mut text = joined(&summary);
    let mut extra = std::mem::take(&mut item.extra);
    if let Some(content) = item.content.take() {
        if let StringOr::List(parts) = &content {
            if text.is_empty() {
                text = joined(parts);
            }
        }
        if let Ok(v) = serde_json::to_value(&content) {
            extra.insert("content".into(), v);
        }
    }
    let id = item.id.take().unwrap_or_default();
    let signature = match item.encrypted_content.take() {
        Some(e) => match carried(&id, &e) {
            Carried::Redacted(data) => {
                return Block::RedactedThinking(RedactedThinkingBlock {
                    data,
                    extra: Extra::default(),
                })
            }
            Carried::Signature(sig) => Some(sig),
        },
        None => {
            if !id.is_empty() {
                extra.insert("id".into(), json!(id));
            }
            None
        }
    };
    Block::Thinking(ThinkingBlock {
        text,
        signature,
        extra: Extra::new(F, extra),
    })
}

fn built_in(param: String, kind: &str) -> TranslateError {
    TranslateError::unsupported(
        param,
        format!(
            "the built-in tool \"{kind}\" is only available when the model is served by a responses upstream; built-in tools are not translated to other protocols"
        ),
    )
}

/// The tools of a request, each `namespace` replaced by its members
/// (`super::flatten`).
fn decode_tools(tools: Vec<ToolDef>) -> Result<Vec<Tool>, TranslateError> {
    let mut out = Vec::with_capacity(tools.len());
    // Where each flattened member sits in `out`, and its place in the request.
    let mut flattened = Vec::new();
    for (i, tool) in tools.into_iter().enumerate() {
        if tool.kind == "namespace" {
            for (member, at) in members(tool, i)? {
                out.push(decode_tool_at(member, &at)?);
                flattened.push((out.len() - 1, at));
            }
        } else {
            out.push(decode_tool_at(tool, &format!("tools[{i}]"))?);
        }
    }
    check_unique(&out, &flattened)?;
    Ok(out)
}

#[cfg(test)]
pub(super) fn decode_tool(tool: ToolDef, i: usize) -> Result<Tool, TranslateError> {
    decode_tool_at(tool, &format!("tools[{i}]"))
}

/// One `function` or `custom` tool (`param`: where it is in the request).
pub(super) fn decode_tool_at(tool: ToolDef, param: &str) -> Result<Tool, TranslateError> {
    let param = param.to_string();
    match tool.kind.as_str() {
        "function" | "custom" => {
            let Some(name) = tool.name.filter(|n| !n.is_empty()) else {
                return Err(TranslateError::invalid(
                    format!("{param}.name"),
                    format!("a {} tool needs a name", tool.kind),
                ));
            };
            let mut extra = tool.extra;
            if tool.kind == "function" {
                return Ok(Tool::Function(FunctionTool {
                    name,
                    description: tool.description,
                    parameters: tool.parameters,
                    strict: tool.strict,
                    cache_control: None,
                    extra: Extra::new(F, extra),
                }));
            }
            let note = format_note(tool.format.as_ref());
            extra.insert("type".into(), json!("custom"));
            if let Some(format) = tool.format {
                extra.insert("format".into(), format);
            }
            let description = match (tool.description, note.is_empty()) {
                (Some(d), _) => Some(format!("{d}{note}")),
                (None, false) => Some(note.trim_start().to_string()),
                (None, true) => None,
            };
            Ok(Tool::Function(FunctionTool {
                name,
                description,
                parameters: Some(custom_parameters()),
                strict: None,
                cache_control: None,
                extra: Extra::new(F, extra),
            }))
        }
        other => Err(built_in(param, other)),
    }
}

/// A named tool in a `tool_choice` or `allowed_tools` entry.
fn chosen_name(v: &Value, param: &str) -> Result<String, TranslateError> {
    match v.get("type").and_then(Value::as_str) {
        Some("function" | "custom") => {
            let name = v.get("name").and_then(Value::as_str).ok_or_else(|| {
                TranslateError::invalid(param.to_string(), "the tool's name is missing")
            })?;
            // A namespace's tool is chosen by its flat name.
            Ok(match v.get("namespace").and_then(Value::as_str) {
                Some(ns) => flat_name(ns, name),
                None => name.to_string(),
            })
        }
        Some(kind) => Err(built_in(param.to_string(), kind)),
        None => Err(TranslateError::invalid(
            param.to_string(),
            "a tool choice object needs a type",
        )),
    }
}

fn decode_tool_choice(choice: &Value) -> Result<ToolChoice, TranslateError> {
    let bad = |why: String| TranslateError::invalid("tool_choice".to_string(), why);
    match choice {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => Err(bad(format!(
                "unknown tool_choice \"{other}\" (expected auto, none, required or an object)"
            ))),
        },
        Value::Object(obj) => match obj.get("type").and_then(Value::as_str) {
            Some("allowed_tools") => {
                let required = match obj.get("mode").and_then(Value::as_str) {
                    Some("required") => true,
                    Some("auto") | None => false,
                    Some(other) => {
                        return Err(bad(format!("unknown allowed_tools mode \"{other}\"")))
                    }
                };
                let mut names = Vec::new();
                for (k, t) in obj
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    names.push(chosen_name(t, &format!("tool_choice.tools[{k}]"))?);
                }
                Ok(ToolChoice::Allowed { required, names })
            }
            _ => chosen_name(choice, "tool_choice").map(ToolChoice::Tool),
        },
        _ => Err(bad("tool_choice must be a string or an object".into())),
    }
}

fn decode_format(f: Format) -> Result<(ResponseFormat, Map<String, Value>), TranslateError> {
    let rf = match f.kind.as_str() {
        "text" => ResponseFormat::Text,
        "json_object" => ResponseFormat::JsonObject,
        "json_schema" => {
            let Some(schema) = f.schema else {
                return Err(TranslateError::invalid(
                    "text.format.schema".to_string(),
                    "a json_schema format needs a \"schema\"",
                ));
            };
            ResponseFormat::JsonSchema(JsonSchemaFormat {
                name: f.name,
                description: f.description,
                schema,
                strict: f.strict,
            })
        }
        other => {
            return Err(TranslateError::invalid(
                "text.format.type".to_string(),
                format!("unknown text.format type \"{other}\""),
            ))
        }
    };
    Ok((rf, f.extra))
}
