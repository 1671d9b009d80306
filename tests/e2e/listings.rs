//! End-to-end: every listing route, health, routing errors and request ids,
//! against the real binary on the shipped catalog and on a test catalog.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::gateway::{authed, catalog, keys, Gateway, KEY};
use crate::common::http_client::Request;
use crate::common::mock_upstream::MockUpstream;
use serde_json::Value;
use switchboard::proxy::route::ROUTES;

fn assert_openai_model(m: &Value) {
    for k in [
        "id",
        "object",
        "created",
        "owned_by",
        "description",
        "context_length",
        "architecture",
        "pricing",
        "top_provider",
        "supported_parameters",
        "supported_protocols",
        "aliases",
    ] {
        assert!(m.get(k).is_some(), "family A model lacks {k}: {m}");
    }
    assert_eq!(m["object"], "model");
    assert!(m["pricing"]["prompt"].is_string() && m["pricing"]["completion"].is_string());
    assert!(!m["id"].as_str().unwrap().contains('/'));
}

/// `YYYY-MM-DDTHH:MM:SSZ`, as Anthropic's `created_at`.
fn is_rfc3339_utc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

fn assert_anthropic_model(m: &Value) {
    // Anthropic's fields and ours, plus `aliases` when the model has any.
    let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
    let aliased = m.get("aliases").is_some();
    assert_eq!(keys.len(), 8 + usize::from(aliased), "{m}");
    if aliased {
        assert!(!m["aliases"].as_array().unwrap().is_empty(), "{m}");
    }
    assert!(m["id"].as_str().unwrap().starts_with("models/"));
    // what the official Anthropic SDK's ModelInfo reads
    assert_eq!(m["type"], "model");
    assert!(is_rfc3339_utc(m["created_at"].as_str().unwrap()), "{m}");
    for k in [
        "display_name",
        "description",
        "context_window_size",
        "supported_actions",
    ] {
        assert!(m.get(k).is_some(), "family B model lacks {k}");
    }
    for f in ["vision", "tool_use", "streaming"] {
        assert!(m["supported_features"][f].is_boolean());
    }
}

/// Family B lists: `models`, and Anthropic's page fields over the same objects.
fn assert_anthropic_page(page: &Value) {
    let models = page["models"].as_array().unwrap();
    assert_eq!(page["data"], page["models"], "{page}");
    assert_eq!(page["has_more"], false);
    match (models.first(), models.last()) {
        (Some(first), Some(last)) => {
            assert_eq!(page["first_id"], first["id"]);
            assert_eq!(page["last_id"], last["id"]);
        }
        _ => assert!(page["first_id"].is_null() && page["last_id"].is_null()),
    }
}

fn assert_gemini_model(m: &Value) {
    assert!(m["name"].as_str().unwrap().starts_with("models/"));
    for k in [
        "version",
        "displayName",
        "description",
        "inputTokenLimit",
        "outputTokenLimit",
        "supportedGenerationMethods",
        "temperature",
        "topP",
        "topK",
    ] {
        assert!(m.get(k).is_some(), "family C model lacks {k}: {m}");
    }
}

