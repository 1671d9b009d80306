//! Provider keys echoed by upstreams (item 4). OpenAI's 401 quotes the key it
//! refused ("Incorrect API key provided: sk-…"), sometimes masked in the
//! middle; other providers quote it in 400s. Scripted raw-socket upstreams of
//! each protocol echo the key they received, verbatim and masked, in error
//! bodies and in a successful answer: neither the client's answer (pass-through
//! and translated), nor the access log (stdout), nor the diagnostic log
//! (stderr) may carry the key or the visible parts of its masked form.
//!
//! Also the scripted upstream the other modules of this work share
//! ([`scripted`]): it records each request and answers what a closure says.

use super::support::read_request;
use crate::common::gateway::{authed, Gateway, KEY};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// One request as the scripted upstream read it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    /// Request line and headers, as sent.
    pub head: String,
    pub body: String,
}

impl Recorded {
    /// A header's value (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    /// The provider key the gateway sent, wherever its protocol puts it.
    pub fn key(&self) -> Option<String> {
        self.header("x-api-key")
            .or_else(|| self.header("x-goog-api-key"))
            .or_else(|| {
                self.header("authorization")
                    .and_then(|v| v.strip_prefix("Bearer ").map(str::to_string))
            })
    }
}

/// A raw-socket upstream: answers each request with what `answer` returns
/// (whole response bytes) and closes the connection.
pub(crate) struct Scripted {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Recorded>>>,
}

impl Scripted {
    pub fn base_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
    pub fn seen(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }
}

/// Starts a scripted upstream.
pub(crate) async fn scripted(
    answer: impl Fn(&Recorded) -> Vec<u8> + Send + Sync + 'static,
) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let answer = Arc::new(answer);
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let (answer, log) = (answer.clone(), log.clone());
            tokio::spawn(async move {
                if let Some(req) = read_request(&mut s).await.map(|r| Recorded {
                    body: r.body_text(),
                    head: r.head,
                }) {
                    let out = answer(&req);
                    log.lock().unwrap().push(req);
                    let _ = s.write_all(&out).await;
                    let _ = s.shutdown().await;
                }
            });
        }
    });
    Scripted { port, seen }
}

