//! Per-family wire protocols: each has the same files (wire types, request and
//! response codecs to and from the IR, stream parser/encoder, listings, error shape).
//!
//! This module is also the dispatch point of the translation layer (hub and
//! spoke): [`decode_request`] / [`encode_request`] / [`decode_response`] /
//! [`encode_response`] pick the family's codec with a `match`, and every
//! cross-family translation is "decode with the source spoke, encode with the
//! target spoke". There are no pairwise converters.

pub mod anthropic;
pub mod framing;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod peek;
#[cfg(test)]
mod reasoning_tests;
pub(crate) mod report;
pub mod responses;
pub mod spoke;
pub mod stream_codec;
pub mod support;
pub mod translate_error;

pub use spoke::{spoke, Spoke};
pub use translate_error::{TranslateError, TranslateErrorKind};

/// Renders `e` in `family`'s error shape: the one place error bodies are made.
pub fn error_body(family: Family, e: &crate::error::GatewayError) -> Vec<u8> {
    (spoke(family).error_body)(e)
}

use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::{ChatRequest, ChatResponse};
use serde_json::Value;

/// What the request body alone does not say (Gemini puts these in the path).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeContext<'a> {
    /// The model from the path (Gemini `models/{model}:generateContent`); body model otherwise.
    pub model: Option<&'a str>,
    /// Streaming chosen by the path (Gemini `:streamGenerateContent` / `alt=sse`).
    pub stream: bool,
}

/// How to shape the upstream request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions<'a> {
    /// The model name the upstream knows (catalog `upstream_model`). Written
    /// into the body for OpenAI and Anthropic; Gemini has it in the URL.
    pub upstream_model: &'a str,
    /// Used when the target requires a max token count and the client gave
    /// none (Anthropic `max_tokens`): the catalog model's `max_output_tokens`.
    pub default_max_tokens: u64,
    /// Ask the upstream for a stream (`"stream": true`; for OpenAI also
    /// `stream_options.include_usage` so usage can be metered). Gemini streams
    /// are chosen by the URL, so this does not change a Gemini body.
    pub stream: bool,
}

/// Decodes a client request body of `family` into the canonical request.
/// Errors are client errors (400).
pub fn decode_request(
    family: Family,
    body: &[u8],
    ctx: &DecodeContext<'_>,
) -> Result<ChatRequest, TranslateError> {
    match family {
        Family::OpenAi => openai::request::decode(body, ctx),
        Family::Anthropic => anthropic::request::decode(body, ctx),
        Family::Gemini => gemini::request::decode(body, ctx),
        Family::Responses => responses::request::decode(body, ctx),
    }
}

/// Encodes a canonical request as an upstream request body of `family`.
/// Errors say what the target protocol cannot express (400). Everything the
/// target cannot carry and that is dropped instead is recorded in `adjusted`,
/// by the client's own name for it (docs/api.md "Adapt or refuse").
pub fn encode_request(
    family: Family,
    req: &ChatRequest,
    opts: &EncodeOptions<'_>,
    adjusted: &mut Adjustments,
) -> Result<Vec<u8>, TranslateError> {
    let value = encode_request_value(family, req, opts, adjusted)?;
    to_bytes(&value)
}

/// [`encode_request`], as a JSON value.
pub fn encode_request_value(
    family: Family,
    req: &ChatRequest,
    opts: &EncodeOptions<'_>,
    adjusted: &mut Adjustments,
) -> Result<Value, TranslateError> {
    let value = match family {
        Family::OpenAi => openai::request::encode(req, opts, adjusted),
        Family::Anthropic => anthropic::request::encode(req, opts, adjusted),
        Family::Gemini => gemini::request::encode(req, opts, adjusted),
        Family::Responses => responses::request::encode(req, opts, adjusted),
    }?;
    report::foreign_extras(req, family, adjusted);
    Ok(value)
}

/// Decodes a non-streaming upstream response body of `family`. Errors are
/// upstream errors (502) and name the upstream protocol.
pub fn decode_response(family: Family, body: &[u8]) -> Result<ChatResponse, TranslateError> {
    match family {
        Family::OpenAi => openai::response::decode(body),
        Family::Anthropic => anthropic::response::decode(body),
        Family::Gemini => gemini::response::decode(body),
        Family::Responses => responses::response::decode(body),
    }
}

/// Encodes a canonical response as a client response body of `family`.
/// `client_model` is what the client sees as the model (OpenAI and Responses
/// `provider/model_id`, Anthropic the bare id, Gemini `modelVersion` the bare id).
pub fn encode_response(
    family: Family,
    resp: &ChatResponse,
    client_model: &str,
) -> Result<Vec<u8>, TranslateError> {
    let value = encode_response_value(family, resp, client_model)?;
    to_bytes(&value)
}

/// [`encode_response`], as a JSON value.
pub fn encode_response_value(
    family: Family,
    resp: &ChatResponse,
    client_model: &str,
) -> Result<Value, TranslateError> {
    match family {
        Family::OpenAi => openai::response::encode(resp, client_model),
        Family::Anthropic => anthropic::response::encode(resp, client_model),
        Family::Gemini => gemini::response::encode(resp, client_model),
        Family::Responses => responses::response::encode(resp, client_model),
    }
}

fn to_bytes(value: &Value) -> Result<Vec<u8>, TranslateError> {
    serde_json::to_vec(value)
        .map_err(|e| TranslateError::upstream(format!("could not serialize JSON: {e}")))
}

/// Serde helpers shared by the wire modules.
pub(crate) mod util {
    use super::TranslateError;
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
}
