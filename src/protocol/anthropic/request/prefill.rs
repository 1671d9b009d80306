//! An Anthropic Messages body asking for a cut answer's continuation: the
//! text the client has as the last assistant message (Anthropic continues
//! an assistant turn that ends the conversation), `thinking` dropped (a
//! prefill cannot be combined with it).

use crate::protocol::common::prefill::{append_content, append_turn, drop_members, edit};
use serde_json::{json, Value};

/// The client's body with `prefill` as (the end of) its last assistant message.
pub fn continue_body(body: &[u8], prefill: Option<&str>) -> Option<(Vec<u8>, Vec<&'static str>)> {
    let text = prefill?;
    let mut dropped = Vec::new();
    let body = edit(body, |o| {
        drop_members(o, &["thinking"], &mut dropped);
        let messages = o.entry("messages").or_insert(Value::Null);
        append_turn(
            messages,
            text,
            |m| m["role"] == "assistant",
            |m, t| {
                if let Some(m) = m.as_object_mut() {
                    let content = m.entry("content").or_insert(Value::Null);
                    append_content(content, t, |t| json!({"type": "text", "text": t}));
                }
            },
            |t| json!({"role": "assistant", "content": [{"type": "text", "text": t}]}),
        );
    })?;
    Some((body, dropped))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_prefill_is_the_last_assistant_turn_and_thinking_goes() {
        let body = br#"{"model":"m","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}"#;
        let (out, dropped) = continue_body(body, Some("Hel")).unwrap();
        assert_eq!(dropped, ["thinking"]);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            out["messages"][1],
            json!({"role": "assistant", "content": [{"type": "text", "text": "Hel"}]})
        );
        assert!(out.get("thinking").is_none());
        assert_eq!(continue_body(body, None), None);
    }
}
