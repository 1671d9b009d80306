//! End-to-end: inference through the real binary to the mock upstream, for each
//! client family against an upstream of its own protocol (issue 3): replies,
//! model names, what reaches the upstream (and what never does), streams in
//! every framing, body sizes up to the limit and above it, chunked and
//! `Expect: 100-continue` uploads, and local token counting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{authed, pingora_conf, Gateway, KEY};
use crate::common::http_client::{self, parse_sse, Request, Response};
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol, RecordedRequest};
use serde_json::{json, Value};
use std::time::Instant;

use Protocol::{Anthropic, Gemini, OpenAi, Responses};

fn assert_json_ok(r: &Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    assert_eq!(
        r.header("content-length")
            .and_then(|v| v.parse::<usize>().ok()),
        Some(r.body.len())
    );
    r.json()
}

fn assert_streamed(r: &Response, content_type: &str) {
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("content-type").unwrap().starts_with(content_type),
        "{:?}",
        r.headers
    );
    assert!(
        r.header("content-length").is_none(),
        "a stream has no content-length"
    );
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert!(r.header("x-request-id").is_some());
}

fn only_request(mock: &MockUpstream) -> RecordedRequest {
    let reqs = mock.requests();
    assert_eq!(
        reqs.len(),
        1,
        "upstream requests: {:?}",
        reqs.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    reqs.into_iter().next().unwrap()
}

/// Checks a family A stream; returns its chunks.
fn check_openai_stream(r: &Response, text: &str) -> Vec<Value> {
    assert_streamed(r, "text/event-stream");
    let events = parse_sse(&r.body);
    assert_eq!(
        events.last().map(|e| e.data.as_str()),
        Some("[DONE]"),
        "{}",
        r.text()
    );
    assert_eq!(events.iter().filter(|e| e.data == "[DONE]").count(), 1);
    let chunks = event_json(&events);
    assert!(chunks.len() >= 3);
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
        assert_eq!(c["model"], "openai/gpt-5", "{c}");
        assert!(c.get("error").is_none(), "{c}");
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(chunks
        .iter()
        .any(|c| c["choices"][0]["finish_reason"] == "stop"));
    assert_eq!(stream_text(OpenAi, &chunks), expected_reply(OpenAi, text));
    chunks
}

/// Checks a family B stream; returns its events' data.
fn check_anthropic_stream(r: &Response, text: &str) -> Vec<Value> {
    assert_streamed(r, "text/event-stream");
    let events = parse_sse(&r.body);
    let names: Vec<&str> = events.iter().map(|e| e.name()).collect();
    let data = event_json(&events);
    for (e, d) in events.iter().zip(&data) {
        assert_eq!(d["type"], e.name(), "event name and type differ");
    }
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(names.last(), Some(&"message_stop"), "{names:?}");
    let pos = |n: &str| {
        names
            .iter()
            .position(|x| *x == n)
            .unwrap_or_else(|| panic!("no {n} in {names:?}"))
    };
    assert!(pos("message_start") < pos("content_block_start"));
    assert!(pos("content_block_start") < pos("content_block_delta"));
    assert!(pos("content_block_delta") < pos("content_block_stop"));
    assert!(pos("content_block_stop") < pos("message_delta"));
    assert!(pos("message_delta") < pos("message_stop"));
    assert!(!names.contains(&"error"));
    assert_eq!(data[0]["message"]["model"], "claude-sonnet-4.7");
    assert_eq!(
        stream_text(Anthropic, &data),
        expected_reply(Anthropic, text)
    );
    data
}

/// Checks family C stream chunks (from SSE or a JSON array).
fn check_gemini_chunks(chunks: &[Value], text: &str) {
    assert!(chunks.len() >= 3, "{chunks:?}");
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c["modelVersion"], "gemini-3.1-pro", "{c}");
        assert!(c.get("error").is_none(), "{c}");
        let last = i + 1 == chunks.len();
        assert_eq!(
            c.get("usageMetadata").is_some(),
            last,
            "usageMetadata only on the last: {c}"
        );
        assert_eq!(
            c["candidates"][0].get("finishReason").is_some(),
            last,
            "{c}"
        );
    }
    let last = chunks.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert!(
        last["usageMetadata"]["candidatesTokenCount"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(stream_text(Gemini, chunks), expected_reply(Gemini, text));
}

fn check_gemini_sse(r: &Response, text: &str) -> Vec<Value> {
    assert_streamed(r, "text/event-stream");
    let events = parse_sse(&r.body);
    assert!(events.iter().all(|e| e.name() == "message"));
    let chunks = event_json(&events);
    check_gemini_chunks(&chunks, text);
    chunks
}

fn check_gemini_array(r: &Response, text: &str) -> Vec<Value> {
    assert_streamed(r, "application/json");
    let v: Value = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("E13j body is not a JSON array ({e}): {}", r.text()));
    let chunks = v.as_array().expect("a JSON array").clone();
    check_gemini_chunks(&chunks, text);
    chunks
}

