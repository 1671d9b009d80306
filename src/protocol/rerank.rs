//! The rerank wire (docs/api.md "Rerank"): the shape Cohere v2, Jina,
//! Voyage and vLLM share. Clients send `POST /v1/rerank` with `model`,
//! `query`, `documents` (strings, or objects with a string `text` as Cohere
//! and Jina accept), `top_n`, `return_documents`, `max_tokens_per_doc`;
//! upstreams (`cohere`: Cohere v2 `{base_url}/rerank`; `openai`: an
//! OpenAI-compatible server's `{base_url}/rerank`, vLLM or Jina) get the
//! documents as strings. Answers are `results` of `index` and
//! `relevance_score`, with Cohere's `meta.billed_units.search_units` or
//! the others' `usage.total_tokens`.

use crate::adjust::Adjustments;
use crate::error::{ErrorKind, GatewayError};
use crate::ir::embed::{Ranked, RerankRequest, RerankResponse};
use serde::Serialize;
use serde_json::{Map, Value};

/// The most documents one request may hold (Cohere's documented
/// recommendation for one call; the gateway does not split a rerank).
pub const MAX_DOCUMENTS: usize = 1000;

/// The request members the gateway reads; any other is refused.
const FIELDS: &[&str] = &[
    "model",
    "query",
    "documents",
    "top_n",
    "return_documents",
    "max_tokens_per_doc",
];

fn bad(param: &str, msg: impl std::fmt::Display) -> GatewayError {
    GatewayError::invalid_param(param, format!("{param}: {msg}"))
}

fn positive(v: &Map<String, Value>, name: &str) -> Result<Option<u64>, GatewayError> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_u64()
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(|| bad(name, "must be an integer of at least 1")),
    }
}

/// The client's body: the `model` it names and the request.
pub fn decode_request(body: &[u8]) -> Result<(String, RerankRequest), GatewayError> {
    let v: Map<String, Value> = serde_json::from_slice(body)
        .map_err(|e| GatewayError::invalid_param("body", format!("invalid JSON body: {e}")))?;
    if let Some(k) = v.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(bad(
            k,
            format!(
                "unknown field (a rerank request takes {})",
                FIELDS.join(", ")
            ),
        ));
    }
    let model = match v.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => return Err(bad("model", "is required")),
    };
    let query = match v.get("query") {
        Some(Value::String(q)) if !q.trim().is_empty() => q.clone(),
        Some(Value::String(_)) => return Err(bad("query", "must not be empty")),
        _ => return Err(bad("query", "is required (a string)")),
    };
    let docs = match v.get("documents") {
        Some(Value::Array(d)) if d.is_empty() => return Err(bad("documents", "must not be empty")),
        Some(Value::Array(d)) => d,
        _ => return Err(bad("documents", "is required (an array of strings)")),
    };
    if docs.len() > MAX_DOCUMENTS {
        return Err(bad(
            "documents",
            format!(
                "{} documents; a rerank request takes at most {MAX_DOCUMENTS}",
                docs.len()
            ),
        ));
    }
    let documents = docs
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            Value::String(s) => Ok(s.clone()),
            Value::Object(o) => match o.get("text") {
                Some(Value::String(s)) => Ok(s.clone()),
                _ => Err(bad(
                    &format!("documents[{i}]"),
                    "an object document needs a string \"text\" member",
                )),
            },
            _ => Err(bad(
                &format!("documents[{i}]"),
                "must be a string or an object with a string \"text\" member",
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let return_documents = match v.get("return_documents") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("return_documents", "must be true or false")),
    };
    Ok((
        model,
        RerankRequest {
            query,
            documents,
            top_n: positive(&v, "top_n")?,
            return_documents,
            max_tokens_per_doc: positive(&v, "max_tokens_per_doc")?,
        },
    ))
}

#[derive(Serialize)]
struct UpstreamBody<'a> {
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    top_n: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens_per_doc: Option<u64>,
}

