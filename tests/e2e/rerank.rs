//! End-to-end: the `rerank` action (docs/api.md "Rerank"): `POST /v1/rerank`
//! (X3) to a `cohere` upstream (the mock checks Cohere v2's wire format and
//! the Bearer key) and to an OpenAI-compatible `/rerank` (vLLM's shape);
//! ordering and `top_n` from the mock's deterministic scores, documents
//! echoed by the gateway, validation, the action check both ways, the
//! price (`pricing.request`) in the access log, the ledger and a budget,
//! failover to a second upstream on a 5xx, a refused key.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::{eventually, metric_value, metrics_text};
use crate::common::gateway::{authed, catalog, keys, model, Gateway, KEY};
use crate::common::http_client::{self, Request};
use crate::common::mock_upstream::{mock_rerank_score, MockUpstream, Protocol};
use serde_json::{json, Value};
use std::time::Duration;

const COHERE_KEY: &str = "cohere-key-e2e-8d41e2";
const BUDGET_KEY: &str = "sk-rerank-budget";
const ADMIN: &str = "sk-admin-rerank";

/// The test catalog with rerank models: `cohere/rerank-v3.5` (a `cohere`
/// upstream, 0.002 USD a request), `vllm/bge-reranker` (an OpenAI-compatible
/// upstream, 0.00000005 USD a token), `cohere-flaky/rerank-fo` (a `cohere`
/// upstream answering 503, then a good one).
fn rerank_catalog(mock: &MockUpstream) -> Value {
    let mut c = catalog(mock);
    let base = format!("http://{}", mock.addr());
    let cohere = |path: &str| {
        json!({"protocol": "cohere", "base_url": format!("{base}{path}"),
            "api_key_env": "SB_TEST_COHERE_KEY"})
    };
    let providers = c["providers"].as_array_mut().unwrap();
    providers.push(json!({"id": "cohere", "families": ["openai"],
        "upstreams": [cohere("/cohere/v2")]}));
    // The failing upstream weighs most: the pool's first pick.
    let mut failing = cohere("/cohere/~status:503/v2");
    failing["weight"] = json!(10);
    providers.push(json!({"id": "cohere-flaky", "families": ["openai"],
        "upstreams": [failing, cohere("/cohere/v2")], "affinity": "off"}));
    // A cohere upstream beside an OpenAI one: completions skip it.
    let mut first = cohere("/cohere/v2");
    first["weight"] = json!(10);
    providers.push(
        json!({"id": "mixed", "families": ["openai"], "affinity": "off",
        "upstreams": [first, {"protocol": "openai", "base_url": mock.base_url(Protocol::OpenAi),
            "api_key_env": "SB_TEST_KEY_OPENAI"}]}),
    );
    providers.push(json!({"id": "vllm", "families": ["openai"],
        "upstreams": [{"protocol": "openai", "base_url": mock.base_url(Protocol::OpenAi),
            "api_key_env": "SB_TEST_KEY_OPENAI"}]}));
    let rerank = |id: &str, provider: &str, upstream: &str, pricing: Value| {
        model(
            id,
            provider,
            json!({"upstream_model": upstream, "supported_actions": ["rerank"],
                "pricing": pricing, "protocols": ["openai"]}),
        )
    };
    let per_request = json!({"prompt": "0", "completion": "0", "request": "0.002"});
    let models = c["models"].as_array_mut().unwrap();
    models.push(rerank(
        "rerank-v3.5",
        "cohere",
        "rerank-v3.5",
        per_request.clone(),
    ));
    models.push(rerank(
        "rerank-fo",
        "cohere-flaky",
        "rerank-v3.5",
        per_request,
    ));
    models.push(model(
        "chat-mixed",
        "mixed",
        json!({"protocols": ["openai"]}),
    ));
    models.push(rerank(
        "bge-reranker",
        "vllm",
        "BAAI/bge-reranker-v2-m3",
        json!({"prompt": "0.00000005", "completion": "0"}),
    ));
    c
}

fn rerank_keys() -> Value {
    let mut k = keys();
    k["keys"].as_array_mut().unwrap().push(
        json!({"id": "rerank-budget", "key": BUDGET_KEY, "budget": {"usd": "0.003", "period": "total"}}),
    );
    k
}

