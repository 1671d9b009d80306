//! Clients that hold the gateway's resources (issue item 9): a request head
//! or body trickled one byte at a time, keep-alive connections left idle,
//! more connections than the gateway can hold. Each test runs the binary
//! with small `--client-*-timeout-ms`, `--keepalive-timeout-ms` and
//! connection caps and drives both listeners with raw sockets.

use crate::common::families::CHAT;
use crate::common::gateway::{catalog, keys, Gateway, KEY};
use crate::common::mock_upstream::MockUpstream;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The longest any test here waits for the event it expects.
const PATIENCE: Duration = Duration::from_secs(20);

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.unwrap()
}

/// Reads until the peer closes (EOF or reset): what it sent, or `None` if
/// the connection is still open after `within`.
async fn read_to_close(s: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(out),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one answer with a `content-length` (the connection stays open):
/// its status and body.
async fn read_answer(s: &mut TcpStream) -> (u16, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if got.len() >= end + 4 + len {
                    let status = head[9..12].parse().unwrap();
                    let body = String::from_utf8_lossy(&got[end + 4..end + 4 + len]).into_owned();
                    return (status, body);
                }
            }
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before a whole answer: {got:?}");
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("an answer")
}

async fn gateway(args: &[&str]) -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), args).await;
    // The start-up probe's connection closes on its own; let the gateway see it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    (mock, gw)
}

