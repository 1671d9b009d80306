//! Anthropic Messages model objects (`/anthropic/v1/models…`): `{"models":[…]}` with
//! `models/<id>` ids, plus the Anthropic API's own page fields (`data`,
//! `has_more`, `first_id`, `last_id`) and model fields (`type`, `created_at`)
//! so that the official Anthropic SDK's `models.list()` / `models.retrieve()` read them.

use crate::config::Model;
use crate::util::rfc3339::Rfc3339;
use serde_json::{json, Value};

/// One model as Anthropic Messages renders it.
pub fn model_object(m: &Model) -> Value {
    let f = m.supported_features;
    let created = Rfc3339::seconds(i64::try_from(m.created).unwrap_or(i64::MAX));
    let mut o = json!({
        "type": "model",
        "id": format!("models/{}", m.id),
        "display_name": m.display_name,
        "created_at": created.to_string(),
        "description": m.description,
        "supported_features": { "vision": f.vision, "tool_use": f.tool_use, "streaming": f.streaming },
        "context_window_size": m.context_length,
        "supported_actions": m.supported_actions,
    });
    // The names the model also answers to, only when it has any (docs/api.md "Aliases").
    if let (false, Some(obj)) = (m.aliases.is_empty(), o.as_object_mut()) {
        obj.insert("aliases".into(), json!(m.aliases));
    }
    o
}

/// The list envelope: `models` (docs/api.md "Routes"), and Anthropic's page (one page, all models).
pub fn list(items: Vec<Value>) -> Value {
    let id = |m: Option<&Value>| m.and_then(|m| m.get("id")).cloned().unwrap_or(Value::Null);
    let (first_id, last_id) = (id(items.first()), id(items.last()));
    json!({
        "models": items,
        "data": items,
        "has_more": false,
        "first_id": first_id,
        "last_id": last_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_fields() {
        let v = list(vec![json!({"id": "models/a"}), json!({"id": "models/b"})]);
        assert_eq!(v["data"], v["models"]);
        assert_eq!(v["has_more"], false);
        assert_eq!(v["first_id"], "models/a");
        assert_eq!(v["last_id"], "models/b");
        let empty = list(Vec::new());
        assert_eq!(empty["data"], json!([]));
        assert!(empty["first_id"].is_null() && empty["last_id"].is_null());
    }
}
