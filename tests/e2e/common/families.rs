//! Per-family helpers for the inference tests: request bodies and paths in each
//! client protocol's shape, reading reply text out of whole and streamed
//! responses, checking error shapes, and checking what the upstream received.

use super::gateway::{authed, provider_key, Gateway, KEY};
use super::http_client::{parse_sse, Request, Response, SseEvent};
use super::mock_upstream::{MockUpstream, Protocol, RecordedRequest};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The gateway's family C path prefix.
pub const GOOGLE: &str = "/google/v1beta/models";
/// E4.
pub const CHAT: &str = "/v1/chat/completions";
/// E8.
pub const MESSAGES: &str = "/anthropic/v1/messages";
/// E8c.
pub const COUNT: &str = "/anthropic/v1/messages/count_tokens";

/// How a family C call asks for its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeminiMode {
    /// `:generateContent`.
    Whole,
    /// `:generateContent?alt=sse`.
    GenerateSse,
    /// `:streamGenerateContent?alt=sse`.
    StreamSse,
    /// `:streamGenerateContent` (a JSON array).
    JsonArray,
}

impl GeminiMode {
    pub fn suffix(self) -> &'static str {
        match self {
            GeminiMode::Whole => ":generateContent",
            GeminiMode::GenerateSse => ":generateContent?alt=sse",
            GeminiMode::StreamSse => ":streamGenerateContent?alt=sse",
            GeminiMode::JsonArray => ":streamGenerateContent",
        }
    }
}

/// `/google/v1beta/models/{model}{suffix}`; `model` may be `provider/id` or a bare id.
pub fn gemini_path(model: &str, mode: GeminiMode) -> String {
    format!("{GOOGLE}/{model}{}", mode.suffix())
}

/// A chat body in family A's shape, with an optional system text (where markers go
/// without changing the quoted user text).
pub fn openai_body(model: &str, user: &str, system: Option<&str>, stream: bool) -> Value {
    let mut messages = Vec::new();
    if let Some(s) = system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": user}));
    let mut b = json!({"model": model, "messages": messages});
    if stream {
        b["stream"] = json!(true);
    }
    b
}

/// A messages body in family B's shape.
pub fn anthropic_body(model: &str, user: &str, system: Option<&str>, stream: bool) -> Value {
    let mut b = json!({
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": user}],
    });
    if let Some(s) = system {
        b["system"] = json!(s);
    }
    if stream {
        b["stream"] = json!(true);
    }
    b
}

/// A generateContent body in family C's shape.
pub fn gemini_body(user: &str, system: Option<&str>) -> Value {
    let mut b = json!({"contents": [{"role": "user", "parts": [{"text": user}]}]});
    if let Some(s) = system {
        b["systemInstruction"] = json!({"parts": [{"text": s}]});
    }
    b
}

/// A request with the family's usual key header and some headers that must never
/// reach the upstream (hop-by-hop and proxy credentials).
pub fn with_hop_headers(r: Request) -> Request {
    r.header("connection", "keep-alive, x-hop-test")
        .header("x-hop-test", "must-not-be-forwarded")
        .header("keep-alive", "timeout=5")
        .header("te", "trailers")
        .header("proxy-authorization", "Basic c2VjcmV0OnNlY3JldA==")
        .header("x-request-id", "trace-e2e-1")
}

