//! Gemini generateContent request codec: wire JSON ⇄ canonical request, plus
//! the Gemini-specific helpers the response and stream codecs share: tool-call
//! ids (Gemini often has none), thought signatures carried inside ids, and
//! conversion between JSON Schema and Gemini's OpenAPI-subset schema.
//!
//! - The model and the stream flag come from the path ([`DecodeContext`]).
//! - `functionCall` parts without an id get a stable synthetic id from their
//!   position and name; `functionResponse` parts without an id are matched to
//!   the earliest unanswered call of the same name. Encoding recovers each
//!   tool result's function name from the earlier call with that id.
//! - Encoding merges consecutive same-role turns, hoists every system prompt
//!   into `systemInstruction`, and converts tool and response schemas to
//!   Gemini's subset (local `$ref`s inlined, unsupported keywords dropped).

use super::wire::{
    FunctionCallingConfig, FunctionDeclaration, GenerateContentRequest, GenerationConfig, Part,
    ThinkingConfig, Tool as WireTool, ToolConfig,
};
use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::media::guess_media_type;
use crate::ir::{
    deep_merge, effort_to_budget, ids, Block, ChatRequest, Extra, FunctionTool, ImageBlock,
    ImageSource, JsonSchemaFormat, Message, Opaque, Reasoning, ResponseFormat, Role, SystemPrompt,
    SystemRole, TextBlock, ThinkingBlock, Tool, ToolCall, ToolChoice, ToolResult,
};
use crate::protocol::common::json::{nested, parse_request, take_nested, to_value};
use crate::protocol::common::report::{self, Param};
use crate::protocol::common::{DecodeContext, EncodeOptions, TranslateError};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

const F: Family = Family::Gemini;

// ---------------------------------------------------------------- call ids

/// Prefix of the ids this gateway invents for Gemini function calls.
pub const SYNTHETIC_ID_PREFIX: &str = "gcall_";
/// Separates a call id from a thought signature carried inside it.
const SIGNATURE_SEPARATOR: &str = "__ts_";

/// A stable id for a function call that has none, from where it sits
/// (`scope` and `position`), its name and its arguments.
pub fn synthetic_call_id(scope: &str, position: usize, name: &str, args: &Value) -> String {
    let position = position.to_string();
    let args = args.to_string();
    ids::stable_id(
        SYNTHETIC_ID_PREFIX,
        &[
            scope.as_bytes(),
            position.as_bytes(),
            name.as_bytes(),
            args.as_bytes(),
        ],
    )
}

/// Carries a Gemini thought signature inside a tool call id, so that it comes
/// back from a client whose protocol has no field for it (OpenAI, Anthropic):
/// clients always echo call ids. The result stays within `[A-Za-z0-9_-]`.
pub fn embed_signature(id: &str, signature: &str) -> String {
    let standard_b64 = !signature.is_empty()
        && signature
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=');
    let payload = if standard_b64 {
        let mut s: String = signature
            .trim_end_matches('=')
            .chars()
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                c => c,
            })
            .collect();
        s.insert(0, 'b');
        s
    } else {
        let mut s = String::from("h");
        for b in signature.bytes() {
            s.push_str(&format!("{b:02x}"));
        }
        s
    };
    format!("{id}{SIGNATURE_SEPARATOR}{payload}")
}

/// Splits an id made by [`embed_signature`] into the original id and signature.
pub fn split_call_id(id: &str) -> (&str, Option<String>) {
    let Some((base, payload)) = id.split_once(SIGNATURE_SEPARATOR) else {
        return (id, None);
    };
    let signature = if let Some(b64) = payload.strip_prefix('b') {
        let mut s: String = b64
            .chars()
            .map(|c| match c {
                '-' => '+',
                '_' => '/',
                c => c,
            })
            .collect();
        while !s.len().is_multiple_of(4) {
            s.push('=');
        }
        Some(s)
    } else if let Some(hex) = payload.strip_prefix('h') {
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect();
        bytes.and_then(|b| String::from_utf8(b).ok())
    } else {
        None
    };
    match signature {
        Some(s) => (base, Some(s)),
        None => (id, None),
    }
}

