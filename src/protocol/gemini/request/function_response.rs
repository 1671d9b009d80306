//! A tool result's text ⇄ a Gemini `functionResponse.response` object, one
//! rule both ways (docs/protocol-mapping.md, *Tool results across
//! families*), so a result keeps its shape through any pair of protocols.
//!
//! Gemini's API reference: "Use `output` key to specify function output and
//! `error` key to specify error details (if any). If `output` and `error`
//! keys are not specified, then whole `response` is treated as function
//! output." google-genai's automatic function calling writes `result`.
//!
//! - To Gemini ([`wrap`]): an error's text is `{"error": text}`; a text that
//!   is a JSON object is that object; any other text is `{"output": text}`.
//! - From Gemini ([`unwrap`]): `{"output": S}`, `{"result": S}` (S a string)
//!   are the bare text S, `{"error": S}` the text S of an error result; any
//!   other response is its JSON text.
//!
//! The one exception keeps the two inverse: a JSON object text that itself
//! has the shape of a wrapped result (`{"output": "sunny"}` as the text a
//! tool returned) is wrapped again, and a response whose string is such a
//! text is unwrapped, so `unwrap(wrap(t)) == t` for every text, and
//! `wrap(unwrap(r)) == r` for every response but `{"result": S}` (which
//! comes back as `{"output": S}`) and whitespace inside JSON texts.

use serde_json::{json, Map, Value};

/// The `functionResponse.response` a tool result's text becomes.
pub fn wrap(text: &str, is_error: bool) -> Value {
    if is_error {
        return json!({ "error": text });
    }
    match as_object(text) {
        Some(obj) => Value::Object(obj),
        None => json!({ "output": text }),
    }
}

/// The tool result text a `functionResponse.response` stands for, and
/// whether it reports an error.
pub fn unwrap(response: &Value) -> (String, bool) {
    if let Value::Object(r) = response {
        if let Some((text, is_error)) = bare(r) {
            return (text.to_string(), is_error);
        }
    }
    (response.to_string(), false)
}

/// The object a text stands for when it is a JSON object [`wrap`] sends as
/// is (not one shaped like a wrapped result).
fn as_object(text: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(obj)) if bare(&obj).is_none() => Some(obj),
        _ => None,
    }
}

/// The text (and error flag) of a response that wraps one: a single
/// `error`, `output` or `result` member holding a string that [`wrap`] would
/// wrap the same way. Strictly shorter strings at each step: it ends.
fn bare(r: &Map<String, Value>) -> Option<(&str, bool)> {
    if r.len() != 1 {
        return None;
    }
    let (key, value) = r.iter().next()?;
    let text = value.as_str()?;
    match key.as_str() {
        "error" => Some((text, true)),
        "output" | "result" if as_object(text).is_none() => Some((text, false)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_keys_unwrap_to_the_bare_result() {
        assert_eq!(
            unwrap(&json!({"output": "sunny, 21 °C"})),
            ("sunny, 21 °C".into(), false)
        );
        assert_eq!(unwrap(&json!({"result": "sunny"})), ("sunny".into(), false));
        assert_eq!(
            unwrap(&json!({"error": "city not found"})),
            ("city not found".into(), true)
        );
        // Anything else is the model's to read as JSON.
        assert_eq!(
            unwrap(&json!({"temp": 21, "sky": "clear"})),
            (r#"{"sky":"clear","temp":21}"#.into(), false)
        );
        assert_eq!(
            unwrap(&json!({"output": 21})),
            (r#"{"output":21}"#.into(), false)
        );
        assert_eq!(
            unwrap(&json!({"output": "a", "error": "b"})),
            (r#"{"error":"b","output":"a"}"#.into(), false)
        );
    }

    #[test]
    fn texts_wrap_as_gemini_documents() {
        assert_eq!(wrap("sunny", false), json!({"output": "sunny"}));
        assert_eq!(wrap("[1,2]", false), json!({"output": "[1,2]"}));
        assert_eq!(wrap(r#"{"temp":21}"#, false), json!({"temp": 21}));
        assert_eq!(wrap("boom", true), json!({"error": "boom"}));
        assert_eq!(
            wrap(r#"{"temp":21}"#, true),
            json!({"error": r#"{"temp":21}"#})
        );
        // A text shaped like a wrapped result is wrapped again.
        assert_eq!(
            wrap(r#"{"output":"sunny"}"#, false),
            json!({"output": r#"{"output":"sunny"}"#})
        );
    }

    #[test]
    fn wrap_and_unwrap_are_inverse() {
        let texts = [
            "sunny",
            "",
            "42",
            "[1,2]",
            "\"quoted\"",
            r#"{"temp":21}"#,
            r#"{"output":"sunny"}"#,
            r#"{"result":"sunny"}"#,
            r#"{"error":"boom"}"#,
            r#"{"output":"{\"output\":\"sunny\"}"}"#,
            r#"{"output":{"nested":true}}"#,
        ];
        for t in texts {
            for is_error in [false, true] {
                assert_eq!(unwrap(&wrap(t, is_error)), (t.to_string(), is_error), "{t}");
            }
        }
        let responses = [
            json!({"output": "sunny"}),
            json!({"error": "boom"}),
            json!({"temp": 21}),
            json!({"output": 21}),
            json!({"output": r#"{"a":1}"#}),
            json!({"output": r#"{"output":"x"}"#}),
            json!({"error": {"code": 404}}),
            json!({}),
        ];
        for r in responses {
            let (text, is_error) = unwrap(&r);
            assert_eq!(wrap(&text, is_error), r, "{text}");
        }
        // `result` is read, and written back under Gemini's documented key.
        let (text, e) = unwrap(&json!({"result": "sunny"}));
        assert_eq!(wrap(&text, e), json!({"output": "sunny"}));
    }
}
