//! One client's answer reaching another (items 1 and 2): a scripted upstream
//! on a raw socket that misbehaves on keep-alive connections (a stray answer
//! after a complete one, framing anomalies, resets after reading a request)
//! and counts the connections and requests it sees, so the tests can tell
//! which connection carried what.
//!
//! - a stray answer never reaches a later request, of another provider at
//!   the same address at once, or of anyone once it has arrived;
//! - two providers at one address never share a connection: each connection
//!   carries one credential;
//! - a connection whose answer had a framing anomaly is not reused;
//! - `--upstream-keepalive-requests` caps the requests per connection;
//! - a POST with `retries: 0` whose connection is reset after the upstream
//!   read it goes out at most twice (once more only when the first went on a
//!   pooled connection), and the access log's `attempts` says how many.

use super::support::read_request;
use crate::common::gateway::{authed, keys, model, Gateway, KEY};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// Another client key of the test keys file (the `hashed` entry's key).
const OTHER_KEY: &str = "test";
/// The provider key of the second provider at the scripted address.
const SECOND_KEY: &str = "upstream-key-second";

/// A request as the scripted upstream read it.
#[derive(Clone, Debug)]
struct Seen {
    /// Which accepted connection (0-based) carried it.
    conn: usize,
    /// Its `authorization` header.
    auth: String,
    body: String,
}

/// What the scripted upstream does for one request, step by step.
#[derive(Clone, Debug)]
enum Step {
    Write(Vec<u8>),
    Sleep(Duration),
    /// Signals the test (`Scripted::event`).
    Notify,
    /// Waits until this many connections were accepted.
    AwaitConnections(usize),
    /// Closes with a reset (SO_LINGER 0).
    Reset,
}

type Script = Arc<dyn Fn(&Seen) -> Vec<Step> + Send + Sync>;

struct Scripted {
    port: u16,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
    event: Arc<Notify>,
}

