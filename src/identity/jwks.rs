//! The identity provider's signing keys (a JWK Set, RFC 7517): parsed,
//! cached, refreshed (docs/security.md "JWT clients").
//!
//! The set is fetched at start in the background (retried with a doubling
//! pause up to a minute while the provider does not answer), then every
//! [`REFRESH_EVERY`]. A token naming a key id the set lacks (the provider
//! rotated its keys) makes one refetch: one at a time (whoever waited finds
//! the new set), and at most one per `min_refetch` (10 s), so a flood of
//! tokens with made-up key ids costs the provider one call per 10 s. While
//! no set has ever been fetched, a token is refused with 503 naming the
//! provider; API keys are not affected.

use super::discovery::{self, url_text};
use super::jwt::{Alg, PublicKey};
use crate::config::BaseUrl;
use crate::upstream::client::UpstreamClient;
use crate::util::base64;
use arc_swap::ArcSwapOption;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the set is fetched again though no token asked for it.
pub const REFRESH_EVERY: Duration = Duration::from_secs(3600);
/// The fewest seconds between two refetches asked by unknown key ids.
pub const MIN_REFETCH: Duration = Duration::from_secs(10);
/// The longest pause between two start-up tries.
const RETRY_MAX: Duration = Duration::from_secs(60);
/// The most keys of a set kept.
const MAX_KEYS: usize = 64;

/// One key of the set.
#[derive(Debug, Clone)]
pub struct Jwk {
    pub kid: Option<String>,
    /// The key's own `alg`, when it names one (RS256 or ES256).
    pub alg: Option<Alg>,
    pub key: PublicKey,
}

/// The keys a token may be verified with.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    pub keys: Vec<Jwk>,
}

/// What a key lookup found.
#[derive(Debug)]
pub enum Found<'a> {
    Key(&'a PublicKey),
    /// The key with that id does not fit the token's `alg` (its `kty`).
    Mismatch(&'static str),
    /// No key with that id (or, for a token without `kid`, no single key of its type).
    Unknown,
}

fn b64url(v: &Value, name: &str) -> Result<Vec<u8>, String> {
    let s = v
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no {name}"))?;
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!("{name} is not base64url"));
    }
    base64::decode(s).ok_or_else(|| format!("{name} is not base64url"))
}

/// One JWK as a key, or why it cannot verify RS256 or ES256 signatures.
fn jwk(v: &Value) -> Result<Jwk, String> {
    let field = |k: &str| v.get(k).and_then(Value::as_str);
    if field("use").is_some_and(|u| u != "sig") {
        return Err("not a signing key (use)".into());
    }
    let alg = match field("alg") {
        None => None,
        Some("RS256") => Some(Alg::Rs256),
        Some("ES256") => Some(Alg::Es256),
        Some(other) => return Err(format!("alg {other} is not RS256 or ES256")),
    };
    let key = match field("kty") {
        Some("RSA") => {
            let strip = |b: Vec<u8>| -> Vec<u8> {
                let zeros = b.iter().take_while(|x| **x == 0).count();
                b[zeros..].to_vec()
            };
            PublicKey::Rsa {
                n: strip(b64url(v, "n")?),
                e: strip(b64url(v, "e")?),
            }
        }
        Some("EC") => {
            if field("crv") != Some("P-256") {
                return Err("an EC key not on P-256".into());
            }
            let (x, y) = (b64url(v, "x")?, b64url(v, "y")?);
            if x.len() != 32 || y.len() != 32 {
                return Err("a P-256 coordinate is not 32 bytes".into());
            }
            let mut point = Vec::with_capacity(65);
            point.push(4);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            PublicKey::P256 { point }
        }
        Some(other) => return Err(format!("kty {other} is not RSA or EC")),
        None => return Err("no kty".into()),
    };
    if alg.is_some_and(|a| !key.fits(a)) {
        return Err("its alg does not fit its kty".into());
    }
    Ok(Jwk {
        kid: field("kid").map(str::to_string),
        alg,
        key,
    })
}

impl KeySet {
    /// Parses a JWK Set, keeping the keys that verify RS256 or ES256 (the
    /// rest are left out, said at debug level); `Err` when none is left.
    pub fn parse(text: &str) -> Result<KeySet, String> {
        let doc: Value =
            serde_json::from_str(text).map_err(|_| "the key set is not JSON".to_string())?;
        let keys = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("the key set has no keys array")?;
        let mut out = Vec::new();
        for (i, k) in keys.iter().enumerate().take(MAX_KEYS) {
            match jwk(k) {
                Ok(j) => out.push(j),
                Err(why) => log::debug!("JWKS: key {i} left out: {why}"),
            }
        }
        if out.is_empty() {
            return Err("the key set has no RS256 or ES256 signing key".into());
        }
        Ok(KeySet { keys: out })
    }

