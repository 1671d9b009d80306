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
/// next read. Past it, one request reads the backend again while the
/// others are admitted on the last reading (the read is a sum over the key's
/// records: 64 requests each waiting on their own, once a second, made
/// p99s of a second under load).
const USAGE_FRESH: Duration = Duration::from_secs(1);

impl ResponseStore {
    /// `key_id`'s usage from this instance's last reading: when it was
    /// read less than [`USAGE_FRESH`] ago, or when it is older but another
    /// request is reading it again now. `Err`: the caller reads it, holding
    /// the [`Reading`] meanwhile when one was started (none when another
    /// read is under way but there is no earlier reading to use, or the
    /// lock is poisoned).
    pub(super) fn usage_cached(&self, key_id: &str) -> Result<u64, Option<Reading<'_>>> {
        let last = self.usage.lock().ok().and_then(|m| m.get(key_id).copied());
        if let Some((n, at)) = last {
            if at.elapsed() < USAGE_FRESH {
                return Ok(n);
            }
        }
        let Ok(mut reading) = self.reading.lock() else {
            return Err(None);
        };
        if !reading.insert(key_id.to_string()) {
            // Another request is reading: the last reading serves, if any.
            return last.map(|(n, _)| n).ok_or(None);
        }
        Err(Some(Reading {
            store: self,
            key_id: key_id.to_string(),
        }))
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
            Err(None)
        } else {
            self.usage_cached(key_id)
        };
        let used = match cached {
            Ok(n) => Ok(n),
            // `_reading` is held until the reading is in the map.
            Err(_reading) => self.backend.usage(key_id).await.inspect(|n| {
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

/// A read of one key's usage from the backend under way (others meanwhile
/// use the last reading); over when dropped, finished or abandoned.
pub(super) struct Reading<'a> {
    store: &'a ResponseStore,
    key_id: String,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if let Ok(mut reading) = self.store.reading.lock() {
            reading.remove(&self.key_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::responses::store::tests::{rec, text};
    use crate::state::responses::{Backend, Memory, StoreError, StoredResponse};
    use std::sync::Arc;

    #[tokio::test]
    async fn records_are_admitted_within_the_record_limit_and_the_key_quota() {
        let store = Arc::new(ResponseStore::memory().with_limits(1000, 2500));
        let e = store.admit("k", 1001).await.unwrap_err();
        assert_eq!((e.status, e.param.as_deref()), (400, Some("store")));
        let mut big = rec(&store, "r1", "k", None);
        big.response = text(&format!("\"{}\"", "x".repeat(1000)));
        assert!(!store.save(big), "a record over the limit is not kept");
        let mut ids = Vec::new();
        for i in 0..3 {
            let mut r = rec(&store, &format!("r{i}"), "k", None);
            r.response = text(&format!("\"{}\"", "x".repeat(700)));
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

    /// A backend whose usage reads are counted and wait for a permit.
    #[derive(Debug)]
    struct SlowSum {
        inner: Memory,
        reads: std::sync::atomic::AtomicUsize,
        gate: tokio::sync::Semaphore,
    }

    impl SlowSum {
        fn new() -> Arc<SlowSum> {
            Arc::new(SlowSum {
                inner: Memory::default(),
                reads: Default::default(),
                gate: tokio::sync::Semaphore::new(0),
            })
        }
    }

    #[async_trait::async_trait]
    impl Backend for SlowSum {
        async fn put(&self, rec: &StoredResponse) -> Result<(), StoreError> {
            self.inner.put(rec).await
        }
        async fn get(&self, id: &str) -> Result<Option<StoredResponse>, StoreError> {
            self.inner.get(id).await
        }
        async fn delete(&self, key_id: &str, id: &str) -> Result<bool, StoreError> {
            self.inner.delete(key_id, id).await
        }
        async fn usage(&self, key_id: &str) -> Result<u64, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.gate.acquire().await.expect("open").forget();
            self.inner.usage(key_id).await
        }
        fn name(&self) -> &'static str {
            "slow"
        }
    }

    #[tokio::test]
    async fn a_stale_usage_is_read_again_by_one_request_while_the_others_go_on() {
        let backend = SlowSum::new();
        let store = Arc::new(ResponseStore::new(backend.clone(), Duration::from_secs(60)));
        backend.gate.add_permits(1);
        store.admit("k", 10).await.unwrap();
        assert_eq!(backend.reads.load(Ordering::SeqCst), 1);
        // The reading ages past USAGE_FRESH.
        store.usage_edit(|m| {
            let e = m.get_mut("k").unwrap();
            e.1 = e.1.checked_sub(USAGE_FRESH * 2).unwrap();
        });
        let reader = tokio::spawn({
            let store = store.clone();
            async move { store.admit("k", 10).await }
        });
        while backend.reads.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        // While that read waits, every other request is admitted on the
        // last reading, without a read of its own.
        let others: Vec<_> = (0..20)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.admit("k", 10).await })
            })
            .collect();
        while !others.iter().all(|h| h.is_finished()) && backend.reads.load(Ordering::SeqCst) == 2 {
            tokio::task::yield_now().await;
        }
        assert_eq!(backend.reads.load(Ordering::SeqCst), 2);
        for h in others {
            h.await.unwrap().unwrap();
        }
        assert!(!reader.is_finished());
        backend.gate.add_permits(1);
        reader.await.unwrap().unwrap();
        assert!(store.reading.lock().unwrap().is_empty());
        // Fresh again: no read.
        store.admit("k", 10).await.unwrap();
        assert_eq!(backend.reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_abandoned_read_lets_the_next_request_read() {
        let backend = SlowSum::new();
        let store = Arc::new(ResponseStore::new(backend.clone(), Duration::from_secs(60)));
        let reader = tokio::spawn({
            let store = store.clone();
            async move { store.admit("k", 10).await }
        });
        while backend.reads.load(Ordering::SeqCst) < 1 {
            tokio::task::yield_now().await;
        }
        reader.abort();
        assert!(reader.await.unwrap_err().is_cancelled());
        backend.gate.add_permits(1);
        store.admit("k", 10).await.unwrap();
        assert_eq!(backend.reads.load(Ordering::SeqCst), 2);
    }
}