#[tokio::test]
async fn family_a_same_protocol_whole_and_streamed() {
    let (mock, gw) = start().await;
    let text = "Say hello to the gateway, über-quickly ✓";
    for model in ["openai/gpt-5", "gpt-5"] {
        mock.clear();
        let r = gw
            .send(&with_hop_headers(call(
                OpenAi,
                CHAT,
                &openai_body(model, text, Some("be brief"), false),
            )))
            .await;
        let v = assert_json_ok(&r);
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(
            v["model"], "openai/gpt-5",
            "family A responses carry provider/model_id"
        );
        assert_eq!(reply_text(OpenAi, &v), expected_reply(OpenAi, text));
        assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        assert_eq!(r.header("x-request-id"), Some("trace-e2e-1"));
        let up = only_request(&mock);
        assert_upstream_request(OpenAi, &up, "gpt-5-2025-08-07", false);
        assert_eq!(up.header("x-request-id"), Some("trace-e2e-1"));
        assert_eq!(up.json().unwrap()["messages"][0]["content"], "be brief");

        mock.clear();
        let r = gw
            .send(&with_hop_headers(call(
                OpenAi,
                CHAT,
                &openai_body(model, text, None, true),
            )))
            .await;
        check_openai_stream(&r, text);
        assert_upstream_request(OpenAi, &only_request(&mock), "gpt-5-2025-08-07", true);
    }
}

#[tokio::test]
async fn family_b_same_protocol_whole_and_streamed() {
    let (mock, gw) = start().await;
    let text = "Bonjour, passerelle — ça va? 🌍";
    for model in ["claude-sonnet-4.7", "anthropic/claude-sonnet-4.7"] {
        mock.clear();
        let r = gw
            .send(&with_hop_headers(call(
                Anthropic,
                MESSAGES,
                &anthropic_body(model, text, Some("be brief"), false),
            )))
            .await;
        let v = assert_json_ok(&r);
        assert_eq!(v["type"], "message");
        assert_eq!(
            v["model"], "claude-sonnet-4.7",
            "family B responses carry the bare id"
        );
        assert_eq!(reply_text(Anthropic, &v), expected_reply(Anthropic, text));
        assert_eq!(v["stop_reason"], "end_turn");
        let up = only_request(&mock);
        assert_upstream_request(Anthropic, &up, "claude-sonnet-4-7", false);
        assert_eq!(up.json().unwrap()["system"], "be brief");

        mock.clear();
        let r = gw
            .send(&with_hop_headers(call(
                Anthropic,
                MESSAGES,
                &anthropic_body(model, text, None, true),
            )))
            .await;
        check_anthropic_stream(&r, text);
        assert_upstream_request(Anthropic, &only_request(&mock), "claude-sonnet-4-7", true);
    }
    // Bearer auth on family B, and a client anthropic-version other than the upstream's.
    mock.clear();
    let r = gw
        .send(
            &Request::post(MESSAGES)
                .json(&anthropic_body("claude-sonnet-4.7", text, None, false))
                .header("authorization", &format!("Bearer {KEY}"))
                .header("anthropic-version", "2024-01-01")
                .header("anthropic-beta", "tools-2024-04-04"),
        )
        .await;
    assert_eq!(
        reply_text(Anthropic, &assert_json_ok(&r)),
        expected_reply(Anthropic, text)
    );
    let up = only_request(&mock);
    assert_upstream_request(Anthropic, &up, "claude-sonnet-4-7", false);
    assert_eq!(up.header("anthropic-beta"), Some("tools-2024-04-04"));
}