    /// The key a token with `kid` and `alg` is verified with. A token
    /// without `kid` takes the set's only key of its type.
    pub fn find(&self, kid: Option<&str>, alg: Alg) -> Found<'_> {
        let fits = |j: &&Jwk| j.key.fits(alg) && j.alg.is_none_or(|a| a == alg);
        match kid {
            Some(kid) => match self.keys.iter().find(|j| j.kid.as_deref() == Some(kid)) {
                Some(j) if fits(&j) => Found::Key(&j.key),
                Some(j) => Found::Mismatch(j.key.kty()),
                None => Found::Unknown,
            },
            None => {
                let mut of_type = self.keys.iter().filter(fits);
                match (of_type.next(), of_type.next()) {
                    (Some(j), None) => Found::Key(&j.key),
                    _ => Found::Unknown,
                }
            }
        }
    }
}

/// Where the set comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// `--oidc-issuer`: the `jwks_uri` of its discovery document.
    Discovery { issuer: String },
    /// `--jwks-url`.
    Url(BaseUrl),
}

/// The cached key set and how it is refreshed.
pub struct Jwks {
    source: Source,
    client: UpstreamClient,
    current: ArcSwapOption<KeySet>,
    /// The key set's URL, once discovery found it.
    url: Mutex<Option<BaseUrl>>,
    /// One refetch at a time; when the last one asked by a token was made.
    refetch: tokio::sync::Mutex<Option<Instant>>,
    /// What the last failed fetch said (for the 503 while none succeeded).
    last_error: Mutex<Option<String>>,
    min_refetch: Duration,
}

impl Jwks {
    /// An empty cache over `source`, fetching with `client`.
    pub fn new(source: Source, client: UpstreamClient) -> Jwks {
        Jwks {
            source,
            client,
            current: ArcSwapOption::empty(),
            url: Mutex::new(None),
            refetch: tokio::sync::Mutex::new(None),
            last_error: Mutex::new(None),
            min_refetch: MIN_REFETCH,
        }
    }

