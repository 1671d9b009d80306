//! Self-test of the test support: drives the mock upstream through the test
//! HTTP client for each protocol, each marker, keep-alive, large bodies and
//! request recording.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::http_client::{self, parse_sse, Connection, Request, Response, SseEvent};
use crate::common::mock_upstream::{
    agent_tool_reply, expected_reply, split_deltas, MockUpstream, Protocol, QUOTE_LIMIT,
    REASONING_ENCRYPTED_CONTENT, THINKING_SIGNATURE, THINKING_TEXT, TOOL_ARGS,
};

const OPENAI: &str = "/openai/v1/chat/completions";
const ANTHROPIC: &str = "/anthropic/v1/messages";
const GEMINI: &str = "/gemini/v1beta/models/gemini-test";
const RESPONSES: &str = "/responses-api/v1/responses";

fn openai_body(prompt: &str, stream: bool) -> Value {
    json!({
        "model": "gpt-test",
        "stream": stream,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "an earlier question"},
            {"role": "assistant", "content": "an earlier answer"},
            {"role": "user", "content": [{"type": "text", "text": prompt}]},
        ],
        "tools": [{"type": "function", "function": {"name": "lookup_weather", "parameters": {"type": "object"}}}],
    })
}

fn anthropic_body(prompt: &str, stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 100,
        "stream": stream,
        "system": "be brief",
        "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
        ],
        "tools": [{"name": "lookup_weather", "input_schema": {"type": "object"}}],
    })
}

fn gemini_body(prompt: &str) -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        "tools": [{"functionDeclarations": [{"name": "lookup_weather"}]}],
    })
}

async fn post(mock: &MockUpstream, path: &str, body: &Value) -> Response {
    http_client::post_json(mock.addr(), path, &[], body).await
}

/// Data of every event, in order.
fn data_json(events: &[SseEvent]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| e.json().unwrap_or_else(|| panic!("not JSON: {:?}", e.data)))
        .collect()
}

fn openai_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

fn anthropic_text(events: &[SseEvent], delta_type: &str, field: &str) -> String {
    data_json(events)
        .iter()
        .filter(|d| d["type"] == "content_block_delta" && d["delta"]["type"] == delta_type)
        .map(|d| d["delta"][field].as_str().unwrap().to_owned())
        .collect()
}

fn gemini_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .unwrap()
                .clone()
        })
        .filter(|p| p["thought"] != true)
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn openai_non_stream() {
    let mock = MockUpstream::start().await;
    let body = openai_body("Hi there", false);
    let response = post(&mock, OPENAI, &body).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert!(
        response.text().starts_with(r#"{"id":"chatcmpl-"#),
        "{}",
        response.text()
    );
    let json = response.json();
    let expected = expected_reply(Protocol::OpenAi, "Hi there");
    assert!(expected.ends_with(" ✓ héllo 🌍"));
    assert_eq!(json["object"], "chat.completion");
    assert_eq!(json["model"], "gpt-test");
    assert!(json["created"].as_u64().unwrap() > 1_600_000_000);
    let choice = &json["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], expected.as_str());
    assert!(choice["message"].get("tool_calls").is_none());
    assert_eq!(choice["finish_reason"], "stop");
    let sent = mock.last_request().unwrap().body.len() as u64;
    let completion = split_deltas(&expected).len() as u64;
    assert_eq!(json["usage"]["prompt_tokens"], sent / 4);
    assert_eq!(json["usage"]["completion_tokens"], completion);
    assert_eq!(json["usage"]["total_tokens"], sent / 4 + completion);
}

#[tokio::test]
async fn openai_stream_with_usage() {
    let mock = MockUpstream::start().await;
    let mut body = openai_body("Stream me", true);
    body["stream_options"] = json!({"include_usage": true});
    let response = post(&mock, OPENAI, &body).await;
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    assert_eq!(response.header("content-length"), None);
    let events = response.sse();
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks = data_json(&events);
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    assert!(chunks.iter().all(|c| c["id"] == chunks[0]["id"]));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let expected = expected_reply(Protocol::OpenAi, "Stream me");
    assert_eq!(openai_text(&chunks), expected);
    let content_deltas = chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .count();
    assert!(content_deltas >= 3);
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish["choices"][0]["delta"], json!({}));
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], content_deltas as u64);
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c["usage"].is_null()));
}

#[tokio::test]
async fn openai_stream_without_usage() {
    let mock = MockUpstream::start().await;
    let response = post(&mock, OPENAI, &openai_body("plain", true)).await;
    let chunks = data_json(&response.sse());
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    assert_eq!(
        openai_text(&chunks),
        expected_reply(Protocol::OpenAi, "plain")
    );
}

