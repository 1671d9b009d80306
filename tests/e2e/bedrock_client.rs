//! End-to-end: the Bedrock client routes (E20-E23) through the real binary
//! against the mock upstreams of every protocol: Converse and ConverseStream
//! answers, InvokeModel (Anthropic Messages in Bedrock's envelope) and its
//! `chunk` stream, the event-stream framing read by this file's own decoder
//! (both CRC32s checked), Bedrock's error shape (`{"message"}` with
//! `x-amzn-errortype`), the key, usage in the access log, and hostile input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::eventually;
use crate::common::gateway::{catalog, keys, model, Gateway, KEY};
use crate::common::http_client::{Request, Response};
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol, TOOL_ARGS};
use serde_json::{json, Value};
use std::time::Duration;

/// (model as the client names it, the upstream protocol that answers).
const MODELS: &[(&str, Protocol)] = &[
    ("openai/gpt-5", Protocol::OpenAi),
    ("anthropic/claude-sonnet-4.7", Protocol::Anthropic),
    ("google/gemini-3.1-pro", Protocol::Gemini),
    ("resp/resp-model", Protocol::Responses),
];

/// The test catalog plus a provider on the mock's Responses upstream.
async fn start(mock: &MockUpstream) -> Gateway {
    let mut cat = catalog(mock);
    cat["providers"].as_array_mut().unwrap().push(json!({
        "id": "resp", "families": ["openai"],
        "upstreams": [{"protocol": "responses", "base_url": mock.base_url(Protocol::Responses),
            "api_key_env": "SB_TEST_KEY_RESPONSES"}]
    }));
    cat["models"].as_array_mut().unwrap().push(model(
        "resp-model",
        "resp",
        json!({"protocols": ["openai"]}),
    ));
    Gateway::start_with(&cat, &keys(), &[]).await
}

/// `provider/model_id` as one escaped path segment, as boto3 writes it.
fn escaped(model: &str) -> String {
    model.replace('/', "%2F")
}

fn post(path: &str, body: &Value) -> Request {
    Request::post(path)
        .json(body)
        .header("authorization", &format!("Bearer {KEY}"))
}

fn converse_body(text: &str) -> Value {
    json!({
        "system": [{"text": "You are terse."}],
        "messages": [
            {"role": "user", "content": [{"text": "earlier question"}]},
            {"role": "assistant", "content": [{"text": "earlier answer"}]},
            {"role": "user", "content": [{"text": text}]}
        ],
        "inferenceConfig": {"maxTokens": 200, "temperature": 0.5}
    })
}

fn invoke_body(text: &str) -> Value {
    json!({
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 200,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": text}]
    })
}

/// One event-stream message: its headers (string values) and payload.
#[derive(Debug)]
struct Message {
    headers: Vec<(String, String)>,
    payload: Vec<u8>,
}

impl Message {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// `:event-type`, or `:exception-type` for an exception.
    fn kind(&self) -> &str {
        self.header(":event-type")
            .or(self.header(":exception-type"))
            .unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.payload).unwrap()
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

/// Decodes an event-stream body (the AWS binary framing), checking each
/// message's lengths, prelude CRC32 and message CRC32; only string headers
/// (type 7) are expected from the gateway.
fn decode(mut body: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    while !body.is_empty() {
        assert!(body.len() >= 16, "a message shorter than its prelude");
        let total = be32(body) as usize;
        let headers_len = be32(&body[4..]) as usize;
        assert!(
            total <= body.len() && total >= 16 + headers_len,
            "bad lengths"
        );
        assert_eq!(be32(&body[8..]), crc32fast::hash(&body[..8]), "prelude CRC");
        assert_eq!(
            be32(&body[total - 4..]),
            crc32fast::hash(&body[..total - 4]),
            "message CRC"
        );
        let mut h = &body[12..12 + headers_len];
        let mut headers = Vec::new();
        while !h.is_empty() {
            let n = h[0] as usize;
            let name = String::from_utf8(h[1..1 + n].to_vec()).unwrap();
            assert_eq!(h[1 + n], 7, "header {name} is not a string");
            let len = u16::from_be_bytes([h[2 + n], h[3 + n]]) as usize;
            let value = String::from_utf8(h[4 + n..4 + n + len].to_vec()).unwrap();
            headers.push((name, value));
            h = &h[4 + n + len..];
        }
        let payload = body[12 + headers_len..total - 4].to_vec();
        out.push(Message { headers, payload });
        body = &body[total..];
    }
    out
}

/// A stream answer's messages, after checking its head.
fn stream_messages(r: &Response) -> Vec<Message> {
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.amazon.eventstream")
    );
    decode(&r.body)
}