#[tokio::test]
async fn family_c_same_protocol_every_path_form() {
    let (mock, gw) = start().await;
    let text = "Hallo Gateway, grüß dich ✓";
    for model in ["google/gemini-3.1-pro", "gemini-3.1-pro"] {
        for mode in [
            GeminiMode::Whole,
            GeminiMode::GenerateSse,
            GeminiMode::StreamSse,
            GeminiMode::JsonArray,
        ] {
            mock.clear();
            let path = gemini_path(model, mode);
            let r = gw
                .send(&with_hop_headers(call(
                    Gemini,
                    &path,
                    &gemini_body(text, Some("be brief")),
                )))
                .await;
            match mode {
                GeminiMode::Whole => {
                    let v = assert_json_ok(&r);
                    assert_eq!(v["modelVersion"], "gemini-3.1-pro", "{path}");
                    assert_eq!(reply_text(Gemini, &v), expected_reply(Gemini, text));
                    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
                    assert!(v["usageMetadata"]["promptTokenCount"].as_u64().unwrap() > 0);
                }
                GeminiMode::JsonArray => {
                    check_gemini_array(&r, text);
                }
                _ => {
                    check_gemini_sse(&r, text);
                }
            }
            let up = only_request(&mock);
            assert_upstream_request(Gemini, &up, "gemini-3.1-pro", mode != GeminiMode::Whole);
            assert_eq!(
                up.json().unwrap()["systemInstruction"]["parts"][0]["text"],
                "be brief"
            );
        }
    }
    // The key in the query instead of the header: accepted, never forwarded.
    mock.clear();
    let path = format!(
        "{}&key={KEY}",
        gemini_path("gemini-3.1-pro", GeminiMode::StreamSse)
    );
    let r = gw
        .send(&Request::post(&path).json(&gemini_body(text, None)))
        .await;
    check_gemini_sse(&r, text);
    assert_upstream_request(Gemini, &only_request(&mock), "gemini-3.1-pro", true);
    mock.clear();
    let path = format!(
        "{}?key={KEY}",
        gemini_path("gemini-3.1-pro", GeminiMode::Whole)
    );
    let r = gw
        .send(&Request::post(&path).json(&gemini_body(text, None)))
        .await;
    assert_eq!(
        reply_text(Gemini, &assert_json_ok(&r)),
        expected_reply(Gemini, text)
    );
    assert_upstream_request(Gemini, &only_request(&mock), "gemini-3.1-pro", false);
}

/// Builds a request body around a system text.
type BodyWithSystem = Box<dyn Fn(&str) -> Value>;

#[tokio::test]
async fn streams_look_the_same_whatever_the_upstream_framing() {
    let (_mock, gw) = start().await;
    let text = "one two three four five six seven";
    let cases: Vec<(Protocol, String, BodyWithSystem)> = vec![
        (
            OpenAi,
            CHAT.into(),
            Box::new(move |s| openai_body("openai/gpt-5", text, Some(s), true)),
        ),
        (
            Anthropic,
            MESSAGES.into(),
            Box::new(move |s| anthropic_body("claude-sonnet-4.7", text, Some(s), true)),
        ),
        (
            Gemini,
            gemini_path("google/gemini-3.1-pro", GeminiMode::StreamSse),
            Box::new(move |s| gemini_body(text, Some(s))),
        ),
        (
            Gemini,
            gemini_path("google/gemini-3.1-pro", GeminiMode::JsonArray),
            Box::new(move |s| gemini_body(text, Some(s))),
        ),
    ];
    for (p, path, body) in &cases {
        let array = path.ends_with(":streamGenerateContent");
        let seen = |r: &Response| -> Value {
            match (*p, array) {
                (Gemini, true) => {
                    check_gemini_array(r, text);
                    normalise(&r.json())
                }
                _ => {
                    let _ = match *p {
                        OpenAi => check_openai_stream(r, text),
                        Anthropic => check_anthropic_stream(r, text),
                        Gemini => check_gemini_sse(r, text),
                        Responses => unreachable!("no family D case in this table yet"),
                    };
                    json!(visible_events(&r.body)
                        .into_iter()
                        .map(|(n, d)| json!([n, d]))
                        .collect::<Vec<_>>())
                }
            }
        };
        let baseline = seen(&gw.send(&call(*p, path, &body("plain system text"))).await);
        for marker in [
            "[[crlf]]",
            "[[sse-comments]]",
            "[[chunk:1]]",
            "[[chunk:0]]",
            "[[crlf]] [[sse-comments]] [[chunk:2]]",
        ] {
            let r = gw.send(&call(*p, path, &body(marker))).await;
            assert_eq!(seen(&r), baseline, "{p:?} {path} with {marker}");
        }
    }
}

/// A base64-looking payload of `n` bytes (a random block, repeated: cheap to build
/// even unoptimised).
fn payload(n: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u32 = 0x2545_f491;
    let block: String = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            ALPHABET[(x % 64) as usize] as char
        })
        .collect();
    let mut s = block.repeat(n / block.len() + 1);
    s.truncate(n);
    s
}

