//! An OpenAI chat body asking for a cut answer's continuation: the text
//! the client has as the last assistant message, reasoning settings dropped;
//! and the member some OpenAI-compatible upstreams want on that message
//! before they continue it.

use crate::protocol::common::prefill::{append_content, append_turn, drop_members, edit};
use serde_json::{json, Value};

/// The client's body with `prefill` as (the end of) its last assistant message.
pub fn continue_body(body: &[u8], prefill: Option<&str>) -> Option<(Vec<u8>, Vec<&'static str>)> {
    let text = prefill?;
    let mut dropped = Vec::new();
    let body = edit(body, |o| {
        drop_members(o, &["reasoning_effort", "reasoning"], &mut dropped);
        let messages = o.entry("messages").or_insert(Value::Null);
        append_turn(
            messages,
            text,
            |m| m["role"] == "assistant" && m.get("tool_calls").is_none(),
            |m, t| {
                if let Some(m) = m.as_object_mut() {
                    let content = m.entry("content").or_insert(Value::Null);
                    append_content(content, t, |t| json!({"type": "text", "text": t}));
                }
            },
            |t| json!({"role": "assistant", "content": t}),
        );
    })?;
    Some((body, dropped))
}

/// Sets `member` (DeepSeek's and Mistral's `prefix`, Qwen's and Kimi's
/// `partial`) to true on the last message, which the upstream then continues.
pub fn mark_prefill(body: &[u8], member: &str) -> Option<Vec<u8>> {
    edit(body, |o| {
        if let Some(last) = o
            .get_mut("messages")
            .and_then(Value::as_array_mut)
            .and_then(|m| m.last_mut())
            .and_then(Value::as_object_mut)
        {
            last.insert(member.to_string(), Value::Bool(true));
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_prefill_is_the_last_assistant_message_and_reasoning_goes() {
        let body = br#"{"model":"m","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}"#;
        let (out, dropped) = continue_body(body, Some("Hel")).unwrap();
        assert_eq!(dropped, ["reasoning_effort"]);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            out["messages"][1],
            json!({"role": "assistant", "content": "Hel"})
        );
        assert!(out.get("reasoning_effort").is_none());
        let marked: Value = serde_json::from_slice(
            &mark_prefill(&serde_json::to_vec(&out).unwrap(), "prefix").unwrap(),
        )
        .unwrap();
        assert_eq!(marked["messages"][1]["prefix"], true);
        // The client's own prefill is continued, not doubled.
        let own =
            br#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{"}]}"#;
        let out: Value =
            serde_json::from_slice(&continue_body(own, Some("\"a\"")).unwrap().0).unwrap();
        assert_eq!(out["messages"][1]["content"], "{\"a\"");
    }
}
