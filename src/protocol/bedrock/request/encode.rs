//! Bedrock Converse request encoding: the canonical request → an upstream
//! Converse body (the model is in the path, not the body).
//!
//! System prompts are hoisted into `system`; consecutive same-role messages
//! are merged (Converse wants alternation) with tool results first; empty
//! text and unsigned reasoning are dropped (Bedrock refuses both); a
//! canonical `cache_control` becomes a `cachePoint` block after what it
//! marks. `maxTokens` comes from the catalog when the client gave none.
//! Reasoning is Claude's `thinking` in `additionalModelRequestFields`, as is
//! `top_k`. What Converse has no field for (structured output, seed,
//! penalties, `user`, parallel tool calls, `tool_choice: none`) is reported.

use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::{
    deep_merge, effort_to_budget, Block, ChatRequest, Extra, ImageSource, Role, TextBlock, Tool,
    ToolChoice,
};
use crate::protocol::common::report::{self, Param};
use crate::protocol::common::{EncodeOptions, TranslateError};
use serde_json::{json, Map, Value};

const F: Family = Family::Bedrock;

fn cache_point() -> Value {
    json!({"cachePoint": {"type": "default"}})
}

/// Adds an IR object's Bedrock extra fields to its encoded wire value.
fn merged(mut value: Value, extra: &Extra) -> Value {
    if let (Value::Object(obj), Some(fields)) = (&mut value, extra.for_family(F)) {
        deep_merge(obj, fields);
    }
    value
}

