//! Secrets and unbounded client strings in the process's own logs (issue
//! items 3 and 8). Broken requests carrying the client key in a family C
//! URI (`?key=`) or the admin key in a header must not put either on stderr
//! or stdout, Pingora's lines included; a 1 MiB URI or a 60 KiB admin
//! parameter must not come back, or go to a log, whole.

use crate::common::families::GOOGLE;
use crate::common::gateway::{catalog, keys, provider_key, Gateway, KEY};
use crate::common::mock_upstream::MockUpstream;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const PATIENCE: Duration = Duration::from_secs(20);
const ADMIN_KEY: &str = "adm-secret-4f1c9b";

/// How a raw client ends its request.
enum End {
    /// Half-closes and reads the answer.
    HalfClose,
    /// Closes at once.
    Close,
    /// Waits for the answer (the body deadline passes).
    Wait,
}

/// Sends `bytes`, ends as told, reads until the gateway closes: the answer.
async fn raw(addr: SocketAddr, bytes: &[u8], end: End) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    match end {
        End::HalfClose => s.shutdown().await.unwrap(),
        End::Close => return String::new(),
        End::Wait => {}
    }
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) | Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Polls until the access log has `n` lines.
async fn access_lines(gw: &Gateway, n: usize) {
    let deadline = Instant::now() + PATIENCE;
    while gw.access_log().lines().count() < n {
        assert!(Instant::now() < deadline, "access log: {}", gw.access_log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn assert_no_secret(gw: &Gateway) {
    let (log, access) = (gw.log(), gw.access_log());
    for secret in [KEY, ADMIN_KEY, provider_key("gemini").as_str()] {
        assert!(!log.contains(secret), "{secret} in stderr:\n{log}");
        assert!(!access.contains(secret), "{secret} in stdout:\n{access}");
    }
}

#[tokio::test]
async fn broken_requests_never_log_a_key() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(
        &catalog(&mock),
        &keys(),
        &[
            "--admin-key",
            ADMIN_KEY,
            "--body-timeout-ms",
            "1000",
            "--header-timeout-ms",
            "1000",
        ],
    )
    .await;
    let head = |framing: &str| {
        format!(
            "POST {GOOGLE}/gemini-3.1-pro:generateContent?key={KEY} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{framing}\r\n"
        )
    };
    let cut = format!("{}{{\"contents\":", head("content-length: 100\r\n"));
    let chunked = head("transfer-encoding: chunked\r\n");
    let requests: Vec<(Vec<u8>, End)> = vec![
        // A body cut short: half-closed, closed, stalled.
        (cut.clone().into_bytes(), End::HalfClose),
        (cut.clone().into_bytes(), End::Close),
        (cut.into_bytes(), End::Wait),
        // Badly chunked: an invalid size, a chunk cut short.
        (
            format!("{chunked}zz\r\n{{}}\r\n0\r\n\r\n").into_bytes(),
            End::Wait,
        ),
        (
            format!("{chunked}40\r\n{{\"contents\":").into_bytes(),
            End::HalfClose,
        ),
    ];
    let n = requests.len();
    for (bytes, end) in requests {
        raw(gw.addr, &bytes, end).await;
    }
    access_lines(&gw, n).await;
    // A head cut short, a head Pingora cannot parse, a URI too long to
    // parse: no request, nothing to wait for but their log lines.
    let h = head("content-length: 2\r\n");
    raw(gw.addr, &h.as_bytes()[..h.len() - 10], End::HalfClose).await;
    raw(gw.addr, &h.as_bytes()[..h.len() - 10], End::Wait).await;
    let bad = h.replace("host: x", "host: x\r\nbad header: \x01");
    raw(gw.addr, bad.as_bytes(), End::Wait).await;
    let long = h.replace("?key=", &format!("?pad={}&key=", "p".repeat(70_000)));
    raw(gw.addr, long.as_bytes(), End::Wait).await;
    // The admin key on the metrics listener: a cut head, a broken head, a
    // head too long to parse.
    let admin =
        format!("GET /admin/usage HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN_KEY}\r\n");
    raw(gw.metrics, admin.as_bytes(), End::HalfClose).await;
    raw(gw.metrics, admin.as_bytes(), End::Wait).await;
    let bad = format!("{admin}bad header: \x01\r\n\r\n");
    raw(gw.metrics, bad.as_bytes(), End::Wait).await;
    let long = format!(
        "GET /admin/usage?pad={} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN_KEY}\r\n\r\n",
        "p".repeat(70_000)
    );
    raw(gw.metrics, long.as_bytes(), End::Wait).await;
    // Everything above has been answered or closed; the lines are written.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_no_secret(&gw);
}

#[tokio::test]
async fn long_client_strings_do_not_amplify_logs_or_answers() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &["--admin-key", ADMIN_KEY]).await;
    let before = gw.log().len() + gw.access_log().len();
    let huge = "a".repeat(1_000_000);
    let mut answers = Vec::new();
    for addr in [gw.metrics, gw.addr] {
        for _ in 0..3 {
            let req = format!("GET /{huge} HTTP/1.1\r\nhost: x\r\n\r\n");
            answers.push(raw(addr, req.as_bytes(), End::Wait).await);
        }
    }
    // A 60 KiB path parses: a 404, with its access line.
    let long = "b".repeat(60 * 1024);
    let req = format!("GET /v1/{long} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    let answer = raw(gw.addr, req.as_bytes(), End::Wait).await;
    assert!(
        answer.starts_with("HTTP/1.1 404"),
        "{}",
        &answer[..answer.len().min(200)]
    );
    assert!(answer.len() < 4096, "a 404 of {} bytes", answer.len());
    access_lines(&gw, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let grown = gw.log().len() + gw.access_log().len() - before;
    assert!(grown < 16 * 1024, "logs grew by {grown} bytes");
    for answer in answers {
        let head = &answer[..answer.len().min(200)];
        assert!(answer.starts_with("HTTP/1.1 400"), "{head}");
    }
    // Admin 400s: short, with the real length of what they quote.
    let value = "c".repeat(60 * 1024);
    for query in [
        format!("from={value}"),
        format!("{value}=1"),
        format!("group_by={value}"),
    ] {
        let req = format!(
            "GET /admin/usage?{query} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN_KEY}\r\nconnection: close\r\n\r\n"
        );
        let answer = raw(gw.metrics, req.as_bytes(), End::Wait).await;
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "{}",
            &answer[..answer.len().min(200)]
        );
        assert!(
            answer.len() < 2048,
            "an admin 400 of {} bytes",
            answer.len()
        );
        assert!(answer.contains("61440 bytes"), "{answer}");
    }
}