/// The reply text of a non-stream response.
pub fn reply_text(p: Protocol, v: &Value) -> String {
    match p {
        Protocol::OpenAi => v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        Protocol::Anthropic => v["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect(),
        Protocol::Gemini => gemini_chunk_text(v),
        Protocol::Responses => v["output"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["type"] == "message")
            .flat_map(|item| item["content"].as_array().into_iter().flatten())
            .filter(|part| part["type"] == "output_text")
            .filter_map(|part| part["text"].as_str())
            .collect(),
    }
}

fn gemini_chunk_text(v: &Value) -> String {
    v["candidates"][0]["content"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["thought"] != true)
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// The JSON data of every SSE event (`[DONE]` skipped); panics on non-JSON data.
pub fn event_json(events: &[SseEvent]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| {
            e.json()
                .unwrap_or_else(|| panic!("event data is not JSON: {:?}", e.data))
        })
        .collect()
}

/// The reassembled text of a stream's events.
pub fn stream_text(p: Protocol, chunks: &[Value]) -> String {
    match p {
        Protocol::OpenAi => chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect(),
        Protocol::Anthropic => chunks
            .iter()
            .filter(|c| c["type"] == "content_block_delta" && c["delta"]["type"] == "text_delta")
            .filter_map(|c| c["delta"]["text"].as_str())
            .collect(),
        Protocol::Gemini => chunks.iter().map(gemini_chunk_text).collect(),
        Protocol::Responses => chunks
            .iter()
            .filter(|c| c["type"] == "response.output_text.delta")
            .filter_map(|c| c["delta"].as_str())
            .collect(),
    }
}

/// Checks a response is an error of `status` in family `p`'s shape; returns the
/// error object.
pub fn assert_error(p: Protocol, r: &Response, status: u16) -> Value {
    assert_eq!(r.status, status, "{:?}: {}", p, r.text());
    assert!(
        r.header("content-type")
            .unwrap_or("")
            .starts_with("application/json"),
        "{:?}",
        r.headers
    );
    assert!(r.header("x-request-id").is_some());
    let v = r.json();
    let e = v["error"].clone();
    assert!(e["message"].is_string(), "{v}");
    match p {
        Protocol::OpenAi | Protocol::Responses => {
            assert!(e["type"].is_string(), "{v}");
            assert!(e.get("param").is_some() && e.get("code").is_some(), "{v}");
            assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");
        }
        Protocol::Anthropic => {
            assert_eq!(v["type"], "error", "{v}");
            assert!(e["type"].is_string(), "{v}");
        }
        Protocol::Gemini => {
            assert_eq!(e["code"], status, "{v}");
            assert!(e["status"].is_string(), "{v}");
        }
    }
    e
}

/// Checks that an error object names `param` (family A's `param` field, or the
/// message for the others).
pub fn assert_names_param(p: Protocol, e: &Value, param: &str) {
    let message = e["message"].as_str().unwrap_or_default();
    match p {
        Protocol::OpenAi | Protocol::Responses => assert_eq!(e["param"], param, "{e}"),
        _ => assert!(message.contains(param), "{param} not named in {e}"),
    }
}

/// What the upstream of each protocol should have been sent.
pub fn upstream_path(p: Protocol, upstream_model: &str, stream: bool) -> String {
    match p {
        Protocol::OpenAi => "/openai/v1/chat/completions".into(),
        Protocol::Anthropic => "/anthropic/v1/messages".into(),
        Protocol::Gemini if stream => {
            format!("/gemini/v1beta/models/{upstream_model}:streamGenerateContent?alt=sse")
        }
        Protocol::Gemini => format!("/gemini/v1beta/models/{upstream_model}:generateContent"),
        Protocol::Responses => "/responses-api/v1/responses".into(),
    }
}

/// Checks the upstream request carried the provider key (and only it), the upstream
/// model, and nothing of the client's credentials or hop-by-hop headers.
pub fn assert_upstream_request(
    p: Protocol,
    r: &RecordedRequest,
    upstream_model: &str,
    stream: bool,
) {
    assert_eq!(r.method, "POST");
    assert_eq!(
        r.path,
        upstream_path(p, upstream_model, stream),
        "{:?}",
        r.headers
    );
    let pk = provider_key(p.name());
    match p {
        Protocol::OpenAi | Protocol::Responses => {
            assert_eq!(
                r.header("authorization"),
                Some(format!("Bearer {pk}").as_str())
            );
            assert!(r.header("x-api-key").is_none() && r.header("x-goog-api-key").is_none());
        }
        Protocol::Anthropic => {
            assert_eq!(r.header("x-api-key"), Some(pk.as_str()));
            assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
            assert!(r.header("authorization").is_none() && r.header("x-goog-api-key").is_none());
        }
        Protocol::Gemini => {
            assert_eq!(r.header("x-goog-api-key"), Some(pk.as_str()));
            assert!(r.header("authorization").is_none() && r.header("x-api-key").is_none());
        }
    }
    let body = r
        .json()
        .unwrap_or_else(|| panic!("upstream body not JSON: {}", r.body_text()));
    match p {
        Protocol::OpenAi | Protocol::Anthropic | Protocol::Responses => {
            assert_eq!(body["model"], upstream_model)
        }
        Protocol::Gemini => assert!(body.get("model").is_none()),
    }
    assert_no_client_secrets(r);
    let count = |name: &str| r.headers.iter().filter(|(n, _)| n == name).count();
    for (name, want) in [("content-length", 1), ("host", 1)] {
        assert_eq!(count(name), want, "{name} in {:?}", r.headers);
    }
    assert_eq!(
        r.header("content-length")
            .and_then(|v| v.parse::<usize>().ok()),
        Some(r.body.len())
    );
}

/// No client key, hop-by-hop header or proxy credential in an upstream request.
pub fn assert_no_client_secrets(r: &RecordedRequest) {
    for (name, value) in &r.headers {
        assert!(
            !value.contains(KEY),
            "client key forwarded in {name}: {value}"
        );
        assert!(
            !value.contains("sk-limited") && !value.contains("sk-rpm"),
            "{name}: {value}"
        );
        for hop in [
            "x-hop-test",
            "keep-alive",
            "te",
            "proxy-authorization",
            "upgrade",
            "trailer",
        ] {
            assert_ne!(name, hop, "hop-by-hop header {name} forwarded");
        }
        assert!(!value.contains("x-hop-test"), "{name}: {value}");
    }
    assert!(
        !r.path.contains(KEY) && !r.path.contains("key="),
        "key in path {}",
        r.path
    );
    let body = r.body_text();
    assert!(!body.contains(KEY), "client key in the upstream body");
}

/// Replaces per-response values (ids, timestamps, prompt-size-dependent usage) so
/// two streams of the same reply compare equal.
pub fn normalise(v: &Value) -> Value {
    const VOLATILE: &[&str] = &[
        "id",
        "created",
        "responseId",
        "prompt_tokens",
        "total_tokens",
        "input_tokens",
        "promptTokenCount",
        "totalTokenCount",
    ];
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    if VOLATILE.contains(&k.as_str()) {
                        (k.clone(), Value::Null)
                    } else {
                        (k.clone(), normalise(v))
                    }
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalise).collect()),
        _ => v.clone(),
    }
}

