//! A request's `input` in item form, as a record keeps it: a string is one
//! user message, a type-less `{role, content}` message gets its `type` and
//! typed parts.

use crate::util::json_text::JsonText;
use crate::util::jsonedit;
use serde_json::value::RawValue;
use serde_json::{json, Value};

fn raw(v: &Value) -> Option<JsonText> {
    serde_json::to_string(v).ok().map(JsonText::valid)
}

/// The type of a text part of a message in `role`'s voice.
fn part_type(role: &str) -> &'static str {
    if role == "assistant" {
        "output_text"
    } else {
        "input_text"
    }
}

/// A `message` item with one text part.
fn text_message(role: &str, text: &str) -> Option<JsonText> {
    let part = part_type(role);
    raw(&json!({"type": "message", "role": role, "content": [{"type": part, "text": text}]}))
}

/// An easy message (`role`, `content`, no `type`) as a `message` item:
/// its `type` set and a string `content` made one text part. The item's
/// other bytes are kept as they came (`jsonedit`, not a parse into a
/// `Value` and back). The item was read whole as JSON and the members set
/// are JSON (a string that was one of its values, inside parts written
/// here), so the edit is too: not parsed again.
fn typed(item: &str, role: &str) -> Option<JsonText> {
    let doc = item.as_bytes();
    let part = part_type(role);
    let text = jsonedit::member_span(doc, "content")
        .map(|r| &doc[r])
        .filter(|v| v.first() == Some(&b'"'));
    let mut parts = Vec::new();
    let mut set: Vec<(&str, &[u8])> = vec![("type", b"\"message\"")];
    if let Some(text) = text {
        parts.extend_from_slice(b"[{\"type\":\"");
        parts.extend_from_slice(part.as_bytes());
        parts.extend_from_slice(b"\",\"text\":");
        parts.extend_from_slice(text);
        parts.extend_from_slice(b"}]");
        set.push(("content", &parts));
    }
    let edited = String::from_utf8(jsonedit::set_members(doc, &set)?).ok()?;
    Some(JsonText::valid(edited))
}

/// The request's `input` in item form: a string is one user message; an
/// "easy" message (`role` and `content`, no `type`) becomes a `message`
/// item with typed parts; other items are kept as they were sent.
pub fn normalise_input(input: &RawValue) -> Vec<JsonText> {
    // A raw value starts at its first byte: only a string is parsed as
    // one (an array's failed attempt cost an error's allocation).
    if input.get().starts_with('"') {
        let Ok(s) = serde_json::from_str::<String>(input.get()) else {
            return Vec::new();
        };
        return text_message("user", &s).into_iter().collect();
    }
    let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(input.get()) else {
        return Vec::new();
    };
    items
        .into_iter()
        .filter_map(|item| match easy_role(item.get()) {
            Some(role) => typed(item.get(), role),
            None => Some(JsonText::from(item)),
        })
        .collect()
}

/// The role of an easy message: an object whose `type` is absent or
/// `null` and whose `role` is a string serde lends as it is (no escapes),
/// each named once. The item was parsed already (`normalise_input`), so
/// its members are found by a walk, not a second parse.
fn easy_role(item: &str) -> Option<&str> {
    let [kind, role] = jsonedit::member_spans(item.as_bytes(), ["type", "role"])?;
    if kind.is_some_and(|k| &item[k] != "null") {
        return None;
    }
    let role = item[role?].strip_prefix('"')?.strip_suffix('"')?;
    (!role.contains('\\')).then_some(role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::responses::store::tests::rawv;

    #[test]
    fn an_easy_message_is_what_serde_reads_as_one() {
        #[derive(serde::Deserialize)]
        struct Easy<'a> {
            #[serde(rename = "type", default)]
            kind: Option<&'a str>,
            #[serde(default)]
            role: Option<&'a str>,
        }
        fn serde(item: &str) -> Option<&str> {
            match serde_json::from_str::<Easy<'_>>(item) {
                Ok(Easy {
                    kind: None,
                    role: Some(role),
                }) => Some(role),
                _ => None,
            }
        }
        for item in [
            r#"{"role":"user","content":"hi"}"#,
            r#"{ "role" : "assistant" , "content" : [] }"#,
            r#"{"type":null,"role":"user"}"#,
            r#"{"type":"message","role":"user"}"#,
            r#"{"type":5,"role":"user"}"#,
            r#"{"type":"m\u0065ssage","role":"user"}"#,
            r#"{"role":"us\u0065r","content":"x"}"#,
            r#"{"r\u006fle":"user","content":"x"}"#,
            r#"{"\u0074ype":"message","role":"user"}"#,
            r#"{"role":"user","role":"user"}"#,
            r#"{"type":null,"type":null,"role":"user"}"#,
            r#"{"role":7}"#,
            r#"{"role":null}"#,
            r#"{"content":"x"}"#,
            r#"{"role":"user","content":"a","content":"b"}"#,
            r#"{"role":"user","nested":{"type":"x","role":"y"}}"#,
            r#""just text""#,
            r#"[{"role":"user"}]"#,
        ] {
            assert_eq!(easy_role(item), serde(item), "{item}");
        }
    }

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
        assert_eq!(
            items[0].get(),
            r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"yo"}]}"#
        );
        let v0: Value = serde_json::from_str(items[0].get()).unwrap();
        assert_eq!(v0["type"], "message");
        assert_eq!(v0["content"][0]["type"], "output_text");
        assert_eq!(
            items[1].get(),
            r#"{"type":"function_call_output","call_id":"c","output":"1"}"#
        );
    }

    #[test]
    fn an_easy_message_keeps_its_bytes_and_gets_a_type() {
        let items = normalise_input(&rawv(
            r#"[{"role": "user", "content": "a \"q\" \u00e9", "name": "x"}, {"type": null, "role": "user", "content": [{"type": "input_text", "text": "t"}]}, {"role": "developer", "content": 7}]"#,
        ));
        assert_eq!(
            items[0].get(),
            r#"{"type":"message","role": "user", "content": [{"type":"input_text","text":"a \"q\" \u00e9"}], "name": "x"}"#
        );
        // A null type is set; a content of parts is kept.
        assert_eq!(
            items[1].get(),
            r#"{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "t"}]}"#
        );
        assert_eq!(
            items[2].get(),
            r#"{"type":"message","role": "developer", "content": 7}"#
        );
    }
}
