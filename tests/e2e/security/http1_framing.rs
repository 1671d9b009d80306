//! How the listener's HTTP/1 session frames requests and answers (item 11;
//! docs/security.md "Request framing"), driven over raw sockets: an
//! ambiguous or refused framing is a `400` and a closed connection, never a
//! second request read out of the first one's body; pipelined requests are
//! answered in order; an unread body is drained before the connection is
//! reused; keep-alive is what the client's version and `Connection` ask.

use crate::common::families::CHAT;
use crate::common::gateway::{catalog, keys, Gateway, KEY};
use crate::common::mock_upstream::MockUpstream;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const PATIENCE: Duration = Duration::from_secs(20);

/// One answer as read off the connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The status line and headers, lowercased.
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            (n.trim() == name).then(|| v.trim())
        })
    }
}

/// A client connection reading answers one after another.
struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    async fn connect(gw: &Gateway) -> Client {
        Client {
            s: TcpStream::connect(gw.addr).await.unwrap(),
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).await.unwrap();
    }

    /// Reads more; false at the end of input (or after [`PATIENCE`]).
    async fn fill(&mut self) -> bool {
        let mut piece = [0u8; 8192];
        match tokio::time::timeout(PATIENCE, self.s.read(&mut piece)).await {
            Ok(Ok(n)) if n > 0 => {
                self.buf.extend_from_slice(&piece[..n]);
                true
            }
            _ => false,
        }
    }

    /// The next answer (`None`: the connection closed first). A `HEAD`
    /// request's answer has no body whatever its headers say.
    async fn answer(&mut self, head_request: bool) -> Option<Answer> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if !self.fill().await {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
        self.buf.drain(..end + 4);
        let mut a = Answer {
            status: head[9..12].parse().unwrap(),
            head,
            body: Vec::new(),
        };
        if head_request {
            return Some(a);
        }
        if a.header("transfer-encoding") == Some("chunked") {
            loop {
                let line_end = loop {
                    if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        break i;
                    }
                    if !self.fill().await {
                        return None;
                    }
                };
                let size =
                    usize::from_str_radix(std::str::from_utf8(&self.buf[..line_end]).unwrap(), 16)
                        .unwrap();
                while self.buf.len() < line_end + 2 + size + 2 {
                    if !self.fill().await {
                        return None;
                    }
                }
                let chunk = &self.buf[line_end + 2..line_end + 2 + size];
                assert_eq!(&self.buf[line_end + 2 + size..][..2], b"\r\n");
                a.body.extend_from_slice(chunk);
                self.buf.drain(..line_end + 2 + size + 2);
                if size == 0 {
                    return Some(a);
                }
            }
        }
        let len: usize = a.header("content-length").map_or(0, |v| v.parse().unwrap());
        while self.buf.len() < len {
            if !self.fill().await {
                return None;
            }
        }
        a.body = self.buf.drain(..len).collect();
        Some(a)
    }

    /// True when the gateway closes the connection with nothing more sent.
    async fn closed(&mut self) -> bool {
        let deadline = Instant::now() + PATIENCE;
        let mut piece = [0u8; 64];
        matches!(
            tokio::time::timeout_at(deadline, self.s.read(&mut piece)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

fn chat(extra: &str) -> String {
    format!(
        "POST {CHAT} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\n{extra}\r\n"
    )
}

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";

/// A chat request's body, answered whole by the mock.
const CHAT_BODY: &str = r#"{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}"#;

#[tokio::test]
async fn refused_framings_are_a_400_and_a_closed_connection() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let body = r#"{"model":"m"}"#;
    let cases = [
        // Transfer-Encoding on HTTP/1.0 (RFC 9112 6.1).
        format!("POST {CHAT} HTTP/1.0\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"),
        // A last coding that is not chunked.
        format!("POST {CHAT} HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked, gzip\r\n\r\n"),
        // Lengths that are no number, or disagree.
        format!("POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-length: 1e3\r\n\r\n{body}"),
        format!("POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-length: -13\r\n\r\n{body}"),
        format!(
            "POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-length: 13\r\ncontent-length: 14\r\n\r\n{body}"
        ),
        format!("POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-length: 13, 14\r\n\r\n{body}"),
        // No HTTP at all.
        "GET /healthz HTTP/1.1\r\nhost x\r\n\r\n".to_string(),
        "\x16\x03\x01\x02\x00\x01\x00\x01\x7c\x03\x03\r\n\r\n".to_string(),
    ];
    for case in &cases {
        let mut c = Client::connect(&gw).await;
        // The second request must never be read out of the first.
        c.send(case.as_bytes()).await;
        c.send(HEALTH).await;
        let a = c.answer(false).await.unwrap_or_else(|| panic!("{case:?}"));
        assert_eq!(a.status, 400, "{case:?}: {a:?}");
        assert!(c.closed().await, "{case:?}: the connection was kept");
    }
    assert!(mock.requests().is_empty());
    assert!(!gw.log().contains("ERROR"), "{}", gw.log());
}

#[tokio::test]
async fn a_head_over_a_mebibyte_is_refused() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let mut c = Client::connect(&gw).await;
    let head = format!(
        "GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n",
        "a".repeat(1 << 20)
    );
    // The gateway may close before it has read all of it.
    let _ = c.s.write_all(head.as_bytes()).await;
    let a = c.answer(false).await.expect("an answer");
    assert_eq!(a.status, 400, "{a:?}");
    assert!(c.closed().await);
}

/// With both `Transfer-Encoding` and `Content-Length`, the body is read as
/// chunked (the length ignored: RFC 9112 6.3) and the connection closed
/// after the answer, so nothing pipelined behind it is read.
#[tokio::test]
async fn chunked_wins_over_a_length_and_the_connection_is_closed() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let body = CHAT_BODY;
    let mut c = Client::connect(&gw).await;
    let mut req = chat("transfer-encoding: chunked\r\ncontent-length: 5\r\n").into_bytes();
    req.extend_from_slice(format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len()).as_bytes());
    req.extend_from_slice(HEALTH);
    c.send(&req).await;
    let a = c.answer(false).await.unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("connection"), Some("close"), "{a:?}");
    assert!(c.closed().await);
    assert_eq!(mock.requests().len(), 1);
}

