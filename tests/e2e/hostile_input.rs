//! End-to-end: hostile input costs bounded work. Long runs of one character
//! (ASCII, multi-byte), digits and punctuation are counted and answered;
//! deeply nested JSON gets a clear 400; huge numbers of tiny messages are
//! counted; ten large counts at once leave health checks and ordinary requests
//! answering; a count whose client leaves is abandoned; echoed input is cut.
//! Every test asserts the answer, never a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{catalog, keys, Gateway, KEY};
use crate::common::http_client::{self, Request};
use crate::common::mock_upstream::{MockUpstream, Protocol};
use serde_json::{json, Value};
use std::time::Duration;
use switchboard::admit::tokens::{self, Cancel};
use switchboard::family::Family;
use tokio::io::AsyncWriteExt;

const MIB: usize = 1 << 20;

/// The test catalog plus `big`: a 400k-context model of provider `deepseek`
/// (families A and C, an OpenAI upstream).
fn big_catalog(mock: &MockUpstream) -> Value {
    let mut c = catalog(mock);
    let mut big = c["models"][0].clone();
    big["id"] = json!("big");
    big["provider"] = json!("deepseek");
    big["upstream_model"] = json!("big");
    big["context_length"] = json!(400_000);
    big["max_output_tokens"] = json!(128_000);
    big["protocols"] = json!(["openai", "anthropic", "gemini"]);
    c["models"].as_array_mut().unwrap().push(big);
    c
}

async fn start_with(args: &[&str]) -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&big_catalog(&mock), &keys(), args).await;
    (mock, gw)
}

/// What the gateway should answer for a count of `body` in `family`.
fn expected_count(family: Family, body: &Value) -> u64 {
    let bytes = serde_json::to_vec(body).unwrap();
    let c = switchboard::admit::validate::countable(family, &bytes).unwrap();
    tokens::count(&c, u64::MAX, &Cancel::default()).unwrap()
}

fn count_b(text: &str) -> Value {
    json!({"model": "big", "messages": [{"role": "user", "content": text}]})
}

fn count_c(text: &str) -> Value {
    gemini_body(text, None)
}

const COUNT_C: &str = "/google/v1beta/models/big:countTokens";

