//! OpenAI `/v1/embeddings`: the request (`input` a string, an array of
//! strings, or token arrays; `dimensions`, `encoding_format`, `user`) and the
//! answer (`data[].embedding` as floats or base64 of little-endian f32), to
//! and from the embeddings hub (`ir::embed`).

use crate::error::{ErrorKind, GatewayError};
use crate::ir::embed::{EmbedInput, EmbedRequest, EmbedResponse};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The most inputs one OpenAI embeddings call takes.
pub const MAX_INPUTS: usize = 2048;

fn bad(param: &str, msg: &str) -> GatewayError {
    GatewayError::invalid_param(param, format!("{param}: {msg}"))
}

/// The client's body: the `model` it names and the request.
pub fn decode_request(body: &[u8]) -> Result<(String, EmbedRequest), GatewayError> {
    let v: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|e| GatewayError::invalid_param("body", format!("invalid JSON body: {e}")))?;
    let model = match v.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => return Err(bad("model", "model is required")),
    };
    let input = decode_input(v.get("input"))?;
    let dimensions = match v.get("dimensions") {
        None | Some(Value::Null) => None,
        Some(d) => Some(
            d.as_u64()
                .filter(|d| *d > 0)
                .ok_or_else(|| bad("dimensions", "must be a positive integer"))?,
        ),
    };
    let base64 = match v.get("encoding_format").and_then(Value::as_str) {
        None | Some("float") => false,
        Some("base64") => true,
        Some(_) => return Err(bad("encoding_format", "must be \"float\" or \"base64\"")),
    };
    let user = v.get("user").and_then(Value::as_str).map(str::to_string);
    Ok((
        model,
        EmbedRequest {
            input,
            dimensions,
            task_type: None,
            user,
            base64,
        },
    ))
}

fn decode_input(input: Option<&Value>) -> Result<EmbedInput, GatewayError> {
    let must = "must be a string, an array of strings, or an array of token arrays";
    let tokens =
        |v: &Value| -> Option<Vec<u64>> { v.as_array()?.iter().map(Value::as_u64).collect() };
    let input = match input {
        Some(Value::String(s)) => EmbedInput::Text(vec![s.clone()]),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => EmbedInput::Text(
            items
                .iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
        ),
        // One token array, or an array of them.
        Some(Value::Array(items)) if items.iter().all(Value::is_u64) => EmbedInput::Tokens(vec![
            tokens(&Value::Array(items.clone())).unwrap_or_default(),
        ]),
        Some(Value::Array(items)) => EmbedInput::Tokens(
            items
                .iter()
                .map(tokens)
                .collect::<Option<_>>()
                .ok_or_else(|| bad("input", must))?,
        ),
        _ => return Err(bad("input", must)),
    };
    if input.is_empty() {
        return Err(bad("input", "must not be empty"));
    }
    Ok(input)
}

/// The upstream body for `upstream_model` (floats asked for: a base64
/// answer is made by the gateway).
pub fn encode_request(r: &EmbedRequest, upstream_model: &str) -> Vec<u8> {
    let input = match &r.input {
        EmbedInput::Text(t) => json!(t),
        EmbedInput::Tokens(t) => json!(t),
    };
    let mut body = json!({"model": upstream_model, "input": input, "encoding_format": "float"});
    if let Some(d) = r.dimensions {
        body["dimensions"] = json!(d);
    }
    if let Some(u) = &r.user {
        body["user"] = json!(u);
    }
    body.to_string().into_bytes()
}

fn broken(msg: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::BadGateway,
        format!("upstream sent an embeddings answer that cannot be read: {msg}"),
    )
}

/// An upstream's answer: `data[]` ordered by `index`, floats or base64.
pub fn decode_response(body: &[u8]) -> Result<EmbedResponse, GatewayError> {
    let v: Value = serde_json::from_slice(body).map_err(|_| broken("not JSON"))?;
    let data = v["data"].as_array().ok_or_else(|| broken("no data"))?;
    let mut rows: Vec<(u64, Vec<f32>)> = Vec::with_capacity(data.len());
    for (i, d) in data.iter().enumerate() {
        let index = d["index"].as_u64().unwrap_or(i as u64);
        let vector = match &d["embedding"] {
            Value::Array(xs) => xs
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| broken("an embedding holds a non-number"))?,
            Value::String(s) => from_base64(s).ok_or_else(|| broken("bad base64 embedding"))?,
            _ => return Err(broken("an item has no embedding")),
        };
        rows.push((index, vector));
    }
    rows.sort_by_key(|r| r.0);
    Ok(EmbedResponse {
        vectors: rows.into_iter().map(|r| r.1).collect(),
        prompt_tokens: v["usage"]["prompt_tokens"].as_u64(),
    })
}