/// The text of a Converse stream's `text` deltas.
fn streamed_text(messages: &[Message]) -> String {
    messages
        .iter()
        .filter(|m| m.kind() == "contentBlockDelta")
        .filter_map(|m| m.json()["delta"]["text"].as_str().map(str::to_string))
        .collect()
}

/// The Anthropic events inside an InvokeModelWithResponseStream answer.
fn chunk_events(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            assert_eq!(m.kind(), "chunk", "{m:?}");
            assert_eq!(m.header(":message-type"), Some("event"));
            assert_eq!(m.header(":content-type"), Some("application/json"));
            let b64 = m.json()["bytes"].as_str().unwrap().to_string();
            let bytes = switchboard::util::base64::decode(&b64).unwrap();
            serde_json::from_slice(&bytes).unwrap()
        })
        .collect()
}

fn assert_bedrock_error(r: &Response, status: u16, kind: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.header("x-amzn-errortype"), Some(kind), "{}", r.text());
    let v = r.json();
    assert!(v["message"].is_string(), "{v}");
    assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
}

#[tokio::test]
async fn converse_reaches_every_upstream() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    for (model, protocol) in MODELS {
        mock.clear();
        let text = format!("Converse to {} ✓", protocol.name());
        let path = format!("/bedrock/model/{}/converse", escaped(model));
        let r = gw.send(&post(&path, &converse_body(&text))).await;
        assert_eq!(r.status, 200, "{model}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v = r.json();
        assert_eq!(v["output"]["message"]["role"], "assistant", "{v}");
        assert_eq!(
            v["output"]["message"]["content"][0]["text"],
            expected_reply(*protocol, &text),
            "{model}"
        );
        assert_eq!(v["stopReason"], "end_turn");
        let u = &v["usage"];
        assert!(u["inputTokens"].as_u64().unwrap() > 0, "{v}");
        assert!(u["outputTokens"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(
            u["totalTokens"].as_u64().unwrap(),
            u["inputTokens"].as_u64().unwrap() + u["outputTokens"].as_u64().unwrap()
        );
        assert!(v["metrics"]["latencyMs"].is_u64(), "{v}");
        // The upstream got its own protocol: the system prompt, the turns.
        let got = mock.last_request().unwrap();
        let body = got.body_text();
        assert!(body.contains("You are terse."), "{body}");
        assert!(body.contains("earlier answer"), "{body}");
        assert!(
            !format!("{:?}", got.headers).contains(KEY),
            "client key leaked"
        );
    }
    // A bare id, and the unescaped two-segment form, name the same model.
    for path in [
        "/bedrock/model/gpt-5/converse",
        "/bedrock/model/openai/gpt-5/converse",
    ] {
        let r = gw.send(&post(path, &converse_body("hi"))).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
    }
}

#[tokio::test]
async fn converse_stream_reaches_every_upstream() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    for (model, protocol) in MODELS {
        let text = format!("Stream to {}", protocol.name());
        let path = format!("/bedrock/model/{}/converse-stream", escaped(model));
        let r = gw.send(&post(&path, &converse_body(&text))).await;
        let m = stream_messages(&r);
        let kinds: Vec<&str> = m.iter().map(Message::kind).collect();
        assert_eq!(kinds.first(), Some(&"messageStart"), "{model}: {kinds:?}");
        assert_eq!(
            &kinds[kinds.len() - 2..],
            ["messageStop", "metadata"],
            "{model}: {kinds:?}"
        );
        for msg in &m {
            assert_eq!(msg.header(":message-type"), Some("event"));
            assert_eq!(msg.header(":content-type"), Some("application/json"));
        }
        assert_eq!(
            streamed_text(&m),
            expected_reply(*protocol, &text),
            "{model}"
        );
        assert_eq!(m[m.len() - 2].json()["stopReason"], "end_turn");
        let meta = m.last().unwrap().json();
        assert!(
            meta["usage"]["outputTokens"].as_u64().unwrap() > 0,
            "{meta}"
        );
        assert!(meta["usage"]["inputTokens"].as_u64().unwrap() > 0, "{meta}");
        assert!(meta["metrics"]["latencyMs"].is_u64(), "{meta}");
    }
}

#[tokio::test]
async fn tool_calls_both_ways() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    let want: Value = serde_json::from_str(TOOL_ARGS).unwrap();
    let mut body = converse_body("weather please [[tool]]");
    body["toolConfig"] = json!({"tools": [{"toolSpec": {"name": "get_weather",
        "description": "Weather for a city",
        "inputSchema": {"json": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string"}}, "required": ["location"]}}}}],
        "toolChoice": {"auto": {}}});
    for (model, protocol) in MODELS {
        let path = format!("/bedrock/model/{}/converse", escaped(model));
        let r = gw.send(&post(&path, &body)).await;
        assert_eq!(r.status, 200, "{model}: {}", r.text());
        let v = r.json();
        assert_eq!(v["stopReason"], "tool_use", "{model}: {v}");
        let call = v["output"]["message"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|b| b.get("toolUse").cloned())
            .unwrap_or_else(|| panic!("{model}: no toolUse in {v}"));
        assert_eq!(call["name"], "get_weather");
        assert_eq!(call["input"], want, "{model}");
        let id = call["toolUseId"].as_str().unwrap().to_string();
        assert!(!id.is_empty());
        // The tool spec reached the upstream in its protocol.
        let sent = mock.last_request().unwrap().body_text();
        assert!(sent.contains("get_weather"), "{}: {sent}", protocol.name());

        // Streamed: a toolUse block start, its input in pieces.
        let path = format!("/bedrock/model/{}/converse-stream", escaped(model));
        let m = stream_messages(&gw.send(&post(&path, &body)).await);
        let start = m
            .iter()
            .find(|x| x.kind() == "contentBlockStart")
            .unwrap_or_else(|| panic!("{model}: no block start"))
            .json();
        assert_eq!(start["start"]["toolUse"]["name"], "get_weather");
        let index = &start["contentBlockIndex"];
        let input: String = m
            .iter()
            .filter(|x| x.kind() == "contentBlockDelta")
            .map(Message::json)
            .filter(|d| &d["contentBlockIndex"] == index)
            .filter_map(|d| d["delta"]["toolUse"]["input"].as_str().map(str::to_string))
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&input).unwrap(), want);
        assert_eq!(m[m.len() - 2].json()["stopReason"], "tool_use");

        // The call and its result sent back as Converse blocks.
        let mut next = converse_body("thanks");
        next["toolConfig"] = body["toolConfig"].clone();
        next["messages"] = json!([
            {"role": "user", "content": [{"text": "weather please"}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": id, "name": "get_weather", "input": want}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": id, "content": [{"json": {"sky": "clear"}}]}}, {"text": "and now?"}]}
        ]);
        let path = format!("/bedrock/model/{}/converse", escaped(model));
        let r = gw.send(&post(&path, &next)).await;
        assert_eq!(r.status, 200, "{model}: {}", r.text());
        let sent = mock.last_request().unwrap().body_text();
        assert!(sent.contains("sky") && sent.contains("clear"), "{sent}");
    }
}

