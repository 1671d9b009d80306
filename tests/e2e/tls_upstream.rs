//! End-to-end: an `https://` upstream is verified against the trust store and
//! reached with the right SNI; an untrusted certificate is refused with 502.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::gateway::{authed, keys, Gateway, TempDir, KEY};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use serde_json::json;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

struct Pki {
    ca_pem: String,
    leaf_der: Vec<u8>,
    leaf_key_der: Vec<u8>,
}

/// A throwaway CA and a leaf certificate for `localhost` signed by it.
fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "switchboard test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        leaf_der: leaf.der().to_vec(),
        leaf_key_der: leaf_key.serialize_der(),
    }
}

/// A one-route HTTPS server answering an OpenAI chat completion; records the SNI it saw.
async fn tls_upstream(p: &Pki) -> (u16, Arc<Mutex<Vec<String>>>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(p.leaf_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(p.leaf_key_der.clone())),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let snis = Arc::new(Mutex::new(Vec::new()));
    let seen = snis.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                seen.lock()
                    .unwrap()
                    .push(tls.get_ref().1.server_name().unwrap_or("").to_string());
                let mut buf = vec![0u8; 64 * 1024];
                let mut got = Vec::new();
                // read the head and a Content-Length body
                loop {
                    let n = tls.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let body = json!({"id":"chatcmpl-tls","object":"chat.completion","created":1,"model":"gpt-5",
                    "choices":[{"index":0,"message":{"role":"assistant","content":"over TLS"},"finish_reason":"stop"}],
                    "usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}).to_string();
                let resp = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = tls.write_all(resp.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, snis)
}

fn catalog(port: u16) -> serde_json::Value {
    json!({
        "providers": [{"id": "secure", "families": ["openai"], "upstreams": [
            {"protocol": "openai", "base_url": format!("https://localhost:{port}/v1"), "api_key_env": "SB_TEST_KEY_OPENAI"}]}],
        "models": [{"id": "gpt-5", "provider": "secure", "context_length": 10000, "max_output_tokens": 1000,
            "pricing": {"prompt": "0", "completion": "0"}, "protocols": ["openai"]}]
    })
}

fn chat() -> serde_json::Value {
    json!({"model": "secure/gpt-5", "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn https_upstream_is_verified_and_gets_sni() {
    let p = pki();
    let (port, snis) = tls_upstream(&p).await;
    let dir = TempDir::new();
    std::fs::write(dir.file("ca.pem"), &p.ca_pem).unwrap();
    let ca = dir.file("ca.pem").to_string_lossy().to_string();
    // trusted: the CA is the process's trust store (rustls-native-certs honours SSL_CERT_FILE)
    let gw = Gateway::start_with_env(&catalog(port), &keys(), &[], &[("SSL_CERT_FILE", &ca)]).await;
    let r = gw
        .send(&authed("openai", "/v1/chat/completions", KEY, &chat()))
        .await;
    assert_eq!(r.status, 200, "{}\n{}", r.text(), gw.log());
    assert_eq!(r.json()["choices"][0]["message"]["content"], "over TLS");
    assert_eq!(
        snis.lock().unwrap().last().map(String::as_str),
        Some("localhost")
    );
}

#[tokio::test]
async fn untrusted_upstream_certificate_is_refused() {
    let p = pki();
    let (port, _snis) = tls_upstream(&p).await;
    let dir = TempDir::new();
    // a trust store that does not hold the test CA
    let other = pki();
    std::fs::write(dir.file("other.pem"), &other.ca_pem).unwrap();
    let ca = dir.file("other.pem").to_string_lossy().to_string();
    let gw = Gateway::start_with_env(&catalog(port), &keys(), &[], &[("SSL_CERT_FILE", &ca)]).await;
    let r = gw
        .send(&authed("openai", "/v1/chat/completions", KEY, &chat()))
        .await;
    assert_eq!(r.status, 502, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["type"], "server_error");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("TLS") || msg.contains("Cert"),
        "not a verification failure: {msg}"
    );
}