/// Long text of real words, about `n` bytes, that tokenises to far fewer tokens than bytes.
fn long_text(n: usize) -> String {
    let words = [
        " information",
        " international",
        " development",
        " government",
        " everything",
        " understanding",
    ];
    let mut s = String::with_capacity(n + 16);
    let mut i = 0;
    while s.len() < n {
        s.push_str(words[i % words.len()]);
        i += 1;
    }
    s
}

/// The inference routes, by route id (docs/api.md "Routes").
const ROUTES: [&str; 7] = ["E4", "E8", "E8c", "E12", "E13", "E13j", "E14"];

fn route_family(id: &str) -> Protocol {
    match id {
        "E4" => OpenAi,
        "E8" | "E8c" => Anthropic,
        _ => Gemini,
    }
}

/// A request on route `id` carrying an image of `image` bytes (or, when `history`, a
/// long multi-turn history of about that size) and the user text `text`.
fn sized_request(id: &str, image: usize, history: bool, text: &str) -> (Protocol, String, Value) {
    let p = route_family(id);
    let path = match id {
        "E4" => CHAT.to_owned(),
        "E8" => MESSAGES.to_owned(),
        "E8c" => COUNT.to_owned(),
        "E12" => gemini_path("google/gemini-3.1-pro", GeminiMode::Whole),
        "E13" => gemini_path("google/gemini-3.1-pro", GeminiMode::StreamSse),
        "E13j" => gemini_path("google/gemini-3.1-pro", GeminiMode::JsonArray),
        _ => gemini_path("google/gemini-3.1-pro", GeminiMode::Whole)
            .replace(":generateContent", ":countTokens"),
    };
    let turns = 64;
    let chunk = if history {
        long_text(image / turns)
    } else {
        String::new()
    };
    let data = if history {
        String::new()
    } else {
        payload(image)
    };
    let body = match p {
        OpenAi => {
            let mut messages = Vec::new();
            if history {
                for i in 0..turns {
                    let role = if i % 2 == 0 { "user" } else { "assistant" };
                    messages.push(json!({"role": role, "content": chunk}));
                }
                messages.push(json!({"role": "user", "content": text}));
            } else {
                messages.push(json!({"role": "user", "content": [
                    {"type": "text", "text": text},
                    {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}
                ]}));
            }
            json!({"model": "openai/gpt-5", "messages": messages})
        }
        Anthropic => {
            let mut messages = Vec::new();
            if history {
                for i in 0..turns {
                    let role = if i % 2 == 0 { "user" } else { "assistant" };
                    messages.push(json!({"role": role, "content": chunk}));
                }
                messages.push(json!({"role": "user", "content": text}));
            } else {
                messages.push(json!({"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
                    {"type": "text", "text": text}
                ]}));
            }
            let mut b = json!({"model": "claude-sonnet-4.7", "messages": messages});
            if id == "E8" {
                b["max_tokens"] = json!(100);
                b["stream"] = json!(false);
            }
            b
        }
        Gemini => {
            let mut contents = Vec::new();
            if history {
                for i in 0..turns {
                    let role = if i % 2 == 0 { "user" } else { "model" };
                    contents.push(json!({"role": role, "parts": [{"text": chunk}]}));
                }
                contents.push(json!({"role": "user", "parts": [{"text": text}]}));
            } else {
                contents.push(json!({"role": "user", "parts": [
                    {"inlineData": {"mimeType": "image/png", "data": data}},
                    {"text": text}
                ]}));
            }
            json!({"contents": contents})
        }
        Responses => unreachable!("no family D route in ROUTES yet"),
    };
    (p, path, body)
}