#[tokio::test]
async fn shipped_catalog_serves_every_listing() {
    let gw = Gateway::start_with(
        &serde_json::from_str(&std::fs::read_to_string("conf/catalog.json").unwrap()).unwrap(),
        &serde_json::from_str(&std::fs::read_to_string("conf/keys.json").unwrap()).unwrap(),
        &[],
    )
    .await;
    let all = gw.get("/v1/models").await;
    assert_eq!(all.status, 200);
    assert_eq!(all.header("content-type"), Some("application/json"));
    let all = all.json();
    assert_eq!(all["object"], "list");
    let data = all["data"].as_array().unwrap();
    for id in [
        "gemini-3.1-flash-lite-preview",
        "gemini-3.1-flash",
        "gemini-3.1-pro",
        "gemini-3.0-flash",
        "gemini-2.0-flash",
        "gemini-2.0-flash-exp",
        "claude-sonnet-4.7",
        "deepseek-v4-pro",
        "deepseek-v4-flash",
        "qwen-3.6",
        "minimax-M2.7",
        "kimi-2.6",
    ] {
        assert!(data.iter().any(|m| m["id"] == id), "{id} missing from E1");
    }
    data.iter().for_each(assert_openai_model);
    for p in [
        "openai",
        "anthropic",
        "google",
        "deepseek",
        "qwen",
        "moonshotai",
    ] {
        let r = gw.get(&format!("/v1/models/{p}")).await.json();
        let items = r["data"].as_array().unwrap();
        assert!(!items.is_empty(), "{p}");
        assert!(items.iter().all(|m| m["owned_by"] == p));
    }
    let b = gw.get("/anthropic/v1/models").await.json();
    assert_anthropic_page(&b);
    b["models"]
        .as_array()
        .unwrap()
        .iter()
        .for_each(assert_anthropic_model);
    assert_eq!(
        gw.get("/anthropic/v1/models/anthropic").await.json()["models"][0]["id"],
        "models/claude-sonnet-4.7"
    );
    assert_eq!(gw.get("/anthropic/v1/models/deepseek").await.status, 404);
    // The shipped aliases: Anthropic's dashed id names the canonical model.
    let sonnet = gw.get("/v1/models/claude-sonnet-4-7").await.json();
    assert_eq!(sonnet["id"], "claude-sonnet-4.7");
    assert_eq!(sonnet["aliases"], serde_json::json!(["claude-sonnet-4-7"]));
    assert_eq!(
        gw.get("/google/v1beta/models/gemini-pro-latest")
            .await
            .json()["name"],
        "models/gemini-3.1-pro"
    );
    let c = gw.get("/google/v1beta/models").await.json();
    let names: Vec<&str> = c["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"models/gemini-3.1-pro") && names.contains(&"models/kimi-2.6"));
    assert!(
        !names.contains(&"models/claude-sonnet-4.7"),
        "anthropic does not accept family C"
    );
    c["models"]
        .as_array()
        .unwrap()
        .iter()
        .for_each(assert_gemini_model);
    for p in ["google", "deepseek", "qwen", "moonshotai"] {
        assert_eq!(
            gw.get(&format!("/google/v1beta/models/{p}")).await.status,
            200,
            "{p}"
        );
    }
    assert_eq!(gw.get("/google/v1beta/models/openai").await.status, 404);
    let one = gw
        .get("/google/v1beta/models/qwen/minimax-M2.7")
        .await
        .json();
    assert_eq!(one["name"], "models/minimax-M2.7");
    let g = gw
        .get("/google/v1beta/models/google/gemini-3.1-pro")
        .await
        .json();
    assert_eq!(
        g["inputTokenLimit"].as_u64().unwrap() + g["outputTokenLimit"].as_u64().unwrap(),
        gw.get("/v1/models/google/gemini-3.1-pro").await.json()["context_length"]
            .as_u64()
            .unwrap()
    );
}

#[tokio::test]
async fn every_route_of_the_table_answers() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    for (id, method, pattern) in ROUTES {
        let (provider, model) = if pattern.starts_with("/anthropic") {
            ("anthropic", "claude-sonnet-4.7")
        } else {
            ("google", "gemini-3.1-pro")
        };
        let path = pattern
            .replace("{provider}", provider)
            .replace("{model_id}", model);
        let r = gw
            .send(&Request::new(method, &path).body(b"{}".to_vec()))
            .await;
        assert!(
            r.header("x-request-id").is_some(),
            "{id} lacks x-request-id"
        );
        if *method == "GET" && *id != "D3" {
            assert_eq!(r.status, 200, "{id} {path}: {}", r.text());
            assert!(r.json().is_object(), "{id} {path}");
        } else if *method == "HEAD" {
            assert_eq!(r.status, 200, "{id} {path}");
            assert!(r.body.is_empty(), "{id}: HEAD with a body");
        } else {
            // inference routes (and D3) without a key: 401 in the family's shape
            assert_eq!(r.status, 401, "{id} {path}");
            let v = r.json();
            if path.starts_with("/anthropic") {
                assert_eq!(v["type"], "error");
                assert_eq!(v["error"]["type"], "authentication_error");
            } else if path.starts_with("/bedrock") {
                assert!(v["message"].is_string(), "{id}: {v}");
                assert_eq!(
                    r.header("x-amzn-errortype"),
                    Some("AccessDeniedException"),
                    "{id}"
                );
            } else if path.starts_with("/google") {
                assert_eq!(v["error"]["status"], "UNAUTHENTICATED");
                assert_eq!(v["error"]["code"], 401);
            } else {
                assert!(v["error"]["message"].is_string());
                assert_eq!(v["error"]["code"], "invalid_api_key");
            }
        }
    }
}