/// The Converse image `format` of a media type.
fn image_format(media_type: &str) -> Option<&'static str> {
    match media_type.to_ascii_lowercase().as_str() {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

fn describe(block: &Block) -> String {
    match block {
        Block::Opaque(o) => format!("{} \"{}\"", o.origin, o.kind),
        other => other.kind().to_string(),
    }
}

fn encode_image(source: &ImageSource, extra: &Extra, param: &str) -> Result<Value, TranslateError> {
    match source {
        ImageSource::Base64 { media_type, data } => {
            let format = image_format(media_type).ok_or_else(|| {
                TranslateError::unsupported(
                    param.to_string(),
                    format!(
                        "Bedrock Converse takes png, jpeg, gif or webp images, not {media_type}"
                    ),
                )
            })?;
            let data = crate::util::base64::to_standard(data);
            Ok(merged(
                json!({"image": {"format": format, "source": {"bytes": data}}}),
                extra,
            ))
        }
        ImageSource::Url { .. } => Err(TranslateError::unsupported(
            param.to_string(),
            "Bedrock Converse takes images as bytes (base64 data), not URLs",
        )),
    }
}

/// Encodes one IR block as Converse content blocks (the block, then a
/// `cachePoint` when it is marked); empty when it is dropped as harmless.
pub(crate) fn encode_block(
    block: &Block,
    param: &str,
    out: &mut Vec<Value>,
) -> Result<(), TranslateError> {
    let (v, cached) = match block {
        Block::Text(t) => {
            if t.text.is_empty() {
                return Ok(());
            }
            (
                merged(json!({"text": t.text}), &t.extra),
                t.cache_control.is_some(),
            )
        }
        Block::Image(img) => (
            encode_image(&img.source, &img.extra, param)?,
            img.cache_control.is_some(),
        ),
        Block::ToolCall(c) => {
            let Value::Object(_) = &c.arguments else {
                return Err(TranslateError::unsupported(
                    param.to_string(),
                    format!(
                        "the arguments of tool call \"{}\" are not a JSON object, which Bedrock toolUse input requires",
                        c.id
                    ),
                ));
            };
            (
                merged(
                    json!({"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}}),
                    &c.extra,
                ),
                c.cache_control.is_some(),
            )
        }
        Block::ToolResult(r) => {
            let mut content = Vec::new();
            for (j, inner) in r.content.iter().enumerate() {
                let p = format!("{param}.content[{j}]");
                match inner {
                    Block::Text(t) => content.push(json!({"text": t.text})),
                    Block::Image(i) => {
                        content.push(encode_image(&i.source, &Extra::default(), &p)?)
                    }
                    Block::Opaque(o) if o.origin == F => content.push(o.value.clone()),
                    other => {
                        return Err(TranslateError::unsupported(
                            p,
                            format!("a Bedrock tool result cannot contain {}", describe(other)),
                        ))
                    }
                }
            }
            if content.is_empty() {
                content.push(json!({"text": ""}));
            }
            let mut obj = json!({"toolUseId": r.call_id, "content": content});
            if r.is_error == Some(true) {
                obj["status"] = json!("error");
            }
            (
                merged(json!({ "toolResult": obj }), &r.extra),
                r.cache_control.is_some(),
            )
        }
        Block::Thinking(t) => {
            // Bedrock verifies reasoning signatures: unsigned reasoning and
            // an OpenAI reasoning item carried in one are left out.
            let Some(signature) = t
                .signature
                .as_ref()
                .filter(|s| !crate::ir::signature::is_reasoning_item(s))
            else {
                return Ok(());
            };
            (
                merged(
                    json!({"reasoningContent": {"reasoningText": {"text": t.text, "signature": signature}}}),
                    &t.extra,
                ),
                false,
            )
        }
        Block::RedactedThinking(r) => (
            json!({"reasoningContent": {"redactedContent": r.data}}),
            false,
        ),
        Block::Opaque(o) if o.origin == F => (o.value.clone(), false),
        Block::Opaque(o) => {
            return Err(TranslateError::unsupported(
                param.to_string(),
                format!(
                    "{} content \"{}\" cannot be expressed in Bedrock Converse",
                    o.origin, o.kind
                ),
            ))
        }
    };
    out.push(v);
    if cached {
        out.push(cache_point());
    }
    Ok(())
}

/// Encodes the canonical request as a Converse body; what Converse cannot
/// carry is recorded in `adj`.
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
                "{n} answers were asked for, but Bedrock Converse returns one answer per request"
            ),
        ));
    }
    let mut out = Map::new();
    out.insert("messages".into(), Value::Array(encode_messages(req)?));
    if let Some(system) = encode_system(req) {
        out.insert("system".into(), system);
    }

    let mut inference = Map::new();
    inference.insert(
        "maxTokens".into(),
        json!(s.max_tokens.unwrap_or(opts.default_max_tokens)),
    );
    let thinking = encode_reasoning(req, adj);
    let thinking_on = thinking
        .as_ref()
        .is_some_and(|t| t.get("type") != Some(&json!("disabled")));
    if let Some(t) = s.temperature {
        if thinking_on {
            // Claude takes only the default temperature while it thinks.
            report::dropped(req, Param::Temperature, adj);
        } else {
            inference.insert("temperature".into(), json!(t));
        }
    }
    if let Some(p) = s.top_p {
        inference.insert("topP".into(), json!(p));
    }
    if !s.stop.is_empty() {
        inference.insert("stopSequences".into(), json!(s.stop));
    }
    out.insert("inferenceConfig".into(), Value::Object(inference));

    let mut additional = Map::new();
    if let Some(k) = s.top_k {
        if thinking_on {
            report::dropped(req, Param::TopK, adj);
        } else {
            additional.insert("top_k".into(), json!(k));
        }
    }
    if let Some(t) = thinking {
        additional.insert("thinking".into(), t);
    }
    if !additional.is_empty() {
        out.insert(
            "additionalModelRequestFields".into(),
            Value::Object(additional),
        );
    }

    if let Some(tc) = encode_tools(req, adj)? {
        out.insert("toolConfig".into(), tc);
    }
    for (set, param) in [
        (s.seed.is_some(), Param::Seed),
        (s.presence_penalty.is_some(), Param::PresencePenalty),
        (s.frequency_penalty.is_some(), Param::FrequencyPenalty),
        (req.user.is_some(), Param::User),
        (
            req.response_format
                .as_ref()
                .is_some_and(|f| !matches!(f, crate::ir::ResponseFormat::Text)),
            Param::ResponseFormat,
        ),
        (req.parallel_tool_calls.is_some(), Param::ParallelToolCalls),
    ] {
        if set {
            report::dropped(req, param, adj);
        }
    }
    deep_merge(&mut out, &std::mem::take(&mut extra));
    Ok(Value::Object(out))
}

/// Claude's `thinking` on Bedrock: a budget (the client's, or the effort's),
/// or `disabled`; `None` when the request says nothing.
fn encode_reasoning(req: &ChatRequest, adj: &mut Adjustments) -> Option<Value> {
    let r = req.reasoning.as_ref()?;
    if r.is_off() {
        return Some(json!({"type": "disabled"}));
    }
    let budget = r
        .fixed_budget()
        .or_else(|| r.effort.as_deref().and_then(effort_to_budget))
        .filter(|b| *b > 0);
    match budget {
        Some(b) => Some(json!({"type": "enabled", "budget_tokens": b.max(1024)})),
        None if r.is_on() => Some(json!({"type": "enabled", "budget_tokens": 1024})),
        None => {
            if r.effort.is_some() {
                report::dropped(req, Param::Effort, adj);
            }
            None
        }
    }
}