/// The upstream body: Cohere v2's for a `cohere` upstream; an
/// OpenAI-compatible server's (vLLM, Jina) has no `max_tokens_per_doc`,
/// reported dropped. `return_documents` never goes upstream: the gateway
/// attaches the documents it holds.
pub fn encode_request(
    r: &RerankRequest,
    upstream_model: &str,
    cohere: bool,
) -> (Vec<u8>, Adjustments) {
    let mut adjusted = Adjustments::default();
    let max_tokens_per_doc = match r.max_tokens_per_doc {
        Some(_) if !cohere => {
            adjusted.drop_field("max_tokens_per_doc");
            None
        }
        m => m,
    };
    let body = UpstreamBody {
        model: upstream_model,
        query: &r.query,
        documents: &r.documents,
        top_n: r.top_n,
        max_tokens_per_doc,
    };
    (serde_json::to_vec(&body).unwrap_or_default(), adjusted)
}

fn broken(msg: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::BadGateway,
        format!("upstream sent a rerank answer that cannot be read: {msg}"),
    )
}

/// An upstream's answer for `req`: each result's index must name one of
/// its documents, at most once; most relevant first (sorted here, whatever
/// order the upstream used), cut to `top_n`.
pub fn decode_response(body: &[u8], req: &RerankRequest) -> Result<RerankResponse, GatewayError> {
    let v: Value = serde_json::from_slice(body).map_err(|_| broken("not JSON"))?;
    let items = v["results"]
        .as_array()
        .ok_or_else(|| broken("no results"))?;
    let mut seen = vec![false; req.documents.len()];
    let mut results = Vec::with_capacity(items.len());
    for r in items {
        let index = r["index"]
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < seen.len())
            .ok_or_else(|| broken("a result's index names no document"))?;
        if std::mem::replace(&mut seen[index], true) {
            return Err(broken("a document is ranked twice"));
        }
        let relevance_score = r["relevance_score"]
            .as_f64()
            .ok_or_else(|| broken("a result has no relevance_score"))?;
        results.push(Ranked {
            index,
            relevance_score,
        });
    }
    results.sort_by(|a, b| b.relevance_score.total_cmp(&a.relevance_score));
    if let Some(n) = req.top_n {
        results.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    let tokens = v["usage"]["total_tokens"]
        .as_u64()
        .or_else(|| v["meta"]["billed_units"]["input_tokens"].as_u64());
    Ok(RerankResponse {
        id: v["id"].as_str().map(str::to_string),
        results,
        tokens,
        search_units: v["meta"]["billed_units"]["search_units"].as_u64(),
    })
}

#[derive(Serialize)]
struct Doc<'a> {
    text: &'a str,
}

#[derive(Serialize)]
struct Scored<'a> {
    index: usize,
    relevance_score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    document: Option<Doc<'a>>,
}

#[derive(Serialize)]
struct Units {
    search_units: u64,
}

#[derive(Serialize)]
struct Meta {
    billed_units: Units,
}

#[derive(Serialize)]
struct TotalTokens {
    total_tokens: u64,
}

#[derive(Serialize)]
struct Answer<'a> {
    id: &'a str,
    model: &'a str,
    results: Vec<Scored<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    meta: Option<Meta>,
    usage: TotalTokens,
}

