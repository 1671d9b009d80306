//! End-to-end: the client listener with TLS (`--tls-cert`, `--tls-key`) and
//! HTTP/2 (CONTRACT 11, docs/operations.md "TLS and HTTP/2"): chat completions
//! whole and streamed over TLS + HTTP/1.1, TLS + HTTP/2 (ALPN) and h2c (prior
//! knowledge), driven by curl; a new certificate served to new connections
//! while an open one keeps working; a handshake that stalls closed at the
//! head deadline; a plain-HTTP client on the TLS port closed; the connection
//! cap counting connections still in their handshake; startup refusing
//! missing or bad files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::{
    anthropic_body, event_json, openai_body, stream_text, CHAT, MESSAGES,
};
use crate::common::gateway::{catalog, keys, Gateway, TempDir, KEY};
use crate::common::http_client::parse_sse;
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// A throwaway CA that signs `localhost` leaves.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "switchboard listener test CA");
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A leaf for `localhost` named `cn`: its PEM certificate, PEM key and DER.
    fn leaf(&self, cn: &str) -> (String, String, Vec<u8>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

/// The CA and the first leaf written into `dir`: (ca.pem, cert, key, leaf DER).
fn write_pki(ca: &Ca, dir: &TempDir) -> (PathBuf, PathBuf, PathBuf, Vec<u8>) {
    let (cert, key, der) = ca.leaf("first");
    let paths = (
        dir.file("ca.pem"),
        dir.file("cert.pem"),
        dir.file("key.pem"),
    );
    std::fs::write(&paths.0, &ca.pem).unwrap();
    std::fs::write(&paths.1, cert).unwrap();
    std::fs::write(&paths.2, key).unwrap();
    (paths.0, paths.1, paths.2, der)
}

fn connector(ca_pem: &str, alpn: &[&[u8]]) -> TlsConnector {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = RootCertStore::empty();
    for c in rustls_pki_types_certs(ca_pem) {
        roots.add(c).unwrap();
    }
    let mut config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

fn rustls_pki_types_certs(pem: &str) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.unwrap())
        .collect()
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// A TLS connection to the gateway (ALPN `http/1.1`).
async fn tls_connect(addr: SocketAddr, ca_pem: &str) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(addr).await?;
    connector(ca_pem, &[b"http/1.1"])
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// The DER of the certificate the server presented on `tls`.
fn served_cert(tls: &Tls) -> Vec<u8> {
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// One keep-alive `GET /healthz` on an open HTTP/1.1 connection: its status line.
async fn healthz_on(tls: &mut Tls) -> String {
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // {"status":"ok"} is 15 bytes with a Content-Length.
    while !(got.windows(4).any(|w| w == b"\r\n\r\n") && got.ends_with(b"{\"status\":\"ok\"}")) {
        let n = tls.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap()
        .to_string()
}

/// What curl got: status, HTTP version, headers (lowercased names), body.
struct Curl {
    status: u16,
    version: String,
    headers: String,
    body: Vec<u8>,
}

/// curl against the gateway: `mode` is `--http1.1`, `--http2` (TLS, ALPN)
/// or `--http2-prior-knowledge` (plain); `https` with the test CA.
async fn curl(
    gw: &Gateway,
    ca: Option<&Path>,
    mode: &str,
    path: &str,
    body: Option<&Value>,
) -> Curl {
    let dir = TempDir::new();
    let head = dir.file("head");
    let out = dir.file("body");
    let port = gw.addr.port();
    let scheme = if ca.is_some() { "https" } else { "http" };
    let mut cmd = tokio::process::Command::new("curl");
    cmd.args(["-sS", "-N", mode, "--resolve"])
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&out)
        .args(["-w", "%{http_code} %{http_version}"])
        .args(["-H", &format!("authorization: Bearer {KEY}")])
        .args(["-H", "anthropic-version: 2023-06-01"])
        .args(["-H", &format!("x-api-key: {KEY}")]);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    if let Some(b) = body {
        cmd.args(["-H", "content-type: application/json", "--data-binary"])
            .arg(b.to_string());
    }
    cmd.arg(format!("{scheme}://localhost:{port}{path}"));
    let o = cmd.output().await.unwrap();
    let w = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "curl {mode} {path}: {w} {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        gw.log()
    );
    let (code, version) = w.split_once(' ').unwrap();
    Curl {
        status: code.parse().unwrap(),
        version: version.to_string(),
        headers: std::fs::read_to_string(&head).unwrap().to_ascii_lowercase(),
        body: std::fs::read(&out).unwrap_or_default(),
    }
}

/// Polls until a TLS handshake with the gateway succeeds (it has started):
/// that connection.
async fn tls_ready(gw: &Gateway, ca_pem: &str) -> Tls {
    for _ in 0..1200 {
        if let Ok(t) = tls_connect(gw.addr, ca_pem).await {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no TLS handshake:\n{}", gw.log());
}

async fn start_tls(mock: &MockUpstream, extra: &[&str]) -> (Gateway, TempDir, Ca, Vec<u8>) {
    let ca = Ca::new();
    let pki = TempDir::new();
    let (_, cert, key, der) = write_pki(&ca, &pki);
    let mut args = vec![
        "--tls-cert".to_string(),
        cert.display().to_string(),
        "--tls-key".to_string(),
        key.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let gw = Gateway::start_tls(&catalog(mock), &keys(), &args).await;
    drop(tls_ready(&gw, &ca.pem).await);
    (gw, pki, ca, der)
}

/// A chat completion and its stream, and an Anthropic stream, over `mode`.
async fn every_answer_over(gw: &Gateway, ca: Option<&Path>, mode: &str, version: &str) {
    let whole = curl(
        gw,
        ca,
        mode,
        CHAT,
        Some(&openai_body("openai/gpt-5", "over tls", None, false)),
    )
    .await;
    assert_eq!(
        whole.status,
        200,
        "{}",
        String::from_utf8_lossy(&whole.body)
    );
    assert_eq!(whole.version, version);
    let v: Value = serde_json::from_slice(&whole.body).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        expected_reply(Protocol::OpenAi, "over tls")
    );
    assert!(
        whole.headers.contains("content-length:"),
        "{}",
        whole.headers
    );

    let streamed = curl(
        gw,
        ca,
        mode,
        CHAT,
        Some(&openai_body("openai/gpt-5", "streamed", None, true)),
    )
    .await;
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed.version, version);
    assert!(
        streamed.headers.contains("content-type: text/event-stream"),
        "{}",
        streamed.headers
    );
    if version == "2" {
        // No HTTP/1 framing headers on HTTP/2.
        assert!(
            !streamed.headers.contains("transfer-encoding"),
            "{}",
            streamed.headers
        );
        assert!(
            !streamed.headers.contains("connection:"),
            "{}",
            streamed.headers
        );
    }
    let events = parse_sse(&streamed.body);
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    let chunks = event_json(&events);
    assert_eq!(
        stream_text(Protocol::OpenAi, &chunks),
        expected_reply(Protocol::OpenAi, "streamed")
    );

    let body = anthropic_body("anthropic/claude-sonnet-4.7", "messages", None, true);
    let m = curl(gw, ca, mode, MESSAGES, Some(&body)).await;
    assert_eq!(m.status, 200, "{}", String::from_utf8_lossy(&m.body));
    let events = parse_sse(&m.body);
    assert_eq!(events.last().map(|e| e.name()), Some("message_stop"));
    assert_eq!(
        stream_text(Protocol::Anthropic, &event_json(&events)),
        expected_reply(Protocol::Anthropic, "messages")
    );

    let models = curl(gw, ca, mode, "/v1/models", None).await;
    assert_eq!(models.status, 200);
    assert_eq!(models.version, version);
}

fn access_versions(gw: &Gateway) -> Vec<String> {
    gw.access_log()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["path"] == CHAT)
        .map(|v| v["http_version"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn tls_with_http1_and_http2_by_alpn() {
    let mock = MockUpstream::start().await;
    let (gw, pki, _ca, _) = start_tls(&mock, &[]).await;
    let ca = pki.file("ca.pem");
    every_answer_over(&gw, Some(&ca), "--http1.1", "1.1").await;
    every_answer_over(&gw, Some(&ca), "--http2", "2").await;
    // The access log names each request's version (written in batches).
    for _ in 0..200 {
        let v = access_versions(&gw);
        if v.len() >= 4 {
            assert_eq!(v.iter().filter(|v| *v == "1.1").count(), 2, "{v:?}");
            assert_eq!(v.iter().filter(|v| *v == "2").count(), 2, "{v:?}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("access log: {}", gw.access_log());
}

#[tokio::test]
async fn h2c_with_prior_knowledge_beside_http1() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    every_answer_over(&gw, None, "--http2-prior-knowledge", "2").await;
    every_answer_over(&gw, None, "--http1.1", "1.1").await;
    // A short HTTP/1.0 request (under the 24-byte HTTP/2 preface) is answered.
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").await.unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).await.unwrap();
    assert!(
        got.starts_with("HTTP/1.0 200") || got.starts_with("HTTP/1.1 200"),
        "{got}"
    );
}

#[tokio::test]
async fn a_new_certificate_serves_new_connections_and_open_ones_keep_working() {
    let mock = MockUpstream::start().await;
    let (gw, pki, ca, first_der) = start_tls(&mock, &[]).await;
    let mut old = tls_connect(gw.addr, &ca.pem).await.unwrap();
    assert_eq!(served_cert(&old), first_der);
    assert!(healthz_on(&mut old).await.contains("200"));

    // A file that does not parse keeps the current certificate.
    std::fs::write(pki.file("cert.pem"), "not a certificate").unwrap();
    for _ in 0..1200 {
        if gw.log().contains("TLS certificate reload failed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = gw.log();
    assert!(log.contains("TLS certificate reload failed"), "{log}");
    assert!(!log.contains("PRIVATE KEY"), "{log}");
    let still = tls_connect(gw.addr, &ca.pem).await.unwrap();
    assert_eq!(served_cert(&still), first_der);

    // The new pair, each file replaced by a rename.
    let (cert, key, second_der) = ca.leaf("second");
    crate::common::gateway::write_atomically(&pki.file("key.pem"), key.as_bytes());
    crate::common::gateway::write_atomically(&pki.file("cert.pem"), cert.as_bytes());
    let mut served = Vec::new();
    for _ in 0..1200 {
        if let Ok(t) = tls_connect(gw.addr, &ca.pem).await {
            served = served_cert(&t);
            if served == second_der {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(served, second_der, "{}", gw.log());
    // The connection opened before the reload still works, on its session.
    assert!(healthz_on(&mut old).await.contains("200"));
    assert_eq!(served_cert(&old), first_der);
    let r = curl(&gw, Some(&pki.file("ca.pem")), "--http2", "/healthz", None).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn a_stalled_handshake_is_closed_at_the_head_deadline() {
    let mock = MockUpstream::start().await;
    let (gw, pki, ca, _) = start_tls(&mock, &["--header-timeout-ms", "300"]).await;
    // Nothing sent at all, then half a ClientHello record header: both closed.
    for first in [&b""[..], &b"\x16\x03\x01\x02"[..]] {
        let mut s = TcpStream::connect(gw.addr).await.unwrap();
        s.write_all(first).await.unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).await.unwrap_or(0);
        assert_eq!(n, 0, "{:?}", &buf[..n]);
    }
    // An h2 client whose preface never comes after the handshake: closed too.
    let tcp = TcpStream::connect(gw.addr).await.unwrap();
    let mut h2 = connector(&ca.pem, &[b"h2"])
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut buf = [0u8; 256];
    loop {
        match h2.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => continue, // the server's SETTINGS
        }
    }
    // Still serving.
    let r = curl(
        &gw,
        Some(&pki.file("ca.pem")),
        "--http1.1",
        "/healthz",
        None,
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn a_plain_http_client_on_the_tls_port_is_closed() {
    let mock = MockUpstream::start().await;
    let (gw, pki, _ca, _) = start_tls(&mock, &[]).await;
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got).await;
    assert!(
        !got.starts_with(b"HTTP/"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let r = curl(&gw, Some(&pki.file("ca.pem")), "--http2", "/healthz", None).await;
    assert_eq!(r.status, 200);
    // A failed handshake is not an ERROR line per client.
    assert!(!gw.log().contains("ERROR"), "{}", gw.log());
}

/// True while the gateway has not closed `s`.
fn still_open(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[tokio::test]
async fn the_connection_cap_counts_connections_in_their_handshake() {
    let mock = MockUpstream::start().await;
    let (gw, _pki, ca, _) = start_tls(&mock, &["--max-connections", "1"]).await;
    // One client holds the only place, its handshake not begun. (The
    // harness's own readiness connections may still be counted for a
    // moment: then the holder is the one refused, and it tries again.)
    let holder = loop {
        let holder = TcpStream::connect(gw.addr).await.unwrap();
        // Once the gateway has counted it, a new client is refused.
        let mut refused = false;
        for _ in 0..200 {
            if !still_open(&holder) {
                break;
            }
            if tls_connect(gw.addr, &ca.pem).await.is_err() {
                refused = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if refused && still_open(&holder) {
            break holder;
        }
    };
    for _ in 0..1200 {
        if gw.log().contains("connection(s) refused") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gw.log().contains("connection(s) refused"), "{}", gw.log());
    drop(holder);
    // Its place is given back: served again.
    let mut tls = tls_ready(&gw, &ca.pem).await;
    assert!(healthz_on(&mut tls).await.contains("200"));
}

#[tokio::test]
async fn an_idle_http2_connection_makes_room_over_the_cap() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &["--max-connections", "1"]).await;
    // An h2c connection, its preface and SETTINGS sent, no stream open (a
    // 503 while the harness's own connection was still counted: again).
    let mut idle = loop {
        let mut idle = TcpStream::connect(gw.addr).await.unwrap();
        idle.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            .await
            .unwrap();
        let mut buf = [0u8; 9];
        idle.read_exact(&mut buf).await.unwrap();
        if !buf.starts_with(b"HTTP/") {
            assert_eq!(buf[3], 4, "the server's SETTINGS");
            break idle;
        }
    };
    // A new client takes its place.
    let r = curl(&gw, None, "--http2-prior-knowledge", "/healthz", None).await;
    assert_eq!(r.status, 200);
    let mut rest = Vec::new();
    let _ = idle.read_to_end(&mut rest).await;
}

#[tokio::test]
async fn startup_refuses_missing_and_bad_certificate_files() {
    let mock = MockUpstream::start().await;
    let ca = Ca::new();
    let dir = TempDir::new();
    let (_, cert, key, _) = write_pki(&ca, &dir);
    std::fs::write(
        dir.file("junk.pem"),
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n",
    )
    .unwrap();
    std::fs::write(
        dir.file("catalog.json"),
        serde_json::to_vec(&catalog(&mock)).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.file("keys.json"), serde_json::to_vec(&keys()).unwrap()).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("--catalog")
            .arg(dir.file("catalog.json"))
            .arg("--keys")
            .arg(dir.file("keys.json"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--metrics",
                "127.0.0.1:0",
                "--data",
            ])
            .arg(dir.file("data"))
            .args(args)
            .env_remove("SWITCHBOARD_TLS_CERT")
            .env_remove("SWITCHBOARD_TLS_KEY")
            .output()
            .unwrap()
    };
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    // One without the other.
    let o = run(&["--tls-cert", &cert]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--tls-key"));
    // A missing file, a key that is not PEM, a key of another certificate.
    let missing = dir.file("nope.pem").display().to_string();
    let junk = dir.file("junk.pem").display().to_string();
    let (_, other_key, _) = ca.leaf("other");
    std::fs::write(dir.file("other.key"), other_key).unwrap();
    let other = dir.file("other.key").display().to_string();
    for (args, says) in [
        (vec!["--tls-cert", &missing, "--tls-key", &key], "nope.pem"),
        (vec!["--tls-cert", &cert, "--tls-key", &junk], "junk.pem"),
        (
            vec!["--tls-cert", &cert, "--tls-key", &other],
            "does not hold the key",
        ),
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("switchboard: TLS: ") && err.contains(says),
            "{err}"
        );
        assert!(!err.contains("c2VjcmV0"), "{err}");
        // `--check` reads the same files and fails the same way.
        let mut checked = args.clone();
        checked.push("--check");
        let o = run(&checked);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "--check: {err}");
        assert!(err.contains(says), "--check: {err}");
    }
    let o = run(&["--tls-cert", &cert, "--tls-key", &key, "--check"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains(", TLS certificate"), "{out}");
}

/// Reads HTTP/2 frames until a GOAWAY (type 7) or the end; true if one came.
async fn goaway_seen(s: &mut TcpStream) -> bool {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // Frames: 9-byte header (24-bit length, type, flags, stream id).
        let mut at = 0;
        while got.len() >= at + 9 {
            let len =
                ((got[at] as usize) << 16) | ((got[at + 1] as usize) << 8) | got[at + 2] as usize;
            if got[at + 3] == 7 {
                return true;
            }
            at += 9 + len;
        }
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn a_graceful_shutdown_ends_http2_connections_with_goaway_after_their_streams() {
    let mock = MockUpstream::start().await;
    let mut gw = Gateway::start(&mock).await;
    // An idle h2c connection (preface and SETTINGS, no stream).
    let mut idle = TcpStream::connect(gw.addr).await.unwrap();
    idle.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    // A stream in flight, paused half way by the upstream.
    let body = openai_body("openai/gpt-5", "[[stall-mid:1500]] drained", None, true);
    let stream = {
        let gw_addr = gw.addr;
        tokio::spawn(async move {
            let o = tokio::process::Command::new("curl")
                .args([
                    "-sS",
                    "-N",
                    "--http2-prior-knowledge",
                    "-w",
                    "\n%{http_version}",
                ])
                .args(["-H", &format!("authorization: Bearer {KEY}")])
                .args(["-H", "content-type: application/json", "--data-binary"])
                .arg(body.to_string())
                .arg(format!("http://{gw_addr}{CHAT}"))
                .output()
                .await
                .unwrap();
            String::from_utf8_lossy(&o.stdout).to_string()
        })
    };
    while mock.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gw.signal("TERM");
    assert!(goaway_seen(&mut idle).await, "{}", gw.log());
    // (A real client acks the server's PING and closes; this one just goes.)
    drop(idle);
    let out = stream.await.unwrap();
    assert!(out.ends_with("\n2"), "{out}");
    let events = parse_sse(out.trim_end_matches("\n2").as_bytes());
    assert_eq!(
        events.last().map(|e| e.data.as_str()),
        Some("[DONE]"),
        "{out}"
    );
    assert_eq!(
        stream_text(Protocol::OpenAi, &event_json(&events)),
        expected_reply(Protocol::OpenAi, "[[stall-mid:1500]] drained")
    );
    let status = gw.wait_exit(Duration::from_secs(60)).expect("exited");
    assert!(status.success(), "{}", gw.log());
    // Nothing was left to cut when the drain ended.
    assert!(!gw.log().contains("grace period ended"), "{}", gw.log());
}

#[tokio::test]
async fn an_http2_stream_whose_body_stalls_gets_408_and_its_siblings_go_on() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &["--body-timeout-ms", "400"]).await;
    let tcp = TcpStream::connect(gw.addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    // A body announced as 1000 bytes, of which 10 come.
    let req = http::Request::post(format!("http://localhost{CHAT}"))
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json")
        .header("content-length", "1000")
        .body(())
        .unwrap();
    let (answer, mut body) = client.send_request(req, false).unwrap();
    body.send_data(bytes::Bytes::from_static(b"{\"model\": "), false)
        .unwrap();
    // A sibling stream on the same connection is answered meanwhile.
    let mut client = client.ready().await.unwrap();
    let (health, _) = client
        .send_request(
            http::Request::get("http://localhost/healthz")
                .body(())
                .unwrap(),
            true,
        )
        .unwrap();
    assert_eq!(health.await.unwrap().status(), 200);
    let answer = answer.await.unwrap();
    assert_eq!(answer.status(), 408);
    let mut data = answer.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = data.data().await {
        let chunk = chunk.unwrap();
        let _ = data.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    let v: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(v["error"]["code"], "request_timeout", "{v}");
}

#[tokio::test]
async fn http2_stream_frames_reach_the_client_as_they_come() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let tcp = TcpStream::connect(gw.addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    // The upstream sends half its frames, then waits 2 s before the rest.
    let body = openai_body("openai/gpt-5", "[[stall-mid:2000]] live", None, true).to_string();
    let req = http::Request::post(format!("http://localhost{CHAT}"))
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (answer, mut send) = client.send_request(req, false).unwrap();
    send.send_data(bytes::Bytes::from(body), true).unwrap();
    let answer = answer.await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    let mut data = answer.into_body();
    let mut got = Vec::new();
    // The first frames arrive while the upstream waits: before the end.
    while !String::from_utf8_lossy(&got).contains("\"content\"") {
        let chunk = data.data().await.expect("more").unwrap();
        let _ = data.flow_control().release_capacity(chunk.len());
        got.extend_from_slice(&chunk);
    }
    assert!(!String::from_utf8_lossy(&got).contains("[DONE]"));
    assert!(!data.is_end_stream());
    while let Some(chunk) = data.data().await {
        let chunk = chunk.unwrap();
        let _ = data.flow_control().release_capacity(chunk.len());
        got.extend_from_slice(&chunk);
    }
    let events = parse_sse(&got);
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("[DONE]"));
    assert_eq!(
        stream_text(Protocol::OpenAi, &event_json(&events)),
        expected_reply(Protocol::OpenAi, "[[stall-mid:2000]] live")
    );
}
