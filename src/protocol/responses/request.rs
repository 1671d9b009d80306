//! OpenAI Responses request codec: wire JSON ⇄ canonical request.
//!
//! # Decoding (a family D client's request, always for another family's upstream)
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
//!   function tools taking one string argument named [`CUSTOM_INPUT_KEY`],
//!   their grammar appended to the description; `custom_tool_call` items are
//!   tool calls with arguments `{CUSTOM_INPUT_KEY: input}`, and their outputs
//!   tool results. Response encoders recognise a call by that argument shape
//!   and write `custom_tool_call` items back.
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
//!
//! # Encoding (for a Responses upstream at `{base_url}/responses`)
//!
//! The first system prompt, when it opens the conversation, is
//! `instructions`; the others are `system` / `developer` message items.
//! Thinking is sent back only as a reasoning item this upstream issued (a
//! packed signature); other reasoning cannot be verified by OpenAI and is
//! left out, like Anthropic leaves out unsigned thinking. `store` is always
//! `false`, and `include` asks for `reasoning.encrypted_content` whenever the
//! request reasons (see [`wants_encrypted_reasoning`]).
//! Stop sequences, `top_k`, `seed` and penalties have no Responses
//! counterpart and are dropped and reported.

use super::wire::{Format, Item, Part, ReasoningConfig, ResponsesRequest, TextConfig, ToolDef};
use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::media::{data_url, parse_data_url};
use crate::ir::signature::{
    unwrap_reasoning_item, wrap_reasoning_item, FOREIGN_REDACTED_PREFIX, FOREIGN_SIGNATURE_PREFIX,
};
use crate::ir::stream::{arguments_text, parse_arguments};
use crate::ir::{
    deep_merge, Block, ChatRequest, Extra, FunctionTool, ImageBlock, ImageSource, JsonSchemaFormat,
    Message, Opaque, Reasoning, RedactedThinkingBlock, ResponseFormat, Role, SystemPrompt,
    SystemRole, TextBlock, ThinkingBlock, Tool, ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::common::json::{nested, parse_request, take_nested, to_value, StringOr};
use crate::protocol::common::report::{self, Param};
use crate::protocol::common::{DecodeContext, EncodeOptions, TranslateError};
use crate::util::base64::to_standard as standard_base64;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

const F: Family = Family::Responses;

/// The one argument of the function a `custom` tool becomes for other protocols.
pub const CUSTOM_INPUT_KEY: &str = "custom_tool_input";

/// The encrypted reasoning the gateway asks a Responses upstream for.
const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

// ---------------------------------------------------------------- custom tools

/// The JSON Schema of the single string argument a custom tool becomes.
pub fn custom_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            CUSTOM_INPUT_KEY: {
                "type": "string",
                "description": "The tool's free-form input, as plain text (not JSON)."
            }
        },
        "required": [CUSTOM_INPUT_KEY],
        "additionalProperties": false
    })
}

/// What a custom tool's format adds to its description (empty for free text).
fn format_note(format: Option<&Value>) -> String {
    let Some(f) = format else {
        return String::new();
    };
    if f.get("type").and_then(Value::as_str) != Some("grammar") {
        return String::new();
    }
    let syntax = f.get("syntax").and_then(Value::as_str).unwrap_or("lark");
    let definition = f.get("definition").and_then(Value::as_str).unwrap_or("");
    format!("\n\nThe input must follow this {syntax} grammar:\n{definition}")
}

/// The custom tool input when `arguments` have the shape a custom tool call
/// takes in the canonical model (`{CUSTOM_INPUT_KEY: "…"}`).
pub fn custom_input(arguments: &Value) -> Option<&str> {
    let obj = arguments.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    obj.get(CUSTOM_INPUT_KEY)?.as_str()
}

/// The canonical arguments of a custom tool call.
pub fn custom_arguments(input: &str) -> Value {
    json!({ CUSTOM_INPUT_KEY: input })
}

// ---------------------------------------------------------------- decoding

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
        for (i, tool) in tools.into_iter().enumerate() {
            req.tools.push(decode_tool(tool, i)?);
        }
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

/// Joins the texts of reasoning parts.
fn joined(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
    texts.join("\n\n")
}

/// What a reasoning item's `encrypted_content` stands for in the canonical model.
pub(crate) enum Carried {
    /// A thinking signature: an Anthropic / Gemini one this gateway wrapped,
    /// or the item itself, packed (see [`crate::ir::signature`]).
    Signature(String),
    /// Anthropic redacted thinking this gateway wrapped.
    Redacted(String),
}