/// The id to put on the Gemini wire for an IR call id: none for ids this
/// gateway invented, the original id otherwise (signature stripped).
pub fn wire_call_id(id: &str) -> Option<String> {
    let (base, _) = split_call_id(id);
    let synthetic = base.len() == SYNTHETIC_ID_PREFIX.len() + 16
        && base.starts_with(SYNTHETIC_ID_PREFIX)
        && base[SYNTHETIC_ID_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit());
    (!synthetic && !base.is_empty()).then(|| base.to_string())
}

// ---------------------------------------------------------------- schemas

/// Keywords of Gemini's `Schema` object (everything else is dropped).
const GEMINI_SCHEMA_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// String/number formats Gemini accepts.
const GEMINI_FORMATS: &[&str] = &["enum", "date-time", "float", "double", "int32", "int64"];

/// Gemini schema keys as google-genai may spell them (snake_case), and their
/// JSON Schema / camelCase names.
const SNAKE_SCHEMA_KEYS: &[(&str, &str)] = &[
    ("any_of", "anyOf"),
    ("max_items", "maxItems"),
    ("min_items", "minItems"),
    ("max_length", "maxLength"),
    ("min_length", "minLength"),
    ("max_properties", "maxProperties"),
    ("min_properties", "minProperties"),
    ("property_ordering", "propertyOrdering"),
];

