//! Structured output toward Anthropic (docs/protocol-mapping.md "Structured
//! output"): a JSON Schema goes up as the native `output_config.format`, and
//! a strict function tool as `strict: true`, when the catalog says the model
//! enforces schemas (`EncodeOptions::native_structured_output`) and the
//! schema fits what Anthropic's constrained decoding takes; otherwise a
//! schema (and always a bare JSON-object request, which has no schema) is a
//! system-prompt instruction. Which form was used is recorded in the
//! request's [`Adjustments`].
//!
//! Fitting a schema: objects get `additionalProperties: false` (Anthropic
//! requires it; output without extra members still satisfies the client's
//! schema), `oneOf` becomes `anyOf`, and constraints Anthropic refuses
//! (numeric bounds, string lengths and patterns, most array and object
//! bounds, unknown string formats) move into the description as JSON, where
//! the model still reads them. A schema that cannot be fitted without
//! changing what it accepts (a map-valued `additionalProperties`, a
//! recursive or external `$ref`) keeps the instruction.

use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::{ChatRequest, ResponseFormat, Tool};
use crate::protocol::common::report::{self, Param};
use serde_json::{json, Map, Value};

/// What the upstream is told about the answer's shape.
#[derive(Debug, PartialEq)]
pub(super) enum Shape {
    /// Nothing (no structured output asked, or the client's own native form rides in `extra`).
    Free,
    /// `output_config.format`.
    Native(Value),
    /// A system-prompt instruction.
    Instruction(String),
}

/// The form the request's `response_format` takes toward Anthropic.
/// `client_native`: the client sent Anthropic's own form (kept in `extra`).
pub(super) fn shape(
    req: &ChatRequest,
    client_native: bool,
    native: bool,
    adj: &mut Adjustments,
) -> Shape {
    let Some(rf) = req.response_format.as_ref().filter(|_| !client_native) else {
        return Shape::Free;
    };
    let param = client_param(req);
    if let ResponseFormat::JsonSchema(js) = rf {
        if let Some(schema) = native.then(|| fit(&js.schema)).flatten() {
            adj.carry(param, "output_config.format");
            return Shape::Native(json!({"type": "json_schema", "schema": schema}));
        }
    }
    match instruction(rf) {
        Some(text) => {
            adj.carry(param, "instruction");
            Shape::Instruction(text)
        }
        None => Shape::Free,
    }
}

/// The client's name for its structured-output setting.
fn client_param(req: &ChatRequest) -> &'static str {
    let gemini_json_schema = req.source == Some(Family::Gemini)
        && req
            .extra
            .for_family(Family::Gemini)
            .and_then(|m| m.get("generationConfig"))
            .is_some_and(|g| g.get("responseJsonSchema").is_some());
    if gemini_json_schema {
        "generationConfig.responseJsonSchema"
    } else {
        report::client_name(req.source, Param::ResponseFormat)
    }
}

/// The system instruction standing in for `response_format` where the
/// native form cannot be used.
pub fn instruction(rf: &ResponseFormat) -> Option<String> {
    match rf {
        ResponseFormat::Text => None,
        ResponseFormat::JsonObject => Some(
            "Respond with a single valid JSON object and nothing else: no prose, no code fences."
                .into(),
        ),
        ResponseFormat::JsonSchema(js) => Some(format!(
            "Respond with a single valid JSON value and nothing else (no prose, no code fences). \
             It must conform to this JSON Schema:\n{}",
            js.schema
        )),
    }
}

/// Marks the strict function tools of `req` (encoded in order as `tools`)
/// `strict: true` with their input schema fitted, when the model enforces
/// schemas; a strict tool that cannot be is reported dropped.
pub(super) fn strict_tools(
    req: &ChatRequest,
    tools: &mut [Value],
    native: bool,
    adj: &mut Adjustments,
) {
    let mut lost = false;
    for (tool, encoded) in req.tools.iter().zip(tools.iter_mut()) {
        let Tool::Function(f) = tool else { continue };
        if f.strict != Some(true) {
            continue;
        }
        let fitted = native
            .then(|| fit(encoded.get("input_schema").unwrap_or(&Value::Null)))
            .flatten();
        match (fitted, encoded.as_object_mut()) {
            (Some(schema), Some(def)) => {
                def.insert("input_schema".into(), schema);
                def.insert("strict".into(), Value::Bool(true));
            }
            _ => lost = true,
        }
    }
    if lost {
        report::dropped(req, Param::Strict, adj);
    }
}

/// Keywords Anthropic's structured outputs refuse, kept for the model in
/// the description.
const MOVED: [&str; 12] = [
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
];

/// The string formats Anthropic's structured outputs take.
const FORMATS: [&str; 10] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

/// `schema` fitted to Anthropic's structured outputs, or `None` when it
/// cannot be without accepting less than a conforming answer needs.
pub fn fit(schema: &Value) -> Option<Value> {
    let Value::Object(root) = schema else {
        return None;
    };
    if recursive(root) {
        return None;
    }
    let mut out = schema.clone();
    fit_node(&mut out).then_some(out)
}

/// Fits one schema object and everything below it; false when it cannot be.
fn fit_node(node: &mut Value) -> bool {
    let Value::Object(map) = node else {
        // `true` / `false` schemas, or a malformed one Anthropic will name.
        return node.is_boolean();
    };
    if map
        .get("$ref")
        .and_then(Value::as_str)
        .is_some_and(|r| !r.starts_with("#/"))
    {
        return false;
    }
    if let Some(one_of) = map.remove("oneOf") {
        map.insert("anyOf".into(), one_of);
    }
    let is_object = map.contains_key("properties")
        || match map.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
            _ => false,
        };
    if is_object {
        match map.get("additionalProperties") {
            None | Some(Value::Bool(_)) => {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            Some(_) => return false,
        }
    }
    move_constraints(map);
    children_fit(map)
}