/// Reads a reasoning item's `encrypted_content`.
pub(crate) fn carried(id: &str, encrypted: &str) -> Carried {
    if let Some(data) = encrypted.strip_prefix(FOREIGN_REDACTED_PREFIX) {
        return Carried::Redacted(data.to_string());
    }
    match encrypted.strip_prefix(FOREIGN_SIGNATURE_PREFIX) {
        Some(native) => Carried::Signature(native.to_string()),
        None => Carried::Signature(wrap_reasoning_item(id, encrypted)),
    }
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

fn decode_tool(tool: ToolDef, i: usize) -> Result<Tool, TranslateError> {
    let param = format!("tools[{i}]");
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
        "namespace" => Err(TranslateError::unsupported(
            param,
            "namespace tools are only available when the model is served by a responses upstream",
        )),
        other => Err(built_in(param, other)),
    }
}

/// A named tool in a `tool_choice` or `allowed_tools` entry.
fn chosen_name(v: &Value, param: &str) -> Result<String, TranslateError> {
    match v.get("type").and_then(Value::as_str) {
        Some("function" | "custom") => v
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                TranslateError::invalid(param.to_string(), "the tool's name is missing")
            }),
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

// ---------------------------------------------------------------- encoding

/// Adds an IR object's Responses extra fields to its encoded wire value.
fn merged(value: Value, extra: &Extra) -> Value {
    let mut value = value;
    if let (Value::Object(obj), Some(fields)) = (&mut value, extra.for_family(F)) {
        deep_merge(obj, fields);
    }
    value
}

fn describe(block: &Block) -> String {
    match block {
        Block::Opaque(o) => format!("{} \"{}\"", o.origin, o.kind),
        other => other.kind().to_string(),
    }
}

fn unsupported_block(param: &str, block: &Block, where_: &str) -> TranslateError {
    TranslateError::unsupported(
        param.to_string(),
        format!(
            "{} content cannot be expressed in a Responses {where_}",
            describe(block)
        ),
    )
}

/// The call ids of the conversation's custom tool calls.
fn custom_call_ids(req: &ChatRequest) -> HashSet<&str> {
    req.messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolCall(c)
                if custom_input(&c.arguments).is_some() && is_custom_name(req, &c.name) =>
            {
                Some(c.id.as_str())
            }
            _ => None,
        })
        .collect()
}

/// Whether the request's tool `name` was a custom tool (or the request does not say).
fn is_custom_name(req: &ChatRequest, name: &str) -> bool {
    req.tools.iter().all(|t| match t {
        Tool::Function(f) if f.name == name => is_custom_tool(f),
        _ => true,
    })
}

fn is_custom_tool(f: &FunctionTool) -> bool {
    f.extra.get(F, "type").and_then(Value::as_str) == Some("custom")
}

/// An input text part (`input_text`, or the part type the client used).
fn text_part(t: &TextBlock, default_kind: &str) -> Value {
    let mut v = json!({"type": default_kind, "text": t.text});
    if let Some(fields) = t.extra.for_family(F) {
        if let (Value::Object(obj), true) =
            (&mut v, fields.get("type").is_some_and(|k| k == "refusal"))
        {
            obj.remove("text");
            obj.insert("refusal".into(), json!(t.text));
        }
        if let Value::Object(obj) = &mut v {
            deep_merge(obj, fields);
        }
    }
    v
}

fn image_part(img: &ImageBlock) -> Value {
    let url = match &img.source {
        ImageSource::Base64 { media_type, data } => data_url(media_type, &standard_base64(data)),
        ImageSource::Url { url, .. } => url.clone(),
    };
    let mut v = json!({"type": "input_image", "image_url": url});
    v["detail"] = json!(img.detail.as_deref().unwrap_or("auto"));
    merged(v, &img.extra)
}

/// One user-side content part.
fn input_part(block: &Block, param: &str, where_: &str) -> Result<Value, TranslateError> {
    match block {
        Block::Text(t) => Ok(text_part(t, "input_text")),
        Block::Image(img) => Ok(image_part(img)),
        Block::Opaque(o) if o.origin == F => Ok(o.value.clone()),
        other => Err(unsupported_block(param, other, where_)),
    }
}

