//! Credentials for the cloud upstreams (docs/clouds.md): an Entra ID
//! token from a client credential (`entra`), a Google OAuth2 token from a
//! service-account key or the metadata server (`google`, signing its JWT
//! in `jwt`) or from workload identity federation (`external`), AWS keys
//! from the standard AWS chain for SigV4 (`aws`), each fetched over the
//! gateway's own upstream client (`fetch`). A token is cached per source and shared by every request and
//! upstream using that source; it is refreshed before it expires
//! (a quarter of its life, at most five minutes, early), one refresh in
//! flight at a time. A token is never logged nor put in an error; a source
//! that cannot give one is an error naming the provider and the source.

pub mod aws;
mod entra;
mod external;
mod fetch;
mod google;
mod jwt;

pub use fetch::text as fetch_text;

use crate::config::Auth;
use crate::error::GatewayError;
use crate::upstream::client::UpstreamClient;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The scope of the Google tokens Vertex AI calls need.
const GOOGLE_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// The most a token is refreshed ahead of its expiry.
const EARLY_MAX: Duration = Duration::from_secs(300);

/// What a source gives: an access token, or AWS keys to sign with.
#[derive(Clone)]
pub enum Secret {
    Token(Arc<str>),
    Aws(Arc<aws::AwsKeys>),
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        match self {
            Secret::Token(_) => f.write_str("Token(..)"),
            Secret::Aws(k) => write!(f, "{k:?}"),
        }
    }
}

/// A credential and when to stop using it.
struct Token {
    value: Secret,
    fresh_until: Instant,
}

/// A credential for a request, and whether it was cached (not fetched for it).
pub struct Granted {
    pub value: Secret,
    pub cached: bool,
}

/// What a source answered: the token and its life (`expires_in`).
pub(crate) struct Fetched {
    pub value: String,
    pub life: Duration,
}

/// One source's cached token; `refresh` lets one fetch run at a time.
#[derive(Default)]
struct Slot {
    token: Mutex<Option<Token>>,
    refresh: tokio::sync::Mutex<()>,
}

impl Slot {
    fn fresh(&self, now: Instant) -> Option<Secret> {
        let t = self.token.lock().ok()?;
        t.as_ref()
            .filter(|t| now < t.fresh_until)
            .map(|t| t.value.clone())
    }
}

/// The token cache of the gateway's cloud upstreams, shared across reloads
/// (a source is the same source in the next catalog).
#[derive(Default)]
pub struct Credentials {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Credentials {
    /// A token for an upstream of `provider` authenticating with `auth`:
    /// the cached one while fresh, else a new one from the source. `None`
    /// for `Auth::Key` (no token: the catalog's key). Errors: 503 when the
    /// source is not configured (a variable unset), 502 when it failed.
    pub async fn token(
        &self,
        client: &UpstreamClient,
        provider: &str,
        auth: &Auth,
    ) -> Option<Result<Granted, GatewayError>> {
        let source = Source::of(auth)?;
        let slot = self.slot(&source.key());
        let cached = |value| {
            Some(Ok(Granted {
                value,
                cached: true,
            }))
        };
        if let Some(t) = slot.fresh(Instant::now()) {
            return cached(t);
        }
        // One refresh at a time: who waited here finds the new token.
        let _one = slot.refresh.lock().await;
        if let Some(t) = slot.fresh(Instant::now()) {
            return cached(t);
        }
        let started = Instant::now();
        // Boxed: a fetch (an HTTP exchange, TLS included: about 10 KB) is
        // rare, and in place it sized every request's upstream call, which
        // waits this whole future's room for the answer's head.
        let fetched = Box::pin(async {
            match &source {
                Source::Entra(e) => entra::fetch(client, provider, e).await.map(|f| {
                    let what = format!("access token from {}", entra::describe(e));
                    (Secret::Token(Arc::from(f.value)), f.life, what)
                }),
                Source::Google(g) => google::fetch(client, provider, g).await.map(|f| {
                    let what = format!("access token from {}", google::describe(g));
                    (Secret::Token(Arc::from(f.value)), f.life, what)
                }),
                Source::Aws(a) => aws::fetch(client, provider, a).await.map(|f| {
                    let what = format!("AWS credentials from {}", f.source);
                    (Secret::Aws(Arc::new(f.keys)), f.life, what)
                }),
            }
        })
        .await;
        let (value, life, what) = match fetched {
            Ok(f) => f,
            Err(e) => {
                log::warn!("{}", e.message);
                return Some(Err(e));
            }
        };
        let early = (life / 4).min(EARLY_MAX);
        if let Ok(mut t) = slot.token.lock() {
            *t = Some(Token {
                value: value.clone(),
                fresh_until: started + life.saturating_sub(early),
            });
        }
        log::info!(
            "provider {provider}: new {what} (expires in {} s)",
            life.as_secs()
        );
        Some(Ok(Granted {
            value,
            cached: false,
        }))
    }

