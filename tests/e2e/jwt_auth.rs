//! End-to-end: JWT clients and admins (docs/configuration.md "JWT clients").
//! A local identity provider (discovery document and JWK Set over HTTP,
//! its key set swappable, its calls counted) and real tokens signed here
//! with `ring`: RS256 with the committed test RSA keys
//! (`common/mock_upstream/keys/`, test-only keys), ES256 with P-256 keys
//! generated per run. Valid tokens reach the mock upstream; expired,
//! wrong-audience, wrong-issuer, tampered, `alg: none`, HS256-with-the-
//! public-key and unknown-key tokens are refused with the reason; a rotated
//! key is found by one refetch, a flood of made-up key ids does not reach
//! the provider; the admin API takes a token carrying the admin group; no
//! token appears in the gateway's logs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{authed, catalog, Gateway, KEY};
use crate::common::http_client::{self, Request, Response};
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol};
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents, ECDSA_P256_SHA256_FIXED_SIGNING,
    RSA_PKCS1_SHA256,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use switchboard::util::base64;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const AUDIENCE: &str = "switchboard-e2e";
/// A client key that has a JWT's shape (some providers' keys are JWTs): still a key.
const JWT_SHAPED_KEY: &str = "eyJhbGciOiJIUzI1NiJ9.eyJyb2xlIjoiYW5vbiJ9.c2lnbmF0dXJl";
const RSA_PEM: &str = include_str!("common/mock_upstream/keys/service-account.pem");
const RSA_PUBLIC_PEM: &str = include_str!("common/mock_upstream/keys/service-account.pub.pem");
const OTHER_RSA_PEM: &str = include_str!("common/mock_upstream/keys/other-key.pem");

fn b64url(data: &[u8]) -> String {
    base64::encode_url_safe(data)
}

fn pem_der(pem: &str) -> Vec<u8> {
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<String>();
    base64::decode(&body).unwrap()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A signing key of the identity provider, with its key id.
enum Signer {
    Rsa(RsaKeyPair, &'static str),
    Ec(EcdsaKeyPair, &'static str),
}

impl Signer {
    fn rsa(pem: &str, kid: &'static str) -> Signer {
        Signer::Rsa(RsaKeyPair::from_pkcs8(&pem_der(pem)).unwrap(), kid)
    }

    fn ec(kid: &'static str) -> Signer {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        Signer::Ec(key, kid)
    }

    fn kid(&self) -> &'static str {
        match self {
            Signer::Rsa(_, k) | Signer::Ec(_, k) => k,
        }
    }

    fn alg(&self) -> &'static str {
        match self {
            Signer::Rsa(..) => "RS256",
            Signer::Ec(..) => "ES256",
        }
    }

    /// The public key as a JWK.
    fn jwk(&self) -> Value {
        match self {
            Signer::Rsa(k, kid) => {
                let c: RsaPublicKeyComponents<Vec<u8>> = k.public().into();
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64url(&c.n), "e": b64url(&c.e)})
            }
            Signer::Ec(k, kid) => {
                let p = k.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": b64url(&p[1..33]), "y": b64url(&p[33..65])})
            }
        }
    }

    /// A compact JWT of `claims`, its header `alg` and `kid` this key's.
    fn sign(&self, claims: &Value) -> String {
        self.sign_with_header(
            &json!({"alg": self.alg(), "kid": self.kid(), "typ": "JWT"}),
            claims,
        )
    }

    fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let sig = match self {
            Signer::Rsa(k, _) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                    .unwrap();
                sig
            }
            Signer::Ec(k, _) => k.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec(),
        };
        format!("{input}.{}", b64url(&sig))
    }
}

fn jwks(signers: &[&Signer]) -> Value {
    json!({"keys": signers.iter().map(|s| s.jwk()).collect::<Vec<_>>()})
}