/// The client's answer: `id` (the upstream's, else `id`), `model` as the
/// client sees it, the results (each with its `document` when asked),
/// Cohere's `meta.billed_units` when the upstream reported search units,
/// and `usage.total_tokens` (the tokens the request is counted for).
pub fn encode_response(
    r: &RerankResponse,
    req: &RerankRequest,
    id: &str,
    model: &str,
    tokens: u64,
) -> Vec<u8> {
    let answer = Answer {
        id: r.id.as_deref().unwrap_or(id),
        model,
        results: r
            .results
            .iter()
            .map(|x| Scored {
                index: x.index,
                relevance_score: x.relevance_score,
                document: req.return_documents.then(|| Doc {
                    text: req.documents.get(x.index).map_or("", String::as_str),
                }),
            })
            .collect(),
        meta: r.search_units.map(|search_units| Meta {
            billed_units: Units { search_units },
        }),
        usage: TotalTokens {
            total_tokens: tokens,
        },
    };
    serde_json::to_vec(&answer).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn req(body: &str) -> Result<RerankRequest, GatewayError> {
        decode_request(body.as_bytes()).map(|(_, r)| r)
    }

    #[test]
    fn decodes_strings_and_text_objects() {
        let (m, r) = decode_request(
            br#"{"model":"co/rr","query":"q","documents":["a",{"text":"b"}],"top_n":1,"return_documents":true,"max_tokens_per_doc":9}"#,
        )
        .unwrap();
        assert_eq!(m, "co/rr");
        assert_eq!(r.documents, ["a", "b"]);
        assert_eq!(
            (r.top_n, r.return_documents, r.max_tokens_per_doc),
            (Some(1), true, Some(9))
        );
    }

    #[test]
    fn refuses_bad_requests_by_name() {
        let cases = [
            (r#"{"model":"m","query":"","documents":["a"]}"#, "query"),
            (r#"{"model":"m","documents":["a"]}"#, "query"),
            (r#"{"model":"m","query":"q","documents":[]}"#, "documents"),
            (
                r#"{"model":"m","query":"q","documents":[1]}"#,
                "documents[0]",
            ),
            (
                r#"{"model":"m","query":"q","documents":["a",{"title":"x"}]}"#,
                "documents[1]",
            ),
            (
                r#"{"model":"m","query":"q","documents":["a"],"top_n":0}"#,
                "top_n",
            ),
            (
                r#"{"model":"m","query":"q","documents":["a"],"rank_fields":["x"]}"#,
                "rank_fields",
            ),
            (r#"{"query":"q","documents":["a"]}"#, "model"),
        ];
        for (body, param) in cases {
            let e = req(body).unwrap_err();
            assert_eq!(e.status, 400, "{body}");
            assert!(e.message.starts_with(&format!("{param}:")), "{body}: {e}");
        }
        let many = format!(
            r#"{{"model":"m","query":"q","documents":[{}]}}"#,
            vec!["\"d\""; MAX_DOCUMENTS + 1].join(",")
        );
        assert!(req(&many).unwrap_err().message.contains("at most 1000"));
    }

    #[test]
    fn upstream_body_and_answer() {
        let r = req(r#"{"model":"m","query":"q","documents":["a","b","c"],"top_n":2,"max_tokens_per_doc":5,"return_documents":true}"#).unwrap();
        let (body, adj) = encode_request(&r, "rerank-v3.5", true);
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"model":"rerank-v3.5","query":"q","documents":["a","b","c"],"top_n":2,"max_tokens_per_doc":5}"#
        );
        assert!(adj.is_empty());
        let (body, adj) = encode_request(&r, "bge", false);
        assert!(!std::str::from_utf8(&body)
            .unwrap()
            .contains("max_tokens_per_doc"));
        assert!(adj.render().contains("max_tokens_per_doc"));
        let up = decode_response(
            br#"{"id":"x","results":[{"index":2,"relevance_score":0.1},{"index":0,"relevance_score":0.9},{"index":1,"relevance_score":0.5}],"meta":{"billed_units":{"search_units":1}}}"#,
            &r,
        )
        .unwrap();
        assert_eq!(
            up.results.iter().map(|x| x.index).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(up.search_units, Some(1));
        let out = encode_response(&up, &r, "req-1", "co/rr", 0);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"id":"x","model":"co/rr","results":[{"index":0,"relevance_score":0.9,"document":{"text":"a"}},{"index":1,"relevance_score":0.5,"document":{"text":"b"}}],"meta":{"billed_units":{"search_units":1}},"usage":{"total_tokens":0}}"#
        );
        let vllm = decode_response(
            br#"{"results":[{"index":1,"relevance_score":0.3}],"usage":{"total_tokens":17}}"#,
            &r,
        )
        .unwrap();
        assert_eq!((vllm.tokens, vllm.id.as_deref()), (Some(17), None));
        for bad in [
            r#"{"results":[{"index":3,"relevance_score":0.3}]}"#,
            r#"{"results":[{"index":0,"relevance_score":0.3},{"index":0,"relevance_score":0.2}]}"#,
            r#"{"results":[{"index":0}]}"#,
            r#"{"data":[]}"#,
        ] {
            assert_eq!(
                decode_response(bad.as_bytes(), &r).unwrap_err().status,
                502,
                "{bad}"
            );
        }
    }
}
