//! Gemini request encoding: the canonical request → an upstream generateContent body.
//!
//! Merges consecutive same-role turns, hoists every system prompt into
//! `systemInstruction`, converts tool and response schemas to Gemini's subset
//! ([`super::schema`]), and recovers each tool result's function name from the
//! earlier call with that id.

use super::call_id::{split_call_id, wire_call_id};
use super::function_response;
use super::schema::to_gemini_schema;
use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::media::guess_media_type;
use crate::ir::{
    deep_merge, effort_to_budget, Block, ChatRequest, Extra, FunctionTool, ImageSource, Reasoning,
    ResponseFormat, Role, Tool, ToolChoice, ToolResult,
};
use crate::protocol::common::json::{take_nested, to_value};
use crate::protocol::common::report::{self, Param};
use crate::protocol::common::{EncodeOptions, TranslateError};
use crate::protocol::gemini::wire::{
    FunctionCallingConfig, FunctionDeclaration, GenerateContentRequest, GenerationConfig,
    ThinkingConfig, Tool as WireTool, ToolConfig,
};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

const F: Family = Family::Gemini;

fn describe(block: &Block) -> String {
    match block {
        Block::Opaque(o) => format!("{} \"{}\"", o.origin, o.kind),
        other => other.kind().to_string(),
    }
}

fn merged(mut value: Value, extra: &Extra) -> Value {
    if let (Value::Object(obj), Some(fields)) = (&mut value, extra.for_family(F)) {
        deep_merge(obj, fields);
    }
    value
}

/// A tool result's content as a Gemini `functionResponse.response` object
/// ([`function_response::wrap`]: text that is a JSON object is used as is;
/// other text is wrapped as `{"output": text}`, or `{"error": text}` for an
/// error result); a Gemini client's own response object when it kept one.
pub fn tool_result_response(result: &ToolResult, param: &str) -> Result<Value, TranslateError> {
    let mut text = String::new();
    for (j, block) in result.content.iter().enumerate() {
        match block {
            Block::Text(t) => text.push_str(&t.text),
            other => {
                return Err(TranslateError::unsupported(
                    format!("{param}.content[{j}]"),
                    format!(
                        "a tool result containing {} cannot be expressed in a Gemini functionResponse (text only)",
                        describe(other)
                    ),
                ))
            }
        }
    }
    let is_error = result.is_error == Some(true);
    let kept = result
        .extra
        .get(F, "functionResponse")
        .and_then(|f| f.get("response"))
        .filter(|r| function_response::unwrap(r) == (text.clone(), is_error));
    Ok(match kept {
        Some(r) => r.clone(),
        None => function_response::wrap(&text, is_error),
    })
}

/// A tool result as a `functionResponse` part (`names`: call ids to
/// function names).
fn function_response_part(
    r: &ToolResult,
    param: &str,
    names: &HashMap<String, String>,
) -> Result<Value, TranslateError> {
    let Some(name) = r.name.clone().or_else(|| names.get(&r.call_id).cloned()) else {
        return Err(TranslateError::unsupported(
            param.to_string(),
            format!(
                "the tool result for call id \"{}\" answers no earlier tool call, so its function name is unknown, and a Gemini functionResponse needs it",
                r.call_id
            ),
        ));
    };
    let response = tool_result_response(r, param)?;
    let mut fr = json!({"name": name});
    if let Some(id) = wire_call_id(&r.call_id) {
        fr["id"] = json!(id);
    }
    let mut v = merged(json!({"functionResponse": fr}), &r.extra);
    // The response is the rule's (or the kept one it chose), never
    // a merge of the two.
    v["functionResponse"]["response"] = response;
    Ok(v)
}