/// Converts a Gemini schema (uppercase types, `nullable`, camelCase or
/// snake_case keys) into JSON Schema.
pub fn from_gemini_schema(schema: &Value) -> Value {
    let Value::Object(obj) = schema else {
        return schema.clone();
    };
    let nullable = obj.get("nullable") == Some(&Value::Bool(true));
    let mut out = Map::new();
    for (key, value) in obj {
        let key = &SNAKE_SCHEMA_KEYS
            .iter()
            .find(|(snake, _)| snake == key)
            .map_or_else(|| key.clone(), |(_, camel)| (*camel).to_string());
        match (key.as_str(), value) {
            ("type", Value::String(t)) => {
                let t = t.to_ascii_lowercase();
                let v = if nullable && t != "null" {
                    json!([t, "null"])
                } else {
                    json!(t)
                };
                out.insert(key.clone(), v);
            }
            ("nullable", _) if obj.contains_key("type") => {}
            ("properties", Value::Object(props)) => {
                let props = props
                    .iter()
                    .map(|(k, v)| (k.clone(), from_gemini_schema(v)))
                    .collect();
                out.insert(key.clone(), Value::Object(props));
            }
            ("items", v) => {
                out.insert(key.clone(), from_gemini_schema(v));
            }
            ("anyOf", Value::Array(list)) => {
                out.insert(
                    key.clone(),
                    Value::Array(list.iter().map(from_gemini_schema).collect()),
                );
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// Converts JSON Schema into Gemini's schema subset: local `$ref`s are
/// inlined, `allOf` merged, `oneOf` read as `anyOf`, `const` as a one-value
/// `enum`, type lists as `nullable`/`anyOf`; keywords Gemini does not know
/// (`additionalProperties`, `$schema`, `exclusiveMinimum`, non-string enums,
/// unsupported `format`s, …) are dropped. Recursive schemas cannot be expressed.
pub fn to_gemini_schema(schema: &Value) -> Result<Value, String> {
    convert_schema(schema, schema, &mut Vec::new(), 0)
}

fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let path = reference.strip_prefix("#")?;
    if path.is_empty() {
        return Some(root);
    }
    root.pointer(path)
}

fn merge_schema(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(Value::Object(a)), Value::Object(b)) if key == "properties" => {
                a.extend(b);
            }
            (Some(Value::Array(a)), Value::Array(b)) if key == "required" => {
                for v in b {
                    if !a.contains(&v) {
                        a.push(v);
                    }
                }
            }
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

fn convert_schema(
    node: &Value,
    root: &Value,
    stack: &mut Vec<String>,
    depth: usize,
) -> Result<Value, String> {
    if depth > 64 {
        return Err("the schema nests too deeply".into());
    }
    let Value::Object(obj) = node else {
        // `true` / `{}`-like schemas: anything goes.
        return Ok(json!({}));
    };
    let mut out = Map::new();
    if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
        if stack.iter().any(|r| r == reference) {
            return Err(format!(
                "the schema is recursive (\"$ref\": \"{reference}\"), which Gemini's schema subset cannot express"
            ));
        }
        let target = resolve_ref(root, reference)
            .ok_or_else(|| format!("the schema reference \"{reference}\" cannot be resolved"))?;
        stack.push(reference.to_string());
        let resolved = convert_schema(target, root, stack, depth + 1)?;
        stack.pop();
        if let Value::Object(r) = resolved {
            out = r;
        }
    }
    if let Some(Value::Array(all)) = obj.get("allOf") {
        for sub in all {
            if let Value::Object(sub) = convert_schema(sub, root, stack, depth + 1)? {
                merge_schema(&mut out, sub);
            }
        }
    }
    let mut any_of: Vec<Value> = Vec::new();
    for (key, value) in obj {
        match key.as_str() {
            "type" => match value {
                Value::String(t) => {
                    out.insert("type".into(), json!(t.to_ascii_lowercase()));
                }
                Value::Array(types) => {
                    let names: Vec<String> = types
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_ascii_lowercase)
                        .collect();
                    let non_null: Vec<&String> = names.iter().filter(|t| *t != "null").collect();
                    let has_null = non_null.len() < names.len();
                    match non_null.as_slice() {
                        [] => {
                            out.insert("type".into(), json!("null"));
                        }
                        [one] => {
                            out.insert("type".into(), json!(one));
                        }
                        many => any_of.extend(many.iter().map(|t| json!({"type": t}))),
                    }
                    if has_null && !non_null.is_empty() {
                        out.insert("nullable".into(), json!(true));
                    }
                }
                _ => {}
            },
            "properties" => {
                if let Value::Object(props) = value {
                    let mut converted = Map::new();
                    for (name, prop) in props {
                        converted
                            .insert(name.clone(), convert_schema(prop, root, stack, depth + 1)?);
                    }
                    out.insert(key.clone(), Value::Object(converted));
                }
            }
            "items" => {
                let item = match value {
                    Value::Array(tuple) => tuple.first().cloned().unwrap_or(json!({})),
                    other => other.clone(),
                };
                out.insert(key.clone(), convert_schema(&item, root, stack, depth + 1)?);
            }
            "anyOf" | "oneOf" => {
                if let Value::Array(list) = value {
                    for sub in list {
                        any_of.push(convert_schema(sub, root, stack, depth + 1)?);
                    }
                }
            }
            "const" if value.is_string() => {
                out.insert("enum".into(), json!([value]));
            }
            "enum"
                if value
                    .as_array()
                    .is_some_and(|v| v.iter().all(Value::is_string)) =>
            {
                out.insert(key.clone(), value.clone());
            }
            "format" if value.as_str().is_some_and(|f| GEMINI_FORMATS.contains(&f)) => {
                out.insert(key.clone(), value.clone());
            }
            "const" | "enum" | "format" => {}
            "examples" => {
                if let Some(first) = value.as_array().and_then(|v| v.first()) {
                    out.entry("example").or_insert_with(|| first.clone());
                }
            }
            k if GEMINI_SCHEMA_KEYS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    if !any_of.is_empty() {
        // A `{"type": "null"}` branch is Gemini's `nullable`.
        let before = any_of.len();
        any_of.retain(|s| s != &json!({"type": "null"}));
        if any_of.len() < before {
            out.insert("nullable".into(), json!(true));
        }
        if let [only] = any_of.as_slice() {
            if let Value::Object(only) = only.clone() {
                merge_schema(&mut out, only);
            }
        } else if !any_of.is_empty() {
            out.insert("anyOf".into(), Value::Array(any_of));
        }
    }
    if out.contains_key("enum") && !out.contains_key("type") {
        out.insert("type".into(), json!("string"));
    }
    if out.contains_key("properties") && !out.contains_key("type") {
        out.insert("type".into(), json!("object"));
    }
    Ok(Value::Object(out))
}

// ---------------------------------------------------------------- parts

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
        return Ok(Block::ToolResult(ToolResult {
            call_id: fr.id.unwrap_or_default(),
            name: Some(fr.name),
            content: vec![Block::text(response.to_string())],
            is_error: None,
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

    // Unanswered calls (id, name), to match id-less function responses.
    let mut pending: Vec<(String, String)> = Vec::new();
    for (ci, content) in wire.contents.into_iter().enumerate() {
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

    for (i, tool) in wire.tools.unwrap_or_default().into_iter().enumerate() {
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

// ---------------------------------------------------------------- encoding

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

/// A tool result's content as a Gemini `functionResponse.response` object:
/// text that is a JSON object is used as is; other text is wrapped as
/// `{"output": text}`, or `{"error": text}` for an error result.
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
    if !is_error {
        if let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(&text) {
            return Ok(Value::Object(obj));
        }
    }
    Ok(if is_error {
        json!({"error": text})
    } else {
        json!({"output": text})
    })
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
        Block::ToolResult(r) => {
            let Some(name) = r.name.clone().or_else(|| names.get(&r.call_id).cloned()) else {
                return Err(TranslateError::unsupported(
                    param.to_string(),
                    format!(
                        "the tool result for call id \"{}\" answers no earlier tool call, so its function name is unknown, and a Gemini functionResponse needs it",
                        r.call_id
                    ),
                ));
            };
            let mut fr = json!({"name": name, "response": tool_result_response(r, param)?});
            if let Some(id) = wire_call_id(&r.call_id) {
                fr["id"] = json!(id);
            }
            merged(json!({"functionResponse": fr}), &r.extra)
        }
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

    // Contents: encode, drop empty turns, merge same-role neighbours.
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
                    encode_part(&Block::Thinking(unsigned), &param, &names)?
                }
                _ => encode_part(block, &param, &names)?,
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

    // Tools: all function declarations in one tool object, provider tools apart.
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

    let mut tc_extra = take_nested(&mut extra, "toolConfig");
    let fcc_extra = take_nested(&mut tc_extra, "functionCallingConfig");
    let fcc = match req.tool_choice.as_ref().filter(|_| has_functions) {
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
    };
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
    fn signatures_survive_inside_ids() {
        for sig in [
            "c2lnbmF0dXJlLWE+Lw==",
            "AAAA",
            "skip_thought_signature_validator",
            "é+/",
        ] {
            let id = embed_signature("gcall_0123456789abcdef", sig);
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "{id}"
            );
            assert_eq!(
                split_call_id(&id),
                ("gcall_0123456789abcdef", Some(sig.to_string()))
            );
        }
        assert_eq!(split_call_id("call_1"), ("call_1", None));
    }

    #[test]
    fn synthetic_ids_stay_off_the_wire() {
        let id = synthetic_call_id("r", 0, "f", &json!({}));
        assert_eq!(wire_call_id(&id), None);
        assert_eq!(wire_call_id(&embed_signature(&id, "AAAA")), None);
        assert_eq!(wire_call_id("call_abc"), Some("call_abc".to_string()));
        assert_eq!(
            wire_call_id(&embed_signature("fc-1", "AAAA")),
            Some("fc-1".to_string())
        );
        assert_ne!(id, synthetic_call_id("r", 1, "f", &json!({})));
    }

    #[test]
    fn json_schema_to_gemini_subset() {
        let schema = json!({
            "$schema": "x",
            "$defs": {"Pet": {"type": "object", "properties": {"kind": {"const": "cat"}}}},
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "pet": {"$ref": "#/$defs/Pet", "description": "the pet"},
                "age": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                "id": {"oneOf": [{"type": "string", "format": "uuid"}, {"type": "integer", "format": "int64"}]},
                "mixed": {"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {"b": {"type": "number"}}}]},
                "tag": {"enum": ["x", "y"]},
                "n": {"enum": [1, 2], "type": "integer"},
                "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            }
        });
        let out = to_gemini_schema(&schema);
        assert_eq!(
            out,
            Ok(json!({
                "type": "object",
                "properties": {
                    "pet": {"type": "object", "description": "the pet", "properties": {"kind": {"type": "string", "enum": ["cat"]}}},
                    "age": {"type": "integer", "nullable": true},
                    "id": {"anyOf": [{"type": "string"}, {"type": "integer", "format": "int64"}]},
                    "mixed": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}, "required": ["a"]},
                    "tag": {"type": "string", "enum": ["x", "y"]},
                    "n": {"type": "integer"},
                    "maybe": {"type": "string", "nullable": true}
                }
            }))
        );
    }

    #[test]
    fn recursive_and_dangling_refs_are_refused() {
        let recursive = json!({"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"});
        assert!(to_gemini_schema(&recursive).is_err());
        assert!(to_gemini_schema(&json!({"$ref": "#/$defs/Missing"})).is_err());
    }

    #[test]
    fn gemini_schema_to_json_schema() {
        let gemini = json!({"type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": true}, "b": {"type": "ARRAY", "items": {"type": "INTEGER"}}}});
        assert_eq!(
            from_gemini_schema(&gemini),
            json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}, "b": {"type": "array", "items": {"type": "integer"}}}})
        );
    }

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