#[tokio::test]
async fn openai_tool_calls() {
    let mock = MockUpstream::start().await;
    let json = post(&mock, OPENAI, &openai_body("weather? [[tool]]", false))
        .await
        .json();
    let message = &json["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    let call = &message["tool_calls"][0];
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "lookup_weather");
    assert_eq!(call["function"]["arguments"], TOOL_ARGS);
    assert_eq!(json["choices"][0]["finish_reason"], "tool_calls");

    let chunks = data_json(
        &post(&mock, OPENAI, &openai_body("weather? [[tool]]", true))
            .await
            .sse(),
    );
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert_eq!(calls[0]["function"]["name"], "lookup_weather");
    assert_eq!(calls[0]["function"]["arguments"], "");
    assert_eq!(calls[0]["type"], "function");
    assert!(calls[0]["id"].is_string());
    assert!(calls.len() >= 3, "arguments in at least 2 fragments");
    assert!(calls[1..]
        .iter()
        .all(|c| c["index"] == 0 && c.get("id").is_none()));
    let arguments: String = calls
        .iter()
        .map(|c| c["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(arguments, TOOL_ARGS);
    assert_eq!(openai_text(&chunks), "");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );

    // Text, then the call; [[thinking]] is ignored by OpenAI.
    let prompt = "both [[text+tool]] [[thinking]]";
    let json = post(&mock, OPENAI, &openai_body(prompt, false))
        .await
        .json();
    let message = &json["choices"][0]["message"];
    assert_eq!(
        message["content"],
        expected_reply(Protocol::OpenAi, prompt).as_str()
    );
    assert_eq!(message["tool_calls"][0]["function"]["arguments"], TOOL_ARGS);
    let chunks = data_json(&post(&mock, OPENAI, &openai_body(prompt, true)).await.sse());
    assert_eq!(
        openai_text(&chunks),
        expected_reply(Protocol::OpenAi, prompt)
    );
    let first_call = chunks
        .iter()
        .position(|c| !c["choices"][0]["delta"]["tool_calls"].is_null())
        .unwrap();
    let last_text = chunks
        .iter()
        .rposition(|c| c["choices"][0]["delta"]["content"].is_string())
        .unwrap();
    assert!(last_text < first_call);
}

#[tokio::test]
async fn anthropic_non_stream_and_count_tokens() {
    let mock = MockUpstream::start().await;
    let body = anthropic_body("Bonjour ✓", false);
    let response = post(&mock, ANTHROPIC, &body).await;
    assert_eq!(response.status, 200);
    assert!(response.text().starts_with(r#"{"id":"msg_"#));
    let json = response.json();
    assert_eq!(json["type"], "message");
    assert_eq!(json["role"], "assistant");
    assert_eq!(json["model"], "claude-test");
    // The last user message has no text (a tool result): the one before counts.
    let expected = expected_reply(Protocol::Anthropic, "Bonjour ✓");
    assert_eq!(json["content"], json!([{"type": "text", "text": expected}]));
    assert_eq!(json["stop_reason"], "end_turn");
    assert_eq!(json["stop_sequence"], Value::Null);
    let sent = mock.last_request().unwrap().body.len() as u64;
    assert_eq!(json["usage"]["input_tokens"], sent / 4);
    assert_eq!(
        json["usage"]["output_tokens"],
        split_deltas(&expected).len() as u64
    );

    let count = post(&mock, "/anthropic/v1/messages/count_tokens", &body).await;
    assert_eq!(count.status, 200);
    assert_eq!(count.json(), json!({"input_tokens": sent / 4}));
}

#[tokio::test]
async fn anthropic_stream() {
    let mock = MockUpstream::start().await;
    let response = post(&mock, ANTHROPIC, &anthropic_body("Stream it", true)).await;
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let events = response.sse();
    for event in &events {
        assert_eq!(
            event.json().unwrap()["type"],
            event.name(),
            "event name matches data type"
        );
    }
    let names: Vec<&str> = events.iter().map(SseEvent::name).collect();
    let deltas = names
        .iter()
        .filter(|n| **n == "content_block_delta")
        .count();
    assert!(deltas >= 3);
    let mut expected = vec!["message_start", "content_block_start", "ping"];
    expected.extend(std::iter::repeat_n("content_block_delta", deltas));
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names, expected);
    let data = data_json(&events);
    let start = &data[0]["message"];
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["model"], "claude-test");
    assert!(start["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        data[1]["content_block"],
        json!({"type": "text", "text": ""})
    );
    assert_eq!(
        anthropic_text(&events, "text_delta", "text"),
        expected_reply(Protocol::Anthropic, "Stream it")
    );
    let message_delta = &data[data.len() - 2];
    assert_eq!(
        message_delta["delta"],
        json!({"stop_reason": "end_turn", "stop_sequence": null})
    );
    assert_eq!(message_delta["usage"]["output_tokens"], deltas as u64);
}

#[tokio::test]
async fn anthropic_tool_and_thinking() {
    let mock = MockUpstream::start().await;
    let json = post(&mock, ANTHROPIC, &anthropic_body("[[tool]]", false))
        .await
        .json();
    let content = json["content"].as_array().unwrap();
    assert_eq!(content.len(), 1);
    assert_eq!(content[0]["type"], "tool_use");
    assert!(content[0]["id"].as_str().unwrap().starts_with("toolu_"));
    assert_eq!(content[0]["name"], "lookup_weather");
    assert_eq!(
        content[0]["input"],
        json!({"location": "Paris", "unit": "c"})
    );
    assert_eq!(json["stop_reason"], "tool_use");

    let prompt = "[[thinking]] [[text+tool]]";
    let json = post(&mock, ANTHROPIC, &anthropic_body(prompt, false))
        .await
        .json();
    let types: Vec<&str> = json["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["thinking", "text", "tool_use"]);
    assert_eq!(json["content"][0]["thinking"], THINKING_TEXT);
    assert_eq!(json["content"][0]["signature"], THINKING_SIGNATURE);

    let events = post(&mock, ANTHROPIC, &anthropic_body(prompt, true))
        .await
        .sse();
    let data = data_json(&events);
    let starts: Vec<&Value> = data
        .iter()
        .filter(|d| d["type"] == "content_block_start")
        .collect();
    assert_eq!(starts[0]["content_block"]["type"], "thinking");
    assert_eq!(starts[1]["content_block"]["type"], "text");
    assert_eq!(starts[2]["content_block"]["type"], "tool_use");
    assert_eq!(starts[2]["content_block"]["name"], "lookup_weather");
    assert_eq!(starts[2]["content_block"]["input"], json!({}));
    assert_eq!(
        starts
            .iter()
            .map(|s| s["index"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert_eq!(
        anthropic_text(&events, "thinking_delta", "thinking"),
        THINKING_TEXT
    );
    assert_eq!(
        anthropic_text(&events, "signature_delta", "signature"),
        THINKING_SIGNATURE
    );
    assert_eq!(
        anthropic_text(&events, "text_delta", "text"),
        expected_reply(Protocol::Anthropic, prompt)
    );
    let fragments = data
        .iter()
        .filter(|d| d["delta"]["type"] == "input_json_delta" && d["delta"]["partial_json"] != "")
        .count();
    assert!(fragments >= 2);
    assert_eq!(
        anthropic_text(&events, "input_json_delta", "partial_json"),
        TOOL_ARGS
    );
    assert_eq!(data[data.len() - 2]["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn gemini_generate_and_count() {
    let mock = MockUpstream::start().await;
    let response = post(
        &mock,
        &format!("{GEMINI}:generateContent"),
        &gemini_body("Hallo"),
    )
    .await;
    assert_eq!(response.status, 200);
    assert!(response
        .text()
        .starts_with(r#"{"candidates":[{"content":{"parts":"#));
    let json = response.json();
    let candidate = &json["candidates"][0];
    let expected = expected_reply(Protocol::Gemini, "Hallo");
    assert_eq!(
        candidate["content"],
        json!({"parts": [{"text": expected}], "role": "model"})
    );
    assert_eq!(candidate["finishReason"], "STOP");
    assert_eq!(candidate["index"], 0);
    assert_eq!(json["modelVersion"], "gemini-test");
    assert!(json["responseId"].is_string());
    let sent = mock.last_request().unwrap().body.len() as u64;
    let completion = split_deltas(&expected).len() as u64;
    assert_eq!(
        json["usageMetadata"],
        json!({
            "promptTokenCount": sent / 4,
            "candidatesTokenCount": completion,
            "totalTokenCount": sent / 4 + completion,
        })
    );

    let count = post(
        &mock,
        &format!("{GEMINI}:countTokens"),
        &gemini_body("Hallo"),
    )
    .await;
    assert_eq!(count.json(), json!({"totalTokens": sent / 4}));

    // A tool call, and a thought part first.
    let json = post(
        &mock,
        &format!("{GEMINI}:generateContent"),
        &gemini_body("[[thinking]] [[text+tool]]"),
    )
    .await
    .json();
    let parts = json["candidates"][0]["content"]["parts"]
        .as_array()
        .unwrap();
    assert_eq!(parts[0], json!({"text": THINKING_TEXT, "thought": true}));
    assert_eq!(
        parts[1]["text"],
        expected_reply(Protocol::Gemini, "[[thinking]] [[text+tool]]").as_str()
    );
    assert_eq!(
        parts[2],
        json!({"functionCall": {
            "name": "lookup_weather",
            "args": {"location": "Paris", "unit": "c"},
        }})
    );
    assert!(
        json["usageMetadata"]["thoughtsTokenCount"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test]
async fn gemini_stream_sse() {
    let mock = MockUpstream::start().await;
    let path = format!("{GEMINI}:streamGenerateContent?alt=sse");
    let response = post(&mock, &path, &gemini_body("Hallo")).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let text = response.text();
    assert!(text.starts_with("data: {"));
    assert!(text.ends_with("}\r\n\r\n"));
    assert_eq!(
        text.matches("\r\n\r\n").count(),
        text.matches("data: ").count()
    );
    let chunks = data_json(&response.sse());
    assert!(chunks.len() >= 3);
    assert_eq!(
        gemini_text(&chunks),
        expected_reply(Protocol::Gemini, "Hallo")
    );
    let (last, rest) = chunks.split_last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert!(last["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0);
    for chunk in rest {
        assert!(chunk.get("usageMetadata").is_none());
        assert!(chunk["candidates"][0].get("finishReason").is_none());
        assert_eq!(chunk["candidates"][0]["content"]["role"], "model");
        assert_eq!(chunk["modelVersion"], "gemini-test");
    }

    let chunks = data_json(
        &post(&mock, &path, &gemini_body("[[tool]] [[thinking]]"))
            .await
            .sse(),
    );
    let parts: Vec<Value> = chunks
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect();
    assert_eq!(parts.first().unwrap()["thought"], true);
    assert_eq!(
        parts.last().unwrap()["functionCall"]["name"],
        "lookup_weather"
    );
    assert_eq!(gemini_text(&chunks), "");
}

#[tokio::test]
async fn gemini_stream_json_array() {
    let mock = MockUpstream::start().await;
    let path = format!("{GEMINI}:streamGenerateContent");
    let response = post(&mock, &path, &gemini_body("Array")).await;
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("application/json; charset=UTF-8")
    );
    assert_eq!(response.header("transfer-encoding"), Some("chunked"));
    let text = response.text();
    assert!(text.starts_with("[{"));
    assert!(text.ends_with("\n]"));
    assert!(text.contains("}\n,{"));
    let chunks = response.json().as_array().unwrap().clone();
    assert!(chunks.len() >= 3);
    assert_eq!(
        gemini_text(&chunks),
        expected_reply(Protocol::Gemini, "Array")
    );
    assert!(chunks.last().unwrap()["usageMetadata"].is_object());
}

#[tokio::test]
async fn forced_statuses_use_each_providers_error_shape() {
    let mock = MockUpstream::start().await;
    for status in [500u16, 429, 503] {
        let prompt = format!("fail [[status:{status}]]");
        let openai = post(&mock, OPENAI, &openai_body(&prompt, true)).await;
        let anthropic = post(&mock, ANTHROPIC, &anthropic_body(&prompt, false)).await;
        let gemini = post(
            &mock,
            &format!("{GEMINI}:streamGenerateContent?alt=sse"),
            &gemini_body(&prompt),
        )
        .await;
        for response in [&openai, &anthropic, &gemini] {
            assert_eq!(response.status, status);
            assert_eq!(
                response.header("retry-after"),
                (status == 429).then_some("1")
            );
            assert!(response
                .header("content-type")
                .unwrap()
                .starts_with("application/json"));
        }
        let error = &openai.json()["error"];
        assert!(error["message"]
            .as_str()
            .unwrap()
            .contains(&status.to_string()));
        assert!(
            error.get("type").is_some()
                && error.get("param").is_some()
                && error.get("code").is_some()
        );
        let anthropic = anthropic.json();
        assert_eq!(anthropic["type"], "error");
        let expected_type = match status {
            429 => "rate_limit_error",
            503 => "overloaded_error",
            _ => "api_error",
        };
        assert_eq!(anthropic["error"]["type"], expected_type);
        let gemini = gemini.json();
        assert_eq!(gemini["error"]["code"], status);
        let expected_status = match status {
            429 => "RESOURCE_EXHAUSTED",
            503 => "UNAVAILABLE",
            _ => "INTERNAL",
        };
        assert_eq!(gemini["error"]["status"], expected_status);
    }
}

#[tokio::test]
async fn unknown_routes_are_404_in_the_paths_shape() {
    let mock = MockUpstream::start().await;
    let openai = http_client::request(mock.addr(), "GET", OPENAI, &[], b"").await;
    assert_eq!(openai.status, 404);
    assert_eq!(openai.json()["error"]["type"], "invalid_request_error");
    let anthropic =
        http_client::request(mock.addr(), "POST", "/anthropic/v1/complete", &[], b"{}").await;
    assert_eq!(anthropic.status, 404);
    assert_eq!(anthropic.json()["error"]["type"], "not_found_error");
    let gemini =
        http_client::request(mock.addr(), "POST", "/v1beta/models/x:predict", &[], b"{}").await;
    assert_eq!(gemini.status, 404);
    assert_eq!(gemini.json()["error"]["status"], "NOT_FOUND");
    let bad = http_client::request(mock.addr(), "POST", OPENAI, &[], b"not json").await;
    assert_eq!(bad.status, 400);
    // Routes work without a prefix and with a trailing slash.
    let bare = post(&mock, "/chat/completions/", &openai_body("bare", false)).await;
    assert_eq!(bare.status, 200);
}

#[tokio::test]
async fn slow_delays_the_head() {
    let mock = MockUpstream::start().await;
    let started = Instant::now();
    let body = openai_body("wait [[slow:300]]", true).to_string();
    let response =
        http_client::request_streaming(mock.addr(), "POST", OPENAI, &[], body.as_bytes()).await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(response.status, 200);
    let events = parse_sse(&response.read_all().await.unwrap());
    assert_eq!(events.last().unwrap().data, "[DONE]");
}

#[tokio::test]
async fn stall_sends_the_first_frame_then_waits() {
    let mock = MockUpstream::start().await;
    for (path, body) in [
        (OPENAI.to_owned(), openai_body("[[stall:400]]", true)),
        (ANTHROPIC.to_owned(), anthropic_body("[[stall:400]]", true)),
        (
            format!("{GEMINI}:streamGenerateContent?alt=sse"),
            gemini_body("[[stall:400]]"),
        ),
    ] {
        let started = Instant::now();
        let mut response = http_client::request_streaming(
            mock.addr(),
            "POST",
            &path,
            &[],
            body.to_string().as_bytes(),
        )
        .await;
        let first = response.next_chunk().await.unwrap().unwrap();
        assert!(!first.is_empty());
        let first_at = started.elapsed();
        let rest = response.read_all().await.unwrap();
        // First bytes before the stall: the rest came at least most of it later.
        assert!(
            started.elapsed() - first_at >= Duration::from_millis(300),
            "first bytes only after the stall"
        );
        assert!(!parse_sse(&[first, rest].concat()).is_empty());
    }
    // Non-stream: the head, then the body after the stall.
    let started = Instant::now();
    let body = anthropic_body("[[stall:300]]", false).to_string();
    let response =
        http_client::request_streaming(mock.addr(), "POST", ANTHROPIC, &[], body.as_bytes()).await;
    let head_at = started.elapsed();
    let json: Value = serde_json::from_slice(&response.read_all().await.unwrap()).unwrap();
    assert!(
        started.elapsed() - head_at >= Duration::from_millis(200),
        "the head only after the stall"
    );
    assert_eq!(json["type"], "message");
}

#[tokio::test]
async fn cut_closes_mid_body() {
    let mock = MockUpstream::start().await;
    for (path, body) in [
        (OPENAI.to_owned(), openai_body("[[cut]]", true)),
        (ANTHROPIC.to_owned(), anthropic_body("[[cut]]", true)),
        (
            format!("{GEMINI}:streamGenerateContent?alt=sse"),
            gemini_body("[[cut]]"),
        ),
        (
            format!("{GEMINI}:streamGenerateContent"),
            gemini_body("[[cut]]"),
        ),
    ] {
        let response = http_client::request_streaming(
            mock.addr(),
            "POST",
            &path,
            &[],
            body.to_string().as_bytes(),
        )
        .await;
        assert_eq!(response.status, 200);
        let (pieces, error) = response.read_until_end().await;
        let error = error.expect("the stream is cut");
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{path}");
        let received = pieces.concat();
        assert!(!received.is_empty());
        assert!(!String::from_utf8_lossy(&received).contains("[DONE]"));
    }
    for (path, body) in [
        (OPENAI.to_owned(), openai_body("[[cut]]", false)),
        (format!("{GEMINI}:generateContent"), gemini_body("[[cut]]")),
    ] {
        let error =
            http_client::try_request(mock.addr(), "POST", &path, &[], body.to_string().as_bytes())
                .await
                .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}

#[tokio::test]
async fn malformed_frames_and_bodies() {
    let mock = MockUpstream::start().await;
    for (path, body) in [
        (OPENAI.to_owned(), openai_body("[[malformed]]", true)),
        (ANTHROPIC.to_owned(), anthropic_body("[[malformed]]", true)),
        (
            format!("{GEMINI}:streamGenerateContent?alt=sse"),
            gemini_body("[[malformed]]"),
        ),
    ] {
        let response = post(&mock, &path, &body).await;
        assert_eq!(response.status, 200);
        let events = response.sse();
        let broken = events
            .iter()
            .filter(|e| e.data != "[DONE]" && e.json().is_none())
            .count();
        assert_eq!(broken, 1, "{path}");
    }
    let array = post(
        &mock,
        &format!("{GEMINI}:streamGenerateContent"),
        &gemini_body("[[malformed]]"),
    )
    .await;
    assert!(array.try_json().is_err());
    for (path, body) in [
        (OPENAI.to_owned(), openai_body("[[malformed]]", false)),
        (ANTHROPIC.to_owned(), anthropic_body("[[malformed]]", false)),
        (
            format!("{GEMINI}:generateContent"),
            gemini_body("[[malformed]]"),
        ),
    ] {
        let response = post(&mock, &path, &body).await;
        assert_eq!(response.status, 200);
        assert!(response.try_json().is_err());
    }
}

#[tokio::test]
async fn stream_error_event() {
    let mock = MockUpstream::start().await;
    let events = post(&mock, OPENAI, &openai_body("[[stream-error]]", true))
        .await
        .sse();
    assert!(events.iter().all(|e| e.data != "[DONE]"));
    assert_eq!(
        events.last().unwrap().json().unwrap()["error"]["type"],
        "server_error"
    );
    let events = post(&mock, ANTHROPIC, &anthropic_body("[[stream-error]]", true))
        .await
        .sse();
    let last = events.last().unwrap();
    assert_eq!(last.name(), "error");
    assert_eq!(last.json().unwrap()["error"]["type"], "overloaded_error");
    assert!(events.iter().all(|e| e.name() != "message_stop"));
    let path = format!("{GEMINI}:streamGenerateContent");
    let array = post(&mock, &path, &gemini_body("[[stream-error]]"))
        .await
        .json();
    assert_eq!(
        array.as_array().unwrap().last().unwrap()["error"]["status"],
        "UNAVAILABLE"
    );
}

#[tokio::test]
async fn echo_request_replies_with_the_body() {
    let mock = MockUpstream::start().await;
    let body = openai_body("echo ✓ [[echo-request]]", false);
    let json = post(&mock, OPENAI, &body).await.json();
    assert_eq!(json["choices"][0]["message"]["content"], body.to_string());
    let body = anthropic_body("[[echo-request]]", true);
    let events = post(&mock, ANTHROPIC, &body).await.sse();
    assert_eq!(
        anthropic_text(&events, "text_delta", "text"),
        body.to_string()
    );
}

const SPLIT_PROMPT: &str = "split ✓✓✓ héllo 🌍🌍🌍 everywhere ✓✓✓ héllo 🌍🌍🌍";

#[tokio::test]
async fn streams_arrive_in_small_pieces_split_anywhere() {
    let mock = MockUpstream::start().await;
    let body = anthropic_body(SPLIT_PROMPT, true).to_string();
    let mut response =
        http_client::request_streaming(mock.addr(), "POST", ANTHROPIC, &[], body.as_bytes()).await;
    let mut pieces = Vec::new();
    while let Some(piece) = response.next_chunk().await.unwrap() {
        pieces.push(piece);
    }
    let all = pieces.concat();
    let frames = parse_sse(&all).len();
    // Every HTTP chunk holds 1..=24 bytes; `next_chunk` never spans two.
    assert!(pieces.iter().all(|p| (1..=24).contains(&p.len())));
    assert!(pieces.len() > 3 * frames);
    // Some piece ends inside a multi-byte character.
    assert!(pieces.iter().any(|p| std::str::from_utf8(p).is_err()));
    assert_eq!(
        anthropic_text(&parse_sse(&all), "text_delta", "text"),
        expected_reply(Protocol::Anthropic, SPLIT_PROMPT)
    );

    // [[chunk:0]]: one write per frame; [[crlf]] and [[sse-comments]] change framing only.
    let body = openai_body("[[chunk:0]] [[crlf]] [[sse-comments]]", true);
    let response = post(&mock, OPENAI, &body).await;
    let text = response.text();
    assert!(text.contains(": keep-alive\r\n\r\ndata: {"));
    assert!(!text.replace("\r\n", "").contains('\n'));
    let chunks = data_json(&response.sse());
    assert_eq!(
        openai_text(&chunks),
        expected_reply(Protocol::OpenAi, "[[chunk:0]] [[crlf]] [[sse-comments]]")
    );
}

#[tokio::test]
async fn keep_alive_reuses_one_connection() {
    let mock = MockUpstream::start().await;
    let mut connection = Connection::connect(mock.addr()).await.unwrap();
    let requests = [
        Request::post(OPENAI).json(&openai_body("one", false)),
        Request::post(OPENAI).json(&openai_body("two", true)),
        Request::post(ANTHROPIC).json(&anthropic_body("three", true)),
        Request::post(&format!("{GEMINI}:streamGenerateContent")).json(&gemini_body("four")),
        Request::post(&format!("{GEMINI}:generateContent"))
            .json(&gemini_body("five"))
            .chunked(7),
        Request::post(ANTHROPIC).json(&anthropic_body("[[status:429]]", false)),
        Request::get("/__mock/requests"),
    ];
    for request in &requests {
        let response = connection.send(request).await.unwrap();
        assert!(
            response.status == 200 || response.status == 429,
            "{}",
            response.status
        );
        assert!(connection.is_open());
    }
    assert_eq!(mock.connections(), 1);
    assert_eq!(mock.requests().len(), requests.len() - 1);
    assert_eq!(
        mock.requests()[4].json().unwrap()["contents"][0]["parts"][0]["text"],
        "five"
    );

    // `connection: close` is honoured.
    let close = Request::post(OPENAI)
        .header("connection", "close")
        .json(&openai_body("bye", false));
    let response = connection.send(&close).await.unwrap();
    assert_eq!(response.header("connection"), Some("close"));
    assert!(!connection.is_open());
}

#[tokio::test]
async fn large_bodies_with_length_and_chunked() {
    let mock = MockUpstream::start().await;
    let prompt = "x".repeat(20 << 20);
    let body = openai_body(&prompt, false).to_string().into_bytes();
    let response = http_client::request(mock.addr(), "POST", OPENAI, &[], &body).await;
    assert_eq!(response.status, 200);
    let reply = response.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        reply.len(),
        "Hello from openai mock: ".len() + QUOTE_LIMIT + " ✓ héllo 🌍".len()
    );
    let response =
        http_client::request_chunked(mock.addr(), "POST", OPENAI, &[], &body, 1 << 16).await;
    assert_eq!(response.status, 200);
    let recorded = mock.requests();
    assert_eq!(recorded.len(), 2);
    assert!(recorded.iter().all(|r| r.body == body));
    assert_eq!(recorded[1].header("transfer-encoding"), Some("chunked"));

    // Past the limit: a 413 in the provider's shape, seen although the body is not all sent.
    let huge = vec![b' '; 70 << 20];
    let response = http_client::request(mock.addr(), "POST", ANTHROPIC, &[], &huge).await;
    assert_eq!(response.status, 413);
    assert_eq!(response.json()["error"]["type"], "request_too_large");
}

#[tokio::test]
async fn expect_continue_is_answered() {
    let mock = MockUpstream::start().await;
    let request = Request::post(OPENAI)
        .header("expect", "100-continue")
        .json(&openai_body("continue", false));
    let response = http_client::send(mock.addr(), &request).await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(
        response.expect_answer,
        Some(100),
        "no 100 Continue from the mock"
    );
    assert_eq!(
        mock.last_request().unwrap().header("expect"),
        Some("100-continue")
    );
}

#[tokio::test]
async fn requests_are_recorded() {
    let mock = MockUpstream::start().await;
    let body = gemini_body("record me");
    let path = format!("{GEMINI}:streamGenerateContent?alt=sse&key=abc");
    let response = http_client::post_json(
        mock.addr(),
        &path,
        &[("X-Goog-Api-Key", "secret"), ("X-Custom", " spaced ")],
        &body,
    )
    .await;
    assert_eq!(response.status, 200);
    let recorded = mock.requests();
    assert_eq!(recorded.len(), 1);
    let request = &recorded[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, path);
    assert_eq!(
        request.path_only(),
        format!("{GEMINI}:streamGenerateContent")
    );
    assert_eq!(request.query(), Some("alt=sse&key=abc"));
    assert_eq!(request.header("x-goog-api-key"), Some("secret"));
    assert!(request
        .headers
        .iter()
        .any(|(n, v)| n == "x-custom" && v == "spaced"));
    assert!(request
        .headers
        .iter()
        .all(|(n, _)| *n == n.to_ascii_lowercase()));
    assert_eq!(request.json(), Some(body.clone()));

    // Out-of-process view and reset.
    let listed = http_client::request(mock.addr(), "GET", "/__mock/requests", &[], b"")
        .await
        .json();
    assert_eq!(listed[0]["path"], path.as_str());
    assert_eq!(listed[0]["headers"]["x-goog-api-key"], "secret");
    assert_eq!(listed[0]["body_len"], body.to_string().len());
    assert_eq!(listed[0]["body"], body.to_string());
    let reset = http_client::request(mock.addr(), "POST", "/__mock/reset", &[], b"").await;
    assert_eq!(reset.json(), json!({"cleared": 1}));
    assert!(mock.requests().is_empty());
    post(&mock, OPENAI, &openai_body("again", false)).await;
    assert_eq!(mock.requests().len(), 1);
    mock.clear();
    assert!(mock.requests().is_empty());
    assert_eq!(
        mock.base_url(Protocol::Anthropic),
        format!("http://{}/anthropic/v1", mock.addr())
    );
}

/// `[[agent-tool:NAME:JSON]]` as an agent meets it: the user's turn gets a call
/// to NAME with JSON (marker written inside a JSON string, so escaped), the
/// turn carrying the tool result gets text quoting it, and a request without
/// tools gets the plain reply. Each protocol, non-stream and stream.
#[tokio::test]
async fn agent_tool_drives_a_tool_loop() {
    let mock = MockUpstream::start().await;
    let prompt = r#"run it [[agent-tool:Bash:{"command":"echo $((6*7))","description":"say ]"}]]"#;
    let args = json!({"command": "echo $((6*7))", "description": "say ]"});
    let result = "42\nsecond line";
    let sys = json!({"role": "system", "content": "a reminder"});

    // The user's turn, then the turn that carries the result, per protocol.
    let openai = |with_result: bool, stream: bool, tools: bool| {
        let mut messages = vec![json!({"role": "user", "content": prompt})];
        if with_result {
            messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": result}));
            messages.push(sys.clone());
        }
        let mut body = json!({"model": "m", "stream": stream, "messages": messages});
        if tools {
            body["tools"] = json!([{"type": "function", "function": {"name": "Read"}},
                                   {"type": "function", "function": {"name": "Bash"}}]);
        }
        body
    };
    let anthropic = |with_result: bool, stream: bool, tools: bool| {
        let mut messages = vec![json!({"role": "user", "content": prompt})];
        if with_result {
            messages.push(json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "content": [{"type": "text", "text": result}]},
                {"type": "text", "text": "a note after the result"}]}));
            messages.push(sys.clone());
        }
        let mut body =
            json!({"model": "m", "max_tokens": 100, "stream": stream, "messages": messages});
        if tools {
            body["tools"] = json!([{"name": "Read", "input_schema": {"type": "object"}},
                                   {"name": "Bash", "input_schema": {"type": "object"}}]);
        }
        body
    };
    let gemini = |with_result: bool, tools: bool| {
        let mut contents = vec![json!({"role": "user", "parts": [{"text": prompt}]})];
        if with_result {
            contents.push(json!({"role": "model", "parts": [
                {"functionCall": {"name": "Bash", "args": {}}}]}));
            contents.push(json!({"role": "user", "parts": [
                {"functionResponse": {"name": "Bash", "response": {"output": result}}}]}));
        }
        let mut body = json!({"contents": contents});
        if tools {
            body["tools"] = json!([{"functionDeclarations": [{"name": "Read"}, {"name": "Bash"}]}]);
        }
        body
    };

    // OpenAI.
    let json = post(&mock, OPENAI, &openai(false, false, true))
        .await
        .json();
    let call = &json["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "Bash");
    let sent: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(sent, args);
    assert_eq!(json["choices"][0]["finish_reason"], "tool_calls");
    let chunks = data_json(&post(&mock, OPENAI, &openai(false, true, true)).await.sse());
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&streamed).unwrap(), args);
    let json = post(&mock, OPENAI, &openai(true, false, true)).await.json();
    assert_eq!(
        json["choices"][0]["message"]["content"],
        agent_tool_reply(Protocol::OpenAi, result).as_str()
    );
    assert!(json["choices"][0]["message"].get("tool_calls").is_none());
    let chunks = data_json(&post(&mock, OPENAI, &openai(true, true, true)).await.sse());
    assert_eq!(
        openai_text(&chunks),
        agent_tool_reply(Protocol::OpenAi, result)
    );
    let json = post(&mock, OPENAI, &openai(false, false, false))
        .await
        .json();
    assert_eq!(
        json["choices"][0]["message"]["content"],
        expected_reply(Protocol::OpenAi, prompt).as_str()
    );

    // Anthropic.
    let json = post(&mock, ANTHROPIC, &anthropic(false, false, true))
        .await
        .json();
    assert_eq!(json["content"][0]["type"], "tool_use");
    assert_eq!(json["content"][0]["name"], "Bash");
    assert_eq!(json["content"][0]["input"], args);
    assert_eq!(json["stop_reason"], "tool_use");
    let events = post(&mock, ANTHROPIC, &anthropic(false, true, true))
        .await
        .sse();
    let streamed = anthropic_text(&events, "input_json_delta", "partial_json");
    assert_eq!(serde_json::from_str::<Value>(&streamed).unwrap(), args);
    let json = post(&mock, ANTHROPIC, &anthropic(true, false, true))
        .await
        .json();
    assert_eq!(
        json["content"][0]["text"],
        agent_tool_reply(Protocol::Anthropic, result).as_str()
    );
    assert_eq!(json["stop_reason"], "end_turn");
    let events = post(&mock, ANTHROPIC, &anthropic(true, true, true))
        .await
        .sse();
    assert_eq!(
        anthropic_text(&events, "text_delta", "text"),
        agent_tool_reply(Protocol::Anthropic, result)
    );
    let json = post(&mock, ANTHROPIC, &anthropic(false, false, false))
        .await
        .json();
    assert_eq!(
        json["content"][0]["text"],
        expected_reply(Protocol::Anthropic, prompt).as_str()
    );

    // Gemini.
    let generate = format!("{GEMINI}:generateContent");
    let stream = format!("{GEMINI}:streamGenerateContent?alt=sse");
    let json = post(&mock, &generate, &gemini(false, true)).await.json();
    let call = &json["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call["name"], "Bash");
    assert_eq!(call["args"], args);
    let chunks = data_json(&post(&mock, &stream, &gemini(false, true)).await.sse());
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["candidates"][0]["content"]["parts"][0].get("functionCall"))
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["args"], args);
    let json = post(&mock, &generate, &gemini(true, true)).await.json();
    assert_eq!(
        json["candidates"][0]["content"]["parts"][0]["text"],
        agent_tool_reply(Protocol::Gemini, result).as_str()
    );
    let chunks = data_json(&post(&mock, &stream, &gemini(true, true)).await.sse());
    assert_eq!(
        gemini_text(&chunks),
        agent_tool_reply(Protocol::Gemini, result)
    );
    let json = post(&mock, &generate, &gemini(false, false)).await.json();
    assert_eq!(
        json["candidates"][0]["content"]["parts"][0]["text"],
        expected_reply(Protocol::Gemini, prompt).as_str()
    );
}

// ---------------------------------------------------------------------------
// OpenAI Responses

fn responses_body(prompt: &str, stream: bool) -> Value {
    json!({
        "model": "gpt-resp-test",
        "stream": stream,
        "instructions": "be brief",
        "input": [
            {"role": "developer", "content": "a developer note"},
            {"type": "message", "role": "user", "content": "an earlier question"},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "an earlier answer", "annotations": []}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
        ],
        "tools": [
            {"type": "web_search"},
            {"type": "function", "name": "lookup_weather", "parameters": {"type": "object"}},
        ],
    })
}

/// Checks the grammar every Responses stream follows: `event:` equals the
/// data's `type`, `sequence_number` counts from 0; returns the data.
fn responses_events(events: &[SseEvent]) -> Vec<Value> {
    let data = data_json(events);
    for (i, (event, d)) in events.iter().zip(&data).enumerate() {
        assert_eq!(event.name(), d["type"].as_str().unwrap(), "{d}");
        assert_eq!(d["sequence_number"], i as u64, "{d}");
    }
    data
}

fn responses_types(data: &[Value]) -> Vec<&str> {
    data.iter().map(|d| d["type"].as_str().unwrap()).collect()
}

fn responses_output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().unwrap().clone())
        .filter(|part| part["type"] == "output_text")
        .map(|part| part["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn responses_non_stream_and_input_tokens() {
    let mock = MockUpstream::start().await;
    assert_eq!(
        mock.base_url(Protocol::Responses),
        format!("http://{}/responses-api/v1", mock.addr())
    );
    assert_eq!(Protocol::from_name("responses"), Some(Protocol::Responses));
    let body = responses_body("Hi there ✓", false);
    let response = post(&mock, RESPONSES, &body).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let json = response.json();
    assert!(json["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(json["object"], "response");
    assert_eq!(json["status"], "completed");
    assert!(json["completed_at"].is_u64());
    assert!(json["error"].is_null() && json["incomplete_details"].is_null());
    assert_eq!(json["model"], "gpt-resp-test");
    assert_eq!(json["instructions"], "be brief");
    assert_eq!(json["tools"], body["tools"]);
    let expected = expected_reply(Protocol::Responses, "Hi there ✓");
    assert!(expected.starts_with("Hello from responses mock: "));
    assert_eq!(responses_output_text(&json), expected);
    let output = json["output"].as_array().unwrap();
    assert_eq!(output.len(), 1);
    let message = &output[0];
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["status"], "completed");
    assert!(message["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(message["content"][0]["annotations"], json!([]));
    let usage = &json["usage"];
    let input = body.to_string().len() as u64 / 4;
    let output_tokens = split_deltas(&expected).len() as u64;
    assert_eq!(usage["input_tokens"], input);
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(usage["output_tokens"], output_tokens);
    assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 0);
    assert_eq!(usage["total_tokens"], input + output_tokens);

    // `input` as a plain string; no prefix before `/responses`.
    let json = post(
        &mock,
        "/responses",
        &json!({"model": "m", "input": "plain"}),
    )
    .await
    .json();
    assert_eq!(
        responses_output_text(&json),
        expected_reply(Protocol::Responses, "plain")
    );
    assert_eq!(json["tools"], json!([]));
    assert_eq!(json["store"], true);

    let count = post(&mock, &format!("{RESPONSES}/input_tokens"), &body).await;
    assert_eq!(count.status, 200);
    assert_eq!(
        count.json(),
        json!({"object": "response.input_tokens", "input_tokens": input})
    );
    let recorded = mock.requests();
    assert_eq!(recorded.len(), 3);
    assert_eq!(recorded[0].path, RESPONSES);
}

#[tokio::test]
async fn responses_stream_text() {
    let mock = MockUpstream::start().await;
    let prompt = "Stream it ✓ héllo";
    let response = post(&mock, RESPONSES, &responses_body(prompt, true)).await;
    assert_eq!(response.status, 200);
    assert!(response
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let data = responses_events(&response.sse());
    let expected = expected_reply(Protocol::Responses, prompt);
    let n = split_deltas(&expected).len();
    let mut want = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    want.extend(std::iter::repeat_n("response.output_text.delta", n));
    want.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(responses_types(&data), want);
    assert_eq!(data[0]["response"]["status"], "in_progress");
    assert!(data[0]["response"]["usage"].is_null());
    assert_eq!(data[0]["response"]["output"], json!([]));
    assert_eq!(data[2]["item"]["status"], "in_progress");
    assert_eq!(data[2]["item"]["content"], json!([]));
    assert_eq!(data[3]["part"]["text"], "");
    let deltas: String = data
        .iter()
        .filter(|d| d["type"] == "response.output_text.delta")
        .map(|d| {
            assert_eq!(d["output_index"], 0);
            assert_eq!(d["content_index"], 0);
            assert_eq!(d["item_id"], data[2]["item"]["id"]);
            d["delta"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(deltas, expected);
    assert_eq!(data[n + 4]["text"], expected.as_str());
    assert_eq!(data[n + 5]["part"]["text"], expected.as_str());
    assert_eq!(data[n + 6]["item"]["status"], "completed");
    let done = &data[n + 7]["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(responses_output_text(done), expected);
    assert_eq!(done["usage"]["output_tokens"], n as u64);
    assert_eq!(done["id"], data[0]["response"]["id"]);
}

#[tokio::test]
async fn responses_tool_and_thinking() {
    let mock = MockUpstream::start().await;
    let json = post(&mock, RESPONSES, &responses_body("[[tool]]", false))
        .await
        .json();
    let output = json["output"].as_array().unwrap();
    assert_eq!(output.len(), 1);
    let call = &output[0];
    assert_eq!(call["type"], "function_call");
    // The first function tool (web_search is a built-in tool).
    assert_eq!(call["name"], "lookup_weather");
    assert_eq!(call["arguments"], TOOL_ARGS);
    assert_eq!(call["status"], "completed");
    assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
    assert!(call["id"].as_str().unwrap().starts_with("fc_"));
    assert_eq!(json["status"], "completed");

    let prompt = "[[thinking]] [[text+tool]]";
    let json = post(&mock, RESPONSES, &responses_body(prompt, false))
        .await
        .json();
    let types: Vec<&str> = json["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["reasoning", "message", "function_call"]);
    let reasoning = &json["output"][0];
    assert!(reasoning["id"].as_str().unwrap().starts_with("rs_"));
    assert_eq!(reasoning["encrypted_content"], REASONING_ENCRYPTED_CONTENT);
    assert_eq!(
        reasoning["summary"],
        json!([{"type": "summary_text", "text": THINKING_TEXT}])
    );
    let thoughts = split_deltas(THINKING_TEXT).len() as u64;
    assert_eq!(
        json["usage"]["output_tokens_details"]["reasoning_tokens"],
        thoughts
    );
    assert_eq!(
        responses_output_text(&json),
        expected_reply(Protocol::Responses, prompt)
    );

    let data = responses_events(
        &post(&mock, RESPONSES, &responses_body(prompt, true))
            .await
            .sse(),
    );
    let types = responses_types(&data);
    let first = |kind: &str| types.iter().position(|t| *t == kind).unwrap();
    assert!(first("response.reasoning_summary_part.added") < first("response.content_part.added"));
    for kind in [
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
    ] {
        assert!(types.contains(&kind), "{kind} in {types:?}");
    }
    let added: Vec<&Value> = data
        .iter()
        .filter(|d| d["type"] == "response.output_item.added")
        .collect();
    let done: Vec<&Value> = data
        .iter()
        .filter(|d| d["type"] == "response.output_item.done")
        .collect();
    assert_eq!(added.len(), 3);
    assert_eq!(done.len(), 3);
    for (i, (a, d)) in added.iter().zip(&done).enumerate() {
        assert_eq!(a["output_index"], i as u64);
        assert_eq!(d["output_index"], i as u64);
        assert_eq!(a["item"]["id"], d["item"]["id"]);
    }
    // The encrypted reasoning comes with the finished item.
    assert!(added[0]["item"].get("encrypted_content").is_none());
    assert_eq!(
        done[0]["item"]["encrypted_content"],
        REASONING_ENCRYPTED_CONTENT
    );
    let summary: String = data
        .iter()
        .filter(|d| d["type"] == "response.reasoning_summary_text.delta")
        .map(|d| d["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(summary, THINKING_TEXT);
    assert_eq!(added[2]["item"]["arguments"], "");
    assert_eq!(added[2]["item"]["name"], "lookup_weather");
    let args: String = data
        .iter()
        .filter(|d| d["type"] == "response.function_call_arguments.delta")
        .map(|d| d["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args, TOOL_ARGS);
    let args_done = &data[first("response.function_call_arguments.done")];
    assert_eq!(args_done["arguments"], TOOL_ARGS);
    assert_eq!(args_done["item_id"], added[2]["item"]["id"]);
    let completed = &data.last().unwrap()["response"];
    assert_eq!(data.last().unwrap()["type"], "response.completed");
    assert_eq!(
        without_ids(&completed["output"]),
        without_ids(&json["output"])
    );
}

/// Output items without their ids (which differ from request to request).
fn without_ids(output: &Value) -> Value {
    let mut output = output.clone();
    for item in output.as_array_mut().unwrap() {
        let item = item.as_object_mut().unwrap();
        item.remove("id");
        item.remove("call_id");
    }
    output
}

#[tokio::test]
async fn responses_markers() {
    let mock = MockUpstream::start().await;
    // [[max-tokens]]: incomplete.
    let json = post(&mock, RESPONSES, &responses_body("[[max-tokens]]", false))
        .await
        .json();
    assert_eq!(json["status"], "incomplete");
    assert_eq!(json["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(json["output"][0]["status"], "incomplete");
    assert!(json["completed_at"].is_null());
    let data = responses_events(
        &post(&mock, RESPONSES, &responses_body("[[max-tokens]]", true))
            .await
            .sse(),
    );
    let last = data.last().unwrap();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["status"], "incomplete");
    assert!(data.iter().all(|d| d["type"] != "response.completed"));

    // [[cached:N]].
    let json = post(&mock, RESPONSES, &responses_body("[[cached:7]]", false))
        .await
        .json();
    assert_eq!(json["usage"]["input_tokens_details"]["cached_tokens"], 7);

    // [[stream-error]]: `error`, then `response.failed`, numbering carried on.
    let data = responses_events(
        &post(&mock, RESPONSES, &responses_body("[[stream-error]]", true))
            .await
            .sse(),
    );
    let n = data.len();
    assert_eq!(data[n - 2]["type"], "error");
    assert_eq!(data[n - 2]["code"], "server_error");
    assert!(data[n - 2]["message"].is_string());
    assert_eq!(data[n - 1]["type"], "response.failed");
    assert_eq!(data[n - 1]["response"]["status"], "failed");
    assert_eq!(data[n - 1]["response"]["error"]["code"], "server_error");
    assert!(data.iter().all(|d| d["type"] != "response.completed"));
    assert!(data
        .iter()
        .any(|d| d["type"] == "response.output_text.delta"));

    // [[malformed]]: one frame of broken JSON; a cut body without a stream.
    let events = post(&mock, RESPONSES, &responses_body("[[malformed]]", true))
        .await
        .sse();
    assert_eq!(events.iter().filter(|e| e.json().is_none()).count(), 1);
    let response = post(&mock, RESPONSES, &responses_body("[[malformed]]", false)).await;
    assert_eq!(response.status, 200);
    assert!(response.try_json().is_err());

    // [[status:N]]: OpenAI's error body.
    for status in [400u16, 429, 500] {
        let prompt = format!("fail [[status:{status}]]");
        let response = post(&mock, RESPONSES, &responses_body(&prompt, true)).await;
        assert_eq!(response.status, status);
        assert_eq!(
            response.header("retry-after"),
            (status == 429).then_some("1")
        );
        let json = response.json();
        assert_eq!(json.as_object().unwrap().len(), 1);
        let error = &json["error"];
        assert!(error["message"].is_string());
        assert!(error["type"].is_string() && error.get("param").is_some());
        assert!(error.get("code").is_some());
    }

    // [[cut]]: no `response.completed`, no clean end.
    let body = responses_body("[[cut]]", true).to_string();
    let response =
        http_client::request_streaming(mock.addr(), "POST", RESPONSES, &[], body.as_bytes()).await;
    let (pieces, error) = response.read_until_end().await;
    assert_eq!(
        error.expect("the stream is cut").kind(),
        std::io::ErrorKind::UnexpectedEof
    );
    assert!(!String::from_utf8_lossy(&pieces.concat()).contains("response.completed"));

    // [[crlf]], [[sse-comments]], [[chunk:1]] change the framing only.
    let prompt = "[[crlf]] [[sse-comments]] [[chunk:1]] ✓";
    let response = post(&mock, RESPONSES, &responses_body(prompt, true)).await;
    let text = response.text();
    assert!(text.contains(": keep-alive\r\n\r\nevent: response.created\r\ndata: {"));
    assert!(!text.replace("\r\n", "").contains('\n'));
    let data = responses_events(&response.sse());
    assert_eq!(
        data.last().unwrap()["response"]["output"][0]["content"][0]["text"],
        expected_reply(Protocol::Responses, prompt).as_str()
    );

    // [[echo-request]].
    let body = responses_body("[[echo-request]]", false);
    let json = post(&mock, RESPONSES, &body).await.json();
    assert_eq!(responses_output_text(&json), body.to_string());

    // Unknown Responses routes: 404 in OpenAI's shape.
    let response = http_client::request(
        mock.addr(),
        "GET",
        "/responses-api/v1/responses/resp_1",
        &[],
        b"",
    )
    .await;
    assert_eq!(response.status, 404);
    assert_eq!(response.json()["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn max_tokens_and_cached_in_the_other_protocols() {
    let mock = MockUpstream::start().await;
    let prompt = "[[max-tokens]] [[cached:5]]";
    let json = post(&mock, OPENAI, &openai_body(prompt, false))
        .await
        .json();
    assert_eq!(json["choices"][0]["finish_reason"], "length");
    assert_eq!(json["usage"]["prompt_tokens_details"]["cached_tokens"], 5);
    let mut body = anthropic_body(prompt, false);
    body["messages"] = json!([{"role": "user", "content": prompt}]);
    let json = post(&mock, ANTHROPIC, &body).await.json();
    assert_eq!(json["stop_reason"], "max_tokens");
    assert_eq!(json["usage"]["cache_read_input_tokens"], 5);
    assert_eq!(
        json["usage"]["input_tokens"],
        body.to_string().len() as u64 / 4 - 5
    );
    let json = post(
        &mock,
        &format!("{GEMINI}:generateContent"),
        &gemini_body(prompt),
    )
    .await
    .json();
    assert_eq!(json["candidates"][0]["finishReason"], "MAX_TOKENS");
    assert_eq!(json["usageMetadata"]["cachedContentTokenCount"], 5);
}

#[tokio::test]
async fn responses_agent_tool_loop() {
    let mock = MockUpstream::start().await;
    let prompt = r#"run it [[agent-tool:shell:{"command":["echo","42"]}]]"#;
    let args = json!({"command": ["echo", "42"]});
    let result = "42\nsecond line";
    let body = |with_result: bool, stream: bool, tools: bool| {
        let mut input = vec![json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": prompt}]})];
        if with_result {
            input.push(json!({"type": "reasoning", "id": "rs_1", "summary": [],
                "encrypted_content": "opaque"}));
            input.push(
                json!({"type": "function_call", "call_id": "call_1", "name": "shell",
                "arguments": "{}"}),
            );
            input.push(json!({"type": "function_call_output", "call_id": "call_1",
                "output": result}));
            input.push(json!({"role": "developer", "content": "a reminder"}));
        }
        let mut body = json!({"model": "m", "stream": stream, "input": input});
        if tools {
            body["tools"] = json!([{"type": "function", "name": "read"},
                                   {"type": "function", "name": "shell"}]);
        }
        body
    };
    let json = post(&mock, RESPONSES, &body(false, false, true))
        .await
        .json();
    let call = &json["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "shell");
    let sent: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(sent, args);
    let data = responses_events(&post(&mock, RESPONSES, &body(false, true, true)).await.sse());
    let streamed: String = data
        .iter()
        .filter(|d| d["type"] == "response.function_call_arguments.delta")
        .map(|d| d["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&streamed).unwrap(), args);
    let json = post(&mock, RESPONSES, &body(true, false, true))
        .await
        .json();
    assert_eq!(
        responses_output_text(&json),
        agent_tool_reply(Protocol::Responses, result)
    );
    assert_eq!(json["output"].as_array().unwrap().len(), 1);
    // Output as a list of text parts.
    let mut parts = body(true, true, true);
    parts["input"][3]["output"] = json!([{"type": "input_text", "text": result}]);
    let data = responses_events(&post(&mock, RESPONSES, &parts).await.sse());
    assert_eq!(
        responses_output_text(&data.last().unwrap()["response"]),
        agent_tool_reply(Protocol::Responses, result)
    );
    let json = post(&mock, RESPONSES, &body(false, false, false))
        .await
        .json();
    assert_eq!(
        responses_output_text(&json),
        expected_reply(Protocol::Responses, prompt)
    );
}
