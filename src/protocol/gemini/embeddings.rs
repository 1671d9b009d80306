//! Gemini `:embedContent` and `:batchEmbedContents`: the request
//! (`content.parts[].text`, `taskType`, `outputDimensionality`) and the
//! answer (`embedding.values`, `embeddings[].values`), to and from the
//! embeddings hub (`ir::embed`). Upstream, the gateway always calls
//! `:batchEmbedContents` (one request per input). Gemini reports no usage
//! for embeddings.

use crate::error::{ErrorKind, GatewayError};
use crate::ir::embed::{EmbedInput, EmbedRequest, EmbedResponse};
use serde::Serialize;
use serde_json::{json, Value};

/// The most requests one `:batchEmbedContents` call takes.
pub const MAX_BATCH: usize = 100;

fn bad(param: &str, msg: &str) -> GatewayError {
    GatewayError::invalid_param(param, format!("{param}: {msg}"))
}

/// One `EmbedContentRequest`'s text: its parts' texts, joined.
fn content_text(req: &Value, at: &str) -> Result<String, GatewayError> {
    let parts = req["content"]["parts"]
        .as_array()
        .ok_or_else(|| bad(&format!("{at}content.parts"), "is required"))?;
    let mut text = String::new();
    for (i, p) in parts.iter().enumerate() {
        let t = p["text"].as_str().ok_or_else(|| {
            bad(
                &format!("{at}content.parts[{i}]"),
                "only text parts can be embedded",
            )
        })?;
        text.push_str(t);
    }
    Ok(text)
}

/// The client's body (`batch`: a `:batchEmbedContents` call). A batch's
/// `taskType` and `outputDimensionality` are the first request's.
pub fn decode_request(body: &[u8], batch: bool) -> Result<EmbedRequest, GatewayError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| GatewayError::invalid_param("body", format!("invalid JSON body: {e}")))?;
    let one = [v.clone()];
    let (reqs, prefix): (&[Value], &str) = if batch {
        let r = v["requests"]
            .as_array()
            .filter(|r| !r.is_empty())
            .ok_or_else(|| bad("requests", "must be a non-empty array"))?;
        (r.as_slice(), "requests[].")
    } else {
        (&one, "")
    };
    let texts = reqs
        .iter()
        .map(|r| content_text(r, prefix))
        .collect::<Result<Vec<_>, _>>()?;
    let first = &reqs[0];
    let dimensions = match &first["outputDimensionality"] {
        Value::Null => None,
        d => Some(
            d.as_u64()
                .filter(|d| *d > 0)
                .ok_or_else(|| bad("outputDimensionality", "must be a positive integer"))?,
        ),
    };
    Ok(EmbedRequest {
        input: EmbedInput::Text(texts),
        dimensions,
        task_type: first["taskType"].as_str().map(str::to_string),
        user: None,
        base64: false,
    })
}

/// The upstream `:batchEmbedContents` body for `upstream_model`, one
/// request per input. Token arrays cannot be carried: a 400 naming `input`.
pub fn encode_request(r: &EmbedRequest, upstream_model: &str) -> Result<Vec<u8>, GatewayError> {
    let EmbedInput::Text(texts) = &r.input else {
        return Err(bad(
            "input",
            "token arrays cannot be sent to a Gemini upstream; send text",
        ));
    };
    let model = format!("models/{upstream_model}");
    let requests: Vec<Value> = texts
        .iter()
        .map(|t| {
            let mut one = json!({"model": model, "content": {"parts": [{"text": t}]}});
            if let Some(d) = r.dimensions {
                one["outputDimensionality"] = json!(d);
            }
            if let Some(t) = &r.task_type {
                one["taskType"] = json!(t);
            }
            one
        })
        .collect();
    Ok(json!({ "requests": requests }).to_string().into_bytes())
}

fn values(e: &Value) -> Option<Vec<f32>> {
    e["values"]
        .as_array()?
        .iter()
        .map(|x| x.as_f64().map(|f| f as f32))
        .collect()
}