/// Content of a message item: a bare string for one plain text block, else parts.
fn message_content(
    blocks: &[&Block],
    param: &str,
    assistant: bool,
) -> Result<Value, TranslateError> {
    if let [Block::Text(t)] = blocks {
        if t.extra.for_family(F).is_none() && !assistant {
            return Ok(json!(t.text));
        }
    }
    let mut parts = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.iter().enumerate() {
        let p = format!("{param}.content[{j}]");
        parts.push(match block {
            Block::Text(t) if assistant => {
                let mut v = text_part(t, "output_text");
                if v.get("type") == Some(&json!("output_text")) && v.get("annotations").is_none() {
                    v["annotations"] = json!([]);
                }
                v
            }
            other => input_part(
                other,
                &p,
                if assistant {
                    "assistant message"
                } else {
                    "user message"
                },
            )?,
        });
    }
    Ok(Value::Array(parts))
}

fn message_item(role: &str, content: Value, extra: Option<&Extra>) -> Value {
    let mut v = json!({"role": role, "content": content});
    if let Some(extra) = extra {
        v = merged(v, extra);
    }
    v
}

/// A reasoning item for a thinking block this upstream issued (`None` otherwise).
fn reasoning_item(t: &ThinkingBlock) -> Option<Value> {
    let packed = t.signature.as_deref().and_then(unwrap_reasoning_item);
    let own_id = t.extra.get(F, "id").and_then(Value::as_str);
    let (id, encrypted) = match (packed, own_id) {
        (Some((id, e)), _) => (id, Some(e)),
        (None, Some(id)) => (id.to_string(), None),
        (None, None) => return None,
    };
    let summary = if t.text.is_empty() {
        json!([])
    } else {
        json!([{"type": "summary_text", "text": t.text}])
    };
    let mut v = json!({"type": "reasoning", "id": id, "summary": summary});
    if let Some(e) = encrypted {
        v["encrypted_content"] = json!(e);
    }
    let mut v = merged(v, &t.extra);
    // A reasoning text the summary was read from goes back where it came from.
    if v.get("content").is_some() {
        if let Value::Object(obj) = &mut v {
            let from_content = obj
                .get("content")
                .and_then(Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n\n")
                })
                .is_some_and(|joined| joined == t.text);
            if from_content {
                obj.insert("summary".into(), json!([]));
            }
        }
    }
    Some(v)
}

fn call_item(c: &ToolCall, custom: bool) -> Value {
    let v = match custom_input(&c.arguments).filter(|_| custom) {
        Some(input) => json!({
            "type": "custom_tool_call",
            "call_id": c.id,
            "name": c.name,
            "input": input,
        }),
        None => json!({
            "type": "function_call",
            "call_id": c.id,
            "name": c.name,
            "arguments": arguments_text(&c.arguments),
        }),
    };
    merged(v, &c.extra)
}

fn output_item(r: &ToolResult, custom: bool, param: &str) -> Result<Value, TranslateError> {
    let output = match r.content.as_slice() {
        [] => json!(""),
        [Block::Text(t)] if t.extra.for_family(F).is_none() => json!(t.text),
        blocks => {
            let mut parts = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                parts.push(input_part(
                    b,
                    &format!("{param}.content[{j}]"),
                    "tool output",
                )?);
            }
            Value::Array(parts)
        }
    };
    let kind = if custom {
        "custom_tool_call_output"
    } else {
        "function_call_output"
    };
    Ok(merged(
        json!({"type": kind, "call_id": r.call_id, "output": output}),
        &r.extra,
    ))
}

