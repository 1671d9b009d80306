//! Vertex AI's text embeddings (`…/publishers/google/models/{m}:predict`,
//! docs/clouds.md): `{"instances": [{"content", "task_type"?}],
//! "parameters": {"outputDimensionality"?}}` answered by
//! `{"predictions": [{"embeddings": {"values", "statistics": {"token_count"}}}]}`,
//! to and from the embeddings hub. The answer's token counts are the usage.

use super::embeddings::broken;
use crate::error::GatewayError;
use crate::ir::embed::{EmbedInput, EmbedRequest, EmbedResponse};
use serde::Serialize;
use serde_json::Value;

/// The most instances one `:predict` call takes (text-embedding-005,
/// text-multilingual-embedding-002).
pub const MAX_INSTANCES: usize = 250;

/// The instances one call of `upstream_model` takes: the Gemini embedding
/// models take one, the others [`MAX_INSTANCES`].
pub fn max_instances(upstream_model: &str) -> usize {
    if upstream_model.starts_with("gemini-embedding") {
        1
    } else {
        MAX_INSTANCES
    }
}

#[derive(Serialize)]
struct Instance<'a> {
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_type: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Parameters {
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u64>,
}

#[derive(Serialize)]
struct Body<'a> {
    instances: Vec<Instance<'a>>,
    parameters: Parameters,
}

/// The `:predict` body; token arrays cannot be carried.
pub fn encode_request(r: &EmbedRequest) -> Result<Vec<u8>, GatewayError> {
    let EmbedInput::Text(texts) = &r.input else {
        return Err(GatewayError::invalid_param(
            "input",
            "input: Vertex AI embeds text, not token arrays",
        ));
    };
    let body = Body {
        instances: texts
            .iter()
            .map(|t| Instance {
                content: t,
                task_type: r.task_type.as_deref(),
            })
            .collect(),
        parameters: Parameters {
            output_dimensionality: r.dimensions,
        },
    };
    Ok(serde_json::to_vec(&body).unwrap_or_default())
}

/// The `:predict` answer: a vector per instance, the tokens summed.
pub fn decode_response(body: &[u8]) -> Result<EmbedResponse, GatewayError> {
    let v: Value = serde_json::from_slice(body).map_err(|_| broken("not JSON"))?;
    let preds = v["predictions"]
        .as_array()
        .ok_or_else(|| broken("no predictions"))?;
    let mut vectors = Vec::with_capacity(preds.len());
    let mut tokens = Some(0u64);
    for p in preds {
        let e = &p["embeddings"];
        let values = e["values"]
            .as_array()
            .and_then(|xs| {
                xs.iter()
                    .map(|x| x.as_f64().map(|f| f as f32))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| broken("a prediction has no embedding values"))?;
        vectors.push(values);
        // `token_count` is a number (Vertex has sent it as 6 and as 6.0).
        let n = e["statistics"]["token_count"].as_f64().map(|n| n as u64);
        tokens = tokens.zip(n).map(|(a, b)| a + b);
    }
    Ok(EmbedResponse {
        vectors,
        prompt_tokens: tokens,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn body_and_answer() {
        let r = EmbedRequest {
            input: EmbedInput::Text(vec!["a".into(), "b".into()]),
            dimensions: Some(3),
            task_type: Some("RETRIEVAL_QUERY".into()),
            user: None,
            base64: false,
        };
        assert_eq!(
            String::from_utf8(encode_request(&r).unwrap()).unwrap(),
            r#"{"instances":[{"content":"a","task_type":"RETRIEVAL_QUERY"},{"content":"b","task_type":"RETRIEVAL_QUERY"}],"parameters":{"outputDimensionality":3}}"#
        );
        let bare = EmbedRequest {
            dimensions: None,
            task_type: None,
            ..r.clone()
        };
        assert_eq!(
            String::from_utf8(encode_request(&bare).unwrap()).unwrap(),
            r#"{"instances":[{"content":"a"},{"content":"b"}],"parameters":{}}"#
        );
        let tokens = EmbedRequest {
            input: EmbedInput::Tokens(vec![vec![1]]),
            ..r
        };
        assert!(encode_request(&tokens).is_err());
        let a = decode_response(br#"{"predictions":[{"embeddings":{"values":[0.5,1],"statistics":{"token_count":2,"truncated":false}}},{"embeddings":{"values":[2],"statistics":{"token_count":3.0,"truncated":false}}}]}"#).unwrap();
        assert_eq!(a.vectors, vec![vec![0.5, 1.0], vec![2.0]]);
        assert_eq!(a.prompt_tokens, Some(5));
        assert!(decode_response(br#"{"predictions":[{}]}"#).is_err());
        assert_eq!(max_instances("gemini-embedding-001"), 1);
        assert_eq!(max_instances("text-embedding-005"), 250);
    }
}
