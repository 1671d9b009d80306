//! OpenAI chat model objects (`/v1/models…`): OpenRouter-like fields plus the model's
//! `aliases` (an alias is no entry of its own), `{"object":"list","data":[…]}`.

use crate::config::Model;
use serde_json::{json, Value};

/// One model as OpenAI chat renders it.
pub fn model_object(m: &Model) -> Value {
    json!({
        "id": m.id,
        "object": "model",
        "created": m.created,
        "owned_by": m.provider,
        "description": m.description,
        "context_length": m.context_length,
        "architecture": m.architecture,
        "pricing": { "prompt": m.pricing.base.prompt.text, "completion": m.pricing.base.completion.text },
        "top_provider": m.provider,
        "supported_parameters": m.supported_parameters,
        "supported_protocols": m.protocols.iter().map(|f| f.name()).collect::<Vec<_>>(),
        "aliases": m.aliases,
    })
}

/// The list envelope.
pub fn list(items: Vec<Value>) -> Value {
    json!({ "object": "list", "data": items })
}
