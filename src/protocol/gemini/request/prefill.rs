//! A Gemini body asking for a cut answer's continuation: the text the
//! client has as the last `model` turn, the thinking settings dropped.

use crate::protocol::common::prefill::{append_turn, drop_members, edit};
use serde_json::{json, Value};

/// The client's body with `prefill` as (the end of) its last model turn.
pub fn continue_body(body: &[u8], prefill: Option<&str>) -> Option<(Vec<u8>, Vec<&'static str>)> {
    let text = prefill?;
    let mut dropped = Vec::new();
    let body = edit(body, |o| {
        for config in ["generationConfig", "generation_config"] {
            if let Some(g) = o.get_mut(config).and_then(Value::as_object_mut) {
                let mut here = Vec::new();
                drop_members(g, &["thinkingConfig", "thinking_config"], &mut here);
                if !here.is_empty() {
                    dropped.push("generationConfig.thinkingConfig");
                }
            }
        }
        let contents = o.entry("contents").or_insert(Value::Null);
        append_turn(
            contents,
            text,
            |c| c["role"] == "model",
            |c, t| {
                if let Some(parts) = c.get_mut("parts").and_then(Value::as_array_mut) {
                    parts.push(json!({"text": t}));
                }
            },
            |t| json!({"role": "model", "parts": [{"text": t}]}),
        );
    })?;
    Some((body, dropped))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_prefill_is_the_last_model_turn_and_thinking_goes() {
        let body = br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":9},"temperature":0}}"#;
        let (out, dropped) = continue_body(body, Some("Hel")).unwrap();
        assert_eq!(dropped, ["generationConfig.thinkingConfig"]);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            out["contents"][1],
            json!({"role": "model", "parts": [{"text": "Hel"}]})
        );
        assert_eq!(out["generationConfig"], json!({"temperature": 0}));
    }
}