#[tokio::test]
async fn listing_shapes_and_lookups() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let e3 = gw
        .get("/v1/models/anthropic/claude-sonnet-4.7")
        .await
        .json();
    assert_openai_model(&e3);
    assert_eq!(e3["id"], "claude-sonnet-4.7");
    assert_eq!(e3["owned_by"], "anthropic");
    assert_eq!(
        e3["supported_protocols"],
        serde_json::json!(["openai", "anthropic"])
    );
    // the OpenAI SDK's models.retrieve(id)
    let by_id = gw.get("/v1/models/claude-sonnet-4.7").await.json();
    assert_eq!(by_id, e3);
    // E5 lists only models speaking anthropic
    let e5 = gw.get("/anthropic/v1/models").await.json();
    let ids: Vec<&str> = e5["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"models/claude-sonnet-4.7") && ids.contains(&"models/deepseek-v4-pro"));
    assert!(!ids.contains(&"models/gpt-5"));
    assert_anthropic_page(&e5);
    assert_eq!(e5["first_id"], "models/claude-sonnet-4.7");
    let e6 = gw.get("/anthropic/v1/models/anthropic").await.json();
    assert_anthropic_page(&e6);
    assert_eq!(
        e6["last_id"],
        e6["models"][e6["models"].as_array().unwrap().len() - 1]["id"]
    );
    let e7 = gw
        .get("/anthropic/v1/models/anthropic/claude-sonnet-4.7")
        .await
        .json();
    assert_anthropic_model(&e7);
    assert_eq!(e7["context_window_size"], 200000);
    // the test catalog's `created` 1767225600
    assert_eq!(e7["created_at"], "2026-01-01T00:00:00Z");
    // catalog order is listing order
    let e1 = gw.get("/v1/models").await.json();
    let order: Vec<&str> = e1["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        &order[..3],
        &["gpt-5", "claude-sonnet-4.7", "gemini-3.1-pro"]
    );
    // a trailing slash is tolerated, query strings ignored
    assert_eq!(gw.get("/v1/models/?x=1").await.json(), e1);
}

