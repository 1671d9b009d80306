//! Responses `custom` tools (free-form input, e.g. Codex's `apply_patch`) in
//! the canonical model: a function tool taking one string argument named
//! [`CUSTOM_INPUT_KEY`], its grammar appended to the description; calls carry
//! `{CUSTOM_INPUT_KEY: input}`. Used by the decoder and encoder here and by
//! the response and stream codecs, which recognise a call by that shape.

use serde_json::{json, Value};

/// The one argument of the function a `custom` tool becomes for other protocols.
pub const CUSTOM_INPUT_KEY: &str = "custom_tool_input";

/// The JSON Schema of the single string argument a custom tool becomes.
pub fn custom_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            CUSTOM_INPUT_KEY: {
                "type": "string",
                "description": "The tool's free-form input, as plain text (not JSON)."
            }
        },
        "required": [CUSTOM_INPUT_KEY],
        "additionalProperties": false
    })
}

/// What a custom tool's format adds to its description (empty for free text).
pub(super) fn format_note(format: Option<&Value>) -> String {
    let Some(f) = format else {
        return String::new();
    };
    if f.get("type").and_then(Value::as_str) != Some("grammar") {
        return String::new();
    }
    let syntax = f.get("syntax").and_then(Value::as_str).unwrap_or("lark");
    let definition = f.get("definition").and_then(Value::as_str).unwrap_or("");
    format!("\n\nThe input must follow this {syntax} grammar:\n{definition}")
}

/// The custom tool input when `arguments` have the shape a custom tool call
/// takes in the canonical model (`{CUSTOM_INPUT_KEY: "…"}`).
pub fn custom_input(arguments: &Value) -> Option<&str> {
    let obj = arguments.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    obj.get(CUSTOM_INPUT_KEY)?.as_str()
}

/// The canonical arguments of a custom tool call.
pub fn custom_arguments(input: &str) -> Value {
    json!({ CUSTOM_INPUT_KEY: input })
}