fn encode_message(
    msg: &Message,
    i: usize,
    custom_ids: &HashSet<&str>,
    out: &mut Vec<Value>,
) -> Result<(), TranslateError> {
    let param = format!("messages[{i}]");
    let mut pending: Vec<&Block> = Vec::new();
    let mut message_extra = Some(&msg.extra);
    let assistant = msg.role == Role::Assistant;
    let role = if assistant { "assistant" } else { "user" };
    let flush = |pending: &mut Vec<&Block>,
                 extra: &mut Option<&Extra>,
                 out: &mut Vec<Value>|
     -> Result<(), TranslateError> {
        if pending.is_empty() {
            return Ok(());
        }
        let content = message_content(pending, &param, assistant)?;
        out.push(message_item(role, content, extra.take()));
        pending.clear();
        Ok(())
    };
    for (j, block) in msg.content.iter().enumerate() {
        let bp = format!("{param}.content[{j}]");
        match (msg.role, block) {
            (Role::User, Block::ToolResult(r)) => {
                flush(&mut pending, &mut message_extra, out)?;
                out.push(output_item(
                    r,
                    custom_ids.contains(r.call_id.as_str()),
                    &bp,
                )?);
            }
            (Role::User, Block::ToolCall(_)) => {
                return Err(TranslateError::invalid(
                    bp,
                    "a user message cannot contain a tool call",
                ))
            }
            (_, Block::Thinking(t)) => {
                flush(&mut pending, &mut message_extra, out)?;
                if assistant {
                    out.extend(reasoning_item(t));
                }
            }
            (_, Block::RedactedThinking(_)) => {}
            (Role::Assistant, Block::ToolCall(c)) => {
                flush(&mut pending, &mut message_extra, out)?;
                out.push(call_item(c, custom_ids.contains(c.id.as_str())));
            }
            (Role::Assistant, Block::ToolResult(_)) => {
                return Err(TranslateError::invalid(
                    bp,
                    "an assistant message cannot contain a tool result",
                ))
            }
            (_, Block::Opaque(o))
                if o.origin == F
                    && o.value.get("type").is_some_and(|t| {
                        t.as_str().is_some_and(|t| {
                            !t.starts_with("input_") && !t.starts_with("output_") && t != "refusal"
                        })
                    }) =>
            {
                // A whole item (a built-in tool's call or output).
                flush(&mut pending, &mut message_extra, out)?;
                out.push(o.value.clone());
            }
            (Role::Assistant, Block::Image(_)) => {
                return Err(unsupported_block(&bp, block, "assistant message"))
            }
            _ => pending.push(block),
        }
    }
    flush(&mut pending, &mut message_extra, out)?;
    if msg.content.is_empty() {
        out.push(message_item(role, json!(""), message_extra));
    }
    Ok(())
}

fn encode_system(sp: &SystemPrompt) -> Value {
    let role = match sp.role {
        SystemRole::System => "system",
        SystemRole::Developer => "developer",
    };
    let content = match sp.content.as_slice() {
        [only] if only.extra.for_family(F).is_none() => json!(only.text),
        blocks => Value::Array(blocks.iter().map(|t| text_part(t, "input_text")).collect()),
    };
    merged(json!({"role": role, "content": content}), &sp.extra)
}

/// The first system prompt becomes `instructions` when it opens the
/// conversation, is a plain `system` prompt and was not a message item.
fn instructions(req: &ChatRequest) -> Option<String> {
    let sp = req.system.first()?;
    let plain = sp.position == 0
        && sp.role == SystemRole::System
        && sp.extra.for_family(F).is_none()
        && sp.content.iter().all(|t| t.extra.for_family(F).is_none());
    plain.then(|| {
        sp.content
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    })
}

fn encode_tool(tool: &Tool, i: usize, source: Option<Family>) -> Result<Value, TranslateError> {
    match tool {
        Tool::Function(f) if is_custom_tool(f) => {
            let mut extra = f.extra.to_map(F);
            let format = extra.remove("format");
            extra.remove("type");
            let note = format_note(format.as_ref());
            let description = f.description.as_deref().map(|d| {
                d.strip_suffix(note.as_str())
                    .or_else(|| (d == note.trim_start()).then_some(""))
                    .unwrap_or(d)
            });
            let mut v = json!({"type": "custom", "name": f.name});
            if let Some(d) = description.filter(|d| !d.is_empty()) {
                v["description"] = json!(d);
            }
            if let Some(format) = format {
                v["format"] = format;
            }
            if let Value::Object(obj) = &mut v {
                deep_merge(obj, &extra);
            }
            Ok(v)
        }
        Tool::Function(f) => {
            let mut v = json!({"type": "function", "name": f.name});
            if let Some(d) = &f.description {
                v["description"] = json!(d);
            }
            v["parameters"] = f
                .parameters
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            // Responses functions are strict unless told otherwise, which
            // refuses most schemas written for other protocols.
            match (f.strict, source) {
                (Some(s), _) => v["strict"] = json!(s),
                (None, Some(Family::Responses)) => {}
                (None, _) => v["strict"] = json!(false),
            }
            Ok(merged(v, &f.extra))
        }
        Tool::Opaque(o) if o.origin == F => Ok(o.value.clone()),
        Tool::Opaque(o) => Err(TranslateError::unsupported(
            format!("tools[{i}]"),
            format!(
                "the {} tool type \"{}\" cannot be expressed in the Responses API",
                o.origin, o.kind
            ),
        )),
    }
}

