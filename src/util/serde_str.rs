//! serde helpers for borrowed text: [`opt_str`], an optional string field
//! read in place from the input when it has no escapes.
//!
//! May import: nothing of ours.

use serde::de::{Deserialize, Deserializer, Visitor};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// An optional string field that borrows from the input when it holds no
/// escapes: `#[serde(borrow, default, deserialize_with = "opt_str")]` on an
/// `Option<Cow<'a, str>>`. serde borrows a `Cow<'a, str>` only when it is
/// the field's own type; inside an `Option` its `Deserialize` always copies
/// into a new `String`: an allocation and a copy per field, per frame in a
/// stream parser.
pub fn opt_str<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    Option::<BorrowedStr<'a>>::deserialize(d).map(|s| s.map(|s| s.0))
}

/// A string borrowed from the input where the input allows it.
struct BorrowedStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for BorrowedStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = BorrowedStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(BorrowedStr(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Texts<'a> {
        #[serde(borrow, default, deserialize_with = "opt_str")]
        a: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        plain: Option<Cow<'a, str>>,
    }

    #[test]
    fn opt_str_borrows_unless_the_string_has_escapes() {
        let t: Texts = serde_json::from_str(r#"{"a":"hello","plain":"hello"}"#).unwrap();
        assert!(matches!(t.a, Some(Cow::Borrowed("hello"))));
        // What the helper is for: serde's own impl copies inside an Option.
        assert!(matches!(t.plain, Some(Cow::Owned(ref s)) if s == "hello"));
        let t: Texts = serde_json::from_str(r#"{"a":"line\nbreak \u00e9"}"#).unwrap();
        assert!(matches!(t.a, Some(Cow::Owned(ref s)) if s == "line\nbreak \u{e9}"));
        let t: Texts = serde_json::from_str(r#"{"a":null}"#).unwrap();
        assert!(t.a.is_none());
        let t: Texts = serde_json::from_str("{}").unwrap();
        assert!(t.a.is_none());
        let err = serde_json::from_str::<Texts>(r#"{"a":7}"#).err().unwrap();
        assert!(err.to_string().contains("expected a string"), "{err}");
        // A `Value` lends its strings the same way.
        let v = serde_json::json!({"a": "owned"});
        let t = Texts::deserialize(&v).unwrap();
        assert_eq!(t.a.as_deref(), Some("owned"));
    }
}
