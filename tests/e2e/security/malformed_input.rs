//! Malformed client input is the client's fault (issue item 11): a broken
//! chunked body is a 400 in the family's shape with no ERROR line,
//! `Expect: 100-continue` with no body is a 408 at the body deadline, an
//! HTTP/1.1 request without one `Host` is a 400, and a `traceparent` that is
//! not W3C's format is never forwarded (a new trace starts).

use crate::common::families::{openai_body, CHAT};
use crate::common::gateway::{authed, catalog, keys, Gateway, KEY};
use crate::common::mock_upstream::MockUpstream;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const PATIENCE: Duration = Duration::from_secs(20);

/// Writes `bytes` on a new connection and reads until the gateway closes
/// it (or [`PATIENCE`] passes): the status and the body of the answer.
async fn exchange(addr: SocketAddr, bytes: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => break,
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    // Skip a `100 Continue` interim answer.
    let text = match text.strip_prefix("HTTP/1.1 100 Continue\r\n\r\n") {
        Some(rest) => rest.to_string(),
        None => text,
    };
    assert!(text.starts_with("HTTP/1."), "no answer: {text:?}");
    let status = text[9..12].parse().unwrap();
    let body = text
        .find("\r\n\r\n")
        .map_or(String::new(), |i| text[i + 4..].to_string());
    (status, body)
}

fn chat_head(extra: &str) -> String {
    format!(
        "POST {CHAT} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\n{extra}\r\n"
    )
}

#[tokio::test]
async fn malformed_chunked_body_is_a_400_without_an_error_line() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let cases: [&[u8]; 3] = [
        b"zz\r\n{\"model\":1}\r\n0\r\n\r\n",
        b"5\r\n{\"model\":1}\r\n0\r\n\r\n",
        b"5;ext=\x01\r\nabcde\r\n0\r\n\r\n",
    ];
    for body in cases {
        let mut req = chat_head("transfer-encoding: chunked\r\n").into_bytes();
        req.extend_from_slice(body);
        let (status, answer) = exchange(gw.addr, &req).await;
        assert_eq!(status, 400, "{answer}");
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    }
    assert!(!gw.log().contains("ERROR"), "{}", gw.log());
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn expect_continue_without_a_body_is_a_408() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &["--body-timeout-ms", "1000"]).await;
    let req = chat_head("expect: 100-continue\r\ncontent-length: 50\r\n");
    let (status, answer) = exchange(gw.addr, req.as_bytes()).await;
    assert_eq!(status, 408, "{answer}");
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["error"]["code"], "request_timeout", "{v}");
    assert!(!gw.log().contains("ERROR"), "{}", gw.log());
}

#[tokio::test]
async fn http11_needs_exactly_one_host() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    for (head, want) in [
        ("GET /healthz HTTP/1.1\r\n\r\n", 400),
        ("GET /no/such/route HTTP/1.1\r\n\r\n", 400),
        ("GET /healthz HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n", 400),
        ("GET /healthz HTTP/1.0\r\n\r\n", 200),
        (
            "GET /healthz HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
            200,
        ),
    ] {
        let (status, answer) = exchange(gw.addr, head.as_bytes()).await;
        assert_eq!(status, want, "{head:?}: {answer}");
        let (status, _) =
            exchange(gw.metrics, head.replace("/healthz", "/metrics").as_bytes()).await;
        assert_eq!(status, want, "metrics listener, {head:?}");
    }
}

/// No tunnels: CONNECT is answered in the family's shape and its
/// connection closed; a request pipelined behind it is not served.
#[tokio::test]
async fn connect_is_answered_and_its_connection_closed() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let req = b"CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\nGET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";
    let (status, answer) = exchange(gw.addr, req).await;
    assert_eq!(status, 404, "{answer}");
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(
        !answer.contains("HTTP/1."),
        "the pipelined request was served: {answer}"
    );
    assert!(!gw.log().contains("ERROR"), "{}", gw.log());
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn only_a_valid_traceparent_goes_upstream() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let huge = format!("00-{}", "a".repeat(900 * 1024));
    for (sent, forwarded) in [
        (valid.to_string(), Some(valid)),
        (huge, None),
        (valid.to_uppercase().replace("00-4BF", "00-4bf"), None),
        (
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01".to_string(),
            None,
        ),
        (format!("{valid}-extra"), None),
    ] {
        mock.clear();
        let body = openai_body("gpt-5", "hello", None, false);
        let r = gw
            .send(&authed("openai", CHAT, KEY, &body).header("traceparent", &sent))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let up = mock.last_request().expect("an upstream request");
        assert_eq!(
            up.header("traceparent"),
            forwarded,
            "traceparent {} forwarded wrongly",
            &sent[..sent.len().min(80)]
        );
    }
}