#[tokio::test]
async fn long_runs_of_one_character_are_counted() {
    let (_mock, gw) = start_with(&[]).await;
    // 400 kB of one character: the case that took 17.7 s of CPU.
    let runs = [
        "b".repeat(400_000),
        "é".repeat(200_000),
        "中".repeat(150_000),
        "😀".repeat(100_000),
        "7".repeat(400_000),
        "!".repeat(400_000),
        "-=".repeat(200_000),
        " ".repeat(400_000),
        "\u{301}".repeat(200_000),
    ];
    for text in &runs {
        let body = count_b(text);
        let r = gw.send(&call(Protocol::Anthropic, COUNT, &body)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let n = r.json()["input_tokens"].as_u64().unwrap();
        assert_eq!(n, expected_count(Family::Anthropic, &body));
        assert!(n > 0 && n <= text.len() as u64 + 1, "{n}");

        let body = count_c(text);
        let r = gw.send(&call(Protocol::Gemini, COUNT_C, &body)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.json()["totalTokens"].as_u64().unwrap(),
            expected_count(Family::Gemini, &body)
        );
    }
}

#[tokio::test]
async fn a_3_mib_one_character_prompt_is_answered() {
    let (mock, gw) = start_with(&[]).await;
    for unit in ["a", "中"] {
        let text = unit.repeat(3 * MIB / unit.len());
        let body = openai_body("deepseek/big", &text, None, false);
        let n = expected_count(Family::OpenAi, &body);
        let before = mock.requests().len();
        let r = gw.send(&call(Protocol::OpenAi, CHAT, &body)).await;
        if n > 400_000 {
            let e = assert_error(Protocol::OpenAi, &r, 400);
            assert_eq!(e["code"], "context_length_exceeded", "{e}");
            assert_eq!(mock.requests().len(), before, "no upstream call");
        } else {
            assert_eq!(r.status, 200, "{unit}: {n} tokens: {}", r.text());
            assert_eq!(mock.requests().len(), before + 1);
        }
    }
}

/// `[[[...["hi"]...]]]` nested `depth` deep.
fn nested(depth: usize) -> String {
    format!("{}\"hi\"{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test]
async fn deeply_nested_json_gets_a_clear_400_in_every_family() {
    let (mock, gw) = start_with(&[]).await;
    let deep = nested(100_000);
    let cases: Vec<(Protocol, String, String)> = vec![
        (
            Protocol::OpenAi,
            CHAT.to_string(),
            format!(
                r#"{{"model":"deepseek/big","messages":[{{"role":"user","content":{deep}}}]}}"#
            ),
        ),
        (
            Protocol::Anthropic,
            MESSAGES.to_string(),
            format!(
                r#"{{"model":"big","max_tokens":10,"messages":[{{"role":"user","content":{deep}}}]}}"#
            ),
        ),
        (
            Protocol::Anthropic,
            COUNT.to_string(),
            format!(r#"{{"model":"big","messages":[{{"role":"user","content":{deep}}}]}}"#),
        ),
        (
            Protocol::Gemini,
            gemini_path("big", GeminiMode::Whole),
            format!(r#"{{"contents":[{{"role":"user","parts":{deep}}}]}}"#),
        ),
        (
            Protocol::Gemini,
            COUNT_C.to_string(),
            format!(r#"{{"contents":[{{"role":"user","parts":{deep}}}]}}"#),
        ),
        (
            Protocol::Responses,
            "/v1/responses".to_string(),
            format!(r#"{{"model":"deepseek/big","input":[{{"role":"user","content":{deep}}}]}}"#),
        ),
    ];
    for (p, path, body) in cases {
        let req = call(p, &path, &json!({})).body(body.into_bytes());
        let r = gw.send(&req).await;
        let e = assert_error(p, &r, 400);
        let message = e["message"].as_str().unwrap();
        assert!(message.contains("recursion limit"), "{path}: {message}");
        assert!(message.len() < 2048, "{}", message.len());
    }
    // Bedrock's routes: Converse, and InvokeModel's envelope (read before
    // the Anthropic body inside it).
    let bedrock = [
        (
            "/bedrock/model/deepseek%2Fbig/converse",
            format!(r#"{{"messages":[{{"role":"user","content":{deep}}}]}}"#),
        ),
        (
            "/bedrock/model/deepseek%2Fbig/invoke",
            format!(
                r#"{{"anthropic_version":"bedrock-2023-05-31","max_tokens":10,"messages":[{{"role":"user","content":{deep}}}]}}"#
            ),
        ),
    ];
    for (path, body) in bedrock {
        let req = Request::post(path)
            .header("authorization", &format!("Bearer {KEY}"))
            .header("content-type", "application/json")
            .body(body.into_bytes());
        let r = gw.send(&req).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        let message = r.json()["message"].as_str().unwrap().to_owned();
        assert!(message.contains("recursion limit"), "{path}: {message}");
        assert!(message.len() < 2048, "{}", message.len());
    }
    assert!(mock.requests().is_empty(), "no upstream call");
}

#[tokio::test]
async fn huge_numbers_of_tiny_messages_are_counted() {
    let (mock, gw) = start_with(&[]).await;
    let messages: Vec<Value> = (0..200_000)
        .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "a"}))
        .collect();
    let body = json!({"model": "big", "messages": messages});
    let r = gw.send(&call(Protocol::Anthropic, COUNT, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["input_tokens"].as_u64().unwrap(),
        expected_count(Family::Anthropic, &body)
    );
    // The same list to a 1000-token model is refused before any upstream call.
    let mut chat = json!({"model": "openai/tiny", "messages": messages});
    chat["messages"][0]["role"] = json!("user");
    let r = gw.send(&call(Protocol::OpenAi, CHAT, &chat)).await;
    let e = assert_error(Protocol::OpenAi, &r, 400);
    assert_eq!(e["code"], "context_length_exceeded", "{e}");
    let parts: Vec<Value> = (0..200_000).map(|_| json!({"text": "a"})).collect();
    let body = json!({"contents": [{"role": "user", "parts": parts}]});
    let r = gw.send(&call(Protocol::Gemini, COUNT_C, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["totalTokens"].as_u64().unwrap(),
        expected_count(Family::Gemini, &body)
    );
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn ten_large_counts_at_once_leave_health_and_ordinary_requests_answering() {
    let (_mock, gw) = start_with(&["--token-workers", "1"]).await;
    let addr = gw.addr;
    let body = count_b(&"中".repeat(MIB));
    let want = expected_count(Family::Anthropic, &body);
    let hostile: Vec<_> = (0..10)
        .map(|_| {
            let req = call(Protocol::Anthropic, COUNT, &body);
            tokio::spawn(async move { http_client::send(addr, &req).await.unwrap() })
        })
        .collect();
    // Wait until counts queue behind the one slot, then ask for health and an answer.
    eventually(Duration::from_secs(120), "counts in flight", || async {
        let m = metrics_text(gw.metrics).await;
        let waiting = metric_value(&m, "switchboard_token_counts", &["state=\"waiting\""])?;
        let running = metric_value(&m, "switchboard_token_counts", &["state=\"running\""])?;
        assert!(running <= 1.0, "one slot, {running} running");
        (waiting + running >= 2.0).then_some(())
    })
    .await;
    let health = gw.get("/healthz").await;
    assert_eq!(health.status, 200);
    let r = gw
        .send(&call(
            Protocol::OpenAi,
            CHAT,
            &openai_body("deepseek/big", "hello", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for h in hostile {
        let r = h.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["input_tokens"].as_u64().unwrap(), want);
    }
}

#[tokio::test]
async fn a_count_whose_client_leaves_is_abandoned() {
    let (_mock, gw) = start_with(&["--token-workers", "1", "--max-body-bytes", "134217728"]).await;
    // Many pieces, so a running count looks at its cancel flag often.
    let text = "word ".repeat(12 * MIB / 5);
    let body = serde_json::to_vec(&count_b(&text)).unwrap();
    let raw = |body: &[u8]| {
        let mut head = format!(
            "POST {COUNT} HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        head.extend_from_slice(body);
        head
    };
    // One count holds the slot; the next waits, and its client leaves.
    let first = {
        let req = Request::post(COUNT)
            .header("x-api-key", KEY)
            .header("anthropic-version", "2023-06-01")
            .header("content-type", "application/json")
            .body(body.clone());
        let addr = gw.addr;
        tokio::spawn(async move { http_client::send(addr, &req).await })
    };
    for _ in 0..3 {
        let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        s.write_all(&raw(&body)).await.unwrap();
        s.flush().await.unwrap();
        // Wait until the gateway holds the whole body (a count is waiting or running), then leave.
        eventually(Duration::from_secs(120), "the count to start", || async {
            let m = metrics_text(gw.metrics).await;
            let waiting = metric_value(&m, "switchboard_token_counts", &["state=\"waiting\""])?;
            let running = metric_value(&m, "switchboard_token_counts", &["state=\"running\""])?;
            (waiting + running >= 1.0).then_some(())
        })
        .await;
        drop(s);
    }
    eventually(Duration::from_secs(120), "a cancelled count", || async {
        let m = metrics_text(gw.metrics).await;
        let n = metric_value(&m, "switchboard_token_counts_cancelled_total", &[])?;
        (n >= 1.0).then_some(())
    })
    .await;
    let r = first.await.unwrap().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // Nothing is left waiting or running once every client has its answer or left.
    eventually(Duration::from_secs(120), "the slots to drain", || async {
        let m = metrics_text(gw.metrics).await;
        let waiting = metric_value(&m, "switchboard_token_counts", &["state=\"waiting\""])?;
        let running = metric_value(&m, "switchboard_token_counts", &["state=\"running\""])?;
        (waiting + running == 0.0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn echoed_input_is_cut_to_a_short_prefix() {
    let (_mock, gw) = start_with(&[]).await;
    let name = "m".repeat(MIB);
    for (p, path, body) in [
        (
            Protocol::OpenAi,
            CHAT.to_string(),
            openai_body(&name, "hi", None, false),
        ),
        (
            Protocol::Anthropic,
            MESSAGES.to_string(),
            anthropic_body(&name, "hi", None, false),
        ),
        (
            Protocol::Anthropic,
            COUNT.to_string(),
            count_b("hi").tap_model(&name),
        ),
    ] {
        let r = gw.send(&call(p, &path, &body)).await;
        let e = assert_error(p, &r, 404);
        let m = e["message"].as_str().unwrap();
        assert!(m.len() < 300, "{} bytes: {}", m.len(), &m[..200]);
        assert!(m.contains(&"m".repeat(64)), "{m}");
    }
    // a huge value in a typed field: the parser's message is bounded too
    let mut body = openai_body("deepseek/big", "hi", None, false);
    body["temperature"] = json!("t".repeat(MIB));
    let r = gw.send(&call(Protocol::OpenAi, CHAT, &body)).await;
    let e = assert_error(Protocol::OpenAi, &r, 400);
    assert!(e["message"].as_str().unwrap().len() < 2048);
    // a long unknown path
    let r = gw.get(&format!("/v1/{}", "p".repeat(8000))).await;
    assert_eq!(r.status, 404);
    assert!(r.text().len() < 1024, "{}", r.text().len());
}

trait TapModel {
    fn tap_model(self, model: &str) -> Value;
}

impl TapModel for Value {
    fn tap_model(mut self, model: &str) -> Value {
        self["model"] = json!(model);
        self
    }
}