#[tokio::test]
async fn routing_errors_in_each_family_shape() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let cases: &[(&str, &str, u16, &str)] = &[
        ("GET", "/v1/models/nope", 404, "openai"),
        ("GET", "/v1/models/openai/nope", 404, "openai"),
        ("GET", "/v1/models/anthropic/gpt-5", 404, "openai"),
        ("POST", "/v1/models", 405, "openai"),
        ("GET", "/v1/chat/completions", 405, "openai"),
        ("GET", "/v1/nothing", 404, "openai"),
        ("GET", "/", 404, "openai"),
        ("GET", "/anthropic/v1/models/google", 404, "anthropic"),
        (
            "GET",
            "/anthropic/v1/models/anthropic/gpt-5",
            404,
            "anthropic",
        ),
        ("GET", "/anthropic/v1/messages", 405, "anthropic"),
        ("DELETE", "/anthropic/v1/models", 405, "anthropic"),
        ("GET", "/anthropic/v2/x", 404, "anthropic"),
        ("GET", "/google/v1beta/models/openai", 404, "gemini"),
        ("GET", "/google/v1beta/models/google/nope", 404, "gemini"),
        (
            "GET",
            "/google/v1beta/models/google/gemini-3.1-pro:generateContent",
            405,
            "gemini",
        ),
        (
            "POST",
            "/google/v1beta/models/google/gemini-3.1-pro:predict",
            404,
            "gemini",
        ),
        ("PUT", "/google/v1beta/models", 405, "gemini"),
        ("POST", "/anthropic", 405, "anthropic"),
        ("DELETE", "/v1", 405, "openai"),
        ("POST", "/google", 405, "gemini"),
        ("GET", "/google/v1", 404, "gemini"),
        (
            "GET",
            "/google/v1beta/deepseek/deepseek-v4-pro:generateContent",
            405,
            "gemini",
        ),
        (
            "POST",
            "/google/v1beta/deepseek/deepseek-v4-pro:predict",
            404,
            "gemini",
        ),
    ];
    for (method, path, status, family) in cases {
        let r = gw.send(&Request::new(method, path)).await;
        assert_eq!(r.status, *status, "{method} {path}: {}", r.text());
        let v = r.json();
        match *family {
            "anthropic" => {
                assert_eq!(v["type"], "error", "{path}");
                let t = if *status == 404 {
                    "not_found_error"
                } else {
                    "invalid_request_error"
                };
                assert_eq!(v["error"]["type"], t, "{path}");
            }
            "gemini" => {
                assert_eq!(v["error"]["code"], *status, "{path}");
                assert!(v["error"]["status"].is_string());
            }
            _ => {
                assert_eq!(v["error"]["type"], "invalid_request_error", "{path}");
                assert!(v["error"].get("param").is_some());
            }
        }
        if *status == 405 {
            assert!(r.header("allow").is_some(), "{path} 405 without allow");
        }
    }
}

#[tokio::test]
async fn request_ids_and_public_routes_ignore_keys() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let a = gw.get("/v1/models").await;
    let b = gw.get("/v1/models").await;
    assert_ne!(a.header("x-request-id"), b.header("x-request-id"));
    let mine = gw
        .send(&Request::get("/v1/models").header("x-request-id", "my-trace-42"))
        .await;
    assert_eq!(mine.header("x-request-id"), Some("my-trace-42"));
    for (h, v) in [
        ("authorization", "Bearer wrong"),
        ("x-api-key", "wrong"),
        ("x-goog-api-key", "wrong"),
    ] {
        let r = gw
            .send(&Request::get("/google/v1beta/models").header(h, v))
            .await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(gw.get("/google/v1beta/models?key=wrong").await.status, 200);
    let ready = gw.get("/readyz").await.json();
    assert_eq!(ready["status"], "ready");
    let _ = (KEY, keys(), catalog(&mock));
}

#[tokio::test]
async fn family_roots_answer_probes() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    for (path, family) in [
        ("/v1", "openai"),
        ("/v1/", "openai"),
        ("/anthropic", "anthropic"),
        ("/anthropic/", "anthropic"),
        ("/anthropic/v1", "anthropic"),
        ("/google", "gemini"),
        ("/google/v1beta/", "gemini"),
    ] {
        let r = gw.get(path).await;
        assert_eq!(r.status, 200, "GET {path}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.json()["family"], family, "{path}");
        // Claude Code's first request: `HEAD /anthropic`, with its key, which is ignored.
        let h = gw
            .send(
                &Request::new("HEAD", path)
                    .header("x-api-key", "not-a-key")
                    .header("authorization", "Bearer not-a-key"),
            )
            .await;
        assert_eq!(h.status, 200, "HEAD {path}");
        assert!(h.body.is_empty());
        assert!(h.header("x-request-id").is_some());
    }
}

