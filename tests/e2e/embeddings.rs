//! End-to-end: the `embed` action (docs/api.md "Embeddings"): OpenAI
//! `/v1/embeddings` (X1) and Gemini `:embedContent` / `:batchEmbedContents`
//! (X2), each to an OpenAI and a Gemini upstream of the mock, whose vectors
//! are deterministic (`mock_vector`), so whole answers are compared; the
//! request each upstream got; `dimensions` ⇄ `outputDimensionality`; base64
//! made by the gateway; the action mismatch both ways; the usage and cost in
//! the access log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::{eventually, metric_value, metrics_text};
use crate::common::gateway::{
    authed, catalog, free_port, keys, model, Gateway, KEY, LIMITED_KEY, RPM_KEY,
};
use crate::common::mock_upstream::{
    mock_embed_tokens, mock_vector, MockUpstream, Protocol, DEFAULT_DIMENSIONS,
};
use serde_json::{json, Value};
use std::time::Duration;

/// The test catalog with an OpenAI embedding model (`embedder/embed-small`,
/// its provider open to the OpenAI and Gemini families) and a Gemini one
/// (`google/gemini-embedding`), both `embed` only, at 0.02 USD per million
/// input tokens.
fn embed_catalog(mock: &MockUpstream) -> Value {
    let mut c = catalog(mock);
    c["providers"].as_array_mut().unwrap().push(json!({
        "id": "embedder", "families": ["openai", "gemini"],
        "upstreams": [{"protocol": "openai", "base_url": mock.base_url(Protocol::OpenAi),
            "api_key_env": "SB_TEST_KEY_OPENAI"}]
    }));
    let embed = |id: &str, provider: &str, upstream: &str| {
        model(
            id,
            provider,
            json!({"upstream_model": upstream, "supported_actions": ["embed"],
                "pricing": {"prompt": "0.00000002", "completion": "0"},
                "protocols": ["openai", "gemini"]}),
        )
    };
    // A dead OpenAI upstream first, then a Gemini one: failover.
    c["providers"].as_array_mut().unwrap().push(json!({
        "id": "embed-flaky", "families": ["openai", "gemini"],
        "upstreams": [
            {"protocol": "openai", "base_url": format!("http://127.0.0.1:{}/v1", free_port()),
                "api_key_env": "SB_TEST_KEY_OPENAI"},
            {"protocol": "gemini", "base_url": mock.base_url(Protocol::Gemini),
                "api_key_env": "SB_TEST_KEY_GEMINI"}]
    }));
    let models = c["models"].as_array_mut().unwrap();
    models.push(embed("flaky-embed", "embed-flaky", "gemini-embedding-001"));
    models.push(embed("embed-small", "embedder", "text-embedding-3-small"));
    models.push(embed("gemini-embedding", "google", "gemini-embedding-001"));
    c
}

async fn start() -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&embed_catalog(&mock), &keys(), &[]).await;
    (mock, gw)
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// The vectors of an answer (OpenAI `data[].embedding`, Gemini
/// `embeddings[].values` or `embedding.values`) as f32, and the answer with
/// each vector replaced by null: floats compare as f32, the rest as JSON.
fn split(mut v: Value) -> (Vec<Vec<f32>>, Value) {
    let mut out = Vec::new();
    let mut take = |x: &mut Value| out.push(floats(&x.take()));
    if let Some(data) = v.get_mut("data").and_then(Value::as_array_mut) {
        data.iter_mut().for_each(|d| take(&mut d["embedding"]));
    } else if let Some(es) = v.get_mut("embeddings").and_then(Value::as_array_mut) {
        es.iter_mut().for_each(|e| take(&mut e["values"]));
    } else {
        take(&mut v["embedding"]["values"]);
    }
    (out, v)
}

fn upstream_body(mock: &MockUpstream) -> (String, Value) {
    let r = mock.last_request().unwrap();
    (r.path.clone(), r.json().unwrap())
}