async fn check_sized(gw: &Gateway, mock: &MockUpstream, id: &str, size: usize, history: bool) {
    let text = format!("describe this ({id}, {size} bytes)");
    let (p, path, body) = sized_request(id, size, history, &text);
    let bytes = body.to_string();
    assert!(bytes.len() >= size, "{id}: body of {} bytes", bytes.len());
    mock.clear();
    let r = gw.send(&call(p, &path, &body)).await;
    let what = format!(
        "{id} with a {} byte body{}",
        bytes.len(),
        if history { " (history)" } else { "" }
    );
    match id {
        "E8c" | "E14" => {
            let v = assert_json_ok(&r);
            let n = if id == "E14" {
                &v["totalTokens"]
            } else {
                &v["input_tokens"]
            };
            let n = n.as_u64().unwrap();
            assert!(n > 0, "{what}: {v}");
            if history {
                assert!(n > 10_000, "{what}: only {n} tokens counted");
            }
            assert!(mock.requests().is_empty(), "{what}: counted upstream");
            return;
        }
        "E13" => {
            check_gemini_sse(&r, &text);
        }
        "E13j" => {
            check_gemini_array(&r, &text);
        }
        _ => assert_eq!(
            reply_text(p, &assert_json_ok(&r)),
            expected_reply(p, &text),
            "{what}"
        ),
    }
    // The body reaches the upstream byte for byte, the model value aside.
    let up = only_request(mock);
    let expected = match p {
        OpenAi => bytes.replacen(
            "\"model\":\"openai/gpt-5\"",
            "\"model\":\"gpt-5-2025-08-07\"",
            1,
        ),
        Anthropic => bytes.replacen(
            "\"model\":\"claude-sonnet-4.7\"",
            "\"model\":\"claude-sonnet-4-7\"",
            1,
        ),
        Gemini => bytes,
        Responses => unreachable!("no family D route in ROUTES yet"),
    };
    assert!(
        up.body == expected.as_bytes(),
        "{what}: the upstream body differs ({} bytes)",
        up.body.len()
    );
}

#[tokio::test]
async fn one_mebibyte_bodies_on_every_route() {
    let (mock, gw) = start().await;
    for id in ROUTES {
        check_sized(&gw, &mock, id, 1 << 20, false).await;
        check_sized(&gw, &mock, id, 1 << 20, true).await;
    }
}

#[tokio::test]
async fn twenty_mebibyte_bodies_on_every_route() {
    let (mock, gw) = start().await;
    for id in ROUTES {
        check_sized(&gw, &mock, id, 20 << 20, false).await;
    }
}

#[tokio::test]
async fn bodies_above_the_limit_get_413_and_never_reach_the_upstream() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(
        &crate::common::gateway::catalog(&mock),
        &crate::common::gateway::keys(),
        &["--max-body-bytes", "100000"],
    )
    .await;
    for id in ROUTES {
        let (p, path, body) = sized_request(id, 150_000, false, "too big");
        let e = assert_error(p, &gw.send(&call(p, &path, &body)).await, 413);
        assert!(
            e["message"].as_str().unwrap().contains("100000"),
            "{id}: {e}"
        );
        match p {
            OpenAi | Responses => assert_eq!(e["code"], "request_too_large"),
            Anthropic => assert_eq!(e["type"], "request_too_large"),
            Gemini => assert_eq!(e["status"], "INVALID_ARGUMENT"),
        }
        // Without a content-length (chunked), the limit holds as the body arrives.
        assert_error(p, &gw.send(&call(p, &path, &body).chunked(8192)).await, 413);
        // Announced with Expect: 100-continue: refused before the body is sent.
        let r = gw
            .send(&call(p, &path, &body).header("expect", "100-continue"))
            .await;
        assert_error(p, &r, 413);
        assert_eq!(
            r.expect_answer,
            Some(413),
            "{id}: 413 only after the client gave up waiting and sent the body"
        );
        // Just below the limit: served.
        let (p, path, body) = sized_request(id, 90_000, false, "small enough");
        let r = gw.send(&call(p, &path, &body)).await;
        assert_eq!(r.status, 200, "{id}: {}", r.text());
    }
    let served = mock.requests().len();
    assert_eq!(
        served, 5,
        "only the five below-limit inference requests reach the upstream"
    );
}

#[tokio::test]
async fn chunked_and_expect_continue_uploads() {
    let (mock, gw) = start().await;
    for id in ROUTES {
        let text = format!("chunked upload on {id}");
        let (p, path, body) = sized_request(id, 300_000, false, &text);
        for chunk in [1000, 65536] {
            let r = gw.send(&call(p, &path, &body).chunked(chunk)).await;
            assert_eq!(r.status, 200, "{id} chunked: {}", r.text());
        }
        let r = gw
            .send(&call(p, &path, &body).header("expect", "100-continue"))
            .await;
        assert_eq!(r.status, 200, "{id} expect: {}", r.text());
        assert_eq!(
            r.expect_answer,
            Some(100),
            "{id}: no 100 Continue from the gateway"
        );
        let r = gw
            .send(
                &call(p, &path, &body)
                    .header("expect", "100-continue")
                    .chunked(4096),
            )
            .await;
        assert_eq!(r.status, 200, "{id} expect+chunked: {}", r.text());
    }
    for r in mock.requests() {
        assert_no_client_secrets(&r);
        assert_eq!(r.header("transfer-encoding"), None);
        assert!(r.header("expect").is_none(), "expect forwarded");
        assert_eq!(
            r.header("content-length")
                .unwrap()
                .parse::<usize>()
                .unwrap(),
            r.body.len()
        );
    }
    // A small chunked request, one byte per chunk, and the answer on the same connection twice.
    let mut conn = http_client::Connection::connect(gw.addr).await.unwrap();
    for _ in 0..2 {
        let body = openai_body("gpt-5", "tiny chunks", None, false);
        let r = conn
            .send(&call(OpenAi, CHAT, &body).chunked(1))
            .await
            .unwrap();
        assert_eq!(
            reply_text(OpenAi, &assert_json_ok(&r)),
            expected_reply(OpenAi, "tiny chunks")
        );
    }
}

