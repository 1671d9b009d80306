//! A Converse body asking for a cut answer's continuation: the text the
//! client has as the last assistant message (Converse continues an
//! assistant turn that ends the conversation), Claude's `thinking` dropped
//! from `additionalModelRequestFields` (a prefill cannot be combined with it).

use crate::protocol::common::prefill::{append_turn, edit};
use serde_json::{json, Value};

/// The client's body with `prefill` as (the end of) its last assistant message.
pub fn continue_body(body: &[u8], prefill: Option<&str>) -> Option<(Vec<u8>, Vec<&'static str>)> {
    let text = prefill?;
    let mut dropped = Vec::new();
    let body = edit(body, |o| {
        if let Some(Value::Object(extra)) = o.get_mut("additionalModelRequestFields") {
            for key in ["thinking", "reasoning_config"] {
                if extra.remove(key).is_some() {
                    dropped.push(if key == "thinking" {
                        "additionalModelRequestFields.thinking"
                    } else {
                        "additionalModelRequestFields.reasoning_config"
                    });
                }
            }
        }
        let messages = o.entry("messages").or_insert(Value::Null);
        append_turn(
            messages,
            text,
            |m| m["role"] == "assistant",
            |m, t| {
                if let Some(Value::Array(content)) = m.get_mut("content") {
                    content.push(json!({ "text": t }));
                }
            },
            |t| json!({"role": "assistant", "content": [{ "text": t }]}),
        );
    })?;
    Some((body, dropped))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_prefill_is_the_last_assistant_turn() {
        let body = br#"{"messages":[{"role":"user","content":[{"text":"hi"}]}],"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}}}"#;
        let (out, dropped) = continue_body(body, Some("Hel")).unwrap();
        assert_eq!(dropped, ["additionalModelRequestFields.thinking"]);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            out["messages"][1],
            json!({"role": "assistant", "content": [{"text": "Hel"}]})
        );
        assert_eq!(continue_body(body, None), None);
    }
}
