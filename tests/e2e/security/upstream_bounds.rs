//! Upstreams that would make a request outlive its deadline or hold
//! unbounded memory (items 10 and 13), against a scripted upstream on a raw
//! socket:
//!
//! - an endless stream to a client that does not read ends at the provider's
//!   `total` deadline, or without one at the write timeout
//!   (`--write-timeout-ms`): the upstream sees its connection closed and the
//!   client, when it finally reads, reaches the end;
//! - one SSE frame that never ends is cut at the frame limit (16 MiB): the
//!   client's stream ends with its family's error event, the upstream
//!   connection is closed;
//! - a whole answer larger than `--max-response-bytes` is a 502 in the
//!   client's family shape naming the limit, whether framed by
//!   content-length (refused before it is read) or chunked (refused as soon
//!   as it passes the limit), and eight at once leave the gateway's peak RSS
//!   far below their total size.

use super::support::read_request;
use crate::common::gateway::{authed, keys, model, Gateway, KEY};
use crate::common::http_client::Response;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Notify;

/// The size of each oversized answer.
const BIG: usize = 24 << 20;

/// What the scripted upstream noticed.
struct Upstream {
    port: u16,
    /// Endless streams whose connection the gateway closed.
    closed: Arc<AtomicUsize>,
    closed_event: Arc<Notify>,
}