#[tokio::test]
async fn count_tokens_is_answered_locally() {
    let (mock, gw) = start().await;
    let short = "How many tokens is this?";
    let long = "How many tokens is this? ".repeat(40);
    // E8c: the count_tokens request has no max_tokens.
    let count_b = |text: &str| json!({"model": "claude-sonnet-4.7", "messages": [{"role": "user", "content": text}]});
    let a = assert_json_ok(&gw.send(&call(Anthropic, COUNT, &count_b(short))).await)
        ["input_tokens"]
        .as_u64()
        .unwrap();
    let b = assert_json_ok(&gw.send(&call(Anthropic, COUNT, &count_b(&long))).await)
        ["input_tokens"]
        .as_u64()
        .unwrap();
    assert!(a > 0 && a < 40, "{a}");
    assert!(b > 10 * a, "{b} vs {a}");
    let with_system = json!({"model": "anthropic/claude-sonnet-4.7", "system": long, "messages": [{"role": "user", "content": short}]});
    let c = assert_json_ok(&gw.send(&call(Anthropic, COUNT, &with_system)).await)["input_tokens"]
        .as_u64()
        .unwrap();
    assert!(c > b, "the system prompt counts: {c} vs {b}");
    // E14, both path forms.
    for model in ["google/gemini-3.1-pro", "gemini-3.1-pro"] {
        let path = format!("{GOOGLE}/{model}:countTokens");
        let x = assert_json_ok(
            &gw.send(&call(Gemini, &path, &gemini_body(short, None)))
                .await,
        )["totalTokens"]
            .as_u64()
            .unwrap();
        let y = assert_json_ok(
            &gw.send(&call(Gemini, &path, &gemini_body(&long, None)))
                .await,
        )["totalTokens"]
            .as_u64()
            .unwrap();
        assert!(x > 0 && x < 40 && y > 10 * x, "{x} {y}");
    }
    assert!(
        mock.requests().is_empty(),
        "count tokens called the upstream"
    );
    // Count-tokens routes are authenticated like their family's inference.
    let r = gw
        .send(
            &Request::post(COUNT)
                .json(&count_b(short))
                .header("anthropic-version", "2023-06-01"),
        )
        .await;
    assert_error(Anthropic, &r, 401);
    let r = gw
        .send(&authed(
            "gemini",
            &format!("{GOOGLE}/gemini-3.1-pro:countTokens"),
            "wrong",
            &gemini_body(short, None),
        ))
        .await;
    assert_error(Gemini, &r, 401);
}

#[tokio::test]
async fn a_refused_body_does_not_poison_the_client_connection() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(
        &crate::common::gateway::catalog(&mock),
        &crate::common::gateway::keys(),
        &["--max-body-bytes", "100000"],
    )
    .await;
    let (p, path, big) = sized_request("E4", 150_000, false, "too big");
    let small = openai_body("gpt-5", "after a refusal", None, false);
    for refused in [
        call(p, &path, &big),
        call(p, &path, &big).chunked(10_000),
        Request::post(CHAT).json(&big),
    ] {
        let mut conn = http_client::Connection::connect(gw.addr).await.unwrap();
        let r = conn.send(&refused).await.unwrap();
        assert!(r.status == 413 || r.status == 401, "{}", r.text());
        if conn.is_open() {
            // Whatever of the refused body the gateway did not read must not be taken
            // for the next request.
            let r = conn.send(&call(OpenAi, CHAT, &small)).await.unwrap();
            assert_eq!(
                reply_text(OpenAi, &assert_json_ok(&r)),
                expected_reply(OpenAi, "after a refusal")
            );
        }
    }
    assert!(
        mock.requests()
            .iter()
            .all(|r| r.body_text().contains("after a refusal")),
        "a refused body went upstream"
    );
}

