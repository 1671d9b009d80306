//! [`JsonText`]: the text of one JSON value, valid because of where it came
//! from. serde_json's `RawValue` proves a text valid by parsing it again
//! whenever one is made from a `String` (about 14,000 instructions for a
//! stored stream's response object, docs/performance.md "Issue 28,
//! twenty-fifth pass"); a text the gateway wrote itself, or cut out of a
//! document a parser or a skim had already accepted whole, needs no second
//! look. Debug builds (and so every test) still check each one.
//!
//! Reads from outside (a stored record read back) go through `RawValue`'s
//! parse ([`JsonText`]'s `Deserialize`), as does [`JsonText::parse`].

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use std::fmt;

/// The text of one JSON value.
#[derive(Clone, PartialEq, Eq)]
pub struct JsonText(Box<str>);

impl JsonText {
    /// `text` if it is one JSON value (serde_json's parse).
    pub fn parse(text: String) -> Option<JsonText> {
        RawValue::from_string(text).ok().map(JsonText::from)
    }

    /// `text`, which the caller wrote as JSON or took whole from a document
    /// already read as JSON: not parsed again (in debug builds it is, and a
    /// text that is not JSON panics: a bug of the caller's). The whitespace
    /// around the value is dropped, as [`JsonText::parse`] drops it: an
    /// upstream's whole answer may end in a newline.
    pub fn valid(mut text: String) -> JsonText {
        debug_assert!(
            serde_json::from_str::<&RawValue>(&text).is_ok(),
            "not one JSON value: {text}"
        );
        let value = text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
        if value.len() != text.len() {
            text = value.to_string();
        }
        JsonText(text.into_boxed_str())
    }

    /// The text.
    pub fn get(&self) -> &str {
        &self.0
    }
}

impl From<Box<RawValue>> for JsonText {
    fn from(raw: Box<RawValue>) -> JsonText {
        JsonText(raw.into())
    }
}

impl From<&RawValue> for JsonText {
    fn from(raw: &RawValue) -> JsonText {
        JsonText(raw.get().into())
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JsonText, D::Error> {
        Box::<RawValue>::deserialize(d).map(JsonText::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_kept_as_they_are() {
        // The value's own bytes, the whitespace around it dropped.
        let t = JsonText::parse(r#" {"a": [1, "x"]} "#.to_string()).unwrap();
        assert_eq!(t.get(), r#"{"a": [1, "x"]}"#);
        assert!(JsonText::parse("{".to_string()).is_none());
        assert!(JsonText::parse("1 2".to_string()).is_none());
        let v = JsonText::valid("[true]".to_string());
        assert_eq!(v.get(), "[true]");
        let v = JsonText::valid("\r\n {\"a\": \" x \"}\n\t ".to_string());
        assert_eq!(v.get(), r#"{"a": " x "}"#);
        let read: Vec<JsonText> = serde_json::from_str(r#"[ {"b":null} ,"s"]"#).unwrap();
        assert_eq!(read[0].get(), r#"{"b":null}"#);
        assert_eq!(read[1].get(), r#""s""#);
        assert!(serde_json::from_str::<JsonText>("[1,").is_err());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "not one JSON value")]
    fn a_text_said_valid_is_checked_in_debug_builds() {
        let _ = JsonText::valid("{\"a\":".to_string());
    }
}
