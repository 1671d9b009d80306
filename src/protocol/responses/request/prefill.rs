//! A Responses body asking for a cut answer's continuation: the text the
//! client has as the last assistant message of `input` (a string input
//! becomes the user message it stands for), `reasoning` dropped.

use crate::protocol::common::prefill::{append_turn, drop_members, edit};
use serde_json::{json, Value};

/// The client's body with `prefill` as (the end of) its last assistant message.
pub fn continue_body(body: &[u8], prefill: Option<&str>) -> Option<(Vec<u8>, Vec<&'static str>)> {
    let text = prefill?;
    let mut dropped = Vec::new();
    let body = edit(body, |o| {
        drop_members(o, &["reasoning"], &mut dropped);
        let input = o.entry("input").or_insert(Value::Null);
        if let Value::String(s) = input {
            *input = json!([{"role": "user", "content": s.clone()}]);
        }
        append_turn(
            input,
            text,
            |i| (i["type"].is_null() || i["type"] == "message") && i["role"] == "assistant",
            |i, t| match i.get_mut("content") {
                Some(Value::Array(parts)) => parts.push(json!({"type": "output_text", "text": t})),
                Some(Value::String(s)) => s.push_str(t),
                _ => {}
            },
            |t| json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]}),
        );
    })?;
    Some((body, dropped))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_string_input_becomes_a_user_message_and_the_prefill_follows() {
        let body = br#"{"model":"m","input":"hi","reasoning":{"effort":"high"}}"#;
        let (out, dropped) = continue_body(body, Some("Hel")).unwrap();
        assert_eq!(dropped, ["reasoning"]);
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["input"][0], json!({"role": "user", "content": "hi"}));
        assert_eq!(out["input"][1]["content"][0]["text"], "Hel");
        assert!(out.get("reasoning").is_none());
    }
}