#[tokio::test]
async fn upstream_connections_are_pooled() {
    let (mock, gw) = start().await;
    // One client connection: it stays on one thread, whose pool serves it
    // (each thread keeps its own idle upstream connections).
    let mut conn = http_client::Connection::connect(gw.addr).await.unwrap();
    for i in 0..4 {
        let text = format!("pooled {i}");
        let r = conn
            .send(&call(
                OpenAi,
                CHAT,
                &openai_body("gpt-5", &text, None, false),
            ))
            .await
            .unwrap();
        assert_eq!(
            reply_text(OpenAi, &assert_json_ok(&r)),
            expected_reply(OpenAi, &text)
        );
        let r = conn
            .send(&call(
                OpenAi,
                CHAT,
                &openai_body("gpt-5", &text, None, true),
            ))
            .await
            .unwrap();
        check_openai_stream(&r, &text);
    }
    assert_eq!(mock.requests().len(), 8);
    assert!(
        mock.connections() <= 2,
        "{} upstream connections for 8 sequential requests",
        mock.connections()
    );
    // A stream cut by the upstream is not put back in the pool; the next request still works.
    let r = gw
        .send(&call(
            OpenAi,
            CHAT,
            &openai_body("gpt-5", "cut [[cut]]", None, true),
        ))
        .await;
    assert_eq!(r.status, 200);
    let r = gw
        .send(&call(
            OpenAi,
            CHAT,
            &openai_body("gpt-5", "after the cut", None, false),
        ))
        .await;
    assert_eq!(
        reply_text(OpenAi, &assert_json_ok(&r)),
        expected_reply(OpenAi, "after the cut")
    );
}

/// Upstream connections the mock saw for one request on each of two client
/// connections held open together, through a gateway started with `args`.
async fn upstream_connections_for_two_clients(args: &[&str]) -> usize {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(
        &crate::common::gateway::catalog(&mock),
        &crate::common::gateway::keys(),
        args,
    )
    .await;
    let mut clients = [
        http_client::Connection::connect(gw.addr).await.unwrap(),
        http_client::Connection::connect(gw.addr).await.unwrap(),
    ];
    for (client, text) in [(0, "from a"), (1, "from b"), (0, "a again")] {
        let r = clients[client]
            .send(&call(
                OpenAi,
                CHAT,
                &openai_body("gpt-5", text, None, false),
            ))
            .await
            .unwrap();
        assert_eq!(
            reply_text(OpenAi, &assert_json_ok(&r)),
            expected_reply(OpenAi, text)
        );
    }
    mock.connections()
}

#[tokio::test]
async fn each_thread_keeps_its_pool_unless_pingora_is_told_to_steal_work() {
    // By default each of two threads runs its own event loop, and two
    // client connections open together go one to each: each thread's
    // pool makes its own upstream connection, which its next request reuses.
    let dir = crate::common::gateway::TempDir::new();
    let two = pingora_conf(&dir.file("two-threads.yaml"), "threads: 2\n");
    assert_eq!(upstream_connections_for_two_clients(&["-c", &two]).await, 2);
    // Pingora's work-stealing runtime, asked for: one pool for both.
    let stealing = pingora_conf(
        &dir.file("stealing.yaml"),
        "threads: 2\nwork_stealing: true\n",
    );
    assert_eq!(
        upstream_connections_for_two_clients(&["-c", &stealing]).await,
        1
    );
}