/// Moves the constraints Anthropic refuses into the description.
fn move_constraints(map: &mut Map<String, Value>) {
    let mut moved = Map::new();
    for key in MOVED {
        if let Some(v) = map.remove(key) {
            moved.insert(key.into(), v);
        }
    }
    if map.get("minItems").and_then(Value::as_u64).unwrap_or(0) > 1 {
        moved.insert(
            "minItems".into(),
            map.remove("minItems").unwrap_or_default(),
        );
    }
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !FORMATS.contains(&f))
    {
        moved.insert("format".into(), map.remove("format").unwrap_or_default());
    }
    if moved.is_empty() {
        return;
    }
    let note = Value::Object(moved).to_string();
    let description = match map.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{d}\n{note}"),
        _ => note,
    };
    map.insert("description".into(), Value::String(description));
}

/// Fits every subschema of one schema object.
fn children_fit(map: &mut Map<String, Value>) -> bool {
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            if !children.values_mut().all(fit_node) {
                return false;
            }
        }
    }
    for key in ["anyOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            if !children.iter_mut().all(fit_node) {
                return false;
            }
        }
    }
    for key in ["items", "not"] {
        if let Some(child) = map.get_mut(key) {
            if !fit_node(child) {
                return false;
            }
        }
    }
    true
}

/// Whether a schema refers to itself: a `$ref` to the root (`#`), or a
/// definition reachable from its own body.
fn recursive(root: &Map<String, Value>) -> bool {
    let defs: Vec<(&str, &Value)> = ["$defs", "definitions"]
        .iter()
        .filter_map(|k| root.get(*k).and_then(Value::as_object))
        .flat_map(|m| m.iter().map(|(k, v)| (k.as_str(), v)))
        .collect();
    let mut refs = Vec::new();
    refs_in_map(root, &mut refs);
    if refs.iter().any(|r| r == "#") {
        return true;
    }
    let target = |r: &str| {
        r.strip_prefix("#/$defs/")
            .or_else(|| r.strip_prefix("#/definitions/"))
            .map(str::to_owned)
    };
    // Depth-first from each definition, over the definitions its body names.
    defs.iter().any(|(start, _)| {
        let mut stack = vec![*start];
        let mut seen: Vec<&str> = Vec::new();
        while let Some(name) = stack.pop() {
            let Some((_, body)) = defs.iter().find(|(n, _)| *n == name) else {
                continue;
            };
            let mut inner = Vec::new();
            refs_in(body, &mut inner);
            for t in inner.iter().filter_map(|r| target(r)) {
                if t == *start {
                    return true;
                }
                if let Some((n, _)) = defs.iter().find(|(n, _)| *n == t) {
                    if !seen.contains(n) {
                        seen.push(n);
                        stack.push(n);
                    }
                }
            }
        }
        false
    })
}

/// Every `$ref` string under `value`.
fn refs_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => refs_in_map(map, out),
        Value::Array(items) => items.iter().for_each(|v| refs_in(v, out)),
        _ => {}
    }
}

/// Every `$ref` string in an object and under its members.
fn refs_in_map(map: &Map<String, Value>, out: &mut Vec<String>) {
    for (k, v) in map {
        match (k.as_str(), v) {
            ("$ref", Value::String(r)) => out.push(r.clone()),
            _ => refs_in(v, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_closed_and_refused_constraints_move_to_the_description() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "description": "Full name"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "email": {"type": "string", "format": "email"},
                "tags": {"type": "array", "items": {"type": "string", "format": "color"}, "minItems": 2},
                "pet": {"oneOf": [{"type": "object", "properties": {"kind": {"const": "cat"}}}, {"type": "null"}]}
            },
            "required": ["name", "age"]
        });
        let fitted = fit(&schema).expect("fits");
        assert_eq!(
            fitted,
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "name": {"type": "string", "description": "Full name\n{\"minLength\":1}"},
                    "age": {"type": "integer", "description": "{\"maximum\":150,\"minimum\":0}"},
                    "email": {"type": "string", "format": "email"},
                    "tags": {"type": "array", "items": {"type": "string", "description": "{\"format\":\"color\"}"}, "description": "{\"minItems\":2}"},
                    "pet": {"anyOf": [{"type": "object", "additionalProperties": false, "properties": {"kind": {"const": "cat"}}}, {"type": "null"}]}
                },
                "required": ["name", "age"]
            })
        );
        // Already within the subset: unchanged.
        assert_eq!(fit(&fitted).as_ref(), Some(&fitted));
    }

    #[test]
    fn schemas_that_cannot_be_fitted_keep_the_instruction() {
        for schema in [
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            json!({"type": "object", "properties": {"next": {"$ref": "#"}}}),
            json!({"$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}, "$ref": "#/$defs/Node"}),
            json!({"$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}}, "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}, "$ref": "#/$defs/A"}),
            json!({"$ref": "https://example.com/schema.json"}),
            json!("not a schema"),
        ] {
            assert_eq!(fit(&schema), None, "{schema}");
        }
        // Definitions that only refer to each other acyclically fit.
        let acyclic = json!({"$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}}, "B": {"type": "string"}}, "$ref": "#/$defs/A"});
        assert!(fit(&acyclic).is_some());
    }
}
