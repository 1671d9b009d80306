//! End-to-end: the gateway's own HTTP/1.1 upstream client against a scripted
//! upstream on a raw socket, for the wire cases a well-behaved mock never
//! shows: a pooled connection the upstream closed while idle, chunked bodies
//! with extensions and trailers cut at odd places, a body delimited by the
//! connection's close, an interim 100 answer, and a head cut short.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::gateway::{authed, keys, model, Gateway, KEY};
use crate::common::http_client::Connection;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A whole chat-completions answer whose text is `text`.
fn answer(text: &str) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    .to_string()
}

/// How the scripted upstream answers each request, in order of arrival.
#[derive(Clone)]
enum Script {
    /// Bytes written in pieces of this size (with a pause between), then
    /// the connection is kept (`keep`) or closed.
    Write {
        bytes: Vec<u8>,
        piece: usize,
        keep: bool,
    },
    /// Read the request, then close without a byte.
    Close,
}

struct Upstream {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

/// Reads one request (head and content-length body); false at end of input.
async fn read_request(s: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut byte).await.unwrap_or(0);
                if n == 0 {
                    return false;
                }
                buf.extend_from_slice(&byte[..n]);
            }
            return true;
        }
        let n = s.read(&mut byte).await.unwrap_or(0);
        if n == 0 {
            return false;
        }
        buf.extend_from_slice(&byte[..n]);
    }
}

