//! Structured output as the providers check it and answer it: the JSON
//! Schema a request enforces in its protocol's own form, Anthropic's refusal
//! of schemas outside what its constrained decoding takes, and a value that
//! conforms to a schema (the `[[json-answer]]` reply).
//! Imports `super::*`; never a protocol file.

use super::*;

/// The schema a request asks its upstream to enforce, in that protocol's
/// own form: OpenAI `response_format.json_schema.schema`, Responses
/// `text.format.schema`, Anthropic `output_config.format.schema`, Gemini
/// `generationConfig.responseJsonSchema` / `responseSchema`.
pub(super) fn enforced_schema(protocol: Protocol, body: &Value) -> Option<Value> {
    let schema = match protocol {
        Protocol::OpenAi => body.pointer("/response_format/json_schema/schema"),
        Protocol::Responses => body.pointer("/text/format/schema"),
        Protocol::Anthropic => body.pointer("/output_config/format/schema"),
        Protocol::Gemini => body
            .pointer("/generationConfig/responseJsonSchema")
            .or_else(|| body.pointer("/generationConfig/responseSchema")),
    };
    schema.cloned()
}

/// The input schema of the tool a `[[tool]]` answer calls (the first declared).
pub(super) fn first_tool_schema(protocol: Protocol, body: &Value) -> Option<Value> {
    let schema = match protocol {
        Protocol::OpenAi => body.pointer("/tools/0/function/parameters"),
        Protocol::Responses => body.pointer("/tools/0/parameters"),
        Protocol::Anthropic => body.pointer("/tools/0/input_schema"),
        Protocol::Gemini => body
            .pointer("/tools/0/functionDeclarations/0/parametersJsonSchema")
            .or_else(|| body.pointer("/tools/0/functionDeclarations/0/parameters")),
    };
    schema.cloned()
}

/// Anthropic's check of `output_config.format` and strict tools: the error
/// message it would answer 400 with, if the request breaks a rule.
pub(super) fn anthropic_refusal(body: &Value) -> Option<String> {
    if let Some(format) = body.pointer("/output_config/format") {
        if format.get("type").and_then(Value::as_str) != Some("json_schema") {
            return Some("output_config.format.type: must be json_schema".into());
        }
        let Some(schema) = format.get("schema") else {
            return Some("output_config.format.schema: Field required".into());
        };
        if let Some(why) = outside_subset(schema, "output_config.format.schema") {
            return Some(why);
        }
    }
    let tools = body.get("tools").and_then(Value::as_array);
    for (i, tool) in tools.into_iter().flatten().enumerate() {
        match tool.get("strict") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => {
                let schema = tool.get("input_schema").unwrap_or(&Value::Null);
                if let Some(why) = outside_subset(schema, &format!("tools.{i}.input_schema")) {
                    return Some(why);
                }
            }
            Some(_) => return Some(format!("tools.{i}.strict: Input should be a valid boolean")),
        }
    }
    None
}

/// Keywords Anthropic's structured outputs refuse.
const REFUSED: [&str; 13] = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "oneOf",
];

/// Why `schema` (at `path`) is outside what Anthropic enforces, if it is.
fn outside_subset(schema: &Value, path: &str) -> Option<String> {
    let Value::Object(map) = schema else {
        return (!schema.is_boolean()).then(|| format!("{path}: not a JSON Schema"));
    };
    if let Some(key) = REFUSED.iter().find(|k| map.contains_key(**k)) {
        return Some(format!(
            "{path}: the '{key}' keyword is not supported for structured outputs"
        ));
    }
    let is_object = map.contains_key("properties") || map.get("type") == Some(&json!("object"));
    if is_object && map.get("additionalProperties") != Some(&Value::Bool(false)) {
        return Some(format!(
            "{path}: For 'object' type, 'additionalProperties' must be explicitly set to false"
        ));
    }
    if map.get("$ref") == Some(&json!("#")) {
        return Some(format!("{path}: recursive schemas are not supported"));
    }
    for key in ["properties", "$defs", "definitions"] {
        for (name, child) in map
            .get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if let Some(why) = outside_subset(child, &format!("{path}.{key}.{name}")) {
                return Some(why);
            }
        }
    }
    for key in ["anyOf", "allOf", "prefixItems"] {
        for (i, child) in map
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(why) = outside_subset(child, &format!("{path}.{key}.{i}")) {
                return Some(why);
            }
        }
    }
    map.get("items")
        .and_then(|child| outside_subset(child, &format!("{path}.items")))
}

/// A value conforming to `schema` (root `root`, for `$ref`s): every
/// property, the first enum value or constant, one array item.
pub(super) fn conforming(schema: &Value, root: &Value) -> Value {
    let Value::Object(map) = schema else {
        return Value::Null;
    };
    if let Some(r) = map.get("$ref").and_then(Value::as_str) {
        let target = r.strip_prefix('#').and_then(|p| root.pointer(p));
        return target.map_or(Value::Null, |t| conforming(t, root));
    }
    if let Some(v) = map.get("const") {
        return v.clone();
    }
    if let Some(first) = map
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = map
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return conforming(first, root);
        }
    }
    let kind = match map.get("type") {
        Some(Value::Array(kinds)) => kinds.iter().find(|k| *k != "null").and_then(Value::as_str),
        Some(kind) => kind.as_str(),
        None if map.contains_key("properties") => Some("object"),
        None => None,
    };
    match kind.map(str::to_ascii_lowercase).as_deref() {
        Some("object") => {
            let props = map.get("properties").and_then(Value::as_object);
            let members = props.into_iter().flatten();
            Value::Object(
                members
                    .map(|(k, v)| (k.clone(), conforming(v, root)))
                    .collect(),
            )
        }
        Some("array") => {
            let item = map
                .get("items")
                .map_or(Value::Null, |i| conforming(i, root));
            json!([item])
        }
        Some("string") => json!("mock"),
        Some("integer") => json!(7),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        _ => Value::Null,
    }
}
