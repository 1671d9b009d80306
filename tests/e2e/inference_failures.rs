//! End-to-end: what goes wrong, and how each client family hears about it —
//! validation before any upstream call, upstream errors and timeouts, streams
//! that break mid-way, and a client that goes away mid-stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{catalog, keys, Gateway};
use crate::common::http_client::{self, Request};
use crate::common::mock_upstream::{MockUpstream, Protocol};
use serde_json::{json, Value};
use std::time::Duration;

use Protocol::{Anthropic, Gemini, OpenAi, Responses};

/// `count` words of real English (about one token each), well over 1000 tokens for 1500.
fn words(count: usize) -> String {
    let list = [
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "while", "birds", "sing",
    ];
    (0..count)
        .map(|i| list[i % list.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn tiny_path() -> String {
    gemini_path("google/tiny-gemini", GeminiMode::Whole)
}

fn gemini_config(config: Value) -> Value {
    let mut b = gemini_body("hi", None);
    b["generationConfig"] = config;
    b
}

/// A mock and a gateway whose catalog sets the `strict` policy (docs/api.md "Adapt or refuse"):
/// the first release's behaviour, where an over-large cap is a 400 too
/// (module policy covers `adapt`, the default).
async fn start_strict() -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    let mut cat = catalog(&mock);
    cat["policy"] = json!("strict");
    let gw = Gateway::start_with(&cat, &keys(), &[]).await;
    (mock, gw)
}

#[tokio::test]
async fn invalid_requests_get_a_400_naming_the_parameter_before_any_upstream_call() {
    let (mock, gw) = start_strict().await;
    let a = |extra: Value| {
        let mut b = openai_body("openai/gpt-5", "hi", None, false);
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let tiny = |extra: Value| {
        let mut b = openai_body("openai/tiny", "hi", None, false);
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let b = |model: &str, extra: Value| {
        let mut b = anthropic_body(model, "hi", None, false);
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let no_max_tokens = {
        let mut v = anthropic_body("claude-sonnet-4.7", "hi", None, false);
        v.as_object_mut().unwrap().remove("max_tokens");
        v
    };
    let tool =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    let cases: Vec<(Protocol, String, Value, &str)> = vec![
        (
            OpenAi,
            CHAT.into(),
            a(json!({"temperature": 2.5})),
            "temperature",
        ),
        (
            OpenAi,
            CHAT.into(),
            a(json!({"temperature": -0.5})),
            "temperature",
        ),
        (
            OpenAi,
            CHAT.into(),
            a(json!({"temperature": "hot"})),
            "temperature",
        ),
        (
            OpenAi,
            CHAT.into(),
            a(json!({"max_tokens": 8193})),
            "max_tokens",
        ),
        (
            OpenAi,
            CHAT.into(),
            tiny(json!({"max_tokens": 101})),
            "max_tokens",
        ),
        (
            OpenAi,
            CHAT.into(),
            tiny(json!({"max_tokens": 0})),
            "max_tokens",
        ),
        (
            OpenAi,
            CHAT.into(),
            tiny(json!({"max_tokens": -3})),
            "max_tokens",
        ),
        (
            OpenAi,
            CHAT.into(),
            tiny(json!({"max_tokens": 2.5})),
            "max_tokens",
        ),
        (
            OpenAi,
            CHAT.into(),
            tiny(json!({"max_tokens": "50"})),
            "max_tokens",
        ),
        (
            OpenAi,
            CHAT.into(),
            tiny(json!({"max_completion_tokens": 0})),
            "max_completion_tokens",
        ),
        (OpenAi, CHAT.into(), tiny(json!({"tools": tool})), "tools"),
        (
            OpenAi,
            CHAT.into(),
            tiny(json!({"temperature": 0.5})),
            "temperature",
        ),
        (
            OpenAi,
            CHAT.into(),
            json!({"model": "openai/gpt-5"}),
            "messages",
        ),
        (
            OpenAi,
            CHAT.into(),
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            "model",
        ),
        (
            Anthropic,
            MESSAGES.into(),
            b("claude-sonnet-4.7", json!({"temperature": 1.5})),
            "temperature",
        ),
        (Anthropic, MESSAGES.into(), no_max_tokens, "max_tokens"),
        (
            Anthropic,
            MESSAGES.into(),
            b("tiny-claude", json!({"max_tokens": 101})),
            "max_tokens",
        ),
        (
            Anthropic,
            MESSAGES.into(),
            b("tiny-claude", json!({"max_tokens": 0})),
            "max_tokens",
        ),
        (
            Anthropic,
            MESSAGES.into(),
            b("tiny-claude", json!({"max_tokens": -1})),
            "max_tokens",
        ),
        (
            Anthropic,
            MESSAGES.into(),
            b("tiny-claude", json!({"max_tokens": 1.5})),
            "max_tokens",
        ),
        (
            Anthropic,
            MESSAGES.into(),
            b(
                "tiny-claude",
                json!({"tools": [{"name": "f", "input_schema": {"type": "object"}}]}),
            ),
            "tools",
        ),
        (
            Anthropic,
            MESSAGES.into(),
            json!({"model": "claude-sonnet-4.7", "max_tokens": 10}),
            "messages",
        ),
        (
            Gemini,
            gemini_path("google/gemini-3.1-pro", GeminiMode::Whole),
            gemini_config(json!({"temperature": 2.5})),
            "temperature",
        ),
        (
            Gemini,
            gemini_path("gemini-3.1-pro", GeminiMode::StreamSse),
            gemini_config(json!({"temperature": -1})),
            "temperature",
        ),
        (
            Gemini,
            tiny_path(),
            gemini_config(json!({"maxOutputTokens": 101})),
            "maxOutputTokens",
        ),
        (
            Gemini,
            tiny_path(),
            gemini_config(json!({"maxOutputTokens": 0})),
            "maxOutputTokens",
        ),
        (
            Gemini,
            tiny_path(),
            gemini_config(json!({"maxOutputTokens": 7.5})),
            "maxOutputTokens",
        ),
        (
            Gemini,
            tiny_path(),
            json!({"contents": [{"parts": [{"text": "hi"}]}], "tools": [{"functionDeclarations": [{"name": "f"}]}]}),
            "tools",
        ),
        (
            Gemini,
            tiny_path(),
            gemini_config(json!({"temperature": 0.5})),
            "temperature",
        ),
        (
            Gemini,
            tiny_path(),
            json!({"generationConfig": {}}),
            "contents",
        ),
    ];
    for (p, path, body, param) in &cases {
        let r = gw.send(&call(*p, path, body)).await;
        let e = assert_error(*p, &r, 400);
        assert_names_param(*p, &e, param);
        match p {
            OpenAi | Responses => assert_eq!(e["type"], "invalid_request_error"),
            Anthropic => assert_eq!(e["type"], "invalid_request_error"),
            Gemini => assert_eq!(e["status"], "INVALID_ARGUMENT"),
        }
        assert!(
            mock.requests().is_empty(),
            "{p:?} {body} reached the upstream"
        );
    }
    // Family B requires anthropic-version.
    let r = gw
        .send(
            &Request::post(MESSAGES)
                .json(&anthropic_body("claude-sonnet-4.7", "hi", None, false))
                .header("x-api-key", crate::common::gateway::KEY),
        )
        .await;
    let e = assert_error(Anthropic, &r, 400);
    assert!(
        e["message"].as_str().unwrap().contains("anthropic-version"),
        "{e}"
    );
    // Malformed JSON, each family.
    for (p, path) in [
        (OpenAi, CHAT.to_owned()),
        (Anthropic, MESSAGES.to_owned()),
        (Gemini, tiny_path()),
    ] {
        let r = gw
            .send(
                &call(p, &path, &json!(null))
                    .body(b"{\"model\": \"gpt-5\", \"messages\": [".to_vec()),
            )
            .await;
        let e = assert_error(p, &r, 400);
        assert!(e["message"].as_str().unwrap().contains("JSON"), "{e}");
        let r = gw
            .send(&call(p, &path, &json!(null)).body(b"[1,2,3]".to_vec()))
            .await;
        assert_error(p, &r, 400);
    }
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn context_too_long_is_refused_in_each_family() {
    let (mock, gw) = start_strict().await;
    let long = words(1500);
    // Fits by bytes? No: 1500 words are ~8 KB, above the byte bound, and over 1000 tokens.
    let r = gw
        .send(&call(
            OpenAi,
            CHAT,
            &openai_body("openai/tiny", &long, None, false),
        ))
        .await;
    let e = assert_error(OpenAi, &r, 400);
    assert_eq!(e["code"], "context_length_exceeded", "{e}");
    assert_eq!(e["param"], "messages");
    assert!(e["message"].as_str().unwrap().contains("1000"), "{e}");
    let r = gw
        .send(&call(
            Anthropic,
            MESSAGES,
            &anthropic_body("tiny-claude", &long, None, true),
        ))
        .await;
    let e = assert_error(Anthropic, &r, 400);
    assert_eq!(e["type"], "invalid_request_error");
    assert!(e["message"].as_str().unwrap().contains("context"), "{e}");
    let r = gw
        .send(&call(Gemini, &tiny_path(), &gemini_body(&long, None)))
        .await;
    let e = assert_error(Gemini, &r, 400);
    assert_eq!(e["status"], "INVALID_ARGUMENT");
    assert!(e["message"].as_str().unwrap().contains("context"), "{e}");
    // Input that fits alone but not with the requested output.
    let near = words(850);
    let mut body = openai_body("openai/tiny", &near, None, false);
    let r = gw.send(&call(OpenAi, CHAT, &body)).await;
    assert_eq!(r.status, 200, "850 tokens fit in 1000: {}", r.text());
    body["max_tokens"] = json!(100);
    body["messages"][0]["content"] = json!(words(950));
    let e = assert_error(OpenAi, &gw.send(&call(OpenAi, CHAT, &body)).await, 400);
    assert_eq!(e["code"], "context_length_exceeded");
    // Many bytes, few tokens (the byte bound fails, the real count passes).
    let dense = " information".repeat(500);
    let r = gw
        .send(&call(
            OpenAi,
            CHAT,
            &openai_body("openai/tiny", &dense, None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "6000 bytes of ~500 tokens fit: {}", r.text());
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn unknown_and_invisible_models_are_404_in_each_family() {
    let (mock, gw) = start().await;
    let cases: Vec<(Protocol, String, Value)> = vec![
        (
            OpenAi,
            CHAT.into(),
            openai_body("no-such-model", "hi", None, false),
        ),
        (
            OpenAi,
            CHAT.into(),
            openai_body("openai/no-such-model", "hi", None, false),
        ),
        (
            OpenAi,
            CHAT.into(),
            openai_body("anthropic/gpt-5", "hi", None, false),
        ),
        (
            OpenAi,
            CHAT.into(),
            openai_body("nobody/gpt-5", "hi", None, false),
        ),
        (
            Anthropic,
            MESSAGES.into(),
            anthropic_body("no-such-model", "hi", None, false),
        ),
        // gpt-5 does not speak the anthropic protocol
        (
            Anthropic,
            MESSAGES.into(),
            anthropic_body("gpt-5", "hi", None, false),
        ),
        (
            Gemini,
            gemini_path("google/no-such-model", GeminiMode::Whole),
            gemini_body("hi", None),
        ),
        (
            Gemini,
            gemini_path("no-such-model", GeminiMode::StreamSse),
            gemini_body("hi", None),
        ),
        // openai does not accept family C; claude does not speak gemini
        (
            Gemini,
            gemini_path("openai/gpt-5", GeminiMode::Whole),
            gemini_body("hi", None),
        ),
        (
            Gemini,
            gemini_path("claude-sonnet-4.7", GeminiMode::Whole),
            gemini_body("hi", None),
        ),
        (
            Gemini,
            format!("{GOOGLE}/google/no-such-model:countTokens"),
            gemini_body("hi", None),
        ),
    ];
    for (p, path, body) in &cases {
        let e = assert_error(*p, &gw.send(&call(*p, path, body)).await, 404);
        match p {
            OpenAi | Responses => assert_eq!(e["code"], "model_not_found"),
            Anthropic => assert_eq!(e["type"], "not_found_error"),
            Gemini => assert_eq!(e["status"], "NOT_FOUND"),
        }
    }
    assert!(mock.requests().is_empty());
}

/// The three families' stream routes for a prompt, with how to read their end.
fn stream_cases(prompt: &str) -> Vec<(Protocol, String, Value)> {
    vec![
        (
            OpenAi,
            CHAT.into(),
            openai_body("openai/gpt-5", prompt, None, true),
        ),
        (
            Anthropic,
            MESSAGES.into(),
            anthropic_body("claude-sonnet-4.7", prompt, None, true),
        ),
        (
            Gemini,
            gemini_path("google/gemini-3.1-pro", GeminiMode::StreamSse),
            gemini_body(prompt, None),
        ),
        (
            Gemini,
            gemini_path("gemini-3.1-pro", GeminiMode::JsonArray),
            gemini_body(prompt, None),
        ),
    ]
}

fn whole_cases(prompt: &str) -> Vec<(Protocol, String, Value)> {
    vec![
        (
            OpenAi,
            CHAT.into(),
            openai_body("openai/gpt-5", prompt, None, false),
        ),
        (
            Anthropic,
            MESSAGES.into(),
            anthropic_body("claude-sonnet-4.7", prompt, None, false),
        ),
        (
            Gemini,
            gemini_path("google/gemini-3.1-pro", GeminiMode::Whole),
            gemini_body(prompt, None),
        ),
    ]
}

#[tokio::test]
async fn upstream_error_statuses_reach_the_client_in_its_shape() {
    let (_mock, gw) = start().await;
    for (status, retry) in [(500, false), (429, true), (400, false), (503, false)] {
        let prompt = format!("fail please [[status:{status}]]");
        for (p, path, body) in whole_cases(&prompt)
            .into_iter()
            .chain(stream_cases(&prompt))
        {
            let r = gw.send(&call(p, &path, &body)).await;
            let e = assert_error(p, &r, status);
            let message = e["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("mock: forced status {status}")),
                "{p:?} {path}: {e}"
            );
            assert_eq!(
                r.header("retry-after").is_some(),
                retry,
                "{p:?} {status}: {:?}",
                r.headers
            );
            if retry {
                assert_eq!(r.header("retry-after"), Some("1"));
            }
            let want = match (p, status) {
                (OpenAi | Responses, 500 | 503) => "server_error",
                (OpenAi | Responses, 429) => "rate_limit_error",
                (OpenAi | Responses, _) => "invalid_request_error",
                (Anthropic, 500) => "api_error",
                (Anthropic, 429) => "rate_limit_error",
                (Anthropic, 503) => "api_error",
                (Anthropic, _) => "invalid_request_error",
                (Gemini, 500) => "INTERNAL",
                (Gemini, 429) => "RESOURCE_EXHAUSTED",
                (Gemini, 503) => "UNAVAILABLE",
                (Gemini, _) => "INVALID_ARGUMENT",
            };
            let got = if p == Gemini {
                &e["status"]
            } else {
                &e["type"]
            };
            assert_eq!(got, want, "{p:?} {status}: {e}");
        }
    }
}

#[tokio::test]
async fn unreachable_upstream_and_missing_provider_key() {
    let (mock, gw) = start().await;
    for stream in [false, true] {
        let r = gw
            .send(&call(
                OpenAi,
                CHAT,
                &openai_body("offline", "hi", None, stream),
            ))
            .await;
        let e = assert_error(OpenAi, &r, 502);
        assert_eq!(e["type"], "server_error");
        assert!(
            e["message"].as_str().unwrap().contains("unreachable"),
            "{e}"
        );
        let r = gw
            .send(&call(
                OpenAi,
                CHAT,
                &openai_body("nokey/orphan-key", "hi", None, stream),
            ))
            .await;
        let e = assert_error(OpenAi, &r, 503);
        assert!(
            e["message"].as_str().unwrap().contains("SB_TEST_UNSET_KEY"),
            "{e}"
        );
    }
    assert!(
        mock.requests().is_empty(),
        "a request without a provider key went upstream"
    );
}

#[tokio::test]
async fn slow_upstream_times_out_with_504_without_resending() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &["--read-timeout-ms", "300"]).await;
    for (p, path, body) in whole_cases("warm the pool")
        .into_iter()
        .chain(stream_cases("warm the pool"))
    {
        assert_eq!(gw.send(&call(p, &path, &body)).await.status, 200);
    }
    // The upstream would answer after 60 s: only the 300 ms read timeout
    // can have made the 504 (no bound on the time taken is asserted).
    for (p, path, body) in whole_cases("slowly [[slow:60000]]")
        .into_iter()
        .chain(stream_cases("slowly [[slow:60000]]"))
    {
        mock.clear();
        let r = gw.send(&call(p, &path, &body)).await;
        let e = assert_error(p, &r, 504);
        match p {
            OpenAi | Responses => assert_eq!(e["type"], "server_error"),
            Anthropic => assert!(e["type"].is_string()),
            Gemini => assert_eq!(e["status"], "DEADLINE_EXCEEDED"),
        }
        assert_eq!(
            mock.requests().len(),
            1,
            "{p:?} {path}: a timed-out request was sent again"
        );
    }
    // A stream that stalls after its first frame: the timeout ends it with an error event.
    // (It would go on after 60 s: the error event is the timeout's.)
    for (p, path, body) in stream_cases("stalling [[stall:60000]]") {
        let r = gw.send(&call(p, &path, &body)).await;
        assert_eq!(r.status, 200);
        let e = stream_error(p, &path, &r);
        assert!(e.to_string().contains("timed out"), "{p:?}: {e}");
    }
}

#[tokio::test]
async fn broken_streams_end_with_the_family_error_event() {
    let (mock, gw) = start().await;
    for (p, path, body) in stream_cases("break it [[cut]] please") {
        let r = gw.send(&call(p, &path, &body)).await;
        let e = stream_error(p, &path, &r);
        assert!(
            e["message"].as_str().unwrap().contains("upstream"),
            "{p:?}: {e}"
        );
    }
    // One unreadable frame in an otherwise healthy stream is skipped (and
    // counted): the client gets the whole answer and a clean end.
    let prompt = "break it [[malformed]] please";
    for (p, path, body) in stream_cases(prompt) {
        let r = gw.send(&call(p, &path, &body)).await;
        assert_eq!(r.status, 200, "{p:?}: {}", r.text());
        assert!(!r.text().contains("\"error\""), "{p:?}: {}", r.text());
        let text = if path.ends_with(":streamGenerateContent") {
            let items: Vec<Value> = serde_json::from_slice(&r.body).unwrap();
            stream_text(p, &items)
        } else {
            stream_text(
                p,
                &event_json(&crate::common::http_client::parse_sse(&r.body)),
            )
        };
        assert_eq!(
            text,
            crate::common::mock_upstream::expected_reply(p, prompt),
            "{p:?} {path}"
        );
    }
    let m = metrics_text(gw.metrics).await;
    assert!(
        metric_value(
            &m,
            "switchboard_upstream_errors_total",
            &["kind=\"skipped_frame\""]
        )
        .is_some_and(|n| n >= 4.0),
        "{m}"
    );
    // The upstream's own error event is passed on as it is.
    for (p, path, body) in stream_cases("break it [[stream-error]] please") {
        let r = gw.send(&call(p, &path, &body)).await;
        let e = stream_error(p, &path, &r);
        match p {
            OpenAi => assert_eq!(e["message"], "mock: upstream failed mid-stream"),
            Anthropic => assert_eq!(
                e,
                json!({"type": "overloaded_error", "message": "Overloaded"})
            ),
            Gemini => {
                assert_eq!(e["message"], "mock: upstream failed mid-stream");
                assert_eq!(e["status"], "UNAVAILABLE");
            }
            Responses => unreachable!("no family D stream case yet"),
        }
    }
    // Non-stream: a body cut short or not JSON is a 502, never a 200.
    for marker in ["[[cut]]", "[[malformed]]"] {
        for (p, path, body) in whole_cases(&format!("break it {marker}")) {
            let r = gw.send(&call(p, &path, &body)).await;
            assert_error(p, &r, 502);
        }
    }
    // A cut stream, and one that failed with the upstream's own server
    // error, was asked again twice (the default `continuation: auto`; its
    // model takes no prefill, so the whole answer, which failed again in the
    // same place: docs/resilience.md "Continuing a cut stream"), and the
    // client got the upstream's own error event as it was; every other
    // broken exchange reached the upstream once.
    assert_eq!(mock.requests().len(), 4 * 3 + 4 * 3 + 4 + 2 * 3);
}

#[tokio::test]
async fn a_client_leaving_mid_stream_drops_the_upstream_request() {
    let (mock, gw) = start().await;
    // The upstream stalls for 60 s: the connection closing before that is
    // the client's leaving (waited for as events, no bound on the time taken).
    for (i, (p, path, body)) in stream_cases("wait for it [[stall:60000]]")
        .into_iter()
        .enumerate()
    {
        let mut s = http_client::send_streaming(gw.addr, &call(p, &path, &body))
            .await
            .unwrap();
        assert_eq!(s.status, 200);
        let first = s.next_chunk().await.unwrap().unwrap();
        assert!(!first.is_empty());
        let active = metric_value(
            &metrics_text(gw.metrics).await,
            "switchboard_active_streams",
            &[],
        );
        assert_eq!(active, Some(1.0), "{p:?} {path}");
        drop(s);
        eventually(
            Duration::from_secs(20),
            "the upstream connection to close",
            || async { (mock.aborted_streams() == i + 1).then_some(()) },
        )
        .await;
        eventually(
            Duration::from_secs(20),
            "active streams back to 0",
            || async {
                let text = metrics_text(gw.metrics).await;
                (metric_value(&text, "switchboard_active_streams", &[]) == Some(0.0)).then_some(())
            },
        )
        .await;
    }
    assert!(
        gw.log().contains("client went away mid-stream"),
        "{}",
        gw.log()
    );
    // The gateway still serves afterwards.
    let r = gw
        .send(&call(
            OpenAi,
            CHAT,
            &openai_body("gpt-5", "still there?", None, false),
        ))
        .await;
    assert_eq!(r.status, 200);
}