#[tokio::test]
async fn x1_to_openai_whole_answer() {
    let (mock, gw) = start().await;
    let body = json!({"model": "embedder/embed-small", "input": ["hello world", "the cat sat"]});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (vectors, rest) = split(r.json());
    let want = json!({
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": null},
            {"object": "embedding", "index": 1, "embedding": null}
        ],
        "model": "embedder/embed-small",
        "usage": {"prompt_tokens": 5, "total_tokens": 5}
    });
    assert_eq!(mock_embed_tokens(&["hello world", "the cat sat"]), 5);
    assert_eq!(rest, want);
    assert_eq!(
        vectors,
        [
            mock_vector("hello world", DEFAULT_DIMENSIONS),
            mock_vector("the cat sat", DEFAULT_DIMENSIONS)
        ]
    );
    let (path, up) = upstream_body(&mock);
    assert_eq!(path, "/openai/v1/embeddings");
    assert_eq!(up["model"], "text-embedding-3-small");
    assert_eq!(up["input"], json!(["hello world", "the cat sat"]));
    // A single string and token arrays reach an OpenAI upstream as sent.
    let one = json!({"model": "embedder/embed-small", "input": "solo", "dimensions": 3});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &one))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        floats(&r.json()["data"][0]["embedding"]),
        mock_vector("solo", 3)
    );
    assert_eq!(upstream_body(&mock).1["dimensions"], 3);
    let tokens = json!({"model": "embedder/embed-small", "input": [[1, 2], [3]]});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &tokens))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(upstream_body(&mock).1["input"], json!([[1, 2], [3]]));
    assert_eq!(r.json()["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn x1_to_gemini_dimensions_and_base64() {
    let (mock, gw) = start().await;
    let texts = ["first text", "second", "third one here"];
    let body = json!({"model": "google/gemini-embedding", "input": texts, "dimensions": 4});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["model"], "google/gemini-embedding");
    for (i, t) in texts.iter().enumerate() {
        assert_eq!(v["data"][i]["index"], i);
        assert_eq!(floats(&v["data"][i]["embedding"]), mock_vector(t, 4), "{i}");
    }
    // Gemini reports no usage: the gateway's own count of the texts.
    assert_eq!(v["usage"]["prompt_tokens"], 6, "{v}");
    let (path, up) = upstream_body(&mock);
    assert_eq!(
        path,
        "/gemini/v1beta/models/gemini-embedding-001:batchEmbedContents"
    );
    let reqs = up["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[2]["model"], "models/gemini-embedding-001");
    assert_eq!(reqs[2]["content"]["parts"][0]["text"], "third one here");
    assert_eq!(reqs[0]["outputDimensionality"], 4);

    // base64: little-endian f32, made by the gateway from Gemini's floats.
    let body =
        json!({"model": "google/gemini-embedding", "input": "x y", "encoding_format": "base64"});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let b64 = r.json()["data"][0]["embedding"]
        .as_str()
        .unwrap()
        .to_string();
    let bytes = switchboard::util::base64::decode(&b64).unwrap();
    let got: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, mock_vector("x y", DEFAULT_DIMENSIONS));

    // Token arrays cannot go to Gemini: a 400 naming the field, nothing sent.
    mock.clear();
    let body = json!({"model": "google/gemini-embedding", "input": [[1, 2]]});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("input"),
        "{}",
        r.text()
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn x2_to_gemini_single_and_batch() {
    let (mock, gw) = start().await;
    let path = "/google/v1beta/models/google/gemini-embedding:embedContent";
    let body = json!({"content": {"parts": [{"text": "hello"}]}, "taskType": "RETRIEVAL_QUERY"});
    let r = gw.send(&authed("gemini", path, KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (vectors, rest) = split(r.json());
    assert_eq!(rest, json!({"embedding": {"values": null}}));
    assert_eq!(vectors, [mock_vector("hello", DEFAULT_DIMENSIONS)]);
    assert_eq!(
        upstream_body(&mock).1["requests"][0]["taskType"],
        "RETRIEVAL_QUERY"
    );
    let path = "/google/v1beta/models/google/gemini-embedding:batchEmbedContents";
    let one = |t: &str| json!({"model": "models/gemini-embedding", "content": {"parts": [{"text": t}]}, "outputDimensionality": 5});
    let body = json!({"requests": [one("a"), one("b")]});
    let r = gw.send(&authed("gemini", path, KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (vectors, rest) = split(r.json());
    assert_eq!(
        rest,
        json!({"embeddings": [{"values": null}, {"values": null}]})
    );
    assert_eq!(vectors, [mock_vector("a", 5), mock_vector("b", 5)]);
}

#[tokio::test]
async fn x2_to_openai_batch() {
    let (mock, gw) = start().await;
    let path = "/google/v1beta/models/embedder/embed-small:batchEmbedContents";
    let one = |t: &str| json!({"content": {"parts": [{"text": t}]}, "outputDimensionality": 3});
    let body = json!({"requests": [one("left"), one("right")]});
    let r = gw.send(&authed("gemini", path, KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (vectors, rest) = split(r.json());
    assert_eq!(
        rest,
        json!({"embeddings": [{"values": null}, {"values": null}]})
    );
    assert_eq!(vectors, [mock_vector("left", 3), mock_vector("right", 3)]);
    let (path, up) = upstream_body(&mock);
    assert_eq!(path, "/openai/v1/embeddings");
    assert_eq!(up["input"], json!(["left", "right"]));
    assert_eq!(up["dimensions"], 3);
    assert_eq!(up["model"], "text-embedding-3-small");
}

#[tokio::test]
async fn action_mismatch_is_a_400_naming_the_action() {
    let (mock, gw) = start().await;
    let chat =
        json!({"model": "embedder/embed-small", "messages": [{"role": "user", "content": "hi"}]});
    let m = gw
        .refused(&authed("openai", "/v1/chat/completions", KEY, &chat))
        .await;
    assert!(
        m.contains("complete") && m.contains("embedder/embed-small"),
        "{m}"
    );
    // A completion model asked to embed, on both routes.
    let body = json!({"model": "openai/gpt-5", "input": "hi"});
    let m = gw
        .refused(&authed("openai", "/v1/embeddings", KEY, &body))
        .await;
    assert!(m.contains("embed") && m.contains("openai/gpt-5"), "{m}");
    let path = "/google/v1beta/models/google/gemini-3.1-pro:embedContent";
    let body = json!({"content": {"parts": [{"text": "hi"}]}});
    let r = gw.send(&authed("gemini", path, KEY, &body)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        r.json()["error"]["status"],
        "INVALID_ARGUMENT",
        "{}",
        r.text()
    );
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("embed"));
    assert!(mock.requests().is_empty(), "nothing went upstream");
}

#[tokio::test]
async fn access_log_has_tokens_and_cost() {
    let (_mock, gw) = start().await;
    let body = json!({"model": "embedder/embed-small", "input": ["one two three", "four five"]});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body).header("x-request-id", "emb-1"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let line = eventually(Duration::from_secs(10), "the access-log line", || async {
        gw.access_log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["request_id"] == "emb-1")
    })
    .await;
    assert_eq!(line["path"], "/v1/embeddings");
    assert_eq!(line["provider"], "embedder");
    assert_eq!(line["model"], "embed-small");
    assert_eq!(line["upstream_protocol"], "openai");
    assert_eq!(line["input_tokens"], 5, "{line}");
    assert_eq!(line["output_tokens"], 0, "{line}");
    // 5 tokens at 0.02 USD per million.
    let cost = line["cost_usd"].as_f64().unwrap();
    assert!((cost - 1e-7).abs() < 1e-12, "{line}");
}

#[tokio::test]
async fn a_large_batch_is_split_and_reassembled_in_order() {
    let (mock, gw) = start().await;
    let texts: Vec<String> = (0..150).map(|i| format!("text number {i}")).collect();
    let body = json!({"model": "google/gemini-embedding", "input": texts, "dimensions": 2});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body).header("x-request-id", "emb-150"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (vectors, _) = split(r.json());
    let want: Vec<Vec<f32>> = texts.iter().map(|t| mock_vector(t, 2)).collect();
    assert_eq!(vectors, want);
    // Gemini takes at most 100 requests a call (the mock refuses more).
    let sizes: Vec<usize> = mock
        .requests()
        .iter()
        .map(|r| r.json().unwrap()["requests"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [100, 50]);
    // Both calls are the request's attempts; the tokens are both parts'.
    let line = eventually(Duration::from_secs(10), "the access-log line", || async {
        gw.access_log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["request_id"] == "emb-150")
    })
    .await;
    assert_eq!(line["attempts"], 2, "{line}");
    assert_eq!(
        line["input_tokens"],
        r.json()["usage"]["prompt_tokens"],
        "{line}"
    );
    assert!(line["input_tokens"].as_u64().unwrap() >= 450, "{line}");
}

#[tokio::test]
async fn failover_and_key_model_globs_as_for_completions() {
    let (mock, gw) = start().await;
    let body = json!({"model": "embed-flaky/flaky-embed", "input": ["kept"]});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body).header("x-request-id", "emb-fo"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (vectors, _) = split(r.json());
    assert_eq!(vectors, [mock_vector("kept", DEFAULT_DIMENSIONS)]);
    assert!(mock
        .last_request()
        .unwrap()
        .path
        .ends_with(":batchEmbedContents"));
    let line = eventually(Duration::from_secs(10), "the access-log line", || async {
        gw.access_log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["request_id"] == "emb-fo")
    })
    .await;
    assert_eq!(line["attempts"], 2, "{line}");
    assert_eq!(line["upstream_protocol"], "gemini", "{line}");
    // A key limited to `openai/*` may not use another provider's model.
    mock.clear();
    let body = json!({"model": "embedder/embed-small", "input": "x"});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", LIMITED_KEY, &body))
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn the_ledger_counts_an_embedding_like_a_completion() {
    const ADMIN: &str = "sk-admin-embed";
    let mock = MockUpstream::start().await;
    let args = ["--admin-key", ADMIN, "--ledger-flush-ms", "50"];
    let gw = Gateway::start_with(&embed_catalog(&mock), &keys(), &args).await;
    let body = json!({"model": "embedder/embed-small", "input": ["one two three", "four five"]});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let total = eventually(Duration::from_secs(10), "the ledger row", || async {
        let r = crate::common::http_client::send(
            gw.metrics,
            &crate::common::http_client::Request::get("/admin/usage")
                .header("authorization", &format!("Bearer {ADMIN}")),
        )
        .await
        .unwrap();
        let total = r.json()["total"].clone();
        (total["requests"] == 1).then_some(total)
    })
    .await;
    assert_eq!(total["input_tokens"], 5, "{total}");
    assert_eq!(total["output_tokens"], 0, "{total}");
    let cost = total["cost_usd"].as_f64().unwrap();
    assert!((cost - 1e-7).abs() < 1e-12, "{total}");
}

#[tokio::test]
async fn metrics_and_the_keys_rpm_count_embeddings() {
    let (_mock, gw) = start().await;
    let body = json!({"model": "embedder/embed-small", "input": ["one two three", "four five"]});
    for _ in 0..2 {
        let r = gw
            .send(&authed("openai", "/v1/embeddings", RPM_KEY, &body))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // The key's rpm is 2: the third request in the minute is refused.
    let r = gw
        .send(&authed("openai", "/v1/embeddings", RPM_KEY, &body))
        .await;
    assert_eq!(r.status, 429, "{}", r.text());
    let m = "model=\"embed-small\"";
    let input = eventually(Duration::from_secs(10), "the token metric", || async {
        let text = metrics_text(gw.metrics).await;
        metric_value(
            &text,
            "switchboard_tokens_total",
            &[m, "direction=\"input\""],
        )
        .filter(|v| *v >= 10.0)
    })
    .await;
    assert_eq!(input, 10.0);
    let text = metrics_text(gw.metrics).await;
    let cost = metric_value(&text, "switchboard_cost_usd_total", &[m]).unwrap();
    assert!((cost - 2e-7).abs() < 1e-12, "{cost}");
}