/// `system`: every system prompt's text, hoisted, with cache points.
fn encode_system(req: &ChatRequest) -> Option<Value> {
    let blocks: Vec<&TextBlock> = req
        .system
        .iter()
        .flat_map(|sp| sp.content.iter())
        .filter(|t| !t.text.is_empty())
        .collect();
    if blocks.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(blocks.len());
    for t in blocks {
        out.push(merged(json!({"text": t.text}), &t.extra));
        if t.cache_control.is_some() {
            out.push(cache_point());
        }
    }
    Some(Value::Array(out))
}

/// `messages`: each message encoded, empties dropped, same-role neighbours
/// merged, tool results first in their message.
fn encode_messages(req: &ChatRequest) -> Result<Vec<Value>, TranslateError> {
    let mut turns: Vec<(Role, Vec<Value>, Map<String, Value>)> = Vec::new();
    for (i, msg) in req.messages.iter().enumerate() {
        let mut blocks = Vec::new();
        for (j, block) in msg.content.iter().enumerate() {
            encode_block(block, &format!("messages[{i}].content[{j}]"), &mut blocks)?;
        }
        if blocks.is_empty() {
            continue;
        }
        let msg_extra = msg.extra.to_map(F);
        match turns.last_mut() {
            Some((role, prev, prev_extra)) if *role == msg.role => {
                prev.extend(blocks);
                deep_merge(prev_extra, &msg_extra);
            }
            _ => turns.push((msg.role, blocks, msg_extra)),
        }
    }
    Ok(turns
        .into_iter()
        .map(|(role, blocks, extra)| {
            let (mut results, others): (Vec<Value>, Vec<Value>) = blocks
                .into_iter()
                .partition(|b| b.get("toolResult").is_some());
            results.extend(others);
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            let mut m = Map::new();
            m.insert("role".into(), json!(role));
            m.insert("content".into(), Value::Array(results));
            deep_merge(&mut m, &extra);
            Value::Object(m)
        })
        .collect())
}

/// `toolConfig`: function tools as `toolSpec`s (a `cachePoint` after a
/// marked one), the choice as `auto` / `any` / `tool`. `none` has no
/// Converse form: the tools stay (a conversation with tool calls needs
/// them) and the choice is reported.
fn encode_tools(req: &ChatRequest, adj: &mut Adjustments) -> Result<Option<Value>, TranslateError> {
    let allowed: Option<&[String]> = match &req.tool_choice {
        Some(ToolChoice::Allowed { names, .. }) => Some(names),
        _ => None,
    };
    let mut tools = Vec::new();
    let mut strict = false;
    for (i, tool) in req.tools.iter().enumerate() {
        match tool {
            Tool::Function(f) => {
                if allowed.is_some_and(|names| !names.contains(&f.name)) {
                    continue;
                }
                strict |= f.strict == Some(true);
                let schema = f
                    .parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                let mut spec = json!({"name": f.name, "inputSchema": {"json": schema}});
                if let Some(d) = f.description.as_deref().filter(|d| !d.is_empty()) {
                    spec["description"] = json!(d);
                }
                tools.push(merged(json!({ "toolSpec": spec }), &f.extra));
                if f.cache_control.is_some() {
                    tools.push(cache_point());
                }
            }
            Tool::Opaque(o) if o.origin == F => tools.push(o.value.clone()),
            Tool::Opaque(o) => {
                return Err(TranslateError::unsupported(
                    format!("tools[{i}]"),
                    format!(
                        "{} tool \"{}\" cannot be expressed in Bedrock Converse",
                        o.origin, o.kind
                    ),
                ))
            }
        }
    }
    if strict {
        report::dropped(req, Param::Strict, adj);
    }
    if tools.is_empty() {
        return Ok(None);
    }
    let choice = match &req.tool_choice {
        None | Some(ToolChoice::Auto) => None,
        Some(ToolChoice::Required) | Some(ToolChoice::Allowed { required: true, .. }) => {
            Some(json!({"any": {}}))
        }
        Some(ToolChoice::Allowed {
            required: false, ..
        }) => Some(json!({"auto": {}})),
        Some(ToolChoice::Tool(name)) => Some(json!({"tool": {"name": name}})),
        Some(ToolChoice::None) => {
            adj.drop_field(report::client_name(req.source, Param::ToolChoice));
            None
        }
    };
    let mut tc = json!({ "tools": tools });
    if let Some(c) = choice {
        tc["toolChoice"] = c;
    }
    Ok(Some(tc))
}