/// A local identity provider: its discovery document at
/// `/.well-known/openid-configuration` and its key set at `/keys`, over
/// HTTP/1.1 with keep-alive.
struct Idp {
    addr: SocketAddr,
    keys: Arc<Mutex<Value>>,
    key_fetches: Arc<AtomicUsize>,
    discovery_fetches: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Idp {
    async fn start(keys: Value) -> Idp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let keys = Arc::new(Mutex::new(keys));
        let key_fetches = Arc::new(AtomicUsize::new(0));
        let discovery_fetches = Arc::new(AtomicUsize::new(0));
        let (k, n, d) = (keys.clone(), key_fetches.clone(), discovery_fetches.clone());
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (k, n, d) = (k.clone(), n.clone(), d.clone());
                tokio::spawn(async move {
                    let (read, mut write) = conn.into_split();
                    let mut lines = BufReader::new(read);
                    loop {
                        let mut first = String::new();
                        if lines.read_line(&mut first).await.unwrap_or(0) == 0 {
                            return;
                        }
                        loop {
                            let mut l = String::new();
                            if lines.read_line(&mut l).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if l == "\r\n" {
                                break;
                            }
                        }
                        let path = first.split(' ').nth(1).unwrap_or("").to_string();
                        let issuer = format!("http://{addr}");
                        let (status, body) = match path.as_str() {
                            "/.well-known/openid-configuration" => {
                                d.fetch_add(1, Ordering::SeqCst);
                                (
                                    "200 OK",
                                    json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys"),
                                       "id_token_signing_alg_values_supported": ["RS256", "ES256"]})
                                    .to_string(),
                                )
                            }
                            "/keys" => {
                                n.fetch_add(1, Ordering::SeqCst);
                                ("200 OK", k.lock().unwrap().to_string())
                            }
                            _ => ("404 Not Found", "{}".to_string()),
                        };
                        let answer = format!(
                            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if write.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Idp {
            addr,
            keys,
            key_fetches,
            discovery_fetches,
            task,
        }
    }

    fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn rotate(&self, keys: Value) {
        *self.keys.lock().unwrap() = keys;
    }

    fn key_fetches(&self) -> usize {
        self.key_fetches.load(Ordering::SeqCst)
    }
}

impl Drop for Idp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Keys with two teams and the `jwt` block mapping `team` and `groups`.
fn jwt_keys() -> Value {
    json!({
        "teams": [{"id": "ml"}, {"id": "research", "rpm": 1000}],
        "keys": [{"id": "test", "key": KEY}, {"id": "jwt-shaped", "key": JWT_SHAPED_KEY}],
        "jwt": {"team_claim": "team", "policy_claim": "sb_policy",
                "admin_claim": "groups", "admin_value": "gateway-admins"}
    })
}

/// Claims a valid token of `idp` carries.
fn claims(idp: &Idp, sub: &str) -> Value {
    let t = now();
    json!({"iss": idp.issuer(), "aud": AUDIENCE, "sub": sub, "team": "ml",
           "iat": t, "nbf": t, "exp": t + 300})
}

fn with(mut base: Value, edits: Value) -> Value {
    for (k, v) in edits.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

async fn start(mock: &MockUpstream, idp: &Idp, extra: &[&str]) -> Gateway {
    let issuer = idp.issuer();
    let mut args = vec!["--oidc-issuer", &issuer, "--jwt-audience", AUDIENCE];
    args.extend_from_slice(extra);
    let gw = Gateway::start_with(&catalog(mock), &jwt_keys(), &args).await;
    // The key set is fetched in the background: wait until it is.
    eventually(
        std::time::Duration::from_secs(20),
        "the key set fetched",
        || async { (idp.key_fetches() > 0).then_some(()) },
    )
    .await;
    gw
}

fn chat_as(token: &str) -> Request {
    authed(
        "openai",
        CHAT,
        token,
        &openai_body("gpt-5", "hi", None, false),
    )
}

fn message(r: &Response) -> String {
    r.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Asserts `r` is a 401 whose message says `why`, and names no token.
fn refused(r: &Response, why: &str, token: &str) {
    assert_eq!(r.status, 401, "{why}: {}", r.text());
    let m = message(r);
    assert!(m.contains(why), "{why}: {m}");
    // Neither the token nor any of its parts is echoed.
    for part in token.split('.').filter(|p| !p.is_empty()) {
        assert!(!r.text().contains(part), "{}", r.text());
    }
}

#[tokio::test]
async fn tokens_are_verified_and_mapped_to_their_team() {
    let mock = MockUpstream::start().await;
    let rsa = Signer::rsa(RSA_PEM, "rsa-1");
    let ec = Signer::ec("ec-1");
    let idp = Idp::start(jwks(&[&rsa, &ec])).await;
    let gw = start(&mock, &idp, &[]).await;
    let mut issued = Vec::new();

    // RS256 on the OpenAI route, ES256 on the Anthropic route (x-api-key).
    let good = rsa.sign(&claims(&idp, "alice"));
    let r = gw
        .send(&chat_as(&good).header("x-request-id", "jwt-rs256"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["choices"][0]["message"]["content"],
        expected_reply(Protocol::OpenAi, "hi")
    );
    let line = gw.access_line("jwt-rs256").await;
    assert_eq!(line["key_id"], "jwt:alice", "{line}");
    issued.push(good);
    let good_ec = ec.sign(&with(claims(&idp, "bob"), json!({"team": "research"})));
    let r = gw
        .send(&authed(
            "anthropic",
            MESSAGES,
            &good_ec,
            &anthropic_body("claude-sonnet-4.7", "hi", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    issued.push(good_ec);
    // No kid: the set's only key of the token's type.
    let no_kid = rsa.sign_with_header(&json!({"alg": "RS256"}), &claims(&idp, "erin"));
    assert_eq!(gw.send(&chat_as(&no_kid)).await.status, 200);
    issued.push(no_kid);
    // A key of the file with a JWT's shape is a key, not a token.
    let r = gw
        .send(&chat_as(JWT_SHAPED_KEY).header("x-request-id", "jwt-shaped"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(gw.access_line("jwt-shaped").await["key_id"], "jwt-shaped");
    // API keys still work beside tokens.
    assert_eq!(gw.send(&chat_as(KEY)).await.status, 200);

    let t = now();
    let cases: Vec<(String, &str)> = vec![
        (
            rsa.sign(&with(claims(&idp, "a"), json!({"exp": t - 120}))),
            "expired",
        ),
        (
            rsa.sign(&with(claims(&idp, "a"), json!({"exp": null}))),
            "exp is missing",
        ),
        (
            rsa.sign(&with(claims(&idp, "a"), json!({"nbf": t + 600}))),
            "not valid yet (nbf",
        ),
        (
            rsa.sign(&with(claims(&idp, "a"), json!({"aud": "another-app"}))),
            "wrong audience",
        ),
        (
            ec.sign(&with(claims(&idp, "a"), json!({"aud": ["x", "y"]}))),
            "wrong audience",
        ),
        (
            rsa.sign(&with(
                claims(&idp, "a"),
                json!({"iss": "http://evil.example"}),
            )),
            "wrong issuer",
        ),
        (
            ec.sign(&with(claims(&idp, "a"), json!({"sub": null}))),
            "sub is missing",
        ),
        // A kid naming the EC key on an RS256 token.
        (
            rsa.sign_with_header(&json!({"alg": "RS256", "kid": "ec-1"}), &claims(&idp, "a")),
            "alg RS256 does not fit its signing key (a EC key)",
        ),
    ];
    for (token, why) in &cases {
        refused(&gw.send(&chat_as(token)).await, why, token);
        issued.push(token.clone());
    }

    // Tampered: the claims swapped for others (another team), the signature kept.
    let original = rsa.sign(&claims(&idp, "mallory"));
    let parts: Vec<&str> = original.split('.').collect();
    let forged_claims = with(
        claims(&idp, "mallory"),
        json!({"team": "research", "sub": "root"}),
    );
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        b64url(forged_claims.to_string().as_bytes()),
        parts[2]
    );
    refused(
        &gw.send(&chat_as(&tampered)).await,
        "bad signature",
        &tampered,
    );
    // One flipped byte in the signature.
    let mut sig = base64::decode(parts[2]).unwrap();
    sig[10] ^= 1;
    let flipped = format!("{}.{}.{}", parts[0], parts[1], b64url(&sig));
    refused(
        &gw.send(&chat_as(&flipped)).await,
        "bad signature",
        &flipped,
    );

    // alg none, unsigned.
    let none = format!(
        "{}.{}.",
        b64url(br#"{"alg":"none","typ":"JWT"}"#),
        b64url(claims(&idp, "a").to_string().as_bytes())
    );
    refused(
        &gw.send(&chat_as(&none)).await,
        "alg \"none\" is not accepted",
        &none,
    );
    // HS256 with the provider's public RSA key as the HMAC secret (key confusion).
    let input = format!(
        "{}.{}",
        b64url(br#"{"alg":"HS256","kid":"rsa-1","typ":"JWT"}"#),
        b64url(claims(&idp, "a").to_string().as_bytes())
    );
    let mac = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, RSA_PUBLIC_PEM.as_bytes()),
        input.as_bytes(),
    );
    let confused = format!("{input}.{}", b64url(mac.as_ref()));
    refused(
        &gw.send(&chat_as(&confused)).await,
        "alg \"HS256\" is not accepted",
        &confused,
    );
    // A stranger's key, with a kid the provider does not have.
    let stranger = Signer::ec("stranger");
    let unknown = stranger.sign(&claims(&idp, "a"));
    refused(
        &gw.send(&chat_as(&unknown)).await,
        "unknown key id",
        &unknown,
    );
    // ... and with the provider's kid: the signature does not verify.
    let impostor =
        stranger.sign_with_header(&json!({"alg": "ES256", "kid": "ec-1"}), &claims(&idp, "a"));
    refused(
        &gw.send(&chat_as(&impostor)).await,
        "bad signature",
        &impostor,
    );

    // A team keys.json does not have, no team claim: 403 naming it.
    let web = rsa.sign(&with(claims(&idp, "carol"), json!({"team": "web"})));
    let r = gw.send(&chat_as(&web)).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(
        message(&r).contains("\"team\" claim names no team of keys.json: \"web\""),
        "{}",
        r.text()
    );
    let teamless = rsa.sign(&with(claims(&idp, "carol"), json!({"team": null})));
    let r = gw.send(&chat_as(&teamless)).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(message(&r).contains("no \"team\" claim"), "{}", r.text());
    // The policy claim: strict refuses what adapt would lower.
    let strict = rsa.sign(&with(claims(&idp, "dave"), json!({"sb_policy": "strict"})));
    let mut body = openai_body("gpt-5", "hi", None, false);
    body["max_tokens"] = json!(20_000);
    let r = gw.send(&authed("openai", CHAT, &strict, &body)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = gw.send(&authed("openai", CHAT, &issued[0], &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());

    issued.extend([
        tampered, flipped, none, confused, unknown, impostor, web, teamless, strict,
    ]);
    // No token, nor any token's signature, in either log.
    let (log, access) = (gw.log(), gw.access_log());
    for t in &issued {
        let sig = t.rsplit('.').next().unwrap();
        for (name, text) in [("stderr", &log), ("stdout", &access)] {
            assert!(!text.contains(t.as_str()), "a token in {name}");
            assert!(
                sig.is_empty() || !text.contains(sig),
                "a token's signature in {name}"
            );
        }
    }
    assert!(log.contains("JWT clients: identity provider"), "{log}");
}

#[tokio::test]
async fn a_rotated_key_is_found_by_one_refetch_and_made_up_kids_do_not_reach_the_provider() {
    let mock = MockUpstream::start().await;
    let old = Signer::rsa(RSA_PEM, "2026-old");
    let idp = Idp::start(jwks(&[&old])).await;
    let gw = start(&mock, &idp, &[]).await;
    // Verified, then remembered: the same token twice.
    let old_token = old.sign(&claims(&idp, "a"));
    for _ in 0..2 {
        assert_eq!(gw.send(&chat_as(&old_token)).await.status, 200);
    }
    let before = idp.key_fetches();

    // The provider rotates: a new key, the old one gone.
    let new = Signer::rsa(OTHER_RSA_PEM, "2026-new");
    idp.rotate(jwks(&[&new]));
    let r = gw.send(&chat_as(&new.sign(&claims(&idp, "a")))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(idp.key_fetches(), before + 1, "one refetch for the new kid");
    // The next token with the new key is verified with the cached set.
    let r = gw.send(&chat_as(&new.sign(&claims(&idp, "b")))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(idp.key_fetches(), before + 1);
    // The token verified before the rotation is not taken from memory: its
    // key is gone from the set.
    refused(
        &gw.send(&chat_as(&old_token)).await,
        "unknown key id",
        &old_token,
    );

    // Twenty tokens with made-up kids, at once: refused, and the provider
    // is asked at most once more (one refetch per 10 s).
    let forger = Signer::ec("x");
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..20 {
        let t = forger.sign_with_header(
            &json!({"alg": "ES256", "kid": format!("made-up-{i}")}),
            &claims(&idp, "a"),
        );
        let addr = gw.addr;
        sends.spawn(async move { http_client::send(addr, &chat_as(&t)).await.unwrap() });
    }
    while let Some(r) = sends.join_next().await {
        let r = r.unwrap();
        assert_eq!(r.status, 401, "{}", r.text());
        assert!(message(&r).contains("unknown key id"), "{}", r.text());
    }
    assert!(
        idp.key_fetches() <= before + 2,
        "{} fetches",
        idp.key_fetches() - before
    );
}

#[tokio::test]
async fn the_admin_api_takes_a_token_with_the_admin_group() {
    let mock = MockUpstream::start().await;
    let rsa = Signer::rsa(RSA_PEM, "rsa-1");
    let idp = Idp::start(jwks(&[&rsa])).await;
    let gw = start(&mock, &idp, &["--admin-key", "admin-key-e2e-7c1f"]).await;
    let admin = |path: &str, bearer: &str| {
        let req = Request::get(path).header("authorization", &format!("Bearer {bearer}"));
        let addr = gw.metrics;
        async move { http_client::send(addr, &req).await.unwrap() }
    };
    let ops = rsa.sign(&with(
        claims(&idp, "u-123"),
        json!({"groups": ["dev", "gateway-admins"], "email": "ops@example.com"}),
    ));
    let r = admin("/admin/whoami", &ops).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"actor": "jwt:ops@example.com"}));
    let r = admin("/admin/upstreams", &ops).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // The admin key as before.
    let r = admin("/admin/whoami", "admin-key-e2e-7c1f").await;
    assert_eq!(r.json(), json!({"actor": "admin-key"}));
    // A valid token without the group: 403; a bad one: 401 with the reason.
    let dev = rsa.sign(&with(claims(&idp, "u-9"), json!({"groups": ["dev"]})));
    let r = admin("/admin/upstreams", &dev).await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("\"groups\" claim does not hold"));
    let expired = rsa.sign(&with(
        claims(&idp, "u-123"),
        json!({"groups": ["gateway-admins"], "exp": now() - 3600}),
    ));
    let r = admin("/admin/upstreams", &expired).await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expired"));
    let r = admin("/admin/upstreams", "not-the-key").await;
    assert_eq!(r.status, 401, "{}", r.text());
    // The same token serves the client routes: it names a team.
    let r = gw.send(&chat_as(&ops)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    for t in [&ops, &dev, &expired] {
        assert!(!gw.log().contains(t.as_str()) && !gw.access_log().contains(t.as_str()));
    }
}

#[tokio::test]
async fn a_key_set_url_is_read_without_discovery() {
    let mock = MockUpstream::start().await;
    let ec = Signer::ec("ec-1");
    let idp = Idp::start(jwks(&[&ec])).await;
    let url = format!("{}/keys", idp.issuer());
    // --jwks-url alone: iss is not checked.
    let gw = Gateway::start_with(
        &catalog(&mock),
        &jwt_keys(),
        &["--jwks-url", &url, "--jwt-audience", AUDIENCE],
    )
    .await;
    let other_iss = ec.sign(&with(
        claims(&idp, "a"),
        json!({"iss": "https://elsewhere.example"}),
    ));
    let r = gw.send(&chat_as(&other_iss)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(gw.log().contains("iss not checked"), "{}", gw.log());
    assert_eq!(idp.discovery_fetches.load(Ordering::SeqCst), 0);
    drop(gw);
    // With --oidc-issuer beside it, iss is checked; the key set is still read from the URL.
    let issuer = idp.issuer();
    let gw = Gateway::start_with(
        &catalog(&mock),
        &jwt_keys(),
        &[
            "--jwks-url",
            &url,
            "--oidc-issuer",
            &issuer,
            "--jwt-audience",
            AUDIENCE,
        ],
    )
    .await;
    refused(
        &gw.send(&chat_as(&other_iss)).await,
        "wrong issuer",
        &other_iss,
    );
    let r = gw.send(&chat_as(&ec.sign(&claims(&idp, "a")))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(idp.discovery_fetches.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn while_the_provider_is_down_tokens_get_503_and_keys_are_served() {
    let mock = MockUpstream::start().await;
    // A port nobody listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let gw = Gateway::start_with(
        &catalog(&mock),
        &jwt_keys(),
        &["--oidc-issuer", &issuer, "--jwt-audience", AUDIENCE],
    )
    .await;
    let rsa = Signer::rsa(RSA_PEM, "rsa-1");
    let t = now();
    let token = rsa
        .sign(&json!({"iss": issuer, "aud": AUDIENCE, "sub": "a", "team": "ml", "exp": t + 300}));
    let r = gw.send(&chat_as(&token)).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(
        message(&r).contains(&format!("identity provider {issuer}")),
        "{}",
        r.text()
    );
    assert_eq!(gw.send(&chat_as(KEY)).await.status, 200);
}

#[tokio::test]
async fn an_audience_is_required_with_a_provider() {
    let dir = crate::common::gateway::TempDir::new();
    let mock = MockUpstream::start().await;
    std::fs::write(dir.file("catalog.json"), catalog(&mock).to_string()).unwrap();
    std::fs::write(dir.file("keys.json"), jwt_keys().to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["--oidc-issuer", "https://idp.example"])
        .arg("--catalog")
        .arg(dir.file("catalog.json"))
        .arg("--keys")
        .arg(dir.file("keys.json"))
        .arg("--data")
        .arg(dir.file("data"))
        .env_remove("SWITCHBOARD_JWT_AUDIENCE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("need --jwt-audience"), "{err}");
}