fn encode_tool_choice(choice: &ToolChoice, req: &ChatRequest) -> Value {
    let named = |name: &str| {
        let custom = req
            .tools
            .iter()
            .any(|t| matches!(t, Tool::Function(f) if f.name == name && is_custom_tool(f)));
        json!({"type": if custom { "custom" } else { "function" }, "name": name})
    };
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => named(name),
        ToolChoice::Allowed { required, names } => json!({
            "type": "allowed_tools",
            "mode": if *required { "required" } else { "auto" },
            "tools": names.iter().map(|n| named(n)).collect::<Vec<_>>(),
        }),
    }
}

fn encode_format(rf: &ResponseFormat) -> Value {
    match rf {
        ResponseFormat::Text => json!({"type": "text"}),
        ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema(js) => {
            let mut v = json!({
                "type": "json_schema",
                "name": js.name.as_deref().unwrap_or("response"),
                "schema": js.schema,
            });
            if let Some(d) = &js.description {
                v["description"] = json!(d);
            }
            if let Some(s) = js.strict {
                v["strict"] = json!(s);
            }
            v
        }
    }
}

/// `reasoning.effort` for canonical settings (as chat-completions'
/// `reasoning_effort`, see [`crate::protocol::openai`]; a Responses client's
/// own level is kept).
fn encode_effort(r: &Reasoning, req: &ChatRequest, adj: &mut Adjustments) -> Option<String> {
    if req.source == Some(F) {
        return r.effort.clone();
    }
    crate::protocol::openai::request::encode_effort(r, req, adj)
}

