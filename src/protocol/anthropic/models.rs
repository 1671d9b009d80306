//! Family B model objects (`/anthropic/v1/models…`): `{"models":[…]}` with `models/<id>` ids.

use crate::config::Model;
use serde_json::{json, Value};

/// One model as family B renders it.
pub fn model_object(m: &Model) -> Value {
    let f = m.supported_features;
    json!({
        "id": format!("models/{}", m.id),
        "display_name": m.display_name,
        "description": m.description,
        "supported_features": { "vision": f.vision, "tool_use": f.tool_use, "streaming": f.streaming },
        "context_window_size": m.context_length,
        "supported_actions": m.supported_actions,
    })
}

/// The list envelope.
pub fn list(items: Vec<Value>) -> Value {
    json!({ "models": items })
}
