//! Every secret the gateway holds, and the scrubber that keeps them out of
//! what it relays and logs: the provider keys resolved from the catalog's
//! `api_key_env` variables, the client keys written in plain in the keys file
//! (`key`; a `sha256` entry's key is never known to the gateway), and the
//! admin key. A secret may only ever appear in the upstream request that
//! carries it.
//!
//! One Aho-Corasick automaton over all of them is built per configuration
//! snapshot ([`install_config`], called by `runtime.rs` on start and on every
//! reload) and read lock-free by [`scrub`]. Where it runs:
//! - every [`GatewayError`](crate::error::GatewayError) message, at
//!   construction: what goes to the client, the access log's `error` and the
//!   log lines that print an error;
//! - upstream error bodies before anything of them is quoted
//!   ([`Secrets::scrub_upstream`]: also masked echoes, below);
//! - successful whole answers, for the answering upstream's own key only
//!   ([`redact_key`], one `memmem` pass). Streams are not scanned: by the time
//!   an upstream streams it has accepted the key, and holding back
//!   key-length bytes of every chunk would cost every stream.
//!
//! Masked echoes: OpenAI's 401 quotes the key with its middle masked
//! (`sk-abc***************wxyz`); the visible prefix and suffix are still a
//! part of the secret. In upstream error text every key-like token that
//! carries a mask run (`***`, `•••`, `…`, `...`) is replaced whole, whether
//! or not it matches a configured key: the gateway cannot tell which of its
//! keys was echoed from a masked form, and such a token is never something a
//! client needs. A bare fragment of a key without a mask is not recognised.
//!
//! Secrets shorter than [`MIN_SECRET_BYTES`] are not searched for: replacing
//! every occurrence of a short common string would corrupt messages, and a
//! key that short is not a secret worth the name.

use aho_corasick::{AhoCorasick, MatchKind};
use arc_swap::ArcSwap;
use once_cell::sync::Lazy;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";
/// The shortest secret searched for.
pub const MIN_SECRET_BYTES: usize = 8;

/// A set of secrets and the automaton that finds them.
#[derive(Default)]
pub struct Secrets {
    /// None: no secret to look for.
    matcher: Option<AhoCorasick>,
    /// The secrets themselves (to rebuild with a process secret added).
    list: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} held)", self.list.len())
    }
}

impl Secrets {
    /// The automaton for `secrets` (too short ones and repeats left out).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Secrets {
        let mut list: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET_BYTES)
            .map(str::to_string)
            .collect();
        list.sort_unstable();
        list.dedup();
        let matcher = if list.is_empty() {
            None
        } else {
            // Leftmost-longest: a key that contains another is replaced whole.
            match AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&list)
            {
                Ok(m) => Some(m),
                Err(e) => {
                    log::error!("secret scrubber not built ({e}); secrets are not scrubbed");
                    None
                }
            }
        };
        Secrets { matcher, list }
    }

    /// How many secrets are searched for.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `text` with every secret replaced by [`REDACTED`] (borrowed when none occurs).
    pub fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let Some(m) = &self.matcher else {
            return Cow::Borrowed(text);
        };
        if !m.is_match(text) {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        m.replace_all_with(text, &mut out, |_, _, dst| {
            dst.push_str(REDACTED);
            true
        });
        Cow::Owned(out)
    }

    /// Text an upstream sent in an error: every secret, and every masked
    /// key-like token (see the module doc), replaced.
    pub fn scrub_upstream(&self, text: &str) -> String {
        redact_masked(&self.scrub(text))
    }
}

/// Process-wide secrets that are not in the configuration files (the admin key).
static PROCESS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The live scrubber.
static CURRENT: Lazy<ArcSwap<Secrets>> = Lazy::new(|| ArcSwap::from_pointee(Secrets::default()));

/// Adds a secret the process holds outside the configuration files (the
/// admin key); it stays through every reload.
pub fn hold_process_secret(secret: &str) {
    let mut p = PROCESS.lock().unwrap_or_else(|e| e.into_inner());
    p.push(secret.to_string());
    let cur = CURRENT.load();
    let all = cur.list.iter().map(String::as_str).chain([secret]);
    let next = Secrets::new(all);
    drop(p);
    CURRENT.store(Arc::new(next));
}

/// Builds the scrubber for a configuration (provider keys, plain client
/// keys, the process secrets) and makes it the live one.
pub fn install_config(catalog: &crate::config::Catalog, keys: &crate::config::KeyStore) {
    let p = PROCESS.lock().unwrap_or_else(|e| e.into_inner());
    let providers = catalog
        .providers
        .iter()
        .flat_map(|p| p.upstreams.iter())
        .flat_map(|u| {
            let secret = match &u.auth {
                crate::config::Auth::Entra(e) => e.client_secret.as_deref(),
                _ => None,
            };
            u.api_key.as_deref().into_iter().chain(secret)
        });
    let next = Secrets::new(
        providers
            .chain(keys.plaintext_keys())
            .chain(p.iter().map(String::as_str)),
    );
    drop(p);
    CURRENT.store(Arc::new(next));
}

