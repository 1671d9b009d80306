//! Rerank: Cohere v2 `POST …/rerank` (under a `/cohere` path prefix) and an
//! OpenAI-compatible server's `POST …/rerank` (vLLM, Jina; anywhere else).
//! Cohere's call is checked as the real API checks it: `Authorization:
//! Bearer` with the key the test set ([`MockUpstream::expect_cohere_key`]),
//! `model`, `query`, `documents` as strings, `top_n` and
//! `max_tokens_per_doc` positive, no other member (v2 has no
//! `return_documents`); errors are Cohere's `{"id", "message"}`. Scores are
//! deterministic ([`mock_rerank_score`]); results come most relevant first,
//! cut to `top_n`, with Cohere's `meta` (one search unit per 100 documents)
//! or the others' `usage.total_tokens` (a token per word of the query, once
//! per document, and of every document). A `~status:N` path segment forces
//! that status. Imports `super::*`.

use super::*;

/// The mock's relevance of `doc` to `query`: the share of the query's
/// words found in the document, and a little of the document's hash (ties
/// broken), in [0, 1).
pub fn mock_rerank_score(query: &str, doc: &str) -> f64 {
    let words = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase()
            })
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (q, d) = (words(query), words(doc));
    let hits = q.iter().filter(|w| d.contains(w)).count();
    let share = if q.is_empty() {
        0.0
    } else {
        hits as f64 / q.len() as f64
    };
    share * 0.9 + (fnv1a(doc.as_bytes()) % 1000) as f64 / 20_000.0
}

impl MockUpstream {
    /// Cohere calls must carry `Authorization: Bearer key`.
    pub fn expect_cohere_key(&self, key: &str) {
        *self
            .state
            .cohere_key
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(key.to_owned());
    }
}

fn cohere_error(status: u16, message: &str) -> Reply {
    Reply::json(status, &json!({"id": "mock-error-id", "message": message}))
}

/// The answer to a rerank call (a POST whose path ends in `/rerank`);
/// `None` for any other request.
pub(super) fn rerank_reply(state: &State, request: &RecordedRequest) -> Option<Reply> {
    let path = request.path_only();
    if request.method != "POST" || !path.trim_end_matches('/').ends_with("/rerank") {
        return None;
    }
    let cohere = path.starts_with("/cohere/");
    let fail = |status: u16, m: &str| {
        if cohere {
            cohere_error(status, m)
        } else {
            error_reply(Protocol::OpenAi, status, m)
        }
    };
    if cohere {
        let want = state
            .cohere_key
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let got = request
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "));
        if want.is_none() || got != want.as_deref() {
            return Some(fail(401, "invalid api token"));
        }
    }
    let faults = Markers::parse(&path_faults(state, path));
    if let Some(status) = faults.status {
        return Some(fail(status, &format!("mock: forced status {status}")));
    }
    let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&request.body) else {
        return Some(fail(400, "invalid request: body is not a JSON object"));
    };
    Some(match rerank(&body, cohere) {
        Ok(v) => Reply::json(200, &v),
        Err(m) => fail(400, &m),
    })
}

fn rerank(body: &serde_json::Map<String, Value>, cohere: bool) -> Result<Value, String> {
    const FIELDS: [&str; 5] = ["model", "query", "documents", "top_n", "max_tokens_per_doc"];
    if let Some(k) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!("invalid request: unknown field {k:?}"));
    }
    if !cohere && body.contains_key("max_tokens_per_doc") {
        return Err("mock: max_tokens_per_doc is Cohere's".into());
    }
    let model = body["model"].as_str().filter(|m| !m.is_empty());
    let query = body
        .get("query")
        .and_then(Value::as_str)
        .filter(|q| !q.is_empty());
    let (Some(model), Some(query)) = (model, query) else {
        return Err("invalid request: model and query are required strings".into());
    };
    let docs: Vec<&str> = match body.get("documents").and_then(Value::as_array) {
        Some(d) if !d.is_empty() => d
            .iter()
            .map(Value::as_str)
            .collect::<Option<_>>()
            .ok_or("invalid request: documents must be strings")?,
        _ => return Err("invalid request: documents must be a non-empty array".into()),
    };
    let positive = |k: &str| match body.get(k) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or(format!("invalid request: {k} must be a positive integer")),
    };
    let top_n = positive("top_n")?;
    positive("max_tokens_per_doc")?;
    let mut scored: Vec<(usize, f64)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (i, mock_rerank_score(query, d)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.truncate(top_n.map_or(usize::MAX, |n| n as usize));
    let results: Vec<Value> = scored
        .iter()
        .map(|(i, s)| json!({"index": i, "relevance_score": s}))
        .collect();
    let words = |s: &str| s.split_whitespace().count() as u64;
    if cohere {
        let units = docs.len().div_ceil(100) as u64;
        Ok(
            json!({"id": format!("mock-rerank-{model}"), "results": results,
            "meta": {"api_version": {"version": "2", "is_experimental": false},
                "billed_units": {"search_units": units}}}),
        )
    } else {
        let tokens = words(query) * docs.len() as u64 + docs.iter().map(|d| words(d)).sum::<u64>();
        Ok(
            json!({"id": format!("rerank-{model}"), "model": model, "results": results,
            "usage": {"total_tokens": tokens}}),
        )
    }
}