/// One stream chunk carrying `text`, as an SSE frame.
fn frame(text: &str) -> String {
    let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

/// A whole answer body of at least `size` bytes (valid JSON).
fn big_json(size: usize) -> Vec<u8> {
    let text = "x".repeat(size);
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    .to_string()
    .into_bytes()
}

/// Writes `body` chunked in 64 KiB chunks; false once the peer is gone.
async fn write_chunked(s: &mut TcpStream, body: &[u8]) -> bool {
    for c in body.chunks(64 << 10) {
        let mut piece = format!("{:x}\r\n", c.len()).into_bytes();
        piece.extend_from_slice(c);
        piece.extend_from_slice(b"\r\n");
        if s.write_all(&piece).await.is_err() {
            return false;
        }
    }
    s.write_all(b"0\r\n\r\n").await.is_ok()
}

/// An upstream answering by marker: `[[endless]]` an endless stream (until
/// the gateway closes the connection, then counted), `[[big-length]]` and
/// `[[big-chunked]]` a `BIG` whole answer framed by content-length or
/// chunked, anything else a small answer.
async fn upstream() -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let closed = Arc::new(AtomicUsize::new(0));
    let closed_event = Arc::new(Notify::new());
    let big = Arc::new(big_json(BIG));
    let (c, e) = (closed.clone(), closed_event.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let (c, e, big) = (c.clone(), e.clone(), big.clone());
            tokio::spawn(async move {
                while let Some(body) = read_request(&mut s).await.map(|r| r.body_text()) {
                    if body.contains("[[endless-frame]]") {
                        // One SSE frame that never ends: no line break, ever.
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n8\r\ndata: xx\r\n";
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let x = "x".repeat(64 << 10);
                        let piece = format!("{:x}\r\n{x}\r\n", x.len());
                        loop {
                            if s.write_all(piece.as_bytes()).await.is_err() {
                                c.fetch_add(1, Ordering::SeqCst);
                                e.notify_one();
                                return;
                            }
                        }
                    } else if body.contains("[[endless]]") {
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let f = frame(&"y".repeat(8 << 10));
                        let piece = format!("{:x}\r\n{f}\r\n", f.len());
                        loop {
                            if s.write_all(piece.as_bytes()).await.is_err() {
                                c.fetch_add(1, Ordering::SeqCst);
                                e.notify_one();
                                return;
                            }
                        }
                    } else if body.contains("[[big-length]]") {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            big.len()
                        );
                        if s.write_all(head.as_bytes()).await.is_err()
                            || s.write_all(&big).await.is_err()
                        {
                            return;
                        }
                    } else if body.contains("[[big-chunked]]") {
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                        if s.write_all(head.as_bytes()).await.is_err()
                            || !write_chunked(&mut s, &big).await
                        {
                            return;
                        }
                    } else {
                        let small = big_json(5);
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            small.len()
                        );
                        if s.write_all(head.as_bytes()).await.is_err()
                            || s.write_all(&small).await.is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    Upstream {
        port,
        closed,
        closed_event,
    }
}

/// A gateway whose model `scripted/m` (OpenAI and Anthropic clients) is
/// served by `up`, with `timeouts` for its provider.
async fn gateway(up: &Upstream, timeouts: Value, args: &[&str]) -> Gateway {
    let cat = json!({
        "providers": [{"id": "scripted", "families": ["openai", "anthropic"], "timeouts": timeouts,
            "upstreams": [{"protocol": "openai", "base_url": format!("http://127.0.0.1:{}/v1", up.port),
                "api_key_env": "SB_TEST_KEY_OPENAI"}]}],
        "models": [model("m", "scripted", json!({"upstream_model": "up-model", "protocols": ["openai", "anthropic"]}))]
    });
    Gateway::start_with(&cat, &keys(), args).await
}

/// Starts a stream on a raw connection with a small receive buffer and
/// never reads from it.
async fn stalled_stream_client(gw: &Gateway) -> TcpStream {
    let body = json!({"model": "scripted/m", "stream": true,
        "messages": [{"role": "user", "content": "[[endless]]"}]})
    .to_string();
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(gw.addr).await.unwrap();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// Waits (generously) for the gateway to close the endless stream's
/// upstream connection, then reads the client's connection to its end.
async fn upstream_closed_then_client_reaches_eof(up: &Upstream, mut client: TcpStream) {
    tokio::time::timeout(Duration::from_secs(60), async {
        while up.closed.load(Ordering::SeqCst) == 0 {
            up.closed_event.notified().await;
        }
    })
    .await
    .expect("the endless upstream stream was never closed while the client did not read");
    let mut buf = vec![0u8; 64 << 10];
    let eof = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match client.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(_) => continue,
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("the client's connection stayed open");
    eof.expect("the client's connection ended in an error, not EOF");
}

#[tokio::test]
async fn an_endless_stream_to_a_client_that_does_not_read_ends_at_the_total_deadline() {
    let up = upstream().await;
    let gw = gateway(&up, json!({"total": 1500}), &[]).await;
    let client = stalled_stream_client(&gw).await;
    upstream_closed_then_client_reaches_eof(&up, client).await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_at_the_write_timeout() {
    let up = upstream().await;
    let gw = gateway(&up, json!({}), &["--write-timeout-ms", "1000"]).await;
    let client = stalled_stream_client(&gw).await;
    upstream_closed_then_client_reaches_eof(&up, client).await;
}

/// Asks for a whole answer marked `marker` as an OpenAI or Anthropic client.
async fn ask(gw: &Gateway, family: &str, marker: &str) -> Response {
    let (path, body) = match family {
        "anthropic" => (
            "/anthropic/v1/messages",
            json!({"model": "scripted/m", "max_tokens": 16, "messages": [{"role": "user", "content": marker}]}),
        ),
        _ => (
            "/v1/chat/completions",
            json!({"model": "scripted/m", "messages": [{"role": "user", "content": marker}]}),
        ),
    };
    gw.send(&authed(family, path, KEY, &body)).await
}

#[tokio::test]
async fn an_answer_over_the_response_limit_is_a_502_naming_the_limit() {
    let up = upstream().await;
    let gw = gateway(&up, json!({}), &["--max-response-bytes", "65536"]).await;
    let ok = ask(&gw, "openai", "small").await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    for marker in ["[[big-length]]", "[[big-chunked]]"] {
        let r = ask(&gw, "openai", marker).await;
        assert_eq!(r.status, 502, "{marker}: {}", r.text());
        let v = r.json();
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("65536"), "{marker}: {v}");
        assert!(v["error"]["type"].is_string(), "{marker}: {v}");
        let r = ask(&gw, "anthropic", marker).await;
        assert_eq!(r.status, 502, "{marker}: {}", r.text());
        let v = r.json();
        assert_eq!(v["type"], "error", "{marker}: {v}");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("65536"), "{marker}: {v}");
    }
    // The gateway still answers afterwards.
    assert_eq!(ask(&gw, "openai", "small").await.status, 200);
}

/// The process's peak resident set (VmHWM), in bytes.
fn peak_rss(gw: &Gateway) -> u64 {
    gw.proc_number("status", "VmHWM:") * 1024
}

#[tokio::test]
async fn oversized_answers_at_once_keep_the_gateway_s_memory_flat() {
    let up = upstream().await;
    let gw = Arc::new(gateway(&up, json!({}), &["--max-response-bytes", "1048576"]).await);
    assert_eq!(ask(&gw, "openai", "small").await.status, 200);
    let before = peak_rss(&gw);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..8 {
        let gw = gw.clone();
        let marker = if i % 2 == 0 {
            "[[big-length]]"
        } else {
            "[[big-chunked]]"
        };
        set.spawn(async move { ask(&gw, "openai", marker).await.status });
    }
    while let Some(status) = set.join_next().await {
        assert_eq!(status.unwrap(), 502);
    }
    let grown = peak_rss(&gw).saturating_sub(before);
    let total = 8 * BIG as u64;
    assert!(
        grown < total / 6,
        "the gateway's peak RSS grew by {} MiB for {} MiB of answers",
        grown >> 20,
        total >> 20
    );
}

#[tokio::test]
async fn a_stream_frame_that_never_ends_is_cut_at_the_frame_limit() {
    let up = upstream().await;
    let gw = gateway(&up, json!({}), &[]).await;
    let body = json!({"model": "scripted/m", "stream": true,
        "messages": [{"role": "user", "content": "[[endless-frame]]"}]});
    let r = gw
        .send(&authed("openai", "/v1/chat/completions", KEY, &body))
        .await;
    assert_eq!(r.status, 200);
    let text = r.text();
    let tail = &text[text.len().saturating_sub(600)..];
    assert!(
        tail.contains("\"error\""),
        "the stream did not end with an error event: {tail}"
    );
    assert!(
        text.len() < 1 << 20,
        "the unfinished frame reached the client ({} bytes)",
        text.len()
    );
    tokio::time::timeout(Duration::from_secs(60), async {
        while up.closed.load(Ordering::SeqCst) == 0 {
            up.closed_event.notified().await;
        }
    })
    .await
    .expect("the upstream connection of the cut stream stayed open");
}
