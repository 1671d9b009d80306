//! A request's `input` in item form, as a record keeps it: a string is one
//! user message, a type-less `{role, content}` message gets its `type` and
//! typed parts.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

fn raw(v: &Value) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(v).ok()
}

/// A `message` item with one text part.
fn text_message(role: &str, text: &str) -> Option<Box<RawValue>> {
    let part = if role == "assistant" {
        "output_text"
    } else {
        "input_text"
    };
    raw(&json!({"type": "message", "role": role, "content": [{"type": part, "text": text}]}))
}

/// The request's `input` in item form: a string is one user message; an
/// "easy" message (`role` and `content`, no `type`) becomes a `message`
/// item with typed parts; other items are kept as they were sent.
pub fn normalise_input(input: &RawValue) -> Vec<Box<RawValue>> {
    if let Ok(s) = serde_json::from_str::<String>(input.get()) {
        return text_message("user", &s).into_iter().collect();
    }
    let Ok(items) = serde_json::from_str::<Vec<Box<RawValue>>>(input.get()) else {
        return Vec::new();
    };
    #[derive(Deserialize)]
    struct Easy<'a> {
        #[serde(rename = "type", default)]
        kind: Option<&'a str>,
        #[serde(default)]
        role: Option<&'a str>,
    }
    items
        .into_iter()
        .filter_map(|item| {
            let easy = serde_json::from_str::<Easy<'_>>(item.get()).ok();
            match easy {
                Some(Easy {
                    kind: None,
                    role: Some(role),
                }) => {
                    let mut v: Value = serde_json::from_str(item.get()).ok()?;
                    let obj = v.as_object_mut()?;
                    if let Some(Value::String(s)) = obj.get("content") {
                        let part = if role == "assistant" {
                            "output_text"
                        } else {
                            "input_text"
                        };
                        let parts = json!([{"type": part, "text": s}]);
                        obj.insert("content".into(), parts);
                    }
                    obj.insert("type".into(), json!("message"));
                    raw(&v)
                }
                _ => Some(item),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::responses::store::tests::rawv;

    #[test]
    fn input_is_normalised_to_items() {
        let items = normalise_input(&rawv(r#""hi""#));
        assert_eq!(
            serde_json::from_str::<Value>(items[0].get()).unwrap(),
            json!({"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]})
        );
        let items = normalise_input(&rawv(
            r#"[{"role":"assistant","content":"yo"},{"type":"function_call_output","call_id":"c","output":"1"}]"#,
        ));
        let v0: Value = serde_json::from_str(items[0].get()).unwrap();
        assert_eq!(v0["type"], "message");
        assert_eq!(v0["content"][0]["type"], "output_text");
        assert_eq!(
            items[1].get(),
            r#"{"type":"function_call_output","call_id":"c","output":"1"}"#
        );
    }
}