#[tokio::test]
async fn invoke_carries_anthropic_messages_to_every_upstream() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    for (model, protocol) in MODELS {
        mock.clear();
        let text = format!("Invoke to {}", protocol.name());
        let path = format!("/bedrock/model/{}/invoke", escaped(model));
        let mut body = invoke_body(&text);
        body["anthropic_beta"] = json!(["context-1m-2025-08-07"]);
        let r = gw.send(&post(&path, &body)).await;
        assert_eq!(r.status, 200, "{model}: {}", r.text());
        let v = r.json();
        assert_eq!(v["type"], "message", "{v}");
        assert_eq!(v["model"], model.rsplit('/').next().unwrap());
        assert_eq!(v["content"][0]["text"], expected_reply(*protocol, &text));
        assert_eq!(v["stop_reason"], "end_turn");
        assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);
        let got = mock.last_request().unwrap();
        let sent = got.json().unwrap();
        assert!(sent.get("anthropic_version").is_none(), "{sent}");
        assert!(sent.get("anthropic_beta").is_none(), "{sent}");
        if *protocol == Protocol::Anthropic {
            // The Messages body as Anthropic takes it: its model, the
            // header version, the betas as the header.
            assert_eq!(sent["model"], "claude-sonnet-4-7");
            assert_eq!(got.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(got.header("anthropic-beta"), Some("context-1m-2025-08-07"));
        }
    }
}