async fn start_with(args: &[&str]) -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    mock.expect_cohere_key(COHERE_KEY);
    let env = [("SB_TEST_COHERE_KEY", COHERE_KEY)];
    let gw = Gateway::start_with_env(&rerank_catalog(&mock), &rerank_keys(), args, &env).await;
    (mock, gw)
}

async fn start() -> (MockUpstream, Gateway) {
    start_with(&[]).await
}

fn rerank(key: &str, body: &Value) -> Request {
    authed("openai", "/v1/rerank", key, body)
}

const QUERY: &str = "capital of the United States";
const DOCS: [&str; 4] = [
    "Carson City is the capital city of Nevada.",
    "Washington D.C. is the capital of the United States.",
    "Capital punishment has existed in the United States.",
    "The Mariana Islands are in the Pacific.",
];

/// The indexes of `DOCS` most relevant first by the mock's scores.
fn order() -> Vec<usize> {
    let mut idx: Vec<usize> = (0..DOCS.len()).collect();
    idx.sort_by(|a, b| {
        mock_rerank_score(QUERY, DOCS[*b]).total_cmp(&mock_rerank_score(QUERY, DOCS[*a]))
    });
    idx
}

#[tokio::test]
async fn x3_to_cohere_in_cohere_v2_wire_format() {
    let (mock, gw) = start().await;
    // Strings and `{"text"}` objects; the gateway sends Cohere strings.
    let docs = json!([DOCS[0], {"text": DOCS[1]}, DOCS[2], {"text": DOCS[3]}]);
    let body = json!({"model": "cohere/rerank-v3.5", "query": QUERY, "documents": docs,
        "top_n": 2, "return_documents": true, "max_tokens_per_doc": 512});
    let r = gw
        .send(&rerank(KEY, &body).header("x-request-id", "rr-1"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("x-switchboard-adjusted").is_none());
    let v = r.json();
    let want = order();
    assert_eq!(want[0], 1, "the mock ranks the right answer first");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    for (r, i) in results.iter().zip(&want) {
        assert_eq!(r["index"], *i, "{v}");
        assert_eq!(r["document"]["text"], DOCS[*i], "{v}");
        let s = r["relevance_score"].as_f64().unwrap();
        assert!(
            (s - mock_rerank_score(QUERY, DOCS[*i])).abs() < 1e-12,
            "{v}"
        );
    }
    assert_eq!(v["id"], "mock-rerank-rerank-v3.5");
    assert_eq!(v["model"], "cohere/rerank-v3.5");
    assert_eq!(v["meta"]["billed_units"]["search_units"], 1, "{v}");
    // Cohere reports no tokens: the gateway counts the query per document
    // and the documents.
    let tokens = v["usage"]["total_tokens"].as_u64().unwrap();
    assert!(tokens > 20, "{v}");
    // What Cohere got, byte for byte, and the key as its Bearer.
    let up = mock.last_request().unwrap();
    assert_eq!(up.path, "/cohere/v2/rerank");
    assert_eq!(
        up.header("authorization"),
        Some(format!("Bearer {COHERE_KEY}").as_str())
    );
    let docs = serde_json::to_string(&DOCS).unwrap();
    assert_eq!(
        String::from_utf8(up.body.clone()).unwrap(),
        format!(
            r#"{{"model":"rerank-v3.5","query":"{QUERY}","documents":{docs},"top_n":2,"max_tokens_per_doc":512}}"#
        )
    );
    // Without top_n: every document, most relevant first, no documents echoed.
    let body = json!({"model": "rerank-v3.5", "query": QUERY, "documents": DOCS});
    let r = gw.send(&rerank(KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let got: Vec<u64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(got, order().iter().map(|i| *i as u64).collect::<Vec<_>>());
    assert!(v["results"][0].get("document").is_none(), "{v}");
    // The access log: the price per request, the tokens counted.
    let line = gw.access_line("rr-1").await;
    assert_eq!(line["path"], "/v1/rerank");
    assert_eq!(line["provider"], "cohere");
    assert_eq!(line["model"], "rerank-v3.5");
    // The wire family (a cloud's too); the upstream's id names the protocol.
    assert_eq!(line["upstream_protocol"], "openai", "{line}");
    assert!(
        line["tried"][0]["upstream"]
            .as_str()
            .unwrap()
            .starts_with("cohere@"),
        "{line}"
    );
    assert_eq!(line["status"], 200);
    assert_eq!(line["input_tokens"], tokens, "{line}");
    assert_eq!(line["output_tokens"], 0, "{line}");
    let cost = line["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.002).abs() < 1e-12, "{line}");
}

#[tokio::test]
async fn x3_to_an_openai_compatible_rerank() {
    let (mock, gw) = start().await;
    let body = json!({"model": "vllm/bge-reranker", "query": QUERY, "documents": DOCS,
        "top_n": 3, "max_tokens_per_doc": 64});
    let r = gw
        .send(&rerank(KEY, &body).header("x-request-id", "rr-v"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // vLLM has no max_tokens_per_doc: dropped, and said so.
    let adjusted = r.header("x-switchboard-adjusted").unwrap_or_default();
    assert!(adjusted.contains("max_tokens_per_doc"), "{adjusted}");
    let v = r.json();
    assert_eq!(v["results"].as_array().unwrap().len(), 3);
    assert_eq!(v["results"][0]["index"], order()[0]);
    assert!(v.get("meta").is_none(), "{v}");
    // The upstream's token count is the usage: the query's 5 words once
    // per document, and the documents' words.
    let words: u64 = DOCS
        .iter()
        .map(|d| d.split_whitespace().count() as u64)
        .sum();
    let tokens = 5 * 4 + words;
    assert_eq!(v["usage"]["total_tokens"], tokens, "{v}");
    let up = mock.last_request().unwrap();
    assert_eq!(up.path, "/openai/v1/rerank");
    let sent: Value = up.json().unwrap();
    assert_eq!(sent["model"], "BAAI/bge-reranker-v2-m3");
    assert!(sent.get("max_tokens_per_doc").is_none());
    let line = gw.access_line("rr-v").await;
    assert_eq!(line["input_tokens"], tokens, "{line}");
    let cost = line["cost_usd"].as_f64().unwrap();
    assert!((cost - tokens as f64 * 5e-8).abs() < 1e-12, "{line}");
}

#[tokio::test]
async fn bad_requests_are_400s_in_the_openai_shape() {
    let (mock, gw) = start().await;
    let many: Vec<String> = (0..1001).map(|i| format!("doc {i}")).collect();
    let m = "cohere/rerank-v3.5";
    let cases = [
        (
            json!({"model": m, "query": "", "documents": ["a"]}),
            "query",
        ),
        (json!({"model": m, "documents": ["a"]}), "query"),
        (
            json!({"model": m, "query": "q", "documents": []}),
            "documents",
        ),
        (json!({"model": m, "query": "q"}), "documents"),
        (
            json!({"model": m, "query": "q", "documents": ["a", 7]}),
            "documents[1]",
        ),
        (
            json!({"model": m, "query": "q", "documents": [{"title": "a"}]}),
            "documents[0]",
        ),
        (
            json!({"model": m, "query": "q", "documents": ["a"], "top_n": 0}),
            "top_n",
        ),
        (
            json!({"model": m, "query": "q", "documents": many}),
            "documents",
        ),
        (
            json!({"model": m, "query": "q", "documents": ["a"], "rank_fields": ["x"]}),
            "rank_fields",
        ),
        (json!({"query": "q", "documents": ["a"]}), "model"),
    ];
    for (body, param) in &cases {
        let r = gw.send(&rerank(KEY, body)).await;
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        let v = r.json();
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with(&format!("{param}:")), "{body}: {msg}");
    }
    let r = gw
        .send(&rerank(
            KEY,
            &json!({"model": m, "query": "q", "documents": many}),
        ))
        .await;
    assert!(r.text().contains("at most 1000"), "{}", r.text());
    // No key: 401 as on the other OpenAI routes.
    let r = gw
        .send(
            &Request::post("/v1/rerank")
                .json(&json!({"model": m, "query": "q", "documents": ["a"]})),
        )
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "invalid_api_key");
    assert!(mock.requests().is_empty(), "nothing went upstream");
}

#[tokio::test]
async fn the_action_check_both_ways() {
    let (mock, gw) = start().await;
    // A completion and an embedding asked of a rerank model.
    let chat =
        json!({"model": "cohere/rerank-v3.5", "messages": [{"role": "user", "content": "hi"}]});
    let m = gw
        .refused(&authed("openai", "/v1/chat/completions", KEY, &chat))
        .await;
    assert!(
        m.contains("complete") && m.contains("cohere/rerank-v3.5"),
        "{m}"
    );
    let embed = json!({"model": "cohere/rerank-v3.5", "input": "hi"});
    let m = gw
        .refused(&authed("openai", "/v1/embeddings", KEY, &embed))
        .await;
    assert!(m.contains("the embed action"), "{m}");
    // A rerank asked of a completion model.
    let body = json!({"model": "openai/gpt-5", "query": "q", "documents": ["a"]});
    let r = gw.send(&rerank(KEY, &body)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], "unsupported_action", "{v}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("the rerank action") && m.contains("openai/gpt-5"),
        "{m}"
    );
    assert!(mock.requests().is_empty(), "nothing went upstream");
}

#[tokio::test]
async fn failover_to_the_second_upstream_on_a_5xx() {
    let (mock, gw) = start().await;
    let body =
        json!({"model": "cohere-flaky/rerank-fo", "query": QUERY, "documents": DOCS, "top_n": 1});
    let r = gw
        .send(&rerank(KEY, &body).header("x-request-id", "rr-fo"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["results"][0]["index"], order()[0]);
    let paths: Vec<String> = mock.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths.last().unwrap(), "/cohere/v2/rerank", "{paths:?}");
    assert!(paths.iter().any(|p| p.contains("~status:503")), "{paths:?}");
    let line = gw.access_line("rr-fo").await;
    assert_eq!(line["attempts"], 2, "{line}");
    assert_eq!(line["tried"][0]["status"], 503, "{line}");
    assert_eq!(line["status"], 200);
}

#[tokio::test]
async fn a_refused_key_is_a_502_naming_the_provider_never_the_key() {
    let mock = MockUpstream::start().await;
    mock.expect_cohere_key("another-key");
    let env = [("SB_TEST_COHERE_KEY", COHERE_KEY)];
    let gw = Gateway::start_with_env(&rerank_catalog(&mock), &rerank_keys(), &[], &env).await;
    let body = json!({"model": "cohere/rerank-v3.5", "query": "q", "documents": ["a"]});
    let r = gw.send(&rerank(KEY, &body)).await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(r.text().contains("cohere"), "{}", r.text());
    assert!(!r.text().contains(COHERE_KEY));
    assert!(!gw.log().contains(COHERE_KEY));
}

#[tokio::test]
async fn the_ledger_and_a_budget_count_a_rerank() {
    let args = ["--admin-key", ADMIN, "--ledger-flush-ms", "50"];
    let (_mock, gw) = start_with(&args).await;
    let body = json!({"model": "cohere/rerank-v3.5", "query": QUERY, "documents": DOCS});
    let r = gw.send(&rerank(BUDGET_KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let total = eventually(Duration::from_secs(10), "the ledger row", || async {
        let r = http_client::send(
            gw.metrics,
            &Request::get("/admin/usage").header("authorization", &format!("Bearer {ADMIN}")),
        )
        .await
        .unwrap();
        let total = r.json()["total"].clone();
        (total["requests"] == 1).then_some(total)
    })
    .await;
    assert_eq!(total["output_tokens"], 0, "{total}");
    assert!(total["input_tokens"].as_u64().unwrap() > 20, "{total}");
    let cost = total["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.002).abs() < 1e-12, "{total}");
    // The cost metric counts it too.
    let cost = eventually(Duration::from_secs(10), "the cost metric", || async {
        let text = metrics_text(gw.metrics).await;
        metric_value(
            &text,
            "switchboard_cost_usd_total",
            &["model=\"rerank-v3.5\""],
        )
    })
    .await;
    assert!((cost - 0.002).abs() < 1e-12, "{cost}");
    // The budget (0.003 USD) held that request at 0.002; the next one's
    // worst case (0.002) is more than what is left.
    let r = gw.send(&rerank(BUDGET_KEY, &body)).await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.text().contains("budget"), "{}", r.text());
}

#[tokio::test]
async fn a_completion_skips_a_cohere_upstream_of_its_provider() {
    let (mock, gw) = start().await;
    let chat =
        json!({"model": "mixed/chat-mixed", "messages": [{"role": "user", "content": "hi"}]});
    let r = gw
        .send(
            &authed("openai", "/v1/chat/completions", KEY, &chat).header("x-request-id", "rr-mix"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let paths: Vec<String> = mock.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        ["/openai/v1/chat/completions"],
        "nothing went to Cohere"
    );
    let line = gw.access_line("rr-mix").await;
    assert_eq!(line["tried"][0]["failure"], "skipped", "{line}");
    assert_eq!(line["tried"][1]["status"], 200, "{line}");
}