/// Encodes one IR block as a Gemini part (`None`: dropped as harmless).
/// `names` maps call ids to function names (for tool results).
pub(crate) fn encode_part(
    block: &Block,
    param: &str,
    names: &HashMap<String, String>,
) -> Result<Option<Value>, TranslateError> {
    let v = match block {
        Block::Text(t) => {
            if t.text.is_empty() && t.signature.is_none() && t.extra.for_family(F).is_none() {
                return Ok(None);
            }
            let mut v = json!({"text": t.text});
            if let Some(sig) = &t.signature {
                v["thoughtSignature"] = json!(sig);
            }
            merged(v, &t.extra)
        }
        Block::Thinking(t) => {
            let mut v = json!({"text": t.text, "thought": true});
            if let Some(sig) = &t.signature {
                v["thoughtSignature"] = json!(sig);
            }
            merged(v, &t.extra)
        }
        Block::RedactedThinking(_) => return Ok(None),
        Block::Image(img) => {
            let v = match &img.source {
                ImageSource::Base64 { media_type, data } => {
                    json!({"inlineData": {"mimeType": media_type, "data": data}})
                }
                ImageSource::Url { url, media_type } => {
                    let Some(mime) = media_type
                        .clone()
                        .or_else(|| guess_media_type(url).map(str::to_string))
                    else {
                        return Err(TranslateError::unsupported(
                            param.to_string(),
                            format!(
                                "the media type of image URL \"{url}\" cannot be told from its extension, and Gemini fileData needs one; send the image as base64 data instead"
                            ),
                        ));
                    };
                    json!({"fileData": {"mimeType": mime, "fileUri": url}})
                }
            };
            merged(v, &img.extra)
        }
        Block::ToolCall(c) => {
            if !c.arguments.is_object() {
                return Err(TranslateError::unsupported(
                    param.to_string(),
                    format!(
                        "the arguments of tool call \"{}\" are not a JSON object, which a Gemini functionCall requires",
                        c.id
                    ),
                ));
            }
            let (_, embedded) = split_call_id(&c.id);
            let mut call = json!({"name": c.name, "args": c.arguments});
            if let Some(id) = wire_call_id(&c.id) {
                call["id"] = json!(id);
            }
            let mut v = json!({"functionCall": call});
            if let Some(sig) = c.signature.clone().or(embedded) {
                v["thoughtSignature"] = json!(sig);
            }
            merged(v, &c.extra)
        }
        Block::ToolResult(r) => function_response_part(r, param, names)?,
        Block::Opaque(o) if o.origin == F => o.value.clone(),
        Block::Opaque(o) => {
            return Err(TranslateError::unsupported(
                param.to_string(),
                format!(
                    "{} content \"{}\" cannot be expressed in Gemini",
                    o.origin, o.kind
                ),
            ))
        }
    };
    Ok(Some(v))
}

/// Encodes the canonical request as a Gemini request body (the model and
/// streaming are in the URL, not the body); what Gemini cannot carry is
/// recorded in `adj`.
pub fn encode(
    req: &ChatRequest,
    _opts: &EncodeOptions<'_>,
    adj: &mut Adjustments,
) -> Result<Value, TranslateError> {
    // Gemini has no end-user id, no switch for parallel calls and no strict schemas.
    if req.user.is_some() {
        report::dropped(req, Param::User, adj);
    }
    if req.parallel_tool_calls.is_some() && !req.tools.is_empty() {
        report::dropped(req, Param::ParallelToolCalls, adj);
    }
    if req
        .tools
        .iter()
        .any(|t| matches!(t, Tool::Function(f) if f.strict == Some(true)))
    {
        report::dropped(req, Param::Strict, adj);
    }
    let mut extra = req.extra.to_map(F);
    let names = req.tool_call_names();

    // System instruction: every system prompt, hoisted.
    let mut system_parts = Vec::new();
    let mut system_extra = Map::new();
    for sp in &req.system {
        for t in sp.content.iter().filter(|t| !t.text.is_empty()) {
            // Gemini refuses empty text parts.
            system_parts.push(merged(json!({"text": t.text}), &t.extra));
        }
        deep_merge(&mut system_extra, &sp.extra.to_map(F));
    }

    let contents = encode_contents(req, &names)?;

    let (tools, has_functions) = encode_tools(req)?;

    let mut tc_extra = take_nested(&mut extra, "toolConfig");
    let fcc_extra = take_nested(&mut tc_extra, "functionCallingConfig");
    let fcc = encode_function_calling(req.tool_choice.as_ref().filter(|_| has_functions));
    let tool_config = if fcc.is_some() || !fcc_extra.is_empty() || !tc_extra.is_empty() {
        let mut fcc = fcc.unwrap_or_default();
        fcc.extra = fcc_extra;
        let has_fcc = fcc.mode.is_some() || !fcc.extra.is_empty();
        Some(ToolConfig {
            function_calling_config: has_fcc.then_some(fcc),
            extra: tc_extra,
        })
    } else {
        None
    };

    let gc_extra = take_nested(&mut extra, "generationConfig");
    let generation_config = encode_generation_config(req, gc_extra, adj)?;

    let wire = GenerateContentRequest {
        contents: Vec::new(),
        system_instruction: None,
        tools: None,
        tool_config,
        generation_config,
        extra: Map::new(),
    };
    let mut out = to_value(&wire)?;
    if let Value::Object(obj) = &mut out {
        obj.insert("contents".into(), Value::Array(contents));
        if !system_parts.is_empty() {
            let mut si = Map::new();
            si.insert("parts".into(), Value::Array(system_parts));
            deep_merge(&mut si, &system_extra);
            obj.insert("systemInstruction".into(), Value::Object(si));
        }
        if !tools.is_empty() {
            obj.insert("tools".into(), Value::Array(tools));
        }
        deep_merge(obj, &extra);
    }
    Ok(out)
}