/// A whole HTTP/1.1 response that closes its connection.
pub(crate) fn http(status: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

/// Polls `f` until it holds (a generous limit: the debug binary on a busy machine).
pub(crate) async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// Realistic keys, each longer than the scrubber's minimum.
const OPENAI_KEY: &str = "sk-proj-Zq8vN3kLmP0aRt7YwX2cB5dE9fGhJ1uIq4Ws";
const ANTHROPIC_KEY: &str = "sk-ant-api03-Hh6Jk2Lm9Nn4Pp7Qq1Rr5Ss8Tt3Uu0Vv";
const GEMINI_KEY: &str = "AIzaSyD4-x9Q2wE7rT1yU6iO3pA8sD5fG0hJ2kL";

/// The visible parts of OpenAI's masked echo of `key`: its first 12 and
/// last 4 characters around a run of stars.
fn masked(key: &str) -> String {
    format!("{}{}{}", &key[..12], "*".repeat(24), &key[key.len() - 4..])
}

/// Fragments that must appear nowhere: the key, its masked form's visible
/// prefix (beyond the common `sk-proj-` / `sk-ant-` style part) and suffix.
fn fragments(key: &str) -> [String; 3] {
    [
        key.to_string(),
        key[..12].to_string(),
        key[key.len() - 4..].to_string(),
    ]
}

/// What the scripted upstream of `protocol` answers: the case named in the
/// request body, echoing the key it was sent.
fn answer_for(protocol: &'static str) -> impl Fn(&Recorded) -> Vec<u8> + Send + Sync {
    move |req: &Recorded| {
        let key = req.key().unwrap_or_default();
        let case = ["case-401", "case-400", "case-200"]
            .into_iter()
            .find(|c| req.body.contains(c))
            .unwrap_or("case-200");
        let text = format!(
            "Incorrect API key provided: {key}. Masked: {}. You can find your API key at https://platform.example/keys.",
            masked(&key)
        );
        let (status, body) = match (protocol, case) {
            ("openai", "case-200") => (
                200,
                json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("your key is {key}")}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
            ),
            ("openai", c) => (
                if c == "case-401" { 401 } else { 400 },
                json!({"error": {"message": text, "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
            ),
            ("anthropic", "case-200") => (
                200,
                json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "up",
                "content": [{"type": "text", "text": format!("your key is {key}")}], "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 3, "output_tokens": 2}}),
            ),
            ("anthropic", c) => (
                if c == "case-401" { 401 } else { 400 },
                json!({"type": "error", "error": {"type": "authentication_error", "message": text}}),
            ),
            ("gemini", "case-200") => (
                200,
                json!({"candidates": [{"content": {"role": "model", "parts": [{"text": format!("your key is {key}")}]}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}}),
            ),
            (_, c) => (
                if c == "case-401" { 401 } else { 400 },
                json!({"error": {"code": 400, "message": text, "status": "INVALID_ARGUMENT"}}),
            ),
        };
        http(
            status,
            &[("content-type", "application/json")],
            &body.to_string(),
        )
    }
}

/// A test model of `provider`, served to families A and B.
fn model(id: &str, provider: &str) -> Value {
    crate::common::gateway::model(
        id,
        provider,
        json!({"protocols": ["openai", "anthropic"], "upstream_model": "up"}),
    )
}

/// An upstream echoing its provider key in 401 and 400 bodies (verbatim and
/// masked) and in a 200 answer's text, for OpenAI, Anthropic and Gemini
/// upstreams, reached by family A and B clients same-protocol (passed
/// through) and translated: no answer, access-log line or log line carries
/// the key or a visible part of its masked echo.
#[tokio::test]
async fn provider_keys_echoed_by_upstreams_reach_no_client_and_no_log() {
    let oa = scripted(answer_for("openai")).await;
    let an = scripted(answer_for("anthropic")).await;
    let ge = scripted(answer_for("gemini")).await;
    let up = |p: &str, s: &Scripted, path: &str, env: &str| {
        json!({"id": p, "families": ["openai"], "retries": 0,
            "upstreams": [{"protocol": p, "base_url": s.base_url(path), "api_key_env": env}]})
    };
    let catalog = json!({
        "providers": [
            up("openai", &oa, "/v1", "SB_SEC_OPENAI_KEY"),
            up("anthropic", &an, "/v1", "SB_SEC_ANTHROPIC_KEY"),
            up("gemini", &ge, "/v1beta", "SB_SEC_GEMINI_KEY"),
        ],
        "models": [model("m-openai", "openai"), model("m-anthropic", "anthropic"), model("m-gemini", "gemini")]
    });
    let gw = Gateway::start_with_env(
        &catalog,
        &crate::common::gateway::keys(),
        &[],
        &[
            ("SB_SEC_OPENAI_KEY", OPENAI_KEY),
            ("SB_SEC_ANTHROPIC_KEY", ANTHROPIC_KEY),
            ("SB_SEC_GEMINI_KEY", GEMINI_KEY),
        ],
    )
    .await;
    let mut sent = 0;
    for (client, path) in [
        ("openai", "/v1/chat/completions"),
        ("anthropic", "/anthropic/v1/messages"),
    ] {
        for (model, key) in [
            ("m-openai", OPENAI_KEY),
            ("m-anthropic", ANTHROPIC_KEY),
            ("m-gemini", GEMINI_KEY),
        ] {
            for case in ["case-401", "case-400", "case-200"] {
                let body = json!({"model": model, "max_tokens": 50,
                    "messages": [{"role": "user", "content": format!("hello {case}")}]});
                let r = gw.send(&authed(client, path, KEY, &body)).await;
                sent += 1;
                let text = r.text();
                let cell = format!("{client} client, {model}, {case}: {} {text}", r.status);
                for f in fragments(key) {
                    assert!(!text.contains(&f), "{cell}: the answer carries {f:?}");
                }
                if case == "case-200" {
                    assert_eq!(r.status, 200, "{cell}");
                    assert!(text.contains("your key is [redacted]"), "{cell}");
                } else {
                    assert!(r.status >= 400, "{cell}");
                }
                if case == "case-400" {
                    // The upstream's message still reaches the client, scrubbed.
                    assert!(
                        text.contains("Incorrect API key provided: [redacted]"),
                        "{cell}"
                    );
                }
            }
        }
    }
    // The upstreams did receive the keys (the test is not vacuous).
    for (s, key) in [(&oa, OPENAI_KEY), (&an, ANTHROPIC_KEY), (&ge, GEMINI_KEY)] {
        assert!(s.seen().iter().all(|r| r.key().as_deref() == Some(key)));
        assert_eq!(s.seen().len(), 6);
    }
    wait_until("every access-log line", || {
        gw.access_log()
            .lines()
            .filter(|l| l.contains("\"method\":\"POST\""))
            .count()
            >= sent
    })
    .await;
    let (access, log) = (gw.access_log(), gw.log());
    assert!(access.contains("[redacted]"), "{access}");
    for key in [OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY] {
        for f in fragments(key) {
            assert!(
                !access.contains(&f),
                "the access log carries {f:?}:\n{access}"
            );
            assert!(!log.contains(&f), "the log carries {f:?}:\n{log}");
        }
    }
}