#[tokio::test]
async fn gemini_alias_without_models_segment() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let body = serde_json::json!({"contents": [{"role": "user", "parts": [{"text": "hello"}]}]});
    let gen = |path: &str| authed("gemini", path, KEY, &body);
    // the Vercel AI SDK's form for an id with a slash, here C -> an OpenAI upstream
    let alias = gw
        .send(&gen(
            "/google/v1beta/deepseek/deepseek-v4-pro:generateContent",
        ))
        .await;
    assert_eq!(alias.status, 200, "{}", alias.text());
    let canonical = gw
        .send(&gen(
            "/google/v1beta/models/deepseek/deepseek-v4-pro:generateContent",
        ))
        .await;
    assert_eq!(canonical.status, 200);
    let text = |v: &Value| v["candidates"][0]["content"]["parts"][0]["text"].clone();
    assert_eq!(text(&alias.json()), text(&canonical.json()));
    assert_eq!(alias.json()["modelVersion"], "deepseek-v4-pro");
    // streaming, both framings
    let sse = gw
        .send(&gen(
            "/google/v1beta/google/gemini-3.1-pro:streamGenerateContent?alt=sse",
        ))
        .await;
    assert_eq!(sse.status, 200, "{}", sse.text());
    assert!(sse
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert!(!sse.sse().is_empty());
    let arr = gw
        .send(&gen(
            "/google/v1beta/google/gemini-3.1-pro:streamGenerateContent",
        ))
        .await;
    assert_eq!(arr.status, 200);
    assert!(arr.json().is_array());
    // countTokens, answered locally
    let n = gw
        .send(&gen("/google/v1beta/google/gemini-3.1-pro:countTokens"))
        .await;
    assert_eq!(n.status, 200, "{}", n.text());
    assert!(n.json()["totalTokens"].as_u64().unwrap() > 0);
    // the provider rule of family C paths still holds: `openai` does not accept family C
    let r = gw
        .send(&gen("/google/v1beta/openai/gpt-5:generateContent"))
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.json()["error"]["status"], "NOT_FOUND");
    // unknown model under the alias
    let r = gw
        .send(&gen("/google/v1beta/google/nope:generateContent"))
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn inference_requires_a_json_content_type() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let cases = [
        (
            "anthropic",
            "/anthropic/v1/messages",
            serde_json::json!({"model": "claude-sonnet-4.7", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "anthropic",
            "/anthropic/v1/messages/count_tokens",
            serde_json::json!({"model": "claude-sonnet-4.7",
                "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "openai",
            "/v1/chat/completions",
            serde_json::json!({"model": "openai/gpt-5",
                "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "gemini",
            "/google/v1beta/models/google/gemini-3.1-pro:generateContent",
            serde_json::json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        ),
    ];
    // the request with its content type replaced (`None`: without one)
    let with_type = |family: &str, path: &str, body: &Value, ct: Option<&str>| {
        let mut req = authed(family, path, KEY, body);
        req.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
        match ct {
            Some(ct) => req.header("content-type", ct),
            None => req,
        }
    };
    for (family, path, body) in &cases {
        for ct in [
            "application/x-www-form-urlencoded",
            "text/plain",
            "multipart/form-data; boundary=x",
        ] {
            let r = gw.send(&with_type(family, path, body, Some(ct))).await;
            assert_eq!(r.status, 400, "{path} {ct}: {}", r.text());
            let v = r.json();
            match *family {
                "anthropic" => {
                    assert_eq!(v["type"], "error");
                    assert_eq!(v["error"]["type"], "invalid_request_error");
                    assert!(v["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("content-type"));
                }
                "gemini" => assert_eq!(v["error"]["status"], "INVALID_ARGUMENT"),
                _ => assert_eq!(v["error"]["param"], "content-type"),
            }
        }
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "APPLICATION/JSON;charset=UTF-8",
        ] {
            let r = gw.send(&with_type(family, path, body, Some(ct))).await;
            assert_eq!(r.status, 200, "{path} {ct}: {}", r.text());
        }
        // no content-type at all: read as JSON
        let r = gw.send(&with_type(family, path, body, None)).await;
        assert_eq!(r.status, 200, "{path} without content-type");
    }
    // a missing key is still a 401, whatever the content type
    let r = gw
        .send(
            &Request::post("/anthropic/v1/messages")
                .header("content-type", "text/plain")
                .header("anthropic-version", "2023-06-01")
                .body(b"{}".to_vec()),
        )
        .await;
    assert_eq!(r.status, 401);
}