/// Sends `head` one byte every `gap` until the gateway closes the
/// connection; true when it did within [`PATIENCE`].
async fn trickle_until_closed(addr: SocketAddr, head: &[u8], gap: Duration) -> bool {
    let mut s = connect(addr).await;
    let deadline = Instant::now() + PATIENCE;
    for b in head.iter().cycle() {
        if Instant::now() > deadline {
            return false;
        }
        if s.write_all(&[*b]).await.is_err() {
            return true;
        }
        if read_to_close(&mut s, gap).await.is_some() {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn trickled_request_head_is_closed_at_the_head_deadline() {
    let (_mock, gw) = gateway(&["--header-timeout-ms", "1500"]).await;
    // Each byte comes well within any per-read timeout; the whole head never does.
    let head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let gap = Duration::from_millis(250);
    assert!(
        trickle_until_closed(gw.addr, head, gap).await,
        "a trickled head outlived the head deadline on the client listener"
    );
    let head = b"GET /metrics HTTP/1.1\r\nhost: x\r\nx-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    assert!(
        trickle_until_closed(gw.metrics, head, gap).await,
        "a trickled head outlived the head deadline on the metrics listener"
    );
    // A head on a kept-alive connection has the same deadline, from its first byte.
    let mut s = connect(gw.addr).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_answer(&mut s).await.0, 200);
    let mut closed = false;
    for b in b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        .iter()
        .cycle()
        .take(200)
    {
        if s.write_all(&[*b]).await.is_err() || read_to_close(&mut s, gap).await.is_some() {
            closed = true;
            break;
        }
    }
    assert!(
        closed,
        "a trickled second head on a kept-alive connection stayed open"
    );
}

#[tokio::test]
async fn stalled_request_body_gets_408_at_the_body_deadline() {
    let (_mock, gw) = gateway(&["--body-timeout-ms", "1000"]).await;
    let mut s = connect(gw.addr).await;
    s.write_all(
        format!(
            "POST {CHAT} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"model\""
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // Then nothing: the body's next read never comes.
    let got = read_to_close(&mut s, PATIENCE)
        .await
        .expect("a stalled body held its connection past the body deadline");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    // In family A's shape, and the client's fault.
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["error"]["code"], "request_timeout", "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
}

#[tokio::test]
async fn trickled_request_body_gets_408_below_the_minimum_rate() {
    let (_mock, gw) = gateway(&["--body-timeout-ms", "1000", "--body-min-rate", "100"]).await;
    let mut s = connect(gw.addr).await;
    s.write_all(
        format!(
            "POST {CHAT} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // A byte every 250 ms: each read well within the body timeout, the
    // whole far below 100 bytes a second. A reader takes the answer.
    let (mut rd, mut wr) = s.into_split();
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        let _ = tokio::time::timeout(PATIENCE, rd.read_to_end(&mut got)).await;
        got
    });
    let deadline = Instant::now() + PATIENCE;
    while !reader.is_finished() && Instant::now() < deadline {
        if wr.write_all(b" ").await.is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let answer = reader.await.unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let (_mock, gw) = gateway(&["--keepalive-timeout-ms", "1000"]).await;
    for (addr, path) in [(gw.addr, "/healthz"), (gw.metrics, "/metrics")] {
        let mut s = connect(addr).await;
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(read_answer(&mut s).await.0, 200);
        // Kept alive: the next request within the timeout is served whole.
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(read_answer(&mut s).await.0, 200);
        assert!(
            read_to_close(&mut s, PATIENCE).await.is_some(),
            "an idle keep-alive connection to {path} was kept"
        );
    }
}

/// With the cap at `cap`: one idle keep-alive connection and `cap - 1` busy
/// ones (a head begun); a new client takes the idle one's place; the next
/// gets an immediate 503, and the admitted one is served.
async fn cap_evicts_idle_then_refuses(addr: SocketAddr, cap: usize, path: &str) {
    let mut idle = connect(addr).await;
    idle.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(read_answer(&mut idle).await.0, 200);
    let mut busy = Vec::new();
    for _ in 1..cap {
        let mut s = connect(addr).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        busy.push(s);
    }
    // Let the gateway take them all in.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut admitted = connect(addr).await;
    assert!(
        read_to_close(&mut idle, PATIENCE).await.is_some(),
        "the idle connection was not closed to make room"
    );
    let mut refused = connect(addr).await;
    let got = read_to_close(&mut refused, PATIENCE)
        .await
        .expect("a client over the cap was left hanging");
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 503"),
        "not a clean refusal: {text}"
    );
    admitted
        .write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(read_answer(&mut admitted).await.0, 200);
    drop(busy);
}

#[tokio::test]
async fn connection_cap_closes_idle_ones_first_then_refuses() {
    let (_mock, gw) = gateway(&["--max-connections", "4", "--metrics-max-connections", "2"]).await;
    cap_evicts_idle_then_refuses(gw.addr, 4, "/healthz").await;
    cap_evicts_idle_then_refuses(gw.metrics, 2, "/metrics").await;
    assert!(gw.log().contains("connection(s) refused"), "{}", gw.log());
}

/// Descriptors the process `pid` has open.
fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[tokio::test]
async fn a_listener_out_of_descriptors_warns_once_a_second_and_recovers() {
    // A cap above what the open-files limit allows, so accept() itself fails.
    let (_mock, gw) = gateway(&["--max-connections", "1000"]).await;
    let room = 3;
    let limit = open_descriptors(gw.pid()) + room;
    let status = std::process::Command::new("prlimit")
        .arg(format!("--pid={}", gw.pid()))
        .arg(format!("--nofile={limit}:{limit}"))
        .status()
        .expect("prlimit (util-linux)");
    assert!(status.success(), "prlimit failed");
    let mut held = Vec::new();
    for _ in 0..room + 2 {
        let mut s = connect(gw.addr).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        held.push(s);
    }
    // Every accept fails now (the loop pauses 100 ms after each): the
    // second warning carries the failures of a whole second.
    let deadline = Instant::now() + PATIENCE;
    let warnings = loop {
        let log = gw.log();
        let warnings: Vec<String> = log
            .lines()
            .filter(|l| l.contains("accept(s) failed"))
            .map(str::to_string)
            .collect();
        if warnings.len() >= 2 {
            break warnings;
        }
        assert!(Instant::now() < deadline, "no second warning:\n{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let count: u64 = warnings[1]
        .split(" accept(s) failed")
        .next()
        .and_then(|before| before.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count in {}", warnings[1]));
    assert!(count >= 2, "one line per failure: {warnings:?}");
    assert!(warnings[1].contains("Too many open files"), "{warnings:?}");
    // Room again: the clients still queued are served.
    held.drain(..room).for_each(drop);
    let mut waiting = held.pop().unwrap();
    waiting.write_all(b"host: x\r\n\r\n").await.unwrap();
    assert_eq!(read_answer(&mut waiting).await.0, 200);
}

#[tokio::test]
async fn the_descriptor_table_holds_the_connection_cap_from_the_start() {
    // Room for 1,000 clients, each with an upstream, and 256 more: the
    // table is grown once when the listener starts, not a doubling at a
    // time under load (src/listener/fdtable.rs), up to the soft limit.
    let (_mock, gw) = gateway(&["--max-connections", "1000"]).await;
    let soft = gw.proc_number("limits", "Max open files");
    let want = (2 * 1000 + 256).min(soft);
    let size = gw.proc_number("status", "FDSize:");
    assert!(
        size >= want,
        "FDSize {size}, want {want} (soft limit {soft})"
    );
    assert!(
        open_descriptors(gw.pid()) < 256,
        "the reserve leaves nothing open"
    );
}