/// The `contents`: each message encoded, empty turns dropped, same-role
/// neighbours merged. `names` gives each tool call id its function name.
fn encode_contents(
    req: &ChatRequest,
    names: &HashMap<String, String>,
) -> Result<Vec<Value>, TranslateError> {
    let mut contents: Vec<(Role, Vec<Value>, Map<String, Value>)> = Vec::new();
    for (i, msg) in req.messages.iter().enumerate() {
        let mut parts = Vec::new();
        for (j, block) in msg.content.iter().enumerate() {
            let param = format!("messages[{i}].content[{j}]");
            // An OpenAI reasoning item carried in a signature (ir::signature)
            // is not Gemini's to verify: the thought goes without it.
            let encoded = match block {
                Block::Thinking(t)
                    if t.signature
                        .as_deref()
                        .is_some_and(crate::ir::signature::is_reasoning_item) =>
                {
                    if t.text.is_empty() {
                        continue;
                    }
                    let mut unsigned = t.clone();
                    unsigned.signature = None;
                    encode_part(&Block::Thinking(unsigned), &param, names)?
                }
                _ => encode_part(block, &param, names)?,
            };
            if let Some(p) = encoded {
                parts.push(p);
            }
        }
        if parts.is_empty() {
            continue;
        }
        let msg_extra = msg.extra.to_map(F);
        match contents.last_mut() {
            Some((role, prev, prev_extra)) if *role == msg.role => {
                prev.extend(parts);
                deep_merge(prev_extra, &msg_extra);
            }
            _ => contents.push((msg.role, parts, msg_extra)),
        }
    }
    let contents: Vec<Value> = contents
        .into_iter()
        .map(|(role, parts, msg_extra)| {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "model",
            };
            let mut c = json!({"role": role, "parts": parts});
            if let Value::Object(obj) = &mut c {
                deep_merge(obj, &msg_extra);
            }
            c
        })
        .collect();
    Ok(contents)
}

/// The `tools`: all function declarations in one tool object, provider tools
/// apart; and whether there are function declarations.
fn encode_tools(req: &ChatRequest) -> Result<(Vec<Value>, bool), TranslateError> {
    let mut declarations = Vec::new();
    let mut other_tools = Vec::new();
    for (i, tool) in req.tools.iter().enumerate() {
        match tool {
            Tool::Function(f) => declarations.push(encode_declaration(f, i)?),
            Tool::Opaque(o) if o.origin == F => other_tools.push(o.value.clone()),
            Tool::Opaque(o) => {
                return Err(TranslateError::unsupported(
                    format!("tools[{i}]"),
                    format!(
                        "the {} tool type \"{}\" cannot be expressed in Gemini",
                        o.origin, o.kind
                    ),
                ))
            }
        }
    }
    let has_functions = !declarations.is_empty();
    let mut tools = Vec::new();
    if has_functions {
        tools.push(to_value(&WireTool {
            function_declarations: Some(declarations),
            extra: Map::new(),
        })?);
    }
    tools.extend(other_tools);
    Ok((tools, has_functions))
}

/// The `functionCallingConfig` for the client's tool choice (when there are
/// function declarations).
fn encode_function_calling(choice: Option<&ToolChoice>) -> Option<FunctionCallingConfig> {
    match choice {
        None => None,
        Some(choice) => {
            let (mode, names) = match choice {
                ToolChoice::Auto => ("AUTO", None),
                ToolChoice::None => ("NONE", None),
                ToolChoice::Required => ("ANY", None),
                ToolChoice::Tool(name) => ("ANY", Some(vec![name.clone()])),
                ToolChoice::Allowed {
                    required: true,
                    names,
                } => ("ANY", Some(names.clone())),
                ToolChoice::Allowed {
                    required: false,
                    names,
                } => ("VALIDATED", Some(names.clone())),
            };
            Some(FunctionCallingConfig {
                mode: Some(mode.into()),
                allowed_function_names: names,
                extra: Map::new(),
            })
        }
    }
}

fn encode_declaration(f: &FunctionTool, i: usize) -> Result<FunctionDeclaration, TranslateError> {
    let extra = f.extra.to_map(F);
    let parameters = if extra.contains_key("parametersJsonSchema") {
        None
    } else {
        match &f.parameters {
            None => None,
            Some(schema) => {
                let converted = to_gemini_schema(schema).map_err(|why| {
                    TranslateError::unsupported(format!("tools[{i}].parameters"), why)
                })?;
                // Gemini rejects an OBJECT schema without properties: a
                // function without parameters simply has none.
                let empty_object = converted.get("type") == Some(&json!("object"))
                    && converted
                        .get("properties")
                        .and_then(Value::as_object)
                        .is_none_or(Map::is_empty);
                (!empty_object).then_some(converted)
            }
        }
    };
    Ok(FunctionDeclaration {
        name: f.name.clone(),
        description: f.description.clone(),
        parameters,
        extra,
    })
}

