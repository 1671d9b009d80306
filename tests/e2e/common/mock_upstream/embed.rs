//! The embeddings endpoints: OpenAI `POST …/embeddings` and Gemini
//! `…/models/{m}:embedContent` / `:batchEmbedContents`, checking the request
//! shape as the real APIs do and answering deterministic vectors
//! ([`mock_vector`]: seeded by the input text, of the requested dimension,
//! 8 by default). OpenAI's usage is one prompt token per whitespace-separated
//! word of the inputs; Gemini reports no usage, as the real API. Vertex AI's
//! `:predict` (text-embedding models) takes `instances` of `content` and
//! `task_type`, `parameters.outputDimensionality`; at most 250 instances, one
//! for `gemini-embedding-*`; each prediction's `statistics.token_count` is
//! its words.
//! Imports `super::*` (the rest of the mock upstream).

use super::*;

/// The dimension when the request names none.
pub const DEFAULT_DIMENSIONS: usize = 8;

/// The mock's vector for `text`: `dims` values in [-1, 1], three decimals,
/// from the FNV-1a hash of the text and the position.
pub fn mock_vector(text: &str, dims: usize) -> Vec<f32> {
    (0..dims)
        .map(|i| {
            let h = fnv1a(format!("{i}:{text}").as_bytes());
            ((h % 2001) as f32 - 1000.0) / 1000.0
        })
        .collect()
}

/// The prompt tokens the mock's OpenAI embeddings report for `texts`.
pub fn mock_embed_tokens(texts: &[&str]) -> u64 {
    texts
        .iter()
        .map(|t| t.split_whitespace().count() as u64)
        .sum()
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn dims_of(v: &Value, field: &str) -> Result<usize, String> {
    match &v[field] {
        Value::Null => Ok(DEFAULT_DIMENSIONS),
        d => d
            .as_u64()
            .filter(|d| (1..=4096).contains(d))
            .map(|d| d as usize)
            .ok_or(format!("mock: {field} must be a positive integer")),
    }
}

/// OpenAI `POST /embeddings`.
pub(super) fn openai_embeddings(body: &Value) -> Reply {
    let fail = |m: String| error_reply(Protocol::OpenAi, 400, &m);
    let Some(model) = body["model"].as_str() else {
        return fail("mock: model is required".into());
    };
    let texts: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) if !a.is_empty() && a.len() <= 2048 => {
            let mut texts = Vec::new();
            for x in a {
                match x {
                    Value::String(s) => texts.push(s.clone()),
                    // Token arrays: embedded by their ids' text.
                    Value::Array(t) if t.iter().all(Value::is_u64) => {
                        texts.push(format!("tokens:{}", Value::Array(t.clone())))
                    }
                    Value::Number(_) => {
                        texts = vec![format!("tokens:{}", Value::Array(a.clone()))];
                        break;
                    }
                    _ => return fail("mock: input items must be strings or token arrays".into()),
                }
            }
            texts
        }
        _ => {
            return fail("mock: input must be a string or a non-empty array of at most 2048".into())
        }
    };
    let dims = match dims_of(body, "dimensions") {
        Ok(d) => d,
        Err(m) => return fail(m),
    };
    let b64 = match body["encoding_format"].as_str() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(_) => return fail("mock: encoding_format must be float or base64".into()),
    };
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let v = mock_vector(t, dims);
            let embedding = if b64 {
                let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                json!(base64(&bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let tokens = mock_embed_tokens(&refs);
    Reply::json(
        200,
        &json!({"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
    )
}

/// One Gemini `EmbedContentRequest`: its text and dimension.
fn gemini_one(r: &Value, model: &str, batch: bool) -> Result<Vec<f32>, String> {
    if batch && r["model"].as_str() != Some(&format!("models/{model}")) {
        return Err(format!(
            "mock: each request's model must be models/{model}, got {}",
            r["model"]
        ));
    }
    let parts = r["content"]["parts"]
        .as_array()
        .filter(|p| !p.is_empty())
        .ok_or("mock: content.parts is required")?;
    let mut text = String::new();
    for p in parts {
        text.push_str(p["text"].as_str().ok_or("mock: only text parts")?);
    }
    Ok(mock_vector(&text, dims_of(r, "outputDimensionality")?))
}

/// Gemini `:embedContent` (`batch` false) and `:batchEmbedContents`.
pub(super) fn gemini_embed(body: &Value, model: &str, batch: bool) -> Reply {
    let fail = |m: String| error_reply(Protocol::Gemini, 400, &m);
    if !batch {
        return match gemini_one(body, model, false) {
            Ok(v) => Reply::json(200, &json!({"embedding": {"values": v}})),
            Err(m) => fail(m),
        };
    }
    let Some(reqs) = body["requests"].as_array().filter(|r| !r.is_empty()) else {
        return fail("mock: requests must be a non-empty array".into());
    };
    if reqs.len() > 100 {
        return fail("mock: at most 100 requests can be in one batch".into());
    }
    let mut out = Vec::new();
    for r in reqs {
        match gemini_one(r, model, true) {
            Ok(v) => out.push(json!({ "values": v })),
            Err(m) => return fail(m),
        }
    }
    Reply::json(200, &json!({ "embeddings": out }))
}

/// Vertex AI's `:predict` for a text-embedding `model`.
pub(super) fn vertex_predict(body: &Value, model: &str) -> Reply {
    let fail = |m: &str| error_reply(Protocol::Gemini, 400, m);
    const TASKS: [&str; 8] = [
        "RETRIEVAL_QUERY",
        "RETRIEVAL_DOCUMENT",
        "SEMANTIC_SIMILARITY",
        "CLASSIFICATION",
        "CLUSTERING",
        "QUESTION_ANSWERING",
        "FACT_VERIFICATION",
        "CODE_RETRIEVAL_QUERY",
    ];
    if body
        .as_object()
        .is_some_and(|o| o.keys().any(|k| k != "instances" && k != "parameters"))
    {
        return fail("Invalid JSON payload received. Unknown name at root.");
    }
    let limit = if model.starts_with("gemini-embedding") {
        1
    } else {
        250
    };
    let Some(instances) = body["instances"].as_array().filter(|i| !i.is_empty()) else {
        return fail("mock: instances must be a non-empty array");
    };
    if instances.len() > limit {
        return fail(&format!(
            "mock: {model} takes at most {limit} instances, got {}",
            instances.len()
        ));
    }
    let params = &body["parameters"];
    if params.as_object().is_some_and(|o| {
        o.keys()
            .any(|k| k != "outputDimensionality" && k != "autoTruncate")
    }) {
        return fail("mock: unknown parameter");
    }
    let dims = match dims_of(params, "outputDimensionality") {
        Ok(d) => d,
        Err(m) => return fail(&m),
    };
    let mut out = Vec::new();
    for i in instances {
        let Some(text) = i["content"].as_str() else {
            return fail("mock: each instance needs a string content");
        };
        if i.as_object().is_some_and(|o| {
            o.keys()
                .any(|k| k != "content" && k != "task_type" && k != "title")
        }) {
            return fail("mock: unknown instance field");
        }
        match &i["task_type"] {
            Value::Null => {}
            Value::String(t) if TASKS.contains(&t.as_str()) => {}
            t => return fail(&format!("mock: unknown task_type {t}")),
        }
        out.push(json!({"embeddings": {"values": mock_vector(text, dims),
            "statistics": {"token_count": mock_embed_tokens(&[text]), "truncated": false}}}));
    }
    Reply::json(
        200,
        &json!({"predictions": out, "metadata": {"billableCharacterCount": 0}}),
    )
}