/// The 502 of an embeddings answer that cannot be read (Gemini's, Vertex's).
pub(super) fn broken(m: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::BadGateway,
        format!("upstream sent an embeddings answer that cannot be read: {m}"),
    )
}

/// An upstream's answer, batch (`embeddings`) or single (`embedding`).
pub fn decode_response(body: &[u8]) -> Result<EmbedResponse, GatewayError> {
    let v: Value = serde_json::from_slice(body).map_err(|_| broken("not JSON"))?;
    let vectors = match (&v["embeddings"], &v["embedding"]) {
        (Value::Array(es), _) => es.iter().map(values).collect::<Option<Vec<_>>>(),
        (_, e @ Value::Object(_)) => values(e).map(|v| vec![v]),
        _ => None,
    }
    .ok_or_else(|| broken("no embedding values"))?;
    Ok(EmbedResponse {
        vectors,
        prompt_tokens: None,
    })
}

#[derive(Serialize)]
struct Values<'a> {
    /// Each float in its shortest f32 form.
    values: &'a [f32],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Answer<'a> {
    Embedding(Values<'a>),
    Embeddings(Vec<Values<'a>>),
}

/// The client's answer: `embedding` for `:embedContent`, `embeddings` for a batch.
pub fn encode_response(r: &EmbedResponse, batch: bool) -> Vec<u8> {
    let answer = if batch {
        Answer::Embeddings(r.vectors.iter().map(|v| Values { values: v }).collect())
    } else {
        Answer::Embedding(Values {
            values: r.vectors.first().map_or(&[], Vec::as_slice),
        })
    };
    serde_json::to_vec(&answer).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn single_and_batch_requests() {
        let r = decode_request(
            br#"{"content":{"parts":[{"text":"a"},{"text":"b"}]},"outputDimensionality":4,"taskType":"RETRIEVAL_QUERY"}"#,
            false,
        )
        .unwrap();
        assert_eq!(r.input, EmbedInput::Text(vec!["ab".into()]));
        assert_eq!(r.dimensions, Some(4));
        assert_eq!(r.task_type.as_deref(), Some("RETRIEVAL_QUERY"));
        let r = decode_request(
            br#"{"requests":[{"content":{"parts":[{"text":"x"}]}},{"content":{"parts":[{"text":"y"}]}}]}"#,
            true,
        )
        .unwrap();
        assert_eq!(r.input, EmbedInput::Text(vec!["x".into(), "y".into()]));
        let e = decode_request(br#"{"content":{"parts":[{"inlineData":{}}]}}"#, false).unwrap_err();
        assert!(e.to_string().contains("content.parts[0]"), "{e}");
    }

    #[test]
    fn encodes_one_request_per_input_and_refuses_tokens() {
        let r = EmbedRequest {
            input: EmbedInput::Text(vec!["a".into(), "b".into()]),
            dimensions: Some(3),
            task_type: None,
            user: None,
            base64: false,
        };
        let v: Value = serde_json::from_slice(&encode_request(&r, "e1").unwrap()).unwrap();
        assert_eq!(v["requests"].as_array().unwrap().len(), 2);
        assert_eq!(v["requests"][1]["model"], "models/e1");
        assert_eq!(v["requests"][1]["outputDimensionality"], 3);
        let t = EmbedRequest {
            input: EmbedInput::Tokens(vec![vec![1]]),
            ..r
        };
        let e = encode_request(&t, "e1").unwrap_err();
        assert!(e.to_string().contains("input"), "{e}");
    }

    #[test]
    fn answers_both_ways() {
        let r = decode_response(br#"{"embeddings":[{"values":[1,2]},{"values":[3]}]}"#).unwrap();
        assert_eq!(r.vectors, vec![vec![1.0, 2.0], vec![3.0]]);
        let one = decode_response(br#"{"embedding":{"values":[0.5]}}"#).unwrap();
        assert_eq!(one.vectors, vec![vec![0.5]]);
        assert_eq!(
            encode_response(&one, false),
            br#"{"embedding":{"values":[0.5]}}"#.to_vec()
        );
    }
}