#[tokio::test]
async fn streams_are_relayed_as_they_arrive_not_buffered() {
    let (_mock, gw) = start().await;
    let text = "first frame then a pause";
    let cases = [
        (
            OpenAi,
            CHAT.to_owned(),
            openai_body("gpt-5", text, Some("[[stall:800]]"), true),
        ),
        (
            Anthropic,
            MESSAGES.to_owned(),
            anthropic_body("claude-sonnet-4.7", text, Some("[[stall:800]]"), true),
        ),
        (
            Gemini,
            gemini_path("gemini-3.1-pro", GeminiMode::StreamSse),
            gemini_body(text, Some("[[stall:800]]")),
        ),
        (
            Gemini,
            gemini_path("gemini-3.1-pro", GeminiMode::JsonArray),
            gemini_body(text, Some("[[stall:800]]")),
        ),
    ];
    for (p, path, body) in cases {
        let started = Instant::now();
        let mut s = http_client::send_streaming(gw.addr, &call(p, &path, &body))
            .await
            .unwrap();
        assert_eq!(s.status, 200);
        // The gateway writes whole frames: the first piece holds the first event.
        let first = s.next_chunk().await.unwrap().expect("a first piece");
        let ttft = started.elapsed();
        let head = String::from_utf8_lossy(&first).into_owned();
        assert!(
            head.contains("gpt-5")
                || head.contains("claude-sonnet-4.7")
                || head.contains("gemini-3.1-pro"),
            "{head}"
        );
        let rest = s.read_all().await.unwrap();
        // The upstream stalls 800 ms after its first frame: a gateway that held
        // the first frame back would deliver everything together. A lower bound
        // on the gap, so a slow machine cannot fail it by being slow.
        let gap = started.elapsed() - ttft;
        assert!(
            gap >= std::time::Duration::from_millis(400),
            "{p:?} {path}: the first frame came only {gap:?} before the rest"
        );
        let mut all = first;
        all.extend_from_slice(&rest);
        let r = Response {
            status: 200,
            headers: vec![("content-type".into(), "x".into())],
            body: all,
            expect_answer: None,
        };
        let chunks = match (p, path.ends_with(":streamGenerateContent")) {
            (Gemini, true) => r.json().as_array().unwrap().clone(),
            _ => event_json(&parse_sse(&r.body)),
        };
        assert_eq!(
            stream_text(p, &chunks),
            expected_reply(p, text),
            "{p:?} {path}"
        );
    }
}

/// Sends `request` on a new connection and reads until the gateway closes
/// it, or until `done` says what was read is whole.
async fn raw_exchange(gw: &Gateway, request: &[u8], done: impl Fn(&str) -> bool) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if done(&String::from_utf8_lossy(&got)) {
            break;
        }
    }
    String::from_utf8(got).unwrap()
}

/// Whether `got` holds a head and all the body its `Content-Length` says.
fn whole_by_length(got: &str) -> bool {
    let Some((head, body)) = got.split_once("\r\n\r\n") else {
        return false;
    };
    head.split("\r\n")
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .is_some_and(|n| body.len() >= n.parse::<usize>().unwrap())
}

fn raw_post(version: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST {CHAT} {version}\r\nHost: gw\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nX-Request-Id: raw-1\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The gateway's own answer heads as they leave on HTTP/1 (written
/// straight into the connection's buffer): a JSON answer framed by its
/// length, a stream chunked for HTTP/1.1 and, for an HTTP/1.0 client, a
/// stream that runs to the connection's close with no chunking; `Date`
/// and `Connection` on each.
#[tokio::test]
async fn answer_heads_on_the_wire_for_http11_and_http10_clients() {
    let (_mock, gw) = start().await;
    let text = "heads on the wire";
    let json = raw_post("HTTP/1.1", &openai_body("openai/gpt-5", text, None, false));
    let got = raw_exchange(&gw, &json, whole_by_length).await;
    let (head, body) = got.split_once("\r\n\r\n").unwrap();
    let lines: Vec<&str> = head.split("\r\n").collect();
    assert_eq!(lines[0], "HTTP/1.1 200 OK", "{head}");
    assert_eq!(lines[1], "Content-Type: application/json", "{head}");
    assert_eq!(
        lines[2],
        format!("Content-Length: {}", body.len()),
        "{head}"
    );
    assert!(lines.contains(&"x-request-id: raw-1"), "{head}");
    assert!(lines.iter().any(|l| l.starts_with("Date: ")), "{head}");
    assert_eq!(lines.last(), Some(&"Connection: keep-alive"), "{head}");
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(reply_text(OpenAi, &v), expected_reply(OpenAi, text));

    let stream = openai_body("openai/gpt-5", text, None, true);
    let chunked_end = |got: &str| got.ends_with("\r\n0\r\n\r\n");
    let got = raw_exchange(&gw, &raw_post("HTTP/1.1", &stream), chunked_end).await;
    let (head, body) = got.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
             Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"
        ),
        "{head}"
    );
    assert!(head.ends_with("\r\nConnection: keep-alive"), "{head}");
    assert!(!head.contains("Content-Length"), "{head}");
    assert!(body.ends_with("data: [DONE]\n\n\r\n0\r\n\r\n"), "{body}");

    // HTTP/1.0: no chunks; the body ends when the gateway closes.
    let got = raw_exchange(&gw, &raw_post("HTTP/1.0", &stream), |_| false).await;
    let (head, body) = got.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        ),
        "{head}"
    );
    assert!(!head.contains("Transfer-Encoding"), "{head}");
    assert!(head.ends_with("\r\nConnection: close"), "{head}");
    assert!(body.starts_with("data: {"), "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
}