/// Requests sent back to back on one connection are answered in order,
/// bodies and chunked bodies included.
#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let body = CHAT_BODY;
    let mut all = Vec::new();
    all.extend_from_slice(HEALTH);
    all.extend_from_slice(chat(&format!("content-length: {}\r\n", body.len())).as_bytes());
    all.extend_from_slice(body.as_bytes());
    all.extend_from_slice(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ");
    all.extend_from_slice(KEY.as_bytes());
    all.extend_from_slice(b"\r\n\r\n");
    all.extend_from_slice(chat("transfer-encoding: chunked\r\n").as_bytes());
    let (a, b) = body.split_at(10);
    all.extend_from_slice(
        format!("{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", a.len(), b.len()).as_bytes(),
    );
    all.extend_from_slice(b"HEAD /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    all.extend_from_slice(HEALTH);
    let mut c = Client::connect(&gw).await;
    // Sent in pieces that cut heads and bodies anywhere.
    for piece in all.chunks(37) {
        c.send(piece).await;
    }
    let health = c.answer(false).await.unwrap();
    assert_eq!(
        (health.status, health.body.as_slice()),
        (200, &br#"{"status":"ok"}"#[..]),
        "{health:?}"
    );
    let chat1 = c.answer(false).await.unwrap();
    assert_eq!(chat1.status, 200, "{chat1:?}");
    let v: serde_json::Value = serde_json::from_slice(&chat1.body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    let models = c.answer(false).await.unwrap();
    assert_eq!(models.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&models.body).unwrap();
    assert_eq!(v["object"], "list");
    let chat2 = c.answer(false).await.unwrap();
    assert_eq!(chat2.status, 200, "{chat2:?}");
    let head = c.answer(true).await.unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("15"), "{head:?}");
    let last = c.answer(false).await.unwrap();
    assert_eq!(
        (last.status, last.body.as_slice()),
        (200, &br#"{"status":"ok"}"#[..]),
        "{last:?}"
    );
    assert_eq!(mock.requests().len(), 2);
    for r in mock.requests() {
        assert!(r.body_text().contains("\"hi\""), "{}", r.body_text());
    }
}

/// A request answered before its body was read (no key): the body is
/// drained, and what follows it is the next request, not the body read as
/// one. Its JSON would be a request line if the body were left unread.
#[tokio::test]
async fn an_unread_body_is_drained_before_the_next_request() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let smuggled = "GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n";
    for framing in ["length", "chunked"] {
        let mut c = Client::connect(&gw).await;
        let mut req = format!("POST {CHAT} HTTP/1.1\r\nhost: x\r\n").into_bytes();
        match framing {
            "length" => req.extend_from_slice(
                format!("content-length: {}\r\n\r\n{smuggled}", smuggled.len()).as_bytes(),
            ),
            _ => req.extend_from_slice(
                format!(
                    "transfer-encoding: chunked\r\n\r\n{:x}\r\n{smuggled}\r\n0\r\n\r\n",
                    smuggled.len()
                )
                .as_bytes(),
            ),
        }
        req.extend_from_slice(HEALTH);
        c.send(&req).await;
        let a = c.answer(false).await.unwrap();
        assert_eq!(a.status, 401, "{framing}: {a:?}");
        // The next answer is the health check's, not the models list's.
        let next = c.answer(false).await.expect("the connection was kept");
        assert_eq!(
            (next.status, next.body.as_slice()),
            (200, &br#"{"status":"ok"}"#[..]),
            "{framing}: {next:?}"
        );
    }
}

/// A body too long to be worth draining (over 1 MiB left unread) closes
/// the connection after the answer, instead of reading it all.
#[tokio::test]
async fn a_long_unread_body_closes_the_connection() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let mut c = Client::connect(&gw).await;
    // No key: a 401 before the body is read. Only its start is sent.
    let head = format!("POST {CHAT} HTTP/1.1\r\nhost: x\r\ncontent-length: 10000000\r\n\r\n");
    c.send(head.as_bytes()).await;
    c.send(&[b' '; 1000]).await;
    let a = c.answer(false).await.unwrap();
    assert_eq!(a.status, 401, "{a:?}");
    assert!(
        c.closed().await,
        "the gateway waited for the rest of the body"
    );
}

/// HTTP/1.1 keeps the connection unless the client says `close`; HTTP/1.0
/// keeps it only when asked.
#[tokio::test]
async fn keep_alive_is_what_the_client_asks() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    for (head, kept) in [
        ("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n", true),
        (
            "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
            false,
        ),
        // `close` wins over a later `keep-alive`.
        (
            "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\nconnection: keep-alive\r\n\r\n",
            false,
        ),
        ("GET /healthz HTTP/1.0\r\n\r\n", false),
        (
            "GET /healthz HTTP/1.0\r\nconnection: keep-alive\r\n\r\n",
            true,
        ),
    ] {
        let mut c = Client::connect(&gw).await;
        c.send(head.as_bytes()).await;
        let a = c.answer(false).await.unwrap();
        assert_eq!(a.status, 200, "{head:?}");
        let said = if kept { "keep-alive" } else { "close" };
        assert_eq!(a.header("connection"), Some(said), "{head:?}: {a:?}");
        assert!(a.header("date").is_some(), "{a:?}");
        if kept {
            c.send(head.as_bytes()).await;
            assert_eq!(c.answer(false).await.expect(head).status, 200);
        } else {
            assert!(c.closed().await, "{head:?}");
        }
    }
}

/// An HTTP/1.0 client reads no chunks: a stream's answer runs to the
/// connection's close, its frames unframed.
#[tokio::test]
async fn a_stream_to_an_http10_client_is_delimited_by_the_close() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let body = crate::common::families::openai_body("gpt-5", "hi", None, true).to_string();
    let req = format!(
        "POST {CHAT} HTTP/1.0\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut c = Client::connect(&gw).await;
    c.send(req.as_bytes()).await;
    let a = c.answer(true).await.unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("transfer-encoding"), None, "{a:?}");
    assert_eq!(a.header("connection"), Some("close"), "{a:?}");
    while c.fill().await {}
    let text = String::from_utf8_lossy(&c.buf);
    assert!(text.starts_with("data: {"), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}
