//! Serde helpers shared by the spokes' wire types and codecs: string-or-list
//! fields, nullable fields, parsing and serializing with translation errors.

use super::translate_error::TranslateError;
use crate::family::Family;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A field that is either a bare string or a list (`"content": "hi"` vs
/// `"content": [{"type":"text",...}]`, `"stop": "x"` vs `["x"]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StringOr<T> {
    /// The bare-string form.
    String(String),
    /// The list form.
    List(Vec<T>),
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for StringOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(StringOr::String(s)),
            v @ Value::Array(_) => serde_json::from_value(v)
                .map(StringOr::List)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "expected a string or an array, got {}",
                kind_of(&other)
            ))),
        }
    }
}

/// Name of a JSON value's type, for error messages.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `Option<Option<T>>` that tells an absent field (outer `None`) from an
/// explicit `null` (`Some(None)`). Use with
/// `#[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]`.
pub mod nullable {
    use super::{Deserialize, Deserializer, Serialize, Serializer};

    /// Present (possibly null) fields become `Some(..)`.
    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }

    /// `Some(None)` is written as `null`.
    pub fn serialize<T: Serialize, S: Serializer>(
        v: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(Some(inner)) => inner.serialize(s),
            _ => s.serialize_none(),
        }
    }
}

/// Parses a client request body.
pub fn parse_request<T: DeserializeOwned>(
    family: Family,
    body: &[u8],
) -> Result<T, TranslateError> {
    serde_json::from_slice(body).map_err(|e| {
        TranslateError::invalid(
            None,
            format!("the request body is not a valid {family} request: {e}"),
        )
    })
}

/// Parses an upstream response body.
pub fn parse_response<T: DeserializeOwned>(
    family: Family,
    body: &[u8],
) -> Result<T, TranslateError> {
    serde_json::from_slice(body).map_err(|e| {
        TranslateError::upstream(format!(
            "the upstream response is not a valid {family} response: {e}"
        ))
    })
}

/// Serializes a wire value into JSON.
pub fn to_value<T: Serialize>(v: &T) -> Result<Value, TranslateError> {
    serde_json::to_value(v)
        .map_err(|e| TranslateError::upstream(format!("could not serialize JSON: {e}")))
}

/// Converts a JSON value into a wire type (used for opaque objects kept as values).
pub fn from_value<T: DeserializeOwned>(v: Value, what: &str) -> Result<T, TranslateError> {
    serde_json::from_value(v)
        .map_err(|e| TranslateError::invalid(None, format!("invalid {what}: {e}")))
}

/// A map holding one nested object's unknown fields under `key` (empty when there are none).
pub fn nested(key: &str, fields: Map<String, Value>) -> Map<String, Value> {
    let mut m = Map::new();
    if !fields.is_empty() {
        m.insert(key.to_string(), Value::Object(fields));
    }
    m
}

/// Takes the object stored under `key` in `map` (the counterpart of [`nested`]).
pub fn take_nested(map: &mut Map<String, Value>, key: &str) -> Map<String, Value> {
    match map.remove(key) {
        Some(Value::Object(m)) => m,
        Some(other) => {
            map.insert(key.to_string(), other);
            Map::new()
        }
        None => Map::new(),
    }
}