#[tokio::test]
async fn invoke_with_response_stream_carries_anthropic_events_in_chunks() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    for (model, protocol) in MODELS {
        let text = format!("Chunks from {}", protocol.name());
        let path = format!(
            "/bedrock/model/{}/invoke-with-response-stream",
            escaped(model)
        );
        let r = gw.send(&post(&path, &invoke_body(&text))).await;
        let events = chunk_events(&stream_messages(&r));
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types.first(), Some(&"message_start"), "{model}: {types:?}");
        assert_eq!(types.last(), Some(&"message_stop"), "{model}: {types:?}");
        assert!(!types.contains(&"ping"), "{types:?}");
        let streamed: String = events
            .iter()
            .filter(|e| e["type"] == "content_block_delta")
            .filter_map(|e| e["delta"]["text"].as_str())
            .collect();
        assert_eq!(streamed, expected_reply(*protocol, &text), "{model}");
        let delta = events
            .iter()
            .find(|e| e["type"] == "message_delta")
            .unwrap();
        assert_eq!(delta["delta"]["stop_reason"], "end_turn");
        assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0);
    }
}

#[tokio::test]
async fn errors_are_in_bedrock_shape() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    let path = "/bedrock/model/openai%2Fgpt-5/converse";
    let body = converse_body("hi");
    // No key, a bad key.
    let r = gw.send(&Request::post(path).json(&body)).await;
    assert_bedrock_error(&r, 401, "AccessDeniedException");
    let bad = Request::post(path)
        .json(&body)
        .header("authorization", "Bearer sk-wrong");
    assert_bedrock_error(&gw.send(&bad).await, 401, "AccessDeniedException");
    // An x-api-key is not where Bedrock clients put the key.
    let other = Request::post(path).json(&body).header("x-api-key", KEY);
    assert_bedrock_error(&gw.send(&other).await, 401, "AccessDeniedException");
    // Unknown model, unknown operation, listings, wrong method.
    let r = gw
        .send(&post("/bedrock/model/nobody%2Fnothing/converse", &body))
        .await;
    assert_bedrock_error(&r, 404, "ResourceNotFoundException");
    let r = gw.send(&post("/bedrock/model/gpt-5/predict", &body)).await;
    assert_bedrock_error(&r, 404, "ResourceNotFoundException");
    let r = gw.send(&Request::get("/bedrock/models")).await;
    assert_bedrock_error(&r, 404, "ResourceNotFoundException");
    let r = gw.send(&Request::get(path)).await;
    assert_bedrock_error(&r, 405, "ValidationException");
    // Bodies that are not Converse / InvokeModel bodies.
    let r = gw
        .send(&post(path, &json!({"inferenceConfig": {"maxTokens": 5}})))
        .await;
    assert_bedrock_error(&r, 400, "ValidationException");
    let r = gw
        .send(&post(
            path,
            &json!({"messages": [{"role": "user", "content": [{"text": "x"}]}], "inferenceConfig": {"maxTokens": -1}}),
        ))
        .await;
    assert_bedrock_error(&r, 400, "ValidationException");
    let r = gw
        .send(
            &Request::post(path)
                .body(b"{not json".to_vec())
                .header("authorization", &format!("Bearer {KEY}")),
        )
        .await;
    assert_bedrock_error(&r, 400, "ValidationException");
    let invoke = "/bedrock/model/anthropic%2Fclaude-sonnet-4.7/invoke";
    let mut no_version = invoke_body("hi");
    no_version
        .as_object_mut()
        .unwrap()
        .remove("anthropic_version");
    let r = gw.send(&post(invoke, &no_version)).await;
    assert_bedrock_error(&r, 400, "ValidationException");
    assert!(r.text().contains("anthropic_version"), "{}", r.text());
    let mut with_model = invoke_body("hi");
    with_model["model"] = json!("claude");
    assert_bedrock_error(
        &gw.send(&post(invoke, &with_model)).await,
        400,
        "ValidationException",
    );
    // An upstream's refusal keeps its status, in Bedrock's shape.
    let r = gw
        .send(&post(
            path,
            &converse_body("hi [[status:429]] [[retry-after:1]]"),
        ))
        .await;
    assert_bedrock_error(&r, 429, "ThrottlingException");
    let r = gw
        .send(&post(invoke, &invoke_body("hi [[status:400]]")))
        .await;
    assert_bedrock_error(&r, 400, "ValidationException");
}