fn encode_generation_config(
    req: &ChatRequest,
    mut extra: Map<String, Value>,
    adj: &mut Adjustments,
) -> Result<Option<GenerationConfig>, TranslateError> {
    let s = &req.sampling;
    let (mime, schema) = match &req.response_format {
        None => (None, None),
        Some(ResponseFormat::Text) => (Some("text/plain".to_string()), None),
        Some(ResponseFormat::JsonObject) => (Some("application/json".to_string()), None),
        Some(ResponseFormat::JsonSchema(js)) => {
            let schema = if extra.contains_key("responseJsonSchema") {
                None
            } else {
                Some(to_gemini_schema(&js.schema).map_err(|why| {
                    TranslateError::unsupported(
                        "response_format.json_schema.schema".to_string(),
                        why,
                    )
                })?)
            };
            (Some("application/json".to_string()), schema)
        }
    };
    let thinking_extra = take_nested(&mut extra, "thinkingConfig");
    let thinking = encode_thinking(req.reasoning.as_ref(), thinking_extra, req, adj);
    let gc = GenerationConfig {
        temperature: s.temperature,
        top_p: s.top_p,
        top_k: s.top_k,
        max_output_tokens: s.max_tokens,
        stop_sequences: (!s.stop.is_empty()).then(|| s.stop.clone()),
        candidate_count: s.candidate_count,
        presence_penalty: s.presence_penalty,
        frequency_penalty: s.frequency_penalty,
        seed: s.seed,
        response_mime_type: mime,
        response_schema: schema,
        thinking_config: thinking,
        extra,
    };
    let value = to_value(&gc)?;
    Ok((value.as_object().is_some_and(|o| !o.is_empty())).then_some(gc))
}

/// The smallest thinking budget derived from an effort level (Gemini 2.5
/// Pro takes no less than 128).
const MIN_DERIVED_BUDGET: i64 = 128;

/// `thinkingConfig` for canonical reasoning settings: off is budget 0; a
/// fixed budget is `thinkingBudget`; a level the client sent as
/// `thinkingLevel` stays as it was; another protocol's effort level becomes a
/// budget ([`effort_to_budget`], at most half of `maxOutputTokens`; every
/// Gemini generation takes a budget, where `thinkingLevel` is Gemini 3 only);
/// on without either is -1 (dynamic).
/// `includeThoughts` is passed on as given (Anthropic thinking implies it).
fn encode_thinking(
    r: Option<&Reasoning>,
    extra: Map<String, Value>,
    req: &ChatRequest,
    adj: &mut Adjustments,
) -> Option<ThinkingConfig> {
    let level_given = extra.contains_key("thinkingLevel");
    let Some(r) = r else {
        return (!extra.is_empty()).then(|| ThinkingConfig {
            extra,
            ..ThinkingConfig::default()
        });
    };
    let budget = if r.is_off() {
        Some(0)
    } else if let Some(b) = r.fixed_budget() {
        Some(b)
    } else if level_given {
        None
    } else if let Some(b) = r.effort.as_deref().and_then(effort_to_budget) {
        // A budget the gateway chose leaves at least half of the output
        // allowance to the answer (Gemini counts thoughts against it).
        let half = req
            .sampling
            .max_tokens
            .and_then(|m| i64::try_from(m / 2).ok())
            .map_or(i64::MAX, |h| h.max(MIN_DERIVED_BUDGET));
        Some(b.min(half))
    } else if r.is_on() {
        Some(-1)
    } else {
        None
    };
    if r.is_off() && r.effort.as_deref().is_some_and(|e| e != "none") {
        // An effort for the answer with thinking off (Anthropic): no counterpart.
        report::dropped(req, Param::Effort, adj);
    }
    let tc = ThinkingConfig {
        include_thoughts: r.include_thoughts,
        thinking_budget: budget,
        extra,
    };
    (tc.include_thoughts.is_some() || tc.thinking_budget.is_some() || !tc.extra.is_empty())
        .then_some(tc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_result_responses() {
        let result = |text: &str, is_error| ToolResult {
            call_id: "c".into(),
            name: Some("f".into()),
            content: vec![Block::text(text)],
            is_error,
            cache_control: None,
            extra: Extra::default(),
        };
        assert_eq!(
            tool_result_response(&result("{\"a\":1}", None), "p"),
            Ok(json!({"a": 1}))
        );
        assert_eq!(
            tool_result_response(&result("[1]", None), "p"),
            Ok(json!({"output": "[1]"}))
        );
        assert_eq!(
            tool_result_response(&result("bad", Some(true)), "p"),
            Ok(json!({"error": "bad"}))
        );
    }
}