/// Little-endian f32s as base64 (what OpenAI's `encoding_format: "base64"` sends).
pub fn to_base64(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 4);
    crate::util::base64::encode(&bytes, &mut out);
    out
}

fn from_base64(s: &str) -> Option<Vec<f32>> {
    let bytes = crate::util::base64::decode(s)?;
    (bytes.len() % 4 == 0).then(|| {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

/// A vector as the client gets it.
#[derive(Serialize)]
#[serde(untagged)]
enum Vector<'a> {
    /// Each float in its shortest f32 form (as OpenAI sends them).
    Floats(&'a [f32]),
    Base64(String),
}

#[derive(Serialize)]
struct Item<'a> {
    object: &'static str,
    index: usize,
    embedding: Vector<'a>,
}

#[derive(Serialize)]
struct Tokens {
    prompt_tokens: u64,
    total_tokens: u64,
}

#[derive(Serialize)]
struct List<'a> {
    object: &'static str,
    data: Vec<Item<'a>>,
    model: &'a str,
    usage: Tokens,
}

/// The client's answer: `model` as the client sees it, the vectors as floats
/// or base64, `usage` with the input tokens.
pub fn encode_response(
    r: &EmbedResponse,
    model: &str,
    base64: bool,
    prompt_tokens: u64,
) -> Vec<u8> {
    let data = r
        .vectors
        .iter()
        .enumerate()
        .map(|(index, v)| Item {
            object: "embedding",
            index,
            embedding: if base64 {
                Vector::Base64(to_base64(v))
            } else {
                Vector::Floats(v)
            },
        })
        .collect();
    let list = List {
        object: "list",
        data,
        model,
        usage: Tokens {
            prompt_tokens,
            total_tokens: prompt_tokens,
        },
    };
    serde_json::to_vec(&list).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_input_form() {
        let (m, r) = decode_request(
            br#"{"model":"p/m","input":"hi","dimensions":8,"encoding_format":"base64"}"#,
        )
        .unwrap();
        assert_eq!(m, "p/m");
        assert_eq!(r.input, EmbedInput::Text(vec!["hi".into()]));
        assert_eq!((r.dimensions, r.base64), (Some(8), true));
        let (_, r) = decode_request(br#"{"model":"m","input":["a","b"]}"#).unwrap();
        assert_eq!(r.input, EmbedInput::Text(vec!["a".into(), "b".into()]));
        let (_, r) = decode_request(br#"{"model":"m","input":[1,2,3]}"#).unwrap();
        assert_eq!(r.input, EmbedInput::Tokens(vec![vec![1, 2, 3]]));
        let (_, r) = decode_request(br#"{"model":"m","input":[[1],[2,3]]}"#).unwrap();
        assert_eq!(r.input, EmbedInput::Tokens(vec![vec![1], vec![2, 3]]));
        let e = decode_request(br#"{"model":"m","input":[{"x":1}]}"#).unwrap_err();
        assert!(e.to_string().contains("input"), "{e}");
        let e =
            decode_request(br#"{"model":"m","input":"a","encoding_format":"int8"}"#).unwrap_err();
        assert!(e.to_string().contains("encoding_format"), "{e}");
    }

    #[test]
    fn base64_is_little_endian_f32() {
        let s = to_base64(&[1.0, -2.5]);
        assert_eq!(from_base64(&s).unwrap(), vec![1.0, -2.5]);
        assert_eq!(
            crate::util::base64::decode(&s).unwrap()[..4],
            1.0f32.to_le_bytes()
        );
    }

    #[test]
    fn answer_is_reordered_by_index() {
        let r = decode_response(
            br#"{"data":[{"index":1,"embedding":[2.0]},{"index":0,"embedding":[1.0]}],"usage":{"prompt_tokens":4}}"#,
        )
        .unwrap();
        assert_eq!(r.vectors, vec![vec![1.0], vec![2.0]]);
        assert_eq!(r.prompt_tokens, Some(4));
    }
}
