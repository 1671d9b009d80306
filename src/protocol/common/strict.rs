//! OpenAI's strict schemas for requests from other families: chat-completions
//! and Responses enforce a schema (`strict: true`) only when every object in
//! it is closed (`additionalProperties: false`) and lists every property in
//! `required`, and refuse a strict schema that is not. A strict tool or an
//! enforced output schema from Anthropic or Gemini (whose rules differ) is
//! asked strict when it satisfies them, else non-strict and reported.

use crate::family::Family;
use serde_json::Value;

/// The `strict` flag an OpenAI-family upstream gets for a schema the client
/// (`source`) marked `strict`: an OpenAI-family client's own choice as it is;
/// from another family, `true` only where the schema satisfies OpenAI's rules.
pub fn openai_strict(
    source: Option<Family>,
    strict: Option<bool>,
    schema: Option<&Value>,
) -> Option<bool> {
    match (source, strict) {
        (None | Some(Family::OpenAi | Family::Responses), s) => s,
        (_, Some(true)) => Some(schema.is_some_and(fits)),
        (_, s) => s,
    }
}

/// Whether a strict flag asked for was lowered by [`openai_strict`].
pub fn lowered(source: Option<Family>, strict: Option<bool>, schema: Option<&Value>) -> bool {
    strict == Some(true) && openai_strict(source, strict, schema) == Some(false)
}

/// Whether `schema` satisfies OpenAI's strict-mode rules.
pub fn fits(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            let is_object = map.contains_key("properties")
                || map.get("type").and_then(Value::as_str) == Some("object");
            if is_object {
                if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                    return false;
                }
                let required: Vec<&str> = map
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let all_required = map
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_none_or(|p| p.keys().all(|k| required.contains(&k.as_str())));
                if !all_required {
                    return false;
                }
            }
            subschemas_fit(map)
        }
        _ => true,
    }
}

/// Whether every subschema of one schema object fits.
fn subschemas_fit(map: &serde_json::Map<String, Value>) -> bool {
    let maps = ["properties", "$defs", "definitions"]
        .into_iter()
        .filter_map(|k| {
            map.get(k)
                .and_then(Value::as_object)
                .map(|m| m.values().all(fits))
        });
    let lists = ["anyOf", "allOf", "oneOf", "prefixItems"]
        .into_iter()
        .filter_map(|k| {
            map.get(k)
                .and_then(Value::as_array)
                .map(|l| l.iter().all(fits))
        });
    let single = ["items", "not", "additionalProperties"]
        .into_iter()
        .filter_map(|k| map.get(k).map(fits));
    maps.chain(lists).chain(single).all(|ok| ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn closed_objects_with_every_property_required_fit() {
        let ok = json!({"type": "object", "additionalProperties": false, "required": ["a", "b"],
            "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "object",
            "additionalProperties": false, "required": ["c"], "properties": {"c": {"type": "integer"}}}}}});
        assert!(fits(&ok));
        let optional = json!({"type": "object", "additionalProperties": false, "required": ["a"],
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
        assert!(!fits(&optional));
        let open_inner = json!({"type": "object", "additionalProperties": false, "required": ["a"],
            "properties": {"a": {"type": "object", "properties": {}}}});
        assert!(!fits(&open_inner));
        let defs = json!({"$defs": {"X": {"type": "object", "properties": {"y": {"type": "string"}}}},
            "$ref": "#/$defs/X"});
        assert!(!fits(&defs));
    }

    #[test]
    fn only_other_families_strict_flags_are_checked() {
        let loose = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let s = Some(&loose);
        assert_eq!(
            openai_strict(Some(Family::OpenAi), Some(true), s),
            Some(true)
        );
        assert_eq!(
            openai_strict(Some(Family::Anthropic), Some(true), s),
            Some(false)
        );
        assert!(lowered(Some(Family::Gemini), Some(true), s));
        assert_eq!(openai_strict(Some(Family::Anthropic), None, s), None);
    }
}
