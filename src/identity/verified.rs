//! Tokens verified recently (docs/security.md "JWT clients"): an agent sends
//! the same token with every request, so its signature check and JSON parse
//! are done once. An entry is the SHA-256 of the whole token → its claims,
//! kept while the token is unexpired (its `exp` plus the leeway) and only
//! for the key set it was verified with: once the set is refetched, every
//! token is verified again (a key the provider dropped stops working then,
//! as without the cache). Bounded: at most [`MAX_ENTRIES`] tokens; when full,
//! the expired and stale ones go, and if that frees nothing, all of them.

use super::claims::Claims;
use super::jwks::KeySet;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most tokens remembered.
pub const MAX_ENTRIES: usize = 4096;

struct Entry {
    claims: Arc<Claims>,
    /// Seconds since the epoch until which the token is valid (`exp` plus the leeway).
    until: i64,
    /// The key set that verified it.
    set: Arc<KeySet>,
}

/// The cache of verified tokens.
#[derive(Default)]
pub struct Verified {
    entries: Mutex<HashMap<[u8; 32], Entry>>,
}

/// The cache key of `token`.
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Verified {
    /// The claims of `token` (its `digest`) when it was verified with `set`
    /// and is still valid at `now`.
    pub fn get(&self, digest: &[u8; 32], set: &Arc<KeySet>, now: i64) -> Option<Arc<Claims>> {
        let entries = self.entries.lock().ok()?;
        entries
            .get(digest)
            .filter(|e| now < e.until && Arc::ptr_eq(&e.set, set))
            .map(|e| e.claims.clone())
    }

    /// Remembers a token just verified with `set`, valid until `until`.
    pub fn put(
        &self,
        digest: [u8; 32],
        claims: Arc<Claims>,
        set: &Arc<KeySet>,
        until: i64,
        now: i64,
    ) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, e| now < e.until && Arc::ptr_eq(&e.set, set));
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(
            digest,
            Entry {
                claims,
                until,
                set: set.clone(),
            },
        );
    }

    /// How many tokens are remembered.
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn claims(sub: &str) -> Arc<Claims> {
        Arc::new(Claims(
            serde_json::json!({ "sub": sub })
                .as_object()
                .unwrap()
                .clone(),
        ))
    }

    #[test]
    fn a_token_is_remembered_while_valid_and_for_its_key_set_only() {
        let v = Verified::default();
        let (set, newer) = (Arc::new(KeySet::default()), Arc::new(KeySet::default()));
        let d = digest("a.b.c");
        v.put(d, claims("a"), &set, 1000, 900);
        assert_eq!(v.get(&d, &set, 999).unwrap().subject().unwrap(), "a");
        assert!(v.get(&d, &set, 1000).is_none(), "expired");
        assert!(
            v.get(&d, &newer, 999).is_none(),
            "verified with another set"
        );
        assert!(v.get(&digest("a.b.d"), &set, 999).is_none());
    }

    #[test]
    fn it_stays_bounded() {
        let v = Verified::default();
        let set = Arc::new(KeySet::default());
        for i in 0..MAX_ENTRIES {
            v.put(
                digest(&i.to_string()),
                claims("x"),
                &set,
                if i % 2 == 0 { 10 } else { 1000 },
                0,
            );
        }
        assert_eq!(v.len(), MAX_ENTRIES);
        // Full at 100 s: the expired half goes.
        v.put(digest("new"), claims("y"), &set, 1000, 100);
        assert_eq!(v.len(), MAX_ENTRIES / 2 + 1);
        // Full of valid tokens: all go.
        for i in 0..MAX_ENTRIES {
            v.put(digest(&format!("more{i}")), claims("z"), &set, 1000, 100);
        }
        assert!(v.len() <= MAX_ENTRIES);
    }
}
