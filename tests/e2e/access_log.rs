//! End-to-end: the access log is one bare JSON object per request on stdout
//! (docs/operations.md "Access log"), with the fields operators need and never the client's key;
//! and `switchboard --version` and `--help`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::{eventually, GOOGLE};
use crate::common::gateway::{authed, Gateway, KEY};
use crate::common::http_client::Request;
use crate::common::mock_upstream::MockUpstream;
use serde_json::{json, Value};
use std::time::Duration;

/// Every stdout line, each parsed as a JSON object (failing on anything else).
fn lines(gw: &Gateway) -> Vec<Value> {
    gw.access_log()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("stdout line is not bare JSON ({e}): {l:?}"));
            assert!(v.is_object(), "{l}");
            v
        })
        .collect()
}

/// The access line of the request with this id, once it is written.
async fn line_of(gw: &Gateway, request_id: &str) -> Value {
    eventually(Duration::from_secs(10), "the access-log line", || async {
        lines(gw)
            .into_iter()
            .find(|v| v["request_id"] == request_id)
    })
    .await
}

fn with_id(r: Request, id: &str) -> Request {
    r.header("x-request-id", id)
}

#[tokio::test]
async fn one_json_object_per_request_on_stdout() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let chat = json!({"model": "openai/gpt-5", "messages": [{"role": "user", "content": "hi"}]});

    // 200, same protocol
    let r = gw
        .send(&with_id(
            authed("openai", "/v1/chat/completions", KEY, &chat),
            "acc-200",
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ok = line_of(&gw, "acc-200").await;
    assert_eq!(ok["status"], 200);
    assert_eq!(ok["method"], "POST");
    assert_eq!(ok["path"], "/v1/chat/completions");
    assert_eq!(ok["family"], "openai");
    assert_eq!(ok["key_id"], "test");
    assert_eq!(ok["provider"], "openai");
    assert_eq!(ok["model"], "gpt-5");
    assert_eq!(ok["upstream_protocol"], "openai");
    let host = ok["upstream_host"].as_str().unwrap();
    assert!(host.starts_with("127.0.0.1:"), "{ok}");
    assert_eq!(ok["attempts"], 1);
    assert!(ok["error"].is_null() && ok["error_type"].is_null(), "{ok}");
    assert!(ok["adjusted"].is_null(), "{ok}");
    assert!(ok["input_tokens"].as_u64().unwrap() > 0);
    assert!(ok["output_tokens"].as_u64().unwrap() > 0);
    assert!(ok["cost_usd"].as_f64().unwrap() > 0.0);
    assert!(ok["latency_ms"].as_f64().unwrap() >= 0.0);
    for k in ["cached_tokens", "reasoning_tokens", "ttft_ms"] {
        assert!(ok.get(k).is_some(), "{k} missing: {ok}");
    }
    let time = ok["time"].as_str().unwrap();
    assert!(
        time.len() == 24 && time.ends_with('Z') && &time[10..11] == "T",
        "{time}"
    );

    // 200 translated (family B client, Gemini upstream), streamed
    let msg = json!({"model": "gemini-any", "max_tokens": 50, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let r = gw
        .send(&with_id(
            authed("anthropic", "/anthropic/v1/messages", KEY, &msg),
            "acc-stream",
        ))
        .await;
    assert_eq!(r.status, 200);
    let s = line_of(&gw, "acc-stream").await;
    assert_eq!(
        (&s["family"], &s["upstream_protocol"], &s["status"]),
        (&json!("anthropic"), &json!("gemini"), &json!(200))
    );
    assert!(s["ttft_ms"].as_f64().is_some(), "{s}");
    assert!(s["output_tokens"].as_u64().unwrap() > 0, "{s}");

    // reasoning tokens from a same-protocol stream (Gemini thoughtsTokenCount)
    let think = json!({"contents": [{"role": "user", "parts": [{"text": "hi [[thinking]]"}]}]});
    let r = gw
        .send(&with_id(
            authed(
                "gemini",
                "/google/v1beta/models/google/gemini-any:streamGenerateContent?alt=sse",
                KEY,
                &think,
            ),
            "acc-think",
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let t = line_of(&gw, "acc-think").await;
    assert_eq!(t["upstream_protocol"], "gemini", "{t}");
    assert!(t["reasoning_tokens"].as_u64().unwrap() > 0, "{t}");

    // 400: the validation message is carried, not `null`
    let bad = json!({"model": "openai/gpt-5", "temperature": 5,
        "messages": [{"role": "user", "content": "hi"}]});
    let r = gw
        .send(&with_id(
            authed("openai", "/v1/chat/completions", KEY, &bad),
            "acc-400",
        ))
        .await;
    assert_eq!(r.status, 400);
    let e400 = line_of(&gw, "acc-400").await;
    assert_eq!(e400["status"], 400);
    assert_eq!(e400["error_type"], "invalid_request");
    let msg400 = e400["error"].as_str().unwrap();
    assert!(msg400.contains("temperature"), "{e400}");
    assert_eq!(msg400, r.json()["error"]["message"].as_str().unwrap());
    assert_eq!(e400["attempts"], 0, "nothing went upstream");
    assert!(e400["upstream_host"].is_null());

    // 401 with a key in family C's query: the key is in neither the path nor anywhere else
    let r = gw
        .send(&with_id(
            Request::post(&format!(
                "{GOOGLE}/google/gemini-3.1-pro:generateContent?key=sk-wrong-secret"
            ))
            .json(&json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})),
            "acc-401",
        ))
        .await;
    assert_eq!(r.status, 401);
    let e401 = line_of(&gw, "acc-401").await;
    assert_eq!(e401["status"], 401);
    assert_eq!(e401["family"], "gemini");
    assert_eq!(e401["error_type"], "authentication");
    assert!(e401["error"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(e401["key_id"].is_null());
    assert_eq!(
        e401["path"],
        "/google/v1beta/models/google/gemini-3.1-pro:generateContent"
    );

    // a listing and a probe are logged too
    gw.send(&with_id(Request::get("/anthropic/v1/models"), "acc-list"))
        .await;
    gw.send(&with_id(Request::new("HEAD", "/anthropic"), "acc-head"))
        .await;
    let head = line_of(&gw, "acc-head").await;
    assert_eq!(
        (&head["method"], &head["status"]),
        (&json!("HEAD"), &json!(200))
    );
    assert_eq!(line_of(&gw, "acc-list").await["status"], 200);

    // stdout holds only these lines (and the start-up health probes), one per
    // request; stderr holds no access lines
    let all = lines(&gw);
    let mut ours = all
        .iter()
        .filter(|v| v["path"] != "/healthz")
        .map(|v| v["request_id"].as_str().unwrap())
        .collect::<Vec<_>>();
    ours.sort_unstable();
    assert_eq!(
        ours,
        [
            "acc-200",
            "acc-400",
            "acc-401",
            "acc-head",
            "acc-list",
            "acc-stream",
            "acc-think"
        ],
    );
    let raw = gw.access_log();
    for secret in [KEY, "sk-wrong-secret"] {
        assert!(!raw.contains(secret), "a client key is in the access log");
        assert!(!gw.log().contains(secret), "a client key is in the log");
    }
    assert!(!gw.log().contains("\"request_id\""), "{}", gw.log());
}

#[test]
fn version_flag_prints_the_crate_version() {
    for flag in ["--version", "-V"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg(flag)
            .output()
            .unwrap();
        assert!(out.status.success(), "{flag}: {out:?}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("switchboard {}\n", env!("CARGO_PKG_VERSION"))
        );
        assert!(
            out.stderr.is_empty(),
            "{flag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Every flag with its environment variable, as operators and scripts know
/// them (README "Configuration"): renaming one breaks their setups.
const FLAGS: [(&str, Option<&str>); 43] = [
    ("--catalog", Some("SWITCHBOARD_CATALOG")),
    ("--keys", Some("SWITCHBOARD_KEYS")),
    ("--check", None),
    ("--listen", Some("SWITCHBOARD_LISTEN")),
    ("--metrics", Some("SWITCHBOARD_METRICS")),
    ("--tls-cert", Some("SWITCHBOARD_TLS_CERT")),
    ("--tls-key", Some("SWITCHBOARD_TLS_KEY")),
    ("--conf", None),
    ("--daemon", None),
    ("--upgrade", None),
    ("--test", None),
    (
        "--connect-timeout-ms",
        Some("SWITCHBOARD_CONNECT_TIMEOUT_MS"),
    ),
    ("--read-timeout-ms", Some("SWITCHBOARD_READ_TIMEOUT_MS")),
    (
        "--max-response-bytes",
        Some("SWITCHBOARD_MAX_RESPONSE_BYTES"),
    ),
    (
        "--upstream-keepalive-requests",
        Some("SWITCHBOARD_UPSTREAM_KEEPALIVE_REQUESTS"),
    ),
    (
        "--upstream-idle-timeout-ms",
        Some("SWITCHBOARD_UPSTREAM_IDLE_TIMEOUT_MS"),
    ),
    ("--max-body-bytes", Some("SWITCHBOARD_MAX_BODY_BYTES")),
    ("--token-workers", Some("SWITCHBOARD_TOKEN_WORKERS")),
    ("--write-timeout-ms", Some("SWITCHBOARD_WRITE_TIMEOUT_MS")),
    ("--header-timeout-ms", Some("SWITCHBOARD_HEADER_TIMEOUT_MS")),
    ("--body-timeout-ms", Some("SWITCHBOARD_BODY_TIMEOUT_MS")),
    ("--body-min-rate", Some("SWITCHBOARD_BODY_MIN_RATE")),
    (
        "--keepalive-timeout-ms",
        Some("SWITCHBOARD_KEEPALIVE_TIMEOUT_MS"),
    ),
    ("--drain-linger-ms", Some("SWITCHBOARD_DRAIN_LINGER_MS")),
    ("--max-connections", Some("SWITCHBOARD_MAX_CONNECTIONS")),
    (
        "--metrics-max-connections",
        Some("SWITCHBOARD_METRICS_MAX_CONNECTIONS"),
    ),
    ("--data", Some("SWITCHBOARD_DATA")),
    ("--database", Some("SWITCHBOARD_DATABASE")),
    (
        "--ledger-retention-days",
        Some("SWITCHBOARD_LEDGER_RETENTION_DAYS"),
    ),
    ("--ledger-queue", Some("SWITCHBOARD_LEDGER_QUEUE")),
    ("--ledger-batch", Some("SWITCHBOARD_LEDGER_BATCH")),
    ("--ledger-flush-ms", Some("SWITCHBOARD_LEDGER_FLUSH_MS")),
    ("--redis", Some("SWITCHBOARD_REDIS")),
    ("--redis-prefix", Some("SWITCHBOARD_REDIS_PREFIX")),
    ("--redis-fail", Some("SWITCHBOARD_REDIS_FAIL")),
    (
        "--responses-ttl-days",
        Some("SWITCHBOARD_RESPONSES_TTL_DAYS"),
    ),
    (
        "--responses-max-record-bytes",
        Some("SWITCHBOARD_RESPONSES_MAX_RECORD_BYTES"),
    ),
    (
        "--responses-key-quota-bytes",
        Some("SWITCHBOARD_RESPONSES_KEY_QUOTA_BYTES"),
    ),
    ("--admin-key", Some("SWITCHBOARD_ADMIN_KEY")),
    ("--otlp-endpoint", Some("SWITCHBOARD_OTLP_ENDPOINT")),
    ("--oidc-issuer", Some("SWITCHBOARD_OIDC_ISSUER")),
    ("--jwks-url", Some("SWITCHBOARD_JWKS_URL")),
    ("--jwt-audience", Some("SWITCHBOARD_JWT_AUDIENCE")),
];

/// `--help` lists every flag with its variable in its own entry, never the
/// value of a secret's variable, and not the hidden test flag.
#[test]
fn help_lists_every_flag_with_its_variable() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--help")
        .env("SWITCHBOARD_ADMIN_KEY", "sk-admin-help-secret")
        .env("SWITCHBOARD_REDIS", "redis://user:pw-help-secret@host:6379")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    // One entry per flag: from its line to the next line that starts a flag.
    let entries: Vec<String> = help.lines().fold(Vec::new(), |mut entries, line| {
        let t = line.trim_start();
        if t.starts_with("--") || (t.starts_with('-') && t.get(2..3) == Some(",")) {
            entries.push(String::new());
        }
        if let Some(e) = entries.last_mut() {
            e.push_str(line);
            e.push('\n');
        }
        entries
    });
    for (flag, var) in FLAGS {
        let entry = entries
            .iter()
            .find(|e| {
                e.split(|c: char| c == ',' || c.is_whitespace())
                    .any(|w| w == flag)
            })
            .unwrap_or_else(|| panic!("{flag} is not in --help:\n{help}"));
        match var {
            Some(var) => assert!(entry.contains(&format!("[env: {var}")), "{flag}: {entry}"),
            None => assert!(!entry.contains("[env: "), "{flag}: {entry}"),
        }
    }
    for short in [
        "-c, --conf",
        "-d, --daemon",
        "-u, --upgrade",
        "-t, --test",
        "-h, --help",
        "-V, --version",
    ] {
        assert!(help.contains(short), "{short} is not in --help:\n{help}");
    }
    assert_eq!(
        entries.len(),
        FLAGS.len() + 2,
        "a flag --help lists is not in FLAGS:\n{help}"
    );
    assert!(!help.contains("responses-ttl-secs"), "{help}");
    assert!(
        !help.contains("help-secret"),
        "a secret's value is in --help:\n{help}"
    );
    assert!(
        help.contains("- open:") && help.contains("- closed:"),
        "{help}"
    );
}