#[tokio::test]
async fn mid_stream_failures_are_exception_messages() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    for (model, _) in &MODELS[..2] {
        for marker in ["[[stream-error]]", "[[cut]]"] {
            let path = format!("/bedrock/model/{}/converse-stream", escaped(model));
            let r = gw
                .send(&post(&path, &converse_body(&format!("hi {marker}"))))
                .await;
            let m = stream_messages(&r);
            let last = m.last().unwrap();
            assert_eq!(
                last.header(":message-type"),
                Some("exception"),
                "{model} {marker}: {m:?}"
            );
            assert!(last.kind().ends_with("Exception"), "{}", last.kind());
            assert!(last.json()["message"].is_string());
            assert!(
                !m.iter().any(|x| x.kind() == "metadata"),
                "{model} {marker}"
            );

            let path = format!(
                "/bedrock/model/{}/invoke-with-response-stream",
                escaped(model)
            );
            let r = gw
                .send(&post(&path, &invoke_body(&format!("hi {marker}"))))
                .await;
            let m = stream_messages(&r);
            let last = m.last().unwrap();
            assert_eq!(
                last.header(":message-type"),
                Some("exception"),
                "{model} {marker}: {m:?}"
            );
            assert!(last.json()["message"].is_string());
            chunk_events(&m[..m.len() - 1]);
        }
    }
}

#[tokio::test]
async fn usage_cost_and_the_access_log() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    for (i, op) in [
        "converse",
        "converse-stream",
        "invoke",
        "invoke-with-response-stream",
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("bedrock-{i}");
        let body = if op.starts_with("invoke") {
            invoke_body("count me [[cached:20]]")
        } else {
            converse_body("count me [[cached:20]]")
        };
        let path = format!("/bedrock/model/openai%2Fgpt-5/{op}");
        let r = gw
            .send(&post(&path, &body).header("x-request-id", &id))
            .await;
        assert_eq!(r.status, 200, "{op}: {}", r.text());
        let line = eventually(Duration::from_secs(10), "the access line", || async {
            gw.access_log()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["request_id"] == id.as_str())
        })
        .await;
        assert_eq!(line["family"], "bedrock", "{line}");
        assert_eq!(line["status"], 200);
        assert_eq!(line["provider"], "openai");
        assert_eq!(line["model"], "gpt-5");
        assert_eq!(line["upstream_protocol"], "openai");
        assert!(line["input_tokens"].as_u64().unwrap() > 0, "{op}: {line}");
        assert!(line["output_tokens"].as_u64().unwrap() > 0, "{op}: {line}");
        assert_eq!(line["cached_tokens"], 20, "{op}: {line}");
        assert!(line["cost_usd"].as_f64().unwrap() > 0.0, "{op}: {line}");
        assert!(!line.to_string().contains(KEY));
    }
    // The Converse answer reports the cache read apart, as Bedrock does.
    let r = gw
        .send(&post(
            "/bedrock/model/openai%2Fgpt-5/converse",
            &converse_body("again [[cached:20]]"),
        ))
        .await;
    let v = r.json();
    assert_eq!(v["usage"]["cacheReadInputTokens"], 20, "{v}");
}

#[tokio::test]
async fn hostile_input_is_refused_in_bedrock_shape() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    let path = "/bedrock/model/openai%2Fgpt-5/converse";
    // Deep nesting.
    let deep = format!(
        "{{\"messages\":[{{\"role\":\"user\",\"content\":[{{\"text\":\"x\"}}]}}],\"x\":{}{}}}",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let r = gw
        .send(
            &Request::post(path)
                .body(deep.into_bytes())
                .header("authorization", &format!("Bearer {KEY}")),
        )
        .await;
    assert_eq!(
        r.header("x-amzn-errortype"),
        Some("ValidationException"),
        "{}",
        r.text()
    );
    // Wrong shapes inside an otherwise valid body.
    for body in [
        json!({"messages": [{"role": "robot", "content": [{"text": "x"}]}]}),
        json!({"messages": [{"role": "user", "content": [{}]}]}),
        json!({"messages": [{"role": "user", "content": [{"toolUse": {"toolUseId": "t", "name": "", "input": {}}}]}]}),
        json!({"messages": "nope"}),
        json!({"messages": [{"role": "user", "content": [{"text": "x"}]}], "toolConfig": {"tools": [], "toolChoice": {"maybe": {}}}}),
    ] {
        let r = gw
            .send(&post(
                "/bedrock/model/anthropic%2Fclaude-sonnet-4.7/converse",
                &body,
            ))
            .await;
        assert_bedrock_error(&r, 400, "ValidationException");
    }
    // A path model that is escaped oddly or too strange to be a model.
    for p in [
        "/bedrock/model/%ZZ/converse",
        "/bedrock/model/..%2F..%2Fetc/converse",
        "/bedrock/model/%00/converse",
    ] {
        let r = gw.send(&post(p, &converse_body("hi"))).await;
        assert_bedrock_error(&r, 404, "ResourceNotFoundException");
    }
    // The upstream is still fine.
    let r = gw.send(&post(path, &converse_body("hi"))).await;
    assert_eq!(r.status, 200);
}