    /// Drops the cached token of `auth`'s source (the upstream refused it).
    pub fn forget(&self, auth: &Auth) {
        let Some(source) = Source::of(auth) else {
            return;
        };
        let slot = self.slot(&source.key());
        if let Ok(mut t) = slot.token.lock() {
            *t = None;
        };
    }

    fn slot(&self, key: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(key.to_string()).or_default().clone()
    }
}

/// A token source of the catalog.
enum Source<'a> {
    Entra(&'a crate::config::Entra),
    Google(&'a crate::config::GoogleAuth),
    Aws(&'a crate::config::AwsAuth),
}

impl<'a> Source<'a> {
    fn of(auth: &'a Auth) -> Option<Source<'a>> {
        match auth {
            Auth::Key => None,
            Auth::Entra(e) => Some(Source::Entra(e)),
            Auth::Google(g) => Some(Source::Google(g)),
            Auth::Aws(a) => Some(Source::Aws(a)),
        }
    }

    /// The cache key: what makes two upstreams' tokens the same token (a
    /// hash of the client secret, never the secret).
    fn key(&self) -> String {
        match self {
            Source::Entra(e) => {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                e.client_secret.hash(&mut h);
                format!(
                    "entra\u{0}{}\u{0}{}\u{0}{}\u{0}{:x}",
                    e.authority.authority,
                    e.tenant_id,
                    e.client_id,
                    h.finish()
                )
            }
            Source::Google(g) => match &g.credentials_file {
                Some(path) => format!("google-file\u{0}{path}"),
                None => format!("google-metadata\u{0}{}", google::metadata_host()),
            },
            Source::Aws(a) => format!("aws\u{0}{}", a.profile.as_deref().unwrap_or("")),
        }
    }
}

/// The error of a source that gave no token: 502, naming the provider and the source.
pub(crate) fn failed(provider: &str, source: &str, why: impl std::fmt::Display) -> GatewayError {
    failed_to_obtain("an access token", provider, source, why)
}

/// The error of a source that gave no `what` (a token, AWS keys): 502,
/// naming the provider and the source.
pub(crate) fn failed_to_obtain(
    what: &str,
    provider: &str,
    source: &str,
    why: impl std::fmt::Display,
) -> GatewayError {
    GatewayError::new(
        crate::error::ErrorKind::BadGateway,
        format!("provider {provider}: cannot obtain {what} from {source}: {why}"),
    )
    .with_code("credential_unavailable")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_fresh_until_a_quarter_of_its_life_before_expiry() {
        let slot = Slot::default();
        let now = Instant::now();
        assert!(slot.fresh(now).is_none());
        let life = Duration::from_secs(100);
        *slot.token.lock().unwrap() = Some(Token {
            value: Secret::Token(Arc::from("t")),
            fresh_until: now + life - (life / 4).min(EARLY_MAX),
        });
        assert!(matches!(
            slot.fresh(now + Duration::from_secs(74)),
            Some(Secret::Token(t)) if &*t == "t"
        ));
        assert!(slot.fresh(now + Duration::from_secs(75)).is_none());
    }

    #[test]
    fn sources_share_a_slot_only_when_they_are_the_same() {
        let entra = |secret: &str| {
            Auth::Entra(crate::config::Entra {
                tenant_id: "t".into(),
                client_id: "c".into(),
                client_secret_env: "S".into(),
                client_secret: Some(secret.into()),
                authority: crate::config::BaseUrl::parse("https://login.example").unwrap(),
            })
        };
        let (a, b, c) = (entra("one"), entra("one"), entra("two"));
        let key = |a: &Auth| Source::of(a).unwrap().key();
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
        assert!(!key(&a).contains("one"), "the key holds no secret");
        assert!(Source::of(&Auth::Key).is_none());
    }
}
