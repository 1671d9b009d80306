//! The quota of stored responses: the largest record kept and what one key's
//! records may hold in all, checked when a request that asks to be stored is
//! admitted (docs/api.md "Stored responses").

use super::ResponseStore;
use crate::error::{ErrorKind, GatewayError};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The largest record kept by default (`--responses-max-record-bytes`),
/// 8 MiB. A record is read whole on every continuation and every read of the
/// Responses routes, and held in memory while its write is in flight; text
/// turns are kilobytes, so this is three orders of magnitude above them and
/// still fits a few inline images (a quarter of the default
/// `--max-body-bytes`), while a Redis value much larger stalls the server for
/// every other client while it is copied.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 8 << 20;

/// What one key may keep stored by default (`--responses-key-quota-bytes`),
/// 64 MiB: thousands of text turns (a turn is kilobytes to tens of them) or
/// eight records at the record limit within the TTL, and usage frees itself
/// as records expire; a thousand keys at quota (64 GB) still fit one large
/// Redis node or a modest disk.
pub const DEFAULT_KEY_QUOTA_BYTES: u64 = 64 << 20;

/// How long a key's usage read from the backend serves `admit`: within it
/// the store adds the records it saves and forgets the entry when one is
/// deleted or a write fails; records that expire meanwhile are freed at the
/// next read.
const USAGE_FRESH: Duration = Duration::from_secs(1);

impl ResponseStore {
    /// `key_id`'s usage when read from the backend less than
    /// [`USAGE_FRESH`] ago.
    pub(super) fn usage_cached(&self, key_id: &str) -> Option<u64> {
        let m = self.usage.lock().ok()?;
        m.get(key_id)
            .filter(|(_, at)| at.elapsed() < USAGE_FRESH)
            .map(|(n, _)| *n)
    }

    /// Applies `f` to the usage entries (a poisoned lock skips it: the next
    /// read asks the backend).
    pub(super) fn usage_edit(
        &self,
        f: impl FnOnce(&mut HashMap<String, (u64, std::time::Instant)>),
    ) {
        if let Ok(mut m) = self.usage.lock() {
            f(&mut m);
        }
    }

    /// Sets the largest record kept and what one key may keep in all.
    #[must_use]
    pub fn with_limits(mut self, max_record_bytes: u64, key_quota_bytes: u64) -> Self {
        self.max_record_bytes = max_record_bytes;
        self.key_quota_bytes = key_quota_bytes;
        self
    }

    /// The largest record kept.
    pub fn max_record_bytes(&self) -> u64 {
        self.max_record_bytes
    }

    /// Logs and counts a response answered but not stored: its record
    /// (`bytes`) is over the record limit.
    pub fn not_kept(&self, id: &str, bytes: u64) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "stored response {id}: {bytes} bytes, more than --responses-max-record-bytes ({}); answered but not stored",
            self.max_record_bytes
        );
    }

    /// Whether a request that asks to be stored, whose own part of the
    /// record (input items and instructions) is `known` bytes, may go on:
    /// a 400 naming `store` when that part alone is over the record limit,
    /// a 429 when the key's records and it would pass the key's quota. A
    /// backend that cannot say is not a reason to refuse an answer (the
    /// write would fail the same way, logged and counted): admitted, logged.
    pub async fn admit(&self, key_id: &str, known: u64) -> Result<(), GatewayError> {
        if known > self.max_record_bytes {
            return Err(GatewayError::invalid_param(
                "store",
                format!(
                    "this response cannot be stored: its input alone is {known} bytes, more than the {} bytes a stored response may hold on this gateway (--responses-max-record-bytes); send \"store\": false (and the conversation itself) or a smaller input",
                    self.max_record_bytes
                ),
            )
            .with_code("stored_response_too_large"));
        }
        let shared = self.backend.shared();
        let cached = if shared {
            None
        } else {
            self.usage_cached(key_id)
        };
        let used = match cached {
            Some(n) => Ok(n),
            None => self.backend.usage(key_id).await.inspect(|n| {
                if shared {
                    return;
                }
                let n = *n;
                self.usage_edit(|m| {
                    m.insert(key_id.to_string(), (n, std::time::Instant::now()));
                });
            }),
        };
        let used = match used {
            Ok(n) => n,
            Err(e) => {
                log::warn!(
                    "stored responses: the {} backend cannot tell a key's usage ({e}); admitting the request unchecked",
                    self.backend.name()
                );
                return Ok(());
            }
        };
        if used.saturating_add(known) > self.key_quota_bytes {
            let mut e = GatewayError::new(
                ErrorKind::RateLimited,
                format!(
                    "this key's stored responses hold {used} bytes of the {} it may keep (--responses-key-quota-bytes), and this one needs at least {known} more: delete stored responses (DELETE /v1/responses/{{id}}), wait for them to expire, or send \"store\": false",
                    self.key_quota_bytes
                ),
            )
            .with_code("stored_responses_quota_exceeded");
            e.param = Some("store".to_string());
            return Err(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::responses::store::tests::{rawv, rec};
    use std::sync::Arc;

    #[tokio::test]
    async fn records_are_admitted_within_the_record_limit_and_the_key_quota() {
        let store = Arc::new(ResponseStore::memory().with_limits(1000, 2500));
        let e = store.admit("k", 1001).await.unwrap_err();
        assert_eq!((e.status, e.param.as_deref()), (400, Some("store")));
        let mut big = rec(&store, "r1", "k", None);
        big.response = rawv(&format!("\"{}\"", "x".repeat(1000)));
        assert!(!store.save(big), "a record over the limit is not kept");
        let mut ids = Vec::new();
        for i in 0..3 {
            let mut r = rec(&store, &format!("r{i}"), "k", None);
            r.response = rawv(&format!("\"{}\"", "x".repeat(700)));
            ids.push(r.id.clone());
            assert!(store.save(r));
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let used = store.backend.usage("k").await.unwrap();
        assert!(used > 2100 && used < 2500, "{used}");
        let e = store.admit("k", 500).await.unwrap_err();
        assert_eq!(e.status, 429);
        assert_eq!(e.code.as_deref(), Some("stored_responses_quota_exceeded"));
        store.admit("other", 500).await.unwrap();
        assert!(store.delete("k", &ids[0]).await.unwrap());
        store.admit("k", 500).await.unwrap();
    }
}