    /// Where keys come from, for messages: the issuer or the set's URL.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Discovery { issuer } => format!("identity provider {issuer}"),
            Source::Url(u) => format!("identity provider key set {}", url_text(u)),
        }
    }

    /// The set now, if one was ever fetched.
    pub fn current(&self) -> Option<Arc<KeySet>> {
        self.current.load_full()
    }

    /// Why no set could be fetched, when the last fetch failed.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// Fetches the set (after discovery, the first time) and keeps it; `Err`
    /// is kept for [`Jwks::last_error`] and logged.
    pub async fn fetch(&self) -> Result<Arc<KeySet>, String> {
        let got = self.fetch_inner().await;
        match &got {
            Ok(set) => {
                self.current.store(Some(set.clone()));
                if let Ok(mut e) = self.last_error.lock() {
                    *e = None;
                }
                log::info!(
                    "{}: {} signing keys ({})",
                    self.describe(),
                    set.keys.len(),
                    set.keys
                        .iter()
                        .map(|k| k.kid.as_deref().unwrap_or("no kid"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Err(e) => {
                log::warn!("{}: cannot fetch the signing keys: {e}", self.describe());
                if let Ok(mut last) = self.last_error.lock() {
                    *last = Some(e.clone());
                }
            }
        }
        got
    }

    async fn fetch_inner(&self) -> Result<Arc<KeySet>, String> {
        let known = self.url.lock().ok().and_then(|u| u.clone());
        let url = match (&self.source, known) {
            (Source::Url(u), _) => u.clone(),
            (Source::Discovery { .. }, Some(u)) => u,
            (Source::Discovery { issuer }, None) => {
                let u = discovery::jwks_uri(&self.client, issuer).await?;
                if let Ok(mut slot) = self.url.lock() {
                    *slot = Some(u.clone());
                }
                u
            }
        };
        let text = crate::upstream::credentials::fetch_text(&self.client, &url, &[])
            .await
            .map_err(|e| format!("{}: {e}", url_text(&url)))?;
        KeySet::parse(&text)
            .map(Arc::new)
            .map_err(|e| format!("{}: {e}", url_text(&url)))
    }

    /// A newer set for a token whose key `seen` lacks (`None`: none was
    /// ever fetched): one refetch at a time, at most one per `min_refetch`.
    /// Returns the set to look in again (`None`: still none).
    pub async fn refetch(&self, seen: Option<&Arc<KeySet>>) -> Option<Arc<KeySet>> {
        let mut last = self.refetch.lock().await;
        let now = self.current.load_full();
        let changed = match (&now, seen) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (a, b) => a.is_some() != b.is_some(),
        };
        if changed || last.is_some_and(|t| t.elapsed() < self.min_refetch) {
            return now;
        }
        *last = Some(Instant::now());
        self.fetch().await.ok().or(now)
    }

    /// Keeps the set fresh: fetches at once, retried with a doubling pause
    /// (1 s up to a minute) while it fails, then every [`REFRESH_EVERY`]
    /// (a failed refresh keeps the set it has and is tried again a minute later).
    pub async fn keep_fresh(&self) {
        let mut pause = Duration::from_secs(1);
        loop {
            match self.fetch().await {
                Ok(_) => {
                    pause = Duration::from_secs(1);
                    tokio::time::sleep(REFRESH_EVERY).await;
                }
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_MAX);
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::util::base64::encode_url_safe as b64;
    use serde_json::json;

    fn ec(kid: &str) -> Value {
        json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": b64(&[1; 32]), "y": b64(&[2; 32])})
    }

    fn rsa(kid: &str) -> Value {
        json!({"kty": "RSA", "kid": kid, "n": b64(&[0, 0xc5, 7, 9]), "e": b64(&[1, 0, 1]), "alg": "RS256", "use": "sig"})
    }

    #[test]
    fn keeps_the_signing_keys_it_can_use() {
        let set = KeySet::parse(
            &json!({"keys": [
                rsa("r1"),
                ec("e1"),
                {"kty": "oct", "kid": "h", "k": "c2VjcmV0"},
                {"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQ", "e": "AQAB"},
                {"kty": "EC", "crv": "P-384", "kid": "p384", "x": "AA", "y": "AA"},
                {"kty": "RSA", "kid": "ps", "alg": "PS256", "n": "AQ", "e": "AQAB"},
                {"kty": "EC", "crv": "P-256", "kid": "wrong-alg", "alg": "RS256", "x": b64(&[1; 32]), "y": b64(&[2; 32])},
                {"kty": "EC", "crv": "P-256", "kid": "short", "x": b64(&[1; 31]), "y": b64(&[2; 32])}
            ]})
            .to_string(),
        )
        .unwrap();
        let kids: Vec<_> = set.keys.iter().map(|k| k.kid.as_deref().unwrap()).collect();
        assert_eq!(kids, ["r1", "e1"]);
        // A leading zero of the modulus is dropped (ring wants it minimal).
        assert_eq!(
            set.keys[0].key,
            PublicKey::Rsa {
                n: vec![0xc5, 7, 9],
                e: vec![1, 0, 1]
            }
        );
        let PublicKey::P256 { point } = &set.keys[1].key else {
            panic!()
        };
        assert_eq!((point.len(), point[0]), (65, 4));
        assert!(KeySet::parse(r#"{"keys":[{"kty":"oct","k":"AA"}]}"#).is_err());
        assert!(KeySet::parse(r#"{"nokeys":1}"#).is_err());
        assert!(KeySet::parse("<html>").is_err());
    }

    #[test]
    fn a_token_finds_its_key_by_kid_and_type() {
        let set = KeySet::parse(&json!({"keys": [rsa("r1"), ec("e1")]}).to_string()).unwrap();
        assert!(matches!(
            set.find(Some("r1"), Alg::Rs256),
            Found::Key(PublicKey::Rsa { .. })
        ));
        assert!(matches!(
            set.find(Some("e1"), Alg::Es256),
            Found::Key(PublicKey::P256 { .. })
        ));
        assert!(matches!(
            set.find(Some("e1"), Alg::Rs256),
            Found::Mismatch("EC")
        ));
        assert!(matches!(
            set.find(Some("r1"), Alg::Es256),
            Found::Mismatch("RSA")
        ));
        assert!(matches!(set.find(Some("r2"), Alg::Rs256), Found::Unknown));
        // Without kid: the only key of the token's type.
        assert!(matches!(set.find(None, Alg::Es256), Found::Key(_)));
        let two = KeySet::parse(&json!({"keys": [ec("a"), ec("b")]}).to_string()).unwrap();
        assert!(matches!(two.find(None, Alg::Es256), Found::Unknown));
    }
}
