//! Callers who prove who they are with a JWT from the team's identity
//! provider (OIDC) rather than an API key (docs/configuration.md "JWT
//! clients (OIDC)", docs/security.md "JWT clients"): `--oidc-issuer` (keys from its
//! discovery document) or `--jwks-url`, and `--jwt-audience`.
//!
//! - `jwt`: the compact token parsed, RS256 / ES256 signatures verified
//!   with `ring`, `iss`, `aud`, `exp`, `nbf`, `iat` checked;
//! - `jwks`: the provider's key set, fetched, cached, refetched once for an
//!   unknown key id (one at a time, at most one per 10 s);
//! - `discovery`: `{issuer}/.well-known/openid-configuration` → `jwks_uri`;
//! - `claims`: the verified claims as a principal (team, policy) for the
//!   client routes, or as an admin (a group claim) with an actor's name;
//! - `verified`: tokens verified recently, by their SHA-256, while unexpired
//!   and for the key set that verified them (a repeated token costs a hash).
//!
//! A token is never logged nor put in an answer: refusals name the reason.

pub mod claims;
pub mod discovery;
pub mod jwks;
pub mod jwt;
pub mod verified;

use crate::config::BaseUrl;
use crate::error::{ErrorKind, GatewayError};
use crate::upstream::client::{ClientSettings, UpstreamClient};
pub use claims::Claims;
use jwks::{Found, Jwks, Source};
pub use jwt::looks_like_jwt;
use std::sync::Arc;
use std::time::Duration;

/// What the command line says about the identity provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcSettings {
    /// `--oidc-issuer`: tokens' `iss`, and where discovery starts (unless `jwks_url`).
    pub issuer: Option<String>,
    /// `--jwks-url`: the key set, without discovery.
    pub jwks_url: Option<String>,
    /// `--jwt-audience`: what tokens' `aud` must hold.
    pub audience: String,
}

/// The verifier of the identity provider's tokens.
pub struct Oidc {
    issuer: Option<String>,
    audience: String,
    jwks: Jwks,
    verified: verified::Verified,
}

/// The connection bounds of the calls to the identity provider.
const CLIENT: ClientSettings = ClientSettings {
    connect_timeout: Duration::from_secs(10),
    read_timeout: Duration::from_secs(15),
    idle_timeout: Duration::from_secs(60),
    keepalive_requests: 100,
};

impl Oidc {
    /// A verifier for `settings` (URLs checked here); no key is fetched yet.
    pub fn new(settings: OidcSettings) -> Result<Oidc, String> {
        let source = match (&settings.jwks_url, &settings.issuer) {
            (Some(url), _) => {
                Source::Url(BaseUrl::parse(url).map_err(|e| format!("--jwks-url {url}: {e}"))?)
            }
            (None, Some(issuer)) => {
                discovery::document_url(issuer)?;
                Source::Discovery {
                    issuer: issuer.clone(),
                }
            }
            (None, None) => return Err("give --oidc-issuer or --jwks-url".into()),
        };
        if settings.audience.is_empty() {
            return Err("--jwt-audience must not be empty".into());
        }
        Ok(Oidc {
            issuer: settings.issuer,
            audience: settings.audience,
            jwks: Jwks::new(source, UpstreamClient::new(&CLIENT)),
            verified: verified::Verified::default(),
        })
    }

    /// The key set (its background refresh: [`Jwks::keep_fresh`]).
    pub fn jwks(&self) -> &Jwks {
        &self.jwks
    }

    /// The start line's words: where keys come from, what is checked.
    pub fn describe(&self) -> String {
        format!(
            "{}, audience {}{}",
            self.jwks.describe(),
            self.audience,
            if self.issuer.is_none() {
                " (iss not checked: no --oidc-issuer)"
            } else {
                ""
            }
        )
    }

    /// Verifies `token`: its signature with the provider's key, then its
    /// issuer, audience and times; a token verified before with the current
    /// key set and still unexpired is taken from the cache (`verified`).
    /// 401 naming the reason; 503 naming the provider while no key set was
    /// ever fetched.
    pub async fn verify(&self, token: &str) -> Result<Arc<Claims>, GatewayError> {
        let refused = |r: jwt::Refusal| GatewayError::new(ErrorKind::Authentication, r.to_string());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let current = self.jwks.current();
        let digest = (token.len() <= jwt::MAX_TOKEN_BYTES).then(|| verified::digest(token));
        if let (Some(set), Some(d)) = (&current, &digest) {
            if let Some(claims) = self.verified.get(d, set, now) {
                return Ok(claims);
            }
        }
        let t = jwt::parse(token).map_err(refused)?;
        let set = match current {
            Some(set) => set,
            // Boxed, as below: a fetch is rare, and its future is large (the
            // HTTP exchange) for every request future that holds this one.
            None => Box::pin(self.jwks.refetch(None))
                .await
                .ok_or_else(|| self.unavailable())?,
        };
        let kid = t.kid.as_deref();
        let newer;
        let (key, verifying) = match set.find(kid, t.alg) {
            Found::Key(k) => (k, &set),
            Found::Mismatch(kty) => {
                return Err(refused(jwt::Refusal::KeyMismatch { alg: t.alg, kty }))
            }
            Found::Unknown if kid.is_none() => return Err(refused(jwt::Refusal::NoKid)),
            Found::Unknown => {
                newer = Box::pin(self.jwks.refetch(Some(&set))).await;
                match newer.as_ref().map(|s| (s.find(kid, t.alg), s)) {
                    Some((Found::Key(k), s)) => (k, s),
                    Some((Found::Mismatch(kty), _)) => {
                        return Err(refused(jwt::Refusal::KeyMismatch { alg: t.alg, kty }))
                    }
                    _ => return Err(refused(jwt::Refusal::UnknownKey)),
                }
            }
        };
        t.verify(key).map_err(refused)?;
        let want = jwt::Expected {
            issuer: self.issuer.as_deref(),
            audience: &self.audience,
            now,
        };
        let until = jwt::check(&t.claims, &want).map_err(refused)?;
        let claims = Arc::new(Claims(t.claims));
        if let Some(d) = digest {
            self.verified.put(d, claims.clone(), verifying, until, now);
        }
        Ok(claims)
    }

    fn unavailable(&self) -> GatewayError {
        GatewayError::new(
            ErrorKind::Unavailable,
            format!(
                "JWTs cannot be verified yet: the {} has not given its signing keys ({})",
                self.jwks.describe(),
                self.jwks
                    .last_error()
                    .unwrap_or_else(|| "no answer yet".into())
            ),
        )
    }
}

/// Keeps the provider's key set fresh in the background (a Pingora
/// background service: started with the server, ended with it).
pub struct KeyRefresh(pub Arc<Oidc>);

#[async_trait::async_trait]
impl pingora_core::services::background::BackgroundService for KeyRefresh {
    async fn start(&self, mut shutdown: pingora_core::server::ShutdownWatch) {
        tokio::select! {
            () = self.0.jwks.keep_fresh() => {}
            _ = shutdown.changed() => {}
        }
    }
}
