//! Conversion between JSON Schema and Gemini's OpenAPI-subset schema (local
//! `$ref`s inlined, unsupported keywords dropped), both ways.

use serde_json::{json, Map, Value};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
