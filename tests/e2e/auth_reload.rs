//! End-to-end: client keys on inference routes (per family), rate limits and
//! model permissions; hot reload of the catalog and keys (file change and
//! SIGHUP), refusing invalid configuration; `--check`; Prometheus metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{authed, catalog, keys, Gateway, TempDir, KEY, LIMITED_KEY, RPM_KEY};
use crate::common::http_client::Request;
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

use Protocol::{Anthropic, Gemini, OpenAi, Responses};

fn chat(model: &str) -> Value {
    openai_body(model, "hi", None, false)
}

#[tokio::test]
async fn missing_or_invalid_keys_are_401_in_each_family() {
    let (mock, gw) = start().await;
    let g = gemini_path("google/gemini-3.1-pro", GeminiMode::Whole);
    let cases: Vec<(Protocol, Request)> = vec![
        (OpenAi, Request::post(CHAT).json(&chat("gpt-5"))),
        (OpenAi, authed("openai", CHAT, "sk-wrong", &chat("gpt-5"))),
        (
            OpenAi,
            Request::post(CHAT)
                .json(&chat("gpt-5"))
                .header("authorization", KEY),
        ),
        (
            OpenAi,
            Request::post(CHAT)
                .json(&chat("gpt-5"))
                .header("x-api-key", KEY),
        ),
        (
            OpenAi,
            Request::post(CHAT)
                .json(&chat("gpt-5"))
                .header("authorization", "Bearer "),
        ),
        (
            Anthropic,
            Request::post(MESSAGES)
                .json(&anthropic_body("claude-sonnet-4.7", "hi", None, false))
                .header("anthropic-version", "2023-06-01"),
        ),
        (
            Anthropic,
            authed(
                "anthropic",
                MESSAGES,
                "sk-wrong",
                &anthropic_body("claude-sonnet-4.7", "hi", None, false),
            ),
        ),
        (Gemini, Request::post(&g).json(&gemini_body("hi", None))),
        (
            Gemini,
            authed("gemini", &g, "sk-wrong", &gemini_body("hi", None)),
        ),
        (
            Gemini,
            Request::post(&format!("{g}?key=sk-wrong")).json(&gemini_body("hi", None)),
        ),
        (
            Gemini,
            Request::post(&g)
                .json(&gemini_body("hi", None))
                .header("authorization", &format!("Bearer {KEY}")),
        ),
    ];
    for (p, req) in &cases {
        let e = assert_error(*p, &gw.send(req).await, 401);
        match p {
            OpenAi | Responses => assert_eq!(e["code"], "invalid_api_key"),
            Anthropic => assert_eq!(e["type"], "authentication_error"),
            Gemini => assert_eq!(e["status"], "UNAUTHENTICATED"),
        }
        assert!(
            !e["message"].as_str().unwrap().contains("sk-wrong"),
            "the key is echoed: {e}"
        );
    }
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn every_way_of_presenting_a_good_key_works() {
    let (mock, gw) = start().await;
    let ok = |r: &crate::common::http_client::Response| assert_eq!(r.status, 200, "{}", r.text());
    let b = anthropic_body("claude-sonnet-4.7", "hi", None, false);
    let g = gemini_path("google/gemini-3.1-pro", GeminiMode::Whole);
    ok(&gw.send(&authed("openai", CHAT, KEY, &chat("gpt-5"))).await);
    ok(&gw
        .send(
            &Request::post(CHAT)
                .json(&chat("gpt-5"))
                .header("authorization", &format!("bearer {KEY}")),
        )
        .await);
    ok(&gw.send(&authed("anthropic", MESSAGES, KEY, &b)).await);
    ok(&gw
        .send(
            &Request::post(MESSAGES)
                .json(&b)
                .header("authorization", &format!("Bearer {KEY}"))
                .header("anthropic-version", "2023-06-01"),
        )
        .await);
    ok(&gw
        .send(&authed("gemini", &g, KEY, &gemini_body("hi", None)))
        .await);
    ok(&gw
        .send(&Request::post(&format!("{g}?key={KEY}")).json(&gemini_body("hi", None)))
        .await);
    ok(&gw
        .send(
            &Request::post(&format!(
                "{}&key={KEY}",
                gemini_path("gemini-3.1-pro", GeminiMode::StreamSse)
            ))
            .json(&gemini_body("hi", None)),
        )
        .await);
    // The key stored only as a sha256 digest ("test").
    ok(&gw
        .send(&authed("openai", CHAT, "test", &chat("gpt-5")))
        .await);
    ok(&gw.send(&authed("anthropic", MESSAGES, "test", &b)).await);
    ok(&gw
        .send(&authed("gemini", &g, "test", &gemini_body("hi", None)))
        .await);
    assert_eq!(mock.requests().len(), 10);
    for r in mock.requests() {
        assert_no_client_secrets(&r);
        assert!(
            !r.headers
                .iter()
                .any(|(_, v)| v == "test" || v.ends_with(" test")),
            "{:?}",
            r.headers
        );
    }
}

#[tokio::test]
async fn limited_keys_get_403_outside_their_models() {
    let (mock, gw) = start().await;
    let r = gw
        .send(&authed("openai", CHAT, LIMITED_KEY, &chat("openai/gpt-5")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let e = assert_error(
        OpenAi,
        &gw.send(&authed(
            "openai",
            CHAT,
            LIMITED_KEY,
            &chat("anthropic/claude-sonnet-4.7"),
        ))
        .await,
        403,
    );
    assert_eq!(e["type"], "permission_error");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("anthropic/claude-sonnet-4.7"),
        "{e}"
    );
    let e = assert_error(
        Anthropic,
        &gw.send(&authed(
            "anthropic",
            MESSAGES,
            LIMITED_KEY,
            &anthropic_body("claude-sonnet-4.7", "hi", None, true),
        ))
        .await,
        403,
    );
    assert_eq!(e["type"], "permission_error");
    let e = assert_error(
        Anthropic,
        &gw.send(&authed(
            "anthropic",
            COUNT,
            LIMITED_KEY,
            &json!({"model": "claude-sonnet-4.7", "messages": [{"role": "user", "content": "hi"}]}),
        ))
        .await,
        403,
    );
    assert_eq!(e["type"], "permission_error");
    for mode in [
        GeminiMode::Whole,
        GeminiMode::StreamSse,
        GeminiMode::JsonArray,
    ] {
        let path = gemini_path("gemini-3.1-pro", mode);
        let e = assert_error(
            Gemini,
            &gw.send(&authed(
                "gemini",
                &path,
                LIMITED_KEY,
                &gemini_body("hi", None),
            ))
            .await,
            403,
        );
        assert_eq!(e["status"], "PERMISSION_DENIED");
    }
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn rate_limited_keys_get_429_with_retry_after() {
    let (mock, gw) = start().await;
    // A sliding minute: the two requests below count for 60 to 61 seconds
    // (e2e module limits checks the window slides).
    for _ in 0..2 {
        let r = gw
            .send(&authed("openai", CHAT, RPM_KEY, &chat("gpt-5")))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    for (p, req) in [
        (OpenAi, authed("openai", CHAT, RPM_KEY, &chat("gpt-5"))),
        (
            Anthropic,
            authed(
                "anthropic",
                MESSAGES,
                RPM_KEY,
                &anthropic_body("claude-sonnet-4.7", "hi", None, false),
            ),
        ),
        (
            Gemini,
            authed(
                "gemini",
                &gemini_path("gemini-3.1-pro", GeminiMode::Whole),
                RPM_KEY,
                &gemini_body("hi", None),
            ),
        ),
    ] {
        let r = gw.send(&req).await;
        let e = assert_error(p, &r, 429);
        let wait: u64 = r
            .header("retry-after")
            .expect("retry-after")
            .parse()
            .unwrap();
        assert!((1..=61).contains(&wait), "{wait}");
        match p {
            OpenAi | Responses => assert_eq!(e["type"], "rate_limit_error"),
            Anthropic => assert_eq!(e["type"], "rate_limit_error"),
            Gemini => assert_eq!(e["status"], "RESOURCE_EXHAUSTED"),
        }
    }
    assert_eq!(mock.requests().len(), 2);
    // Other keys are not affected.
    assert_eq!(
        gw.send(&authed("openai", CHAT, KEY, &chat("gpt-5")))
            .await
            .status,
        200
    );
}

fn e1_ids(v: &Value) -> Vec<String> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

fn with_model(mock: &MockUpstream, id: &str) -> Value {
    let mut c = catalog(mock);
    let mut m = c["models"][0].clone();
    m["id"] = json!(id);
    m["display_name"] = json!(format!("Added {id}"));
    c["models"].as_array_mut().unwrap().push(m);
    c
}

async fn has_model(gw: &Gateway, id: &str) -> bool {
    e1_ids(&gw.get("/v1/models").await.json())
        .iter()
        .any(|m| m == id)
}

#[tokio::test]
async fn catalog_changes_are_picked_up_and_invalid_ones_refused() {
    let (mock, gw) = start().await;
    assert!(!has_model(&gw, "gpt-5-added").await);
    gw.write_catalog(&with_model(&mock, "gpt-5-added"));
    eventually(Duration::from_secs(5), "the added model in E1", || async {
        has_model(&gw, "gpt-5-added").await.then_some(())
    })
    .await;
    // The new model serves inference too.
    let r = gw
        .send(&call(
            OpenAi,
            CHAT,
            &openai_body("openai/gpt-5-added", "new one", None, false),
        ))
        .await;
    assert_eq!(
        reply_text(OpenAi, &r.json()),
        expected_reply(OpenAi, "new one")
    );
    assert_eq!(r.json()["model"], "openai/gpt-5-added");

    // An invalid edit: the previous catalog keeps serving, the log says where.
    let mut bad = with_model(&mock, "gpt-5-broken");
    bad["models"][2]["provider"] = json!("no-such-provider");
    gw.write_catalog(&bad);
    let path = gw.dir.file("catalog.json").display().to_string();
    eventually(
        Duration::from_secs(5),
        "the reload failure in the log",
        || async {
            let log = gw.log();
            (log.contains("reload failed")
                && log.contains(&path)
                && log.contains("$.models[2].provider"))
            .then_some(())
        },
    )
    .await;
    assert!(has_model(&gw, "gpt-5-added").await);
    assert!(!has_model(&gw, "gpt-5-broken").await);
    let text = metrics_text(gw.metrics).await;
    assert!(
        metric_value(&text, "switchboard_catalog_reload_failures_total", &[]).unwrap() >= 1.0,
        "{text}"
    );
    assert_eq!(
        gw.send(&call(
            OpenAi,
            CHAT,
            &openai_body("gpt-5", "still", None, false)
        ))
        .await
        .status,
        200
    );
    // Not JSON at all: also refused.
    crate::common::gateway::write_atomically(&gw.dir.file("catalog.json"), b"{\"providers\": [");
    eventually(
        Duration::from_secs(5),
        "the second reload failure",
        || async {
            let text = metrics_text(gw.metrics).await;
            (metric_value(&text, "switchboard_catalog_reload_failures_total", &[]).unwrap() >= 2.0)
                .then_some(())
        },
    )
    .await;
    assert!(has_model(&gw, "gpt-5-added").await);
    // Fixed again: picked up.
    gw.write_catalog(&with_model(&mock, "gpt-5-fixed"));
    eventually(Duration::from_secs(5), "the fixed catalog", || async {
        has_model(&gw, "gpt-5-fixed").await.then_some(())
    })
    .await;
    assert!(!has_model(&gw, "gpt-5-added").await);
}

#[tokio::test]
async fn sighup_reloads_even_when_the_file_looks_unchanged() {
    let (_mock, gw) = start().await;
    let file = gw.dir.file("catalog.json");
    let e7 = "/anthropic/v1/models/anthropic/claude-sonnet-4.7";
    assert_eq!(
        gw.get(e7).await.json()["display_name"],
        "Test claude-sonnet-4.7"
    );
    // Same length and same mtime: the poller cannot tell; only SIGHUP reloads it.
    let before = std::fs::metadata(&file).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replace("\"Test claude-sonnet-4.7\"", "\"Test claude-sonnet-4.X\"");
    assert_ne!(text, edited);
    assert_eq!(text.len(), edited.len());
    let handle = std::fs::File::options()
        .write(true)
        .truncate(true)
        .open(&file)
        .unwrap();
    std::io::Write::write_all(&mut &handle, edited.as_bytes()).unwrap();
    handle.set_modified(before.modified().unwrap()).unwrap();
    drop(handle);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        gw.get(e7).await.json()["display_name"],
        "Test claude-sonnet-4.7",
        "reloaded without a signal"
    );
    let sighups = |gw: &Gateway| gw.log().matches("configuration reloaded (SIGHUP)").count();
    assert_eq!(sighups(&gw), 0);
    gw.signal("HUP");
    eventually(Duration::from_secs(5), "the SIGHUP reload", || async {
        let changed = gw.get(e7).await.json()["display_name"] == "Test claude-sonnet-4.X";
        (changed && sighups(&gw) == 1).then_some(())
    })
    .await;
    assert!(!gw.log().contains("(file changed)"), "{}", gw.log());
    let text = metrics_text(gw.metrics).await;
    assert_eq!(
        metric_value(&text, "switchboard_catalog_reloads_total", &[]),
        Some(1.0),
        "{text}"
    );
    // The process is alive and serving after the signal.
    assert_eq!(
        gw.send(&call(OpenAi, CHAT, &chat("gpt-5"))).await.status,
        200
    );
}

#[tokio::test]
async fn keys_file_changes_are_picked_up() {
    let (_mock, gw) = start().await;
    let fresh = "sk-fresh-key";
    let e = assert_error(
        OpenAi,
        &gw.send(&authed("openai", CHAT, fresh, &chat("gpt-5")))
            .await,
        401,
    );
    assert_eq!(e["code"], "invalid_api_key");
    let mut k = keys();
    k["keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "fresh", "key": fresh}));
    gw.write_keys(&k);
    eventually(Duration::from_secs(5), "the new key to work", || async {
        (gw.send(&authed("openai", CHAT, fresh, &chat("gpt-5")))
            .await
            .status
            == 200)
            .then_some(())
    })
    .await;
    // Removing a key revokes it.
    let mut k = keys();
    k["keys"]
        .as_array_mut()
        .unwrap()
        .retain(|x| x["id"] != "test");
    k["keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "fresh", "key": fresh}));
    gw.write_keys(&k);
    eventually(
        Duration::from_secs(5),
        "the removed key to fail",
        || async {
            (gw.send(&authed("openai", CHAT, KEY, &chat("gpt-5")))
                .await
                .status
                == 401)
                .then_some(())
        },
    )
    .await;
    // An invalid keys file keeps the previous keys.
    gw.write_keys(&json!({"keys": [{"id": "broken"}]}));
    eventually(
        Duration::from_secs(5),
        "the keys reload failure",
        || async {
            (gw.log().contains("keys.json") && gw.log().contains("$.keys[0]")).then_some(())
        },
    )
    .await;
    assert_eq!(
        gw.send(&authed("openai", CHAT, fresh, &chat("gpt-5")))
            .await
            .status,
        200
    );
}

#[test]
fn an_invalid_catalog_stops_startup_with_file_and_path() {
    let dir = TempDir::new();
    let mock_like = json!({
        "providers": [{"id": "p", "families": ["openai"], "upstreams": [{"protocol": "openai", "base_url": "http://127.0.0.1:9/v1"}]}],
        "models": [{"id": "m", "provider": "p", "display_name": "M", "description": "d", "created": 1, "version": "1",
                    "architecture": "decoder", "context_length": 100, "max_output_tokens": 10,
                    "pricing": {"prompt": "abc", "completion": "0"},
                    "supported_parameters": [], "supported_features": {"vision": false, "tool_use": false, "streaming": true},
                    "supported_actions": ["complete"], "supported_generation_methods": ["generateContent"],
                    "defaults": {"temperature": 1.0, "top_p": 1.0, "top_k": 1}, "protocols": ["openai"]}]
    });
    std::fs::write(
        dir.file("catalog.json"),
        serde_json::to_vec_pretty(&mock_like).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.file("keys.json"), serde_json::to_vec(&keys()).unwrap()).unwrap();
    let port = crate::common::gateway::free_port();
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--catalog")
        .arg(dir.file("catalog.json"))
        .arg("--keys")
        .arg(dir.file("keys.json"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--metrics")
        .arg(format!("127.0.0.1:{}", crate::common::gateway::free_port()))
        .output()
        .unwrap();
    assert!(!out.status.success(), "started on an invalid catalog");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&dir.file("catalog.json").display().to_string()),
        "{err}"
    );
    assert!(err.contains("$.models[0].pricing.prompt"), "{err}");
    // --check on the same files fails the same way.
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--check")
        .arg("--catalog")
        .arg(dir.file("catalog.json"))
        .arg("--keys")
        .arg(dir.file("keys.json"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("$.models[0].pricing.prompt"));
}

#[test]
fn check_accepts_the_shipped_configuration() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "--check",
            "--catalog",
            "conf/catalog.json",
            "--keys",
            "conf/keys.json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("ok"), "{text}");
    assert!(
        text.contains("providers") && text.contains("models"),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_count_requests_tokens_and_cost() {
    let (_mock, gw) = start().await;
    for _ in 0..2 {
        assert_eq!(
            gw.send(&call(
                OpenAi,
                CHAT,
                &openai_body("openai/gpt-5", "count me", None, false)
            ))
            .await
            .status,
            200
        );
    }
    assert_eq!(
        gw.send(&call(
            Anthropic,
            MESSAGES,
            &anthropic_body("claude-sonnet-4.7", "count me", None, true)
        ))
        .await
        .status,
        200
    );
    let path = gemini_path("google/gemini-3.1-pro", GeminiMode::StreamSse);
    assert_eq!(
        gw.send(&call(Gemini, &path, &gemini_body("count me", None)))
            .await
            .status,
        200
    );
    assert_eq!(
        gw.send(&call(
            OpenAi,
            CHAT,
            &openai_body("openai/gpt-5", "[[status:500]]", None, false)
        ))
        .await
        .status,
        500
    );
    let mut hot = openai_body("openai/gpt-5", "hi", None, false);
    hot["temperature"] = json!(2.5);
    assert_eq!(gw.send(&call(OpenAi, CHAT, &hot)).await.status, 400);
    // Metrics are recorded in the logging phase, just after the response.
    let text = eventually(Duration::from_secs(3), "the request series", || async {
        let text = metrics_text(gw.metrics).await;
        let n = metric_value(&text, "switchboard_requests_total", &["model=\"gpt-5\""]);
        (n == Some(4.0)).then_some(text)
    })
    .await;
    let labels = |family: &str, provider: &str, model: &str, status: u16| {
        format!("switchboard_requests_total{{family=\"{family}\",provider=\"{provider}\",model=\"{model}\",status=\"{status}\"}}")
    };
    for (series, n) in [
        (labels("openai", "openai", "gpt-5", 200), 2),
        (
            labels("anthropic", "anthropic", "claude-sonnet-4.7", 200),
            1,
        ),
        (labels("gemini", "google", "gemini-3.1-pro", 200), 1),
        (labels("openai", "openai", "gpt-5", 500), 1),
        (labels("openai", "openai", "gpt-5", 400), 1),
    ] {
        assert!(
            text.lines().any(|l| l == format!("{series} {n}")),
            "no `{series} {n}` in\n{text}"
        );
    }
    for model in ["gpt-5", "claude-sonnet-4.7", "gemini-3.1-pro"] {
        let m = format!("model=\"{model}\"");
        let input = metric_value(
            &text,
            "switchboard_tokens_total",
            &[&m, "direction=\"input\""],
        )
        .unwrap_or(0.0);
        let output = metric_value(
            &text,
            "switchboard_tokens_total",
            &[&m, "direction=\"output\""],
        )
        .unwrap_or(0.0);
        assert!(
            input > 0.0 && output > 0.0,
            "{model}: tokens {input}/{output}\n{text}"
        );
        let cost = metric_value(&text, "switchboard_cost_usd_total", &[&m]).unwrap_or(0.0);
        // Test pricing: 1e-6 per input token, 2e-6 per output token.
        let want = input * 0.000001 + output * 0.000002;
        assert!(
            (cost - want).abs() < 1e-9,
            "{model}: cost {cost}, want {want}"
        );
    }
    assert!(
        metric_value(
            &text,
            "switchboard_upstream_errors_total",
            &["provider=\"openai\"", "kind=\"500\""]
        )
        .unwrap()
            >= 1.0
    );
    assert!(
        metric_value(
            &text,
            "switchboard_request_duration_seconds_count",
            &["family=\"openai\""]
        )
        .unwrap()
            >= 4.0
    );
    assert!(
        metric_value(
            &text,
            "switchboard_time_to_first_token_seconds_count",
            &["family=\"anthropic\""]
        )
        .unwrap()
            >= 1.0
    );
    assert_eq!(
        metric_value(&text, "switchboard_active_streams", &[]),
        Some(0.0)
    );
    // The access log: one JSON line per request, with the key id and never
    // the key (lines are written in batches, at most 50 ms late).
    let log = eventually(Duration::from_secs(10), "six access lines", || {
        let log = gw.access_log();
        let n = log.lines().filter(|l| l.contains("\"request_id\"")).count();
        async move { (n >= 6).then_some(log) }
    })
    .await;
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"request_id\""))
        .collect();
    assert!(lines.len() >= 6, "{log}");
    assert!(lines
        .iter()
        .any(|l| l.contains("\"key_id\":\"test\"") && l.contains("\"model\":\"gpt-5\"")));
    assert!(!log.contains(KEY), "the client key is in the access log");
    assert!(!gw.log().contains(KEY), "the client key is in the log");
}
