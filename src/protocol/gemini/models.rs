//! Gemini model objects (`/google/v1beta/models…`): camelCase fields, `{"models":[…]}`.
//!
//! `context_length` splits into `inputTokenLimit` (context minus the output
//! budget) and `outputTokenLimit` (`max_output_tokens`), so the pair sums to it.

use crate::config::Model;
use serde_json::{json, Value};

/// One model as Gemini renders it.
pub fn model_object(m: &Model) -> Value {
    let mut o = json!({
        "name": format!("models/{}", m.id),
        "version": m.version,
        "displayName": m.display_name,
        "description": m.description,
        "inputTokenLimit": m.context_length - m.max_output_tokens,
        "outputTokenLimit": m.max_output_tokens,
        "supportedGenerationMethods": m.supported_generation_methods,
    });
    if let Some(obj) = o.as_object_mut() {
        if let Some(t) = m.defaults.temperature {
            obj.insert("temperature".into(), json!(t));
        }
        if let Some(p) = m.defaults.top_p {
            obj.insert("topP".into(), json!(p));
        }
        if let Some(k) = m.defaults.top_k {
            obj.insert("topK".into(), json!(k));
        }
    }
    o
}

/// The list envelope.
pub fn list(items: Vec<Value>) -> Value {
    json!({ "models": items })
}