/// The `reasoning` object: effort, and a summary when the client wants to
/// see reasoning (Gemini `includeThoughts`, Anthropic `thinking`, a
/// Responses client's own `summary`). An effort alone (OpenAI chat, a Gemini
/// level) does not ask for one: summaries need a verified OpenAI organization.
fn encode_reasoning(req: &ChatRequest, adj: &mut Adjustments) -> Option<Value> {
    let r = req.reasoning.as_ref()?;
    let mut out = Map::new();
    if let Some(effort) = encode_effort(r, req, adj) {
        out.insert("effort".into(), json!(effort));
    }
    // Anthropic thinking is returned whenever it is on; Gemini thoughts only
    // with `includeThoughts`.
    let wants_text = r.include_thoughts == Some(true)
        || (r.enabled == Some(true) && req.source == Some(Family::Anthropic));
    if wants_text && !r.is_off() {
        out.insert("summary".into(), json!("auto"));
    }
    if let Some(extra) = r.extra.for_family(F) {
        deep_merge(&mut out, extra);
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// Whether to ask for `reasoning.encrypted_content`: when the request asks
/// for reasoning, or sends back reasoning this upstream issued. Not always:
/// OpenAI refuses the `include` for models that do not reason ("Encrypted
/// content is not supported with this model"), and the policy has already
/// taken reasoning settings out of requests for models without reasoning.
fn wants_encrypted_reasoning(req: &ChatRequest) -> bool {
    req.reasoning.as_ref().is_some_and(|r| !r.is_off())
        || req.messages.iter().flat_map(|m| &m.content).any(|b| {
            matches!(b, Block::Thinking(t) if t.signature.as_deref().is_some_and(crate::ir::signature::is_reasoning_item))
        })
}

/// Encodes the canonical request as a Responses request body; what the
/// Responses API cannot carry is recorded in `adj`.
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
                "{n} answers were asked for (OpenAI n / Gemini candidateCount), but the Responses API returns one answer per request"
            ),
        ));
    }

    let instructions = instructions(req);
    let skip = usize::from(instructions.is_some());
    let custom_ids = custom_call_ids(req);
    let mut input = Vec::new();
    let mut systems = req.system.iter().skip(skip).peekable();
    for (i, msg) in req.messages.iter().enumerate() {
        let mut pending = Vec::new();
        while let Some(sp) = systems.next_if(|sp| sp.position <= i) {
            pending.push(encode_system(sp));
        }
        let mut encoded = Vec::new();
        encode_message(msg, i, &custom_ids, &mut encoded)?;
        // Tool outputs follow their calls directly (as chat-completions
        // requires of tool messages): a system message placed before the
        // outputs goes after them.
        let outputs = encoded
            .iter()
            .take_while(|item| {
                item.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.ends_with("_call_output"))
            })
            .count();
        let mut encoded = encoded.into_iter();
        input.extend(encoded.by_ref().take(outputs));
        input.extend(pending);
        input.extend(encoded);
    }
    input.extend(systems.map(encode_system));

    let mut tools = Vec::new();
    for (i, tool) in req.tools.iter().enumerate() {
        tools.push(encode_tool(tool, i, req.source)?);
    }

    if !s.stop.is_empty() {
        report::dropped(req, Param::Stop, adj);
    }
    for (set, param) in [
        (s.top_k.is_some(), Param::TopK),
        (s.seed.is_some(), Param::Seed),
        (s.presence_penalty.is_some(), Param::PresencePenalty),
        (s.frequency_penalty.is_some(), Param::FrequencyPenalty),
    ] {
        if set {
            report::dropped(req, param, adj);
        }
    }

    let mut out = Map::new();
    out.insert("model".into(), json!(opts.upstream_model));
    if let Some(text) = instructions {
        out.insert("instructions".into(), json!(text));
    }
    out.insert("input".into(), Value::Array(input));
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = &req.tool_choice {
        out.insert("tool_choice".into(), encode_tool_choice(choice, req));
    }
    if let Some(p) = req.parallel_tool_calls {
        out.insert("parallel_tool_calls".into(), json!(p));
    }
    let mut text_extra = take_nested(&mut extra, "text");
    if let Some(rf) = &req.response_format {
        let mut format = encode_format(rf);
        let format_extra = take_nested(&mut text_extra, "format");
        if let Value::Object(obj) = &mut format {
            deep_merge(obj, &format_extra);
        }
        text_extra.insert("format".into(), format);
    }
    if !text_extra.is_empty() {
        out.insert("text".into(), Value::Object(text_extra));
    }
    if let Some(r) = encode_reasoning(req, adj) {
        out.insert("reasoning".into(), r);
    }
    if let Some(n) = s.max_tokens {
        out.insert("max_output_tokens".into(), json!(n));
    }
    if let Some(t) = s.temperature {
        out.insert("temperature".into(), json!(t));
    }
    if let Some(p) = s.top_p {
        out.insert("top_p".into(), json!(p));
    }
    if let Some(user) = &req.user {
        let said_safety_identifier =
            extra.get("safety_identifier").and_then(Value::as_str) == Some(user.as_str());
        if !said_safety_identifier {
            if req.source == Some(F) {
                out.insert("user".into(), json!(user));
            } else {
                out.insert(
                    "safety_identifier".into(),
                    json!(crate::protocol::openai::request::openai_user(user)),
                );
            }
        }
    }
    if opts.stream {
        out.insert("stream".into(), json!(true));
    } else {
        extra.remove("stream_options");
    }
    // The gateway keeps no state upstream, and carries reasoning itself.
    extra.remove("store");
    out.insert("store".into(), json!(false));
    let mut include: Vec<Value> = match extra.remove("include") {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    if wants_encrypted_reasoning(req) && !include.iter().any(|v| v == ENCRYPTED_REASONING) {
        include.push(json!(ENCRYPTED_REASONING));
    }
    if !include.is_empty() {
        out.insert("include".into(), Value::Array(include));
    }
    deep_merge(&mut out, &extra);
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_tool_descriptions_carry_the_grammar_and_come_back_clean() {
        let format = json!({"type": "grammar", "syntax": "lark", "definition": "start: \"x\""});
        let tool = ToolDef {
            kind: "custom".into(),
            name: Some("apply_patch".into()),
            description: Some("Edit files.".into()),
            format: Some(format),
            ..ToolDef::default()
        };
        let decoded = decode_tool(tool, 0);
        let Ok(Tool::Function(f)) = &decoded else {
            panic!("{decoded:?}");
        };
        assert!(f
            .description
            .as_deref()
            .is_some_and(|d| d.starts_with("Edit files.") && d.contains("lark grammar")));
        assert_eq!(f.parameters, Some(custom_parameters()));
        let back = encode_tool(&Tool::Function(f.clone()), 0, Some(F));
        assert_eq!(
            back.ok(),
            Some(
                json!({"type": "custom", "name": "apply_patch", "description": "Edit files.",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: \"x\""}})
            )
        );
    }

    #[test]
    fn custom_arguments_are_recognised_by_shape() {
        assert_eq!(
            custom_input(&custom_arguments("*** Begin")),
            Some("*** Begin")
        );
        assert_eq!(custom_input(&json!({CUSTOM_INPUT_KEY: 1})), None);
        assert_eq!(custom_input(&json!({CUSTOM_INPUT_KEY: "a", "b": 1})), None);
        assert_eq!(custom_input(&json!({"input": "a"})), None);
    }
}