/// An upstream answering request i with `scripts[i]` (the last one repeats).
async fn upstream(scripts: Vec<Script>) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let scripts = Arc::new(Mutex::new(scripts));
    let (c, r) = (connections.clone(), requests.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            c.fetch_add(1, Ordering::SeqCst);
            let (r, scripts) = (r.clone(), scripts.clone());
            tokio::spawn(async move {
                while read_request(&mut s).await {
                    let i = r.fetch_add(1, Ordering::SeqCst);
                    let script = {
                        let all = scripts.lock().unwrap();
                        all[i.min(all.len() - 1)].clone()
                    };
                    match script {
                        Script::Close => return,
                        Script::Write { bytes, piece, keep } => {
                            for p in bytes.chunks(piece.max(1)) {
                                if s.write_all(p).await.is_err() {
                                    return;
                                }
                                tokio::time::sleep(Duration::from_millis(2)).await;
                            }
                            if !keep {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    Upstream {
        port,
        connections,
        requests,
    }
}

/// A gateway whose model `wire` is served by `up` (OpenAI protocol).
async fn gateway(up: &Upstream) -> Gateway {
    let cat = json!({
        "providers": [{"id": "scripted", "families": ["openai"], "upstreams": [
            {"protocol": "openai", "base_url": format!("http://127.0.0.1:{}/v1", up.port), "api_key_env": "SB_TEST_KEY_OPENAI"}]}],
        "models": [model("wire", "scripted", json!({"upstream_model": "up-model", "protocols": ["openai"]}))]
    });
    Gateway::start_with(&cat, &keys(), &[]).await
}

fn ask(stream: bool) -> Value {
    json!({"model": "scripted/wire", "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

/// A chat request for the scripted model through `gw`.
async fn chat(gw: &Gateway, stream: bool) -> crate::common::http_client::Response {
    gw.send(&authed("openai", "/v1/chat/completions", KEY, &ask(stream)))
        .await
}

/// A chat request for the scripted model on the client connection `conn`:
/// requests that count on a pooled upstream connection share one client
/// connection, so they are served by one thread, whose pool it is.
async fn chat_on(conn: &mut Connection, stream: bool) -> crate::common::http_client::Response {
    conn.send(&authed("openai", "/v1/chat/completions", KEY, &ask(stream)))
        .await
        .unwrap()
}

fn whole(body: &str, extra_headers: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra_headers}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn text_of(v: &Value) -> &str {
    v["choices"][0]["message"]["content"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_pooled_connection_closed_while_idle_is_replaced_without_an_error() {
    // The first answer keeps the connection; the upstream then drops the
    // next request on it without a byte (an idle close racing the reuse).
    let up = upstream(vec![
        Script::Write {
            bytes: whole(&answer("first"), ""),
            piece: 4096,
            keep: true,
        },
        Script::Close,
        Script::Write {
            bytes: whole(&answer("second"), ""),
            piece: 4096,
            keep: true,
        },
    ])
    .await;
    let gw = gateway(&up).await;
    let mut conn = Connection::connect(gw.addr).await.unwrap();
    let r = chat_on(&mut conn, false).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(text_of(&r.json()), "first");
    let r = chat_on(&mut conn, false).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(text_of(&r.json()), "second");
    assert_eq!(up.requests.load(Ordering::SeqCst), 3);
    assert_eq!(up.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn chunked_bodies_with_extensions_and_trailers_cut_anywhere_are_read_whole() {
    let body = answer("chunked \u{00e9}\u{4e2d} answer");
    let (a, b) = body.split_at(17);
    let wire = format!(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x};note=1\r\n{a}\r\n{:X}\r\n{b}\r\n0\r\nx-trailer: yes\r\n\r\n",
        a.len(),
        b.len()
    );
    for piece in [1, 3, 7, 64, 4096] {
        let up = upstream(vec![Script::Write {
            bytes: wire.clone().into_bytes(),
            piece,
            keep: true,
        }])
        .await;
        let gw = gateway(&up).await;
        let mut conn = Connection::connect(gw.addr).await.unwrap();
        for _ in 0..2 {
            let r = chat_on(&mut conn, false).await;
            assert_eq!(r.status, 200, "piece {piece}: {}", r.text());
            assert_eq!(
                text_of(&r.json()),
                "chunked \u{00e9}\u{4e2d} answer",
                "piece {piece}"
            );
        }
        // Read to its end, the connection went back to the pool.
        assert_eq!(up.connections.load(Ordering::SeqCst), 1, "piece {piece}");
    }
}

#[tokio::test]
async fn a_body_delimited_by_close_is_read_to_the_end_and_not_reused() {
    let body = answer("until close");
    let wire = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{body}"
    );
    let up = upstream(vec![Script::Write {
        bytes: wire.into_bytes(),
        piece: 10,
        keep: false,
    }])
    .await;
    let gw = gateway(&up).await;
    for _ in 0..2 {
        let r = chat(&gw, false).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(text_of(&r.json()), "until close");
    }
    assert_eq!(up.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_stream_split_at_every_few_bytes_is_relayed_whole() {
    let frames: Vec<String> = ["Hel", "lo, ", "wor", "ld"]
        .iter()
        .map(|t| {
            format!(
                "data: {}\n\n",
                json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
                    "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]})
            )
        })
        .chain(std::iter::once("data: [DONE]\n\n".to_string()))
        .collect();
    let mut wire = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    for f in &frames {
        wire.push_str(&format!("{:x}\r\n{f}\r\n", f.len()));
    }
    wire.push_str("0\r\n\r\n");
    let up = upstream(vec![Script::Write {
        bytes: wire.into_bytes(),
        piece: 5,
        keep: true,
    }])
    .await;
    let gw = gateway(&up).await;
    let r = chat(&gw, true).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let text: String = r
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(text, "Hello, world");
    assert!(r.text().contains("data: [DONE]"), "{}", r.text());
}

#[tokio::test]
async fn a_head_cut_short_on_a_new_connection_is_a_502_and_not_sent_again() {
    let up = upstream(vec![Script::Write {
        bytes: b"HTTP/1.1 200 OK\r\ncontent-ty".to_vec(),
        piece: 4096,
        keep: false,
    }])
    .await;
    let gw = gateway(&up).await;
    let r = chat(&gw, false).await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(r.text().contains("unreachable"), "{}", r.text());
    assert_eq!(
        up.requests.load(Ordering::SeqCst),
        1,
        "a request on a new connection was sent again"
    );
}

/// An OpenAI chunk carrying `text`, as an SSE frame.
fn chunk_frame(text: &str, finish: Option<&str>) -> String {
    let v = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

/// Frames as OpenAI sends them: each its own HTTP chunk.
fn as_chunks(frames: &[String]) -> String {
    frames
        .iter()
        .map(|f| format!("{:x}\r\n{f}\r\n", f.len()))
        .collect()
}

/// Reads one chunk of a chunked body from `buf` (refilled from `s`):
/// its data, or None at the terminator.
async fn next_chunk(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    loop {
        if let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") {
            let size =
                usize::from_str_radix(std::str::from_utf8(&buf[..eol]).unwrap(), 16).unwrap();
            if buf.len() >= eol + 2 + size + 2 {
                let data = buf[eol + 2..eol + 2 + size].to_vec();
                buf.drain(..eol + 2 + size + 2);
                return (size > 0).then_some(data);
            }
        }
        let mut more = [0u8; 16384];
        let n = s.read(&mut more).await.unwrap();
        assert!(n > 0, "the stream ended before its terminator");
        buf.extend_from_slice(&more[..n]);
    }
}

/// What one upstream read brings (a burst of frames, each its own HTTP
/// chunk, sent in one write) reaches the client as one chunk, and at once:
/// the upstream sends its second burst only once the client has the first,
/// so a gateway that waited for more would never finish the stream.
#[tokio::test]
async fn a_burst_of_frames_reaches_the_client_as_one_chunk_without_waiting_for_more() {
    let first: Vec<String> = (0..6)
        .map(|i| chunk_frame(&format!("a{i} "), None))
        .collect();
    let second = vec![
        chunk_frame("b0 ", None),
        chunk_frame("b1", None),
        chunk_frame("", Some("stop")),
        "data: [DONE]\n\n".to_string(),
    ];
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = Upstream {
        port: listener.local_addr().unwrap().port(),
        connections: Arc::default(),
        requests: Arc::default(),
    };
    let client_has_first = Arc::new(tokio::sync::Notify::new());
    let wait = client_has_first.clone();
    let (burst1, burst2) = (as_chunks(&first), as_chunks(&second));
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        assert!(read_request(&mut s).await);
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        s.write_all(format!("{head}{burst1}").as_bytes())
            .await
            .unwrap();
        wait.notified().await;
        s.write_all(format!("{burst2}0\r\n\r\n").as_bytes())
            .await
            .unwrap();
        // Kept open: the stream's end is its terminator, not a close.
        let _ = s.read(&mut [0u8; 1]).await;
    });
    let gw = gateway(&up).await;
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    let body = ask(true).to_string();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let mut more = [0u8; 4096];
        let n = s.read(&mut more).await.unwrap();
        assert!(n > 0, "no response head");
        buf.extend_from_slice(&more[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    buf.drain(..head_end + 4);
    let text = |data: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(data)
            .split("\n\n")
            .filter(|f| !f.is_empty())
            .map(|f| {
                let d = f.strip_prefix("data: ").unwrap();
                if d == "[DONE]" {
                    return d.to_string();
                }
                let v: Value = serde_json::from_str(d).unwrap();
                assert_eq!(
                    v["model"], "scripted/wire",
                    "the model is renamed in each frame"
                );
                format!(
                    "{}|{}",
                    v["choices"][0]["delta"]["content"].as_str().unwrap_or(""),
                    v["choices"][0]["finish_reason"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    let one = next_chunk(&mut s, &mut buf).await.unwrap();
    assert_eq!(
        text(&one),
        ["a0 |", "a1 |", "a2 |", "a3 |", "a4 |", "a5 |"],
        "the first burst is one chunk"
    );
    client_has_first.notify_one();
    let two = next_chunk(&mut s, &mut buf).await.unwrap();
    assert_eq!(
        text(&two),
        ["b0 |", "b1|", "|stop", "[DONE]"],
        "the second burst is one chunk"
    );
    assert_eq!(
        next_chunk(&mut s, &mut buf).await,
        None,
        "then the terminator"
    );
    assert!(buf.is_empty(), "nothing after the terminator");
}