/// `text` with every live secret replaced (see [`Secrets::scrub`]).
pub fn scrub(text: &str) -> Cow<'_, str> {
    let cur = CURRENT.load();
    match cur.scrub(text) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// `text` from an upstream error with every live secret and masked token replaced.
pub fn scrub_upstream(text: &str) -> String {
    CURRENT.load().scrub_upstream(text)
}

/// `body` with every occurrence of `key` replaced by [`REDACTED`]: one
/// `memmem` pass, no copy when it does not occur (the usual case).
pub fn redact_key(body: bytes::Bytes, key: Option<&str>) -> bytes::Bytes {
    let Some(key) = key.filter(|k| k.len() >= MIN_SECRET_BYTES) else {
        return body;
    };
    let finder = memchr::memmem::Finder::new(key.as_bytes());
    let Some(first) = finder.find(&body) else {
        return body;
    };
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    let mut next = Some(first);
    while let Some(i) = next {
        out.extend_from_slice(&body[at..at + i]);
        out.extend_from_slice(REDACTED.as_bytes());
        at += i + key.len();
        next = finder.find(&body[at..]);
    }
    out.extend_from_slice(&body[at..]);
    bytes::Bytes::from(out)
}

/// Characters a key-like token is made of (masks included).
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '*' | '•' | '…')
}

/// Whether `token` is a masked credential: a mask run with visible
/// alphanumerics on both sides, at least four in all.
fn masked(token: &str) -> bool {
    const MARKS: [&str; 4] = ["***", "•••", "…", "..."];
    let start = MARKS.iter().filter_map(|m| token.find(m)).min();
    let end = MARKS
        .iter()
        .filter_map(|m| token.rfind(m).map(|i| i + m.len()))
        .max();
    let (Some(start), Some(end)) = (start, end) else {
        return false;
    };
    let alnum = |t: &str| t.chars().filter(char::is_ascii_alphanumeric).count();
    alnum(&token[..start]) >= 1 && alnum(&token[end..]) >= 1 && alnum(token) >= 4
}

/// `text` with every masked key-like token replaced by [`REDACTED`].
fn redact_masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(token_char) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let len = tail.find(|c| !token_char(c)).unwrap_or(tail.len());
        let mut token = &tail[..len];
        // A sentence's full stop is not part of the token ("…wxyz. You can").
        let dots = token.len() - token.trim_end_matches('.').len();
        if dots > 0 && dots < 3 {
            token = &token[..token.len() - dots];
        }
        if masked(token) {
            out.push_str(REDACTED);
        } else {
            out.push_str(token);
        }
        rest = &tail[token.len()..];
        if token.is_empty() {
            // Only dots: copy them and go on.
            out.push_str(&rest[..len]);
            rest = &rest[len..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_wherever_they_occur() {
        let s = Secrets::new(["sk-live-0123456789", "short", "admin-key-xyz"]);
        assert_eq!(s.len(), 2, "short secrets are not searched for");
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
        assert_eq!(
            s.scrub(
                "Incorrect API key provided: sk-live-0123456789. Also admin-key-xyzadmin-key-xyz"
            ),
            "Incorrect API key provided: [redacted]. Also [redacted][redacted]"
        );
        assert!(matches!(Secrets::default().scrub("x"), Cow::Borrowed(_)));
    }

    #[test]
    fn masked_echoes_are_replaced_whole() {
        let s = Secrets::new(["sk-abc123456789wxyz"]);
        assert_eq!(
            s.scrub_upstream("Incorrect API key provided: sk-abc12***********wxyz. You can find your API key at https://platform.openai.com/account/api-keys."),
            "Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys."
        );
        assert_eq!(
            s.scrub_upstream("key sk-proj-…wxyz and sk-ab...yz12 and a•••••b9c1"),
            "key [redacted] and [redacted] and [redacted]"
        );
        // Ordinary text, ellipses and stars in prose are kept.
        assert_eq!(
            s.scrub_upstream("wait... ** bold ** é… done. v1.2.3 a.b"),
            "wait... ** bold ** é… done. v1.2.3 a.b"
        );
        assert_eq!(
            s.scrub_upstream("exact sk-abc123456789wxyz!"),
            "exact [redacted]!"
        );
    }

    #[test]
    fn a_key_is_cut_out_of_a_body() {
        let b = bytes::Bytes::from_static(b"{\"a\":\"KEY-12345678 and KEY-12345678\"}");
        assert_eq!(
            &redact_key(b.clone(), Some("KEY-12345678"))[..],
            b"{\"a\":\"[redacted] and [redacted]\"}"
        );
        let same = redact_key(b.clone(), Some("other-key-1"));
        assert_eq!(same.as_ptr(), b.as_ptr(), "no copy when absent");
        assert_eq!(redact_key(b.clone(), None), b);
    }
}