/// The client-visible events of an SSE body: (event name, normalised data).
pub fn visible_events(body: &[u8]) -> Vec<(String, Value)> {
    parse_sse(body)
        .iter()
        .map(|e| {
            let data = e
                .json()
                .map_or_else(|| Value::String(e.data.clone()), |v| normalise(&v));
            (e.name().to_owned(), data)
        })
        .collect()
}

/// A request of family `p` to `path` with the test key.
pub fn call(p: Protocol, path: &str, body: &Value) -> Request {
    authed(p.name(), path, KEY, body)
}

/// Fetches the metrics exposition.
pub async fn metrics_text(addr: SocketAddr) -> String {
    let r = super::http_client::send(addr, &Request::get("/metrics"))
        .await
        .unwrap_or_else(|e| panic!("metrics: {e}"));
    assert_eq!(r.status, 200);
    r.text()
}

/// The value of an unlabelled metric (or the sum of a labelled one's series
/// whose labels contain all of `labels`).
pub fn metric_value(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        if metric != name || !labels.iter().all(|l| rest.contains(l)) {
            continue;
        }
        let v: f64 = value.parse().unwrap_or(f64::NAN);
        found = Some(found.unwrap_or(0.0) + v);
    }
    found
}

/// Polls `f` every 50 ms until it returns `Some`, failing after `within`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a mock and a gateway on the test catalog.
pub async fn start() -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    (mock, gw)
}

/// Checks a stream ended with its family's error event (and nothing after it, no
/// clean end); returns the error object.
pub fn stream_error(p: Protocol, path: &str, r: &Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    if path.ends_with(":streamGenerateContent") {
        let v: Value = serde_json::from_slice(&r.body).unwrap_or_else(|e| {
            panic!(
                "E13j stream is not a complete JSON array ({e}): {}",
                r.text()
            )
        });
        let items = v.as_array().unwrap();
        let last = items.last().unwrap();
        assert!(last["error"]["message"].is_string(), "{}", r.text());
        assert!(
            last["error"]["status"].is_string() && last["error"]["code"].is_number(),
            "{last}"
        );
        assert!(items[..items.len() - 1]
            .iter()
            .all(|i| i.get("error").is_none()));
        return last["error"].clone();
    }
    let events = parse_sse(&r.body);
    let last = events.last().unwrap_or_else(|| panic!("empty stream"));
    assert!(
        events.iter().all(|e| e.data != "[DONE]"),
        "a broken stream ended with [DONE]: {}",
        r.text()
    );
    let data = last
        .json()
        .unwrap_or_else(|| panic!("last event is not JSON: {}", r.text()));
    // Family D's response objects carry `"error": null` until they fail.
    let errors = events
        .iter()
        .filter(|e| match p {
            Protocol::Responses => e.name() == "error",
            _ => e.data.contains("\"error\""),
        })
        .count();
    assert_eq!(errors, 1, "exactly one error event: {}", r.text());
    match p {
        Protocol::OpenAi => {
            assert_eq!(last.name(), "message");
            assert!(data["error"]["message"].is_string(), "{data}");
            assert!(data["error"].get("type").is_some(), "{data}");
        }
        Protocol::Anthropic => {
            assert_eq!(last.name(), "error", "{}", r.text());
            assert_eq!(data["type"], "error");
            assert!(data["error"]["type"].is_string() && data["error"]["message"].is_string());
            assert!(!events.iter().any(|e| e.name() == "message_stop"));
        }
        Protocol::Gemini => {
            assert_eq!(last.name(), "message");
            assert!(
                data["error"]["code"].is_number() && data["error"]["status"].is_string(),
                "{data}"
            );
        }
        Protocol::Responses => {
            // `error`, then `response.failed` carrying the same error.
            assert_eq!(last.name(), "response.failed", "{}", r.text());
            assert_eq!(data["response"]["status"], "failed", "{data}");
            let error = &events[events.len() - 2];
            assert_eq!(error.name(), "error", "{}", r.text());
            return error.json().unwrap();
        }
    }
    data["error"].clone()
}
