//! Responses request encoding: the canonical request → an upstream wire body
//! (for a Responses upstream at `{base_url}/responses`).
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

use super::custom::{custom_input, format_note};
use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::media::data_url;
use crate::ir::signature::unwrap_reasoning_item;
use crate::ir::stream::arguments_text;
use crate::ir::{
    deep_merge, Block, ChatRequest, Extra, FunctionTool, ImageBlock, ImageSource, Message,
    Reasoning, ResponseFormat, Role, SystemPrompt, SystemRole, TextBlock, ThinkingBlock, Tool,
    ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::common::json::take_nested;
use crate::protocol::common::report::{self, Param};
use crate::protocol::common::strict;
use crate::protocol::common::{EncodeOptions, TranslateError};
use crate::util::base64::to_standard as standard_base64;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

const F: Family = Family::Responses;

/// The encrypted reasoning the gateway asks a Responses upstream for.
const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

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

pub(super) fn encode_tool(
    tool: &Tool,
    i: usize,
    source: Option<Family>,
) -> Result<Value, TranslateError> {
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
                (Some(_), _) => {
                    v["strict"] = json!(strict::openai_strict(
                        source,
                        f.strict,
                        f.parameters.as_ref()
                    ))
                }
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

/// `text.format`; a schema another family enforces is asked strict where it
/// meets OpenAI's rules (as chat-completions' `response_format`).
fn encode_format(rf: &ResponseFormat, source: Option<Family>) -> Value {
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
            let enforced = js.strict.or(Some(true));
            match strict::openai_strict(source, enforced, Some(&js.schema)) {
                Some(s) if s || js.strict.is_some() => v["strict"] = json!(s),
                _ => {}
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
    let input = encode_input(req, skip)?;

    let mut tools = Vec::new();
    for (i, tool) in req.tools.iter().enumerate() {
        tools.push(encode_tool(tool, i, req.source)?);
    }
    let lowered = req.tools.iter().any(|t| {
        matches!(t, Tool::Function(f) if strict::lowered(req.source, f.strict, f.parameters.as_ref()))
    });
    if lowered {
        report::dropped(req, Param::Strict, adj);
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
        let mut format = encode_format(rf, req.source);
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

/// The `input` items: each message, with the system prompts after the first
/// `skip` (those that became `instructions`) at their positions.
fn encode_input(req: &ChatRequest, skip: usize) -> Result<Vec<Value>, TranslateError> {
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
    Ok(input)
}
