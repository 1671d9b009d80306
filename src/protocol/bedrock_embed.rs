//! Embeddings on Amazon Bedrock (docs/clouds.md "Embeddings on Bedrock"):
//! InvokeModel of an embedding model on a `bedrock` or `bedrock-anthropic`
//! upstream, its body the model's own: Amazon Titan Text Embeddings
//! (`amazon.titan-embed-*`: one text per call, `{"inputText", "dimensions",
//! "normalize"}` → `{"embedding", "inputTextTokenCount"}`) and Cohere Embed
//! (`cohere.embed-*`: up to 96 texts, `{"texts", "input_type"}` →
//! `{"embeddings"}`). Plain functions over the hub `ir/embed.rs`.

use crate::error::{ErrorKind, GatewayError};
use crate::ir::embed::{EmbedInput, EmbedRequest, EmbedResponse};
use serde_json::{json, Value};

/// The embedding model families Bedrock serves that the gateway speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Titan,
    Cohere,
}

/// The most texts Cohere Embed takes in one call on Bedrock.
pub const COHERE_MAX_TEXTS: usize = 96;

/// Which family `upstream_model` (an id, an inference profile or an ARN) is.
pub fn kind(upstream_model: &str) -> Option<Kind> {
    if upstream_model.contains("amazon.titan-embed") {
        Some(Kind::Titan)
    } else if upstream_model.contains("cohere.embed") {
        Some(Kind::Cohere)
    } else {
        None
    }
}

/// The most inputs one call to `upstream_model` takes.
pub fn batch_limit(upstream_model: &str) -> usize {
    match kind(upstream_model) {
        Some(Kind::Cohere) => COHERE_MAX_TEXTS,
        _ => 1,
    }
}

fn invalid(message: String) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message)
}

/// The InvokeModel body for `r` (at most [`batch_limit`] inputs).
pub fn encode_request(r: &EmbedRequest, upstream_model: &str) -> Result<Vec<u8>, GatewayError> {
    let EmbedInput::Text(texts) = &r.input else {
        return Err(invalid(format!(
            "{upstream_model} on Bedrock embeds text; token arrays cannot be sent to it"
        )));
    };
    let body = match kind(upstream_model) {
        Some(Kind::Titan) => {
            let [text] = texts.as_slice() else {
                return Err(invalid(format!("{upstream_model} embeds one text per call")));
            };
            let mut b = json!({"inputText": text, "normalize": true});
            if let Some(d) = r.dimensions {
                b["dimensions"] = json!(d);
            }
            b
        }
        Some(Kind::Cohere) => {
            if r.dimensions.is_some() {
                return Err(invalid(format!(
                    "{upstream_model} on Bedrock has a fixed size: dimensions cannot be set"
                )));
            }
            // Gemini's task types in Cohere's words (documents by default).
            let input_type = match r.task_type.as_deref() {
                Some("RETRIEVAL_QUERY" | "QUESTION_ANSWERING" | "CODE_RETRIEVAL_QUERY") => {
                    "search_query"
                }
                Some("CLASSIFICATION") => "classification",
                Some("CLUSTERING") => "clustering",
                _ => "search_document",
            };
            json!({"texts": texts, "input_type": input_type})
        }
        None => {
            return Err(invalid(format!(
                "{upstream_model} is not an embedding model the gateway calls on Bedrock (amazon.titan-embed-*, cohere.embed-*)"
            )))
        }
    };
    Ok(body.to_string().into_bytes())
}

/// The model's answer in the hub, read by its shape: Titan's
/// `{"embedding", "inputTextTokenCount"}` or Cohere's `{"embeddings"}`
/// (the float vectors, or by type with `embedding_types`).
pub fn decode_response(body: &[u8]) -> Result<EmbedResponse, GatewayError> {
    let bad = |why: &str| {
        GatewayError::new(
            ErrorKind::BadGateway,
            format!("upstream answered an embedding Bedrock's models do not write: {why}"),
        )
    };
    let v: Value = serde_json::from_slice(body).map_err(|_| bad("not JSON"))?;
    let vector = |v: &Value| -> Option<Vec<f32>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32))
            .collect()
    };
    if let Some(one) = v.get("embedding") {
        return Ok(EmbedResponse {
            vectors: vec![vector(one).ok_or_else(|| bad("an embedding that is not numbers"))?],
            prompt_tokens: v["inputTextTokenCount"].as_u64(),
        });
    }
    let list = match &v["embeddings"] {
        Value::Object(by_type) => by_type.get("float").cloned().unwrap_or_default(),
        other => other.clone(),
    };
    let vectors = list
        .as_array()
        .ok_or_else(|| bad("no embedding"))?
        .iter()
        .map(vector)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| bad("an embedding that is not numbers"))?;
    Ok(EmbedResponse {
        vectors,
        prompt_tokens: None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn req(texts: &[&str], dimensions: Option<u64>, task: Option<&str>) -> EmbedRequest {
        EmbedRequest {
            input: EmbedInput::Text(texts.iter().map(|t| t.to_string()).collect()),
            dimensions,
            task_type: task.map(str::to_string),
            user: None,
            base64: false,
        }
    }

    #[test]
    fn titan_and_cohere_bodies_and_answers() {
        let titan = "amazon.titan-embed-text-v2:0";
        let b = encode_request(&req(&["hi"], Some(256), None), titan).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&b).unwrap(),
            json!({"inputText": "hi", "normalize": true, "dimensions": 256})
        );
        assert!(encode_request(&req(&["a", "b"], None, None), titan).is_err());
        let r = decode_response(br#"{"embedding":[0.5,-1],"inputTextTokenCount":3}"#).unwrap();
        assert_eq!(
            (r.vectors, r.prompt_tokens),
            (vec![vec![0.5, -1.0]], Some(3))
        );
        let cohere = "cohere.embed-english-v3";
        let b = encode_request(&req(&["a", "b"], None, Some("RETRIEVAL_QUERY")), cohere).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&b).unwrap(),
            json!({"texts": ["a", "b"], "input_type": "search_query"})
        );
        assert!(encode_request(&req(&["a"], Some(3), None), cohere).is_err());
        let r = decode_response(br#"{"embeddings":[[1],[2]],"id":"x"}"#).unwrap();
        assert_eq!(r.vectors, vec![vec![1.0], vec![2.0]]);
        let r = decode_response(br#"{"embeddings":{"float":[[1]]}}"#).unwrap();
        assert_eq!(r.vectors, vec![vec![1.0]]);
        assert_eq!((batch_limit(titan), batch_limit(cohere)), (1, 96));
        assert!(encode_request(&req(&["a"], None, None), "anthropic.claude-3").is_err());
    }
}