impl Scripted {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// An upstream running `script` for every request it reads.
async fn scripted(script: Script) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let up = Scripted {
        port,
        connections: Arc::new(AtomicUsize::new(0)),
        seen: Arc::new(Mutex::new(Vec::new())),
        event: Arc::new(Notify::new()),
    };
    let (conns, seen, event) = (up.connections.clone(), up.seen.clone(), up.event.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let conn = conns.fetch_add(1, Ordering::SeqCst);
            let (conns, seen, event, script) =
                (conns.clone(), seen.clone(), event.clone(), script.clone());
            tokio::spawn(async move {
                while let Some(req) = read_request(&mut s).await {
                    let (auth, body) = (req.header("authorization").to_string(), req.body_text());
                    let req = Seen { conn, auth, body };
                    seen.lock().unwrap().push(req.clone());
                    for step in script(&req) {
                        match step {
                            Step::Write(b) => {
                                if s.write_all(&b).await.is_err() {
                                    return;
                                }
                            }
                            Step::Sleep(d) => tokio::time::sleep(d).await,
                            Step::Notify => event.notify_one(),
                            Step::AwaitConnections(n) => {
                                while conns.load(Ordering::SeqCst) < n {
                                    tokio::time::sleep(Duration::from_millis(5)).await;
                                }
                            }
                            Step::Reset => {
                                let _ = s.set_zero_linger();
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    up
}

/// A whole chat-completions answer whose text is `text`.
fn answer_json(text: &str) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    .to_string()
}

/// A whole keep-alive answer with `text`, framed by content-length.
fn answer(text: &str) -> Vec<u8> {
    let body = answer_json(text);
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The `[[say:TEXT]]` marker of a request body (what the answer should say).
fn said(body: &str) -> String {
    body.split("[[say:")
        .nth(1)
        .and_then(|r| r.split("]]").next())
        .unwrap_or("")
        .to_string()
}

/// Two providers, `first` and `second`, with the same base URL (the
/// scripted upstream) and different credentials; `retries` for both.
fn catalog(up: &Scripted, retries: u32) -> Value {
    let url = format!("http://127.0.0.1:{}/v1", up.port);
    json!({
        "providers": [
            {"id": "first", "families": ["openai"], "retries": retries, "upstreams": [
                {"protocol": "openai", "base_url": url, "api_key_env": "SB_TEST_KEY_OPENAI"}]},
            {"id": "second", "families": ["openai"], "retries": retries, "upstreams": [
                {"protocol": "openai", "base_url": url, "api_key_env": "SB_SEC_KEY_SECOND"}]}
        ],
        "models": [
            model("m1", "first", json!({"upstream_model": "up-model", "protocols": ["openai"]})),
            model("m2", "second", json!({"upstream_model": "up-model", "protocols": ["openai"]}))
        ]
    })
}

async fn gateway(up: &Scripted, retries: u32, args: &[&str]) -> Gateway {
    Gateway::start_with_env(
        &catalog(up, retries),
        &keys(),
        args,
        &[("SB_SEC_KEY_SECOND", SECOND_KEY)],
    )
    .await
}

/// Asks `model` (with `key`) to say `text`: the status and the answer's text.
async fn ask(gw: &Gateway, key: &str, model: &str, text: &str) -> (u16, String) {
    let body = json!({"model": model, "messages": [{"role": "user", "content": format!("[[say:{text}]]")}]});
    let r = gw
        .send(&authed("openai", "/v1/chat/completions", key, &body))
        .await;
    let said = r
        .try_json()
        .ok()
        .and_then(|v| {
            v["choices"][0]["message"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| r.text());
    (r.status, said)
}

#[tokio::test]
async fn a_stray_answer_after_a_complete_one_never_reaches_a_later_request() {
    // The first answer is followed, 30 ms later, by a stray one on the same
    // connection; every other request is answered with what it asked for.
    let up = scripted(Arc::new(|r: &Seen| {
        let text = said(&r.body);
        if text == "first" {
            vec![
                Step::Write(answer("first")),
                Step::Sleep(Duration::from_millis(30)),
                Step::Write(answer("STRAY")),
                Step::Notify,
            ]
        } else {
            vec![Step::Write(answer(&text))]
        }
    }))
    .await;
    let gw = gateway(&up, 0, &[]).await;
    assert_eq!(
        ask(&gw, KEY, "first/m1", "first").await,
        (200, "first".into())
    );
    // At once, while the stray is still to come: another provider at the
    // same address must not take the first one's connection.
    assert_eq!(
        ask(&gw, OTHER_KEY, "second/m2", "second-1").await,
        (200, "second-1".into())
    );
    // Once the stray has arrived on the idle connection, nobody reads it.
    tokio::time::timeout(Duration::from_secs(30), up.event.notified())
        .await
        .expect("the upstream never sent its stray answer");
    for i in 0..4 {
        for (key, model) in [
            (KEY, "first/m1"),
            (OTHER_KEY, "second/m2"),
            (OTHER_KEY, "first/m1"),
        ] {
            let want = format!("{model}-{i}");
            let got = ask(&gw, key, model, &want).await;
            assert_eq!(got, (200, want), "a later request read another answer");
        }
    }
}

#[tokio::test]
async fn two_providers_at_one_address_never_share_a_connection() {
    let up = scripted(Arc::new(|r: &Seen| {
        vec![Step::Write(answer(&said(&r.body)))]
    }))
    .await;
    let gw = gateway(&up, 0, &[]).await;
    // Alternating, one at a time (a shared pool would hand each provider's
    // request the other's idle connection) ...
    for i in 0..6 {
        let model = if i % 2 == 0 { "first/m1" } else { "second/m2" };
        assert_eq!(ask(&gw, KEY, model, &format!("a{i}")).await.0, 200);
    }
    // ... and a few at once.
    let mut set = tokio::task::JoinSet::new();
    let gw = Arc::new(gw);
    for i in 0..8 {
        let gw = gw.clone();
        let model = if i % 2 == 0 { "first/m1" } else { "second/m2" };
        set.spawn(async move { ask(&gw, KEY, model, &format!("b{i}")).await.0 });
    }
    while let Some(status) = set.join_next().await {
        assert_eq!(status.unwrap(), 200);
    }
    let seen = up.seen();
    assert_eq!(seen.len(), 14);
    let mut per_conn: std::collections::HashMap<usize, std::collections::BTreeSet<String>> =
        Default::default();
    for s in &seen {
        per_conn.entry(s.conn).or_default().insert(s.auth.clone());
    }
    for (conn, creds) in &per_conn {
        assert_eq!(
            creds.len(),
            1,
            "connection {conn} carried more than one provider's credential"
        );
    }
    let creds: std::collections::BTreeSet<&String> = seen.iter().map(|s| &s.auth).collect();
    assert_eq!(creds.len(), 2, "both credentials were used: {creds:?}");
}

#[tokio::test]
async fn a_connection_whose_answer_had_a_framing_anomaly_is_not_reused() {
    let body = answer_json("odd");
    let anomalies: Vec<(&str, Vec<u8>)> = vec![
        (
            "bytes past the declared length",
            [answer("odd"), b"HTTP/1.1 200 OK\r\n".to_vec()].concat(),
        ),
        (
            "content-length with transfer-encoding",
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            )
            .into_bytes(),
        ),
        (
            "framing on a 204",
            b"HTTP/1.1 204 No Content\r\ncontent-length: 9\r\n\r\n".to_vec(),
        ),
        (
            "a body on a 204",
            b"HTTP/1.1 204 No Content\r\n\r\n{\"x\":1}".to_vec(),
        ),
        (
            "a 101",
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"
                .to_vec(),
        ),
        (
            "an answer that is not keep-alive",
            format!(
                "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        ),
        (
            "an HTTP/1.0 answer",
            format!(
                "HTTP/1.0 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        ),
    ];
    for (what, wire) in anomalies {
        // The upstream keeps every connection open; only the gateway decides.
        let up = scripted(Arc::new(move |r: &Seen| {
            if said(&r.body) == "odd" {
                vec![Step::Write(wire.clone())]
            } else {
                vec![Step::Write(answer("fine"))]
            }
        }))
        .await;
        let gw = gateway(&up, 0, &[]).await;
        let _ = ask(&gw, KEY, "first/m1", "odd").await;
        let (status, text) = ask(&gw, KEY, "first/m1", "next").await;
        assert_eq!((status, text.as_str()), (200, "fine"), "{what}");
        assert_eq!(
            up.connections(),
            2,
            "{what}: the connection was reused after the anomaly"
        );
    }
}

#[tokio::test]
async fn requests_per_upstream_connection_are_capped() {
    let up = scripted(Arc::new(|r: &Seen| {
        vec![Step::Write(answer(&said(&r.body)))]
    }))
    .await;
    let gw = gateway(&up, 0, &["--upstream-keepalive-requests", "3"]).await;
    for i in 0..10 {
        let want = format!("r{i}");
        assert_eq!(ask(&gw, KEY, "first/m1", &want).await, (200, want));
    }
    let seen = up.seen();
    let mut per_conn = std::collections::HashMap::<usize, usize>::new();
    for s in &seen {
        *per_conn.entry(s.conn).or_default() += 1;
    }
    assert!(up.connections() >= 4, "{} connections", up.connections());
    assert!(per_conn.values().all(|&n| n <= 3), "{per_conn:?}");
}

/// The access log line of the request whose upstream status was `status`
/// (waits for the batched log to be written).
async fn access_line(gw: &Gateway, status: u16) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = gw
            .access_log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["status"] == status);
        if let Some(v) = found {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "no access line with {status}:\n{}",
            gw.access_log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An upstream that answers `warm` requests once two connections are open
/// (so two end up pooled) and resets every `reset` request after reading it.
async fn resetting_upstream() -> Scripted {
    scripted(Arc::new(|r: &Seen| match said(&r.body).as_str() {
        "reset" => vec![Step::Reset],
        "warm" => vec![Step::AwaitConnections(2), Step::Write(answer("warm"))],
        other => vec![Step::Write(answer(other))],
    }))
    .await
}

fn resets(up: &Scripted) -> usize {
    up.seen()
        .iter()
        .filter(|s| said(&s.body) == "reset")
        .count()
}

#[tokio::test]
async fn a_post_reset_on_a_pooled_connection_is_sent_at_most_once_more() {
    let up = resetting_upstream().await;
    let gw = Arc::new(gateway(&up, 0, &[]).await);
    // Two requests at once leave two idle connections in the pool.
    let (a, b) = tokio::join!(
        ask(&gw, KEY, "first/m1", "warm"),
        ask(&gw, KEY, "first/m1", "warm")
    );
    assert_eq!((a.0, b.0), (200, 200));
    assert_eq!(up.connections(), 2);
    let (status, _) = ask(&gw, KEY, "first/m1", "reset").await;
    assert_eq!(status, 502);
    let received = resets(&up);
    assert!(
        (1..=2).contains(&received),
        "with retries 0 the upstream received the POST {received} times"
    );
    let line = access_line(&gw, 502).await;
    assert_eq!(
        line["attempts"].as_u64(),
        Some(received as u64),
        "the access log's attempts must count every request sent: {line}"
    );
    // The metrics count the resend as an attempt of its own.
    let metrics = crate::common::http_client::send(
        gw.metrics,
        &crate::common::http_client::Request::get("/metrics"),
    )
    .await
    .unwrap()
    .text();
    let attempts: u64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("switchboard_upstream_attempts_total{")
                && l.contains("provider=\"first\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(
        attempts,
        2 + received as u64,
        "two warm-up attempts and every send of the reset POST:\n{metrics}"
    );
}

#[tokio::test]
async fn a_post_reset_on_a_new_connection_is_never_resent() {
    let up = resetting_upstream().await;
    let gw = gateway(&up, 0, &[]).await;
    let (status, _) = ask(&gw, KEY, "first/m1", "reset").await;
    assert_eq!(status, 502);
    assert_eq!(resets(&up), 1, "a reset on a new connection was resent");
    let line = access_line(&gw, 502).await;
    assert_eq!(line["attempts"].as_u64(), Some(1), "{line}");
}
