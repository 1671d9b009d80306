//! The store the gateway uses: a backend, the TTL, and the writes in flight
//! (a record is served from memory until its write lands), with the lookups
//! and deletes of the Responses routes.

use super::quota::{DEFAULT_KEY_QUOTA_BYTES, DEFAULT_MAX_RECORD_BYTES};
use super::{now_ms, Backend, Memory, StoreError, StoredResponse};
use crate::error::{ErrorKind, GatewayError};
use crate::util::json_text::JsonText;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The default time a stored response is kept.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// A write not yet landed: served from here meanwhile.
#[derive(Debug)]
struct Pending {
    rec: Arc<StoredResponse>,
    /// Deleted before its write landed: the write is undone when it does.
    deleted: bool,
}

/// The store the gateway uses: a backend, the TTL, and the writes in flight.
#[derive(Debug)]
pub struct ResponseStore {
    pub(super) backend: Arc<dyn Backend>,
    ttl: Duration,
    pending: Mutex<HashMap<String, Pending>>,
    /// Writes (and undo-deletes) that failed, and records not kept for
    /// their size; shared with the metrics.
    pub(super) failures: Arc<AtomicU64>,
    /// The largest record kept ([`StoredResponse::bytes`]).
    pub(super) max_record_bytes: u64,
    /// What one key's records may hold, summed.
    pub(super) key_quota_bytes: u64,
    /// Each key's usage as last read from an unshared backend (memory,
    /// SQLite), with when, plus the records written since: `admit` asks the
    /// backend at most once per `quota::USAGE_FRESH` per key (its answer is a sum
    /// over the key's records, which must not run on every request). A
    /// shared backend (Redis) keeps a total and is asked every time.
    pub(super) usage: Mutex<HashMap<String, (u64, std::time::Instant)>>,
    /// The keys whose usage one request is reading from the backend now:
    /// the others go on with the last reading meanwhile.
    pub(super) reading: Mutex<std::collections::HashSet<String>>,
}

/// `'id'` (OpenAI quotes ids in single quotes), cut to a sane length.
pub fn quote_single(id: &str) -> String {
    let cut: String = id.chars().take(200).collect();
    format!("'{cut}'")
}

fn unavailable(e: &StoreError) -> GatewayError {
    GatewayError::new(
        ErrorKind::Unavailable,
        format!("stored responses are unavailable: {e}"),
    )
    .with_code("store_unavailable")
}

impl ResponseStore {
    /// A store over `backend` keeping records for `ttl`.
    pub fn new(backend: Arc<dyn Backend>, ttl: Duration) -> Self {
        ResponseStore {
            backend,
            ttl: ttl.max(Duration::from_secs(1)),
            pending: Mutex::new(HashMap::new()),
            failures: Arc::new(AtomicU64::new(0)),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            key_quota_bytes: DEFAULT_KEY_QUOTA_BYTES,
            usage: Mutex::new(HashMap::new()),
            reading: Mutex::default(),
        }
    }

    /// Counts failed writes in `counter` (the metrics' own).
    #[must_use]
    pub fn count_failures_in(mut self, counter: Arc<AtomicU64>) -> Self {
        self.failures = counter;
        self
    }

    /// Counts one failed write.
    pub fn count_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// An in-memory store with the default TTL.
    pub fn memory() -> Self {
        ResponseStore::new(Arc::new(Memory::default()), DEFAULT_TTL)
    }

    /// The backend's name.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// How long records are kept.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Writes that failed so far (`switchboard_responses_store_failures_total`).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    fn pending<R>(&self, f: impl FnOnce(&mut HashMap<String, Pending>) -> R) -> R {
        let mut g = match self.pending.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut g)
    }

    /// A record for `key_id` made now, expiring after the TTL.
    pub fn record(
        &self,
        id: String,
        key_id: &str,
        previous_response_id: Option<String>,
        instructions: Option<JsonText>,
        input_items: Vec<JsonText>,
        response: JsonText,
    ) -> StoredResponse {
        let now = now_ms();
        StoredResponse {
            id,
            key_id: key_id.to_string(),
            created_at: now / 1000,
            expires_at_ms: now
                .saturating_add(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)),
            previous_response_id,
            instructions,
            input_items,
            response,
        }
    }

    /// Stores `rec` off the caller's path: served from memory at once and
    /// handed over to the backend ([`Backend::hand_over`]), which says when
    /// it has landed; a failure is logged and counted. A record over the
    /// record limit is not kept (logged and counted), nor one saved outside
    /// a runtime; whether it was.
    pub fn save(self: &Arc<Self>, rec: StoredResponse) -> bool {
        let bytes = rec.bytes();
        if bytes > self.max_record_bytes {
            self.not_kept(&rec.id, bytes);
            return false;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.failures.fetch_add(1, Ordering::Relaxed);
            log::error!("stored response {}: no runtime to write it on", rec.id);
            return false;
        };
        // Counted from now on in this instance's reading of the key's usage
        // (a backend read replaces it with what the backend holds).
        self.usage_edit(|m| {
            if let Some((n, _)) = m.get_mut(&rec.key_id) {
                *n = n.saturating_add(bytes);
            }
        });
        let rec = Arc::new(rec);
        let id = rec.id.clone();
        self.pending(|p| {
            p.insert(
                id.clone(),
                Pending {
                    rec: rec.clone(),
                    deleted: false,
                },
            )
        });
        let (store, key_id, on) = (self.clone(), rec.key_id.clone(), runtime.clone());
        let landed = Box::new(move |r| store.landed(r, id, key_id, &on));
        self.backend.clone().hand_over(rec, &runtime, landed);
        true
    }

    /// How the write of `id` (a record of `key_id`) ended, as its backend
    /// tells it ([`Backend::hand_over`]), possibly on the backend's own
    /// thread: a failure is logged and counted, and the record leaves the
    /// writes in flight (after its backend copy is deleted, when the client
    /// deleted it meanwhile: on `runtime`, where the record came from).
    fn landed(
        self: Arc<Self>,
        r: Result<(), StoreError>,
        id: String,
        key_id: String,
        runtime: &tokio::runtime::Handle,
    ) {
        if let Err(e) = &r {
            self.failures.fetch_add(1, Ordering::Relaxed);
            log::error!(
                "stored response {id}: the {} write failed: {e}",
                self.backend.name()
            );
        }
        // Handed over to the backend, unless it was deleted meanwhile:
        // then its entry stays (a tombstone: reads find nothing) until
        // the backend's copy is deleted too. Removed first, a read in
        // between found the record the client had deleted.
        let deleted = self.pending(|p| match p.get(&id) {
            Some(x) if x.deleted => true,
            _ => {
                p.remove(&id);
                false
            }
        });
        if r.is_err() || deleted {
            // Not kept after all: counted in `save`, read again next time.
            self.usage_edit(|m| {
                m.remove(&key_id);
            });
        }
        if !deleted {
            return;
        }
        if r.is_err() {
            self.pending(|p| p.remove(&id));
            return;
        }
        runtime.spawn(async move {
            if let Err(e) = self.backend.delete(&key_id, &id).await {
                self.failures.fetch_add(1, Ordering::Relaxed);
                log::error!("stored response {id}: deleting it failed: {e}");
            }
            self.pending(|p| p.remove(&id));
        });
    }

    /// At shutdown: writes what the backend holds and waits, at most
    /// `within`, for the writes in flight to land; with `settle`, until none
    /// is left in flight (a backend without a writer thread of its own
    /// writes on tasks of the runtime, which runs them no more once it has
    /// stopped: `settle` false then). What
    /// may be left unwritten is logged. Blocks the calling thread.
    pub fn close(&self, settle: bool, within: Duration) {
        let until = std::time::Instant::now() + within;
        let left = || until.saturating_duration_since(std::time::Instant::now());
        let mut landed = self.backend.flush(left());
        while settle && self.pending(|p| !p.is_empty()) && !left().is_zero() {
            std::thread::sleep(Duration::from_millis(2));
            landed = self.backend.flush(left());
        }
        let unwritten = if settle { self.pending(|p| p.len()) } else { 0 };
        if !landed || unwritten > 0 {
            log::warn!(
                "shutting down: stored responses may not all have been written to {} ({unwritten} still in flight)",
                self.backend.name()
            );
        }
    }

    /// The record `id` if it exists, has not expired and belongs to `key_id`.
    pub async fn lookup(
        &self,
        key_id: &str,
        id: &str,
    ) -> Result<Option<Arc<StoredResponse>>, GatewayError> {
        let now = now_ms();
        let pending = self.pending(|p| p.get(id).map(|x| (x.rec.clone(), x.deleted)));
        let rec = match pending {
            Some((_, true)) => None,
            Some((rec, false)) => Some(rec),
            None => self
                .backend
                .get(id)
                .await
                .map_err(|e| unavailable(&e))?
                .map(Arc::new),
        };
        Ok(rec.filter(|r| r.key_id == key_id && !r.expired(now)))
    }

    /// Deletes `id` if it belongs to `key_id`; whether it did.
    pub async fn delete(&self, key_id: &str, id: &str) -> Result<bool, GatewayError> {
        if self.lookup(key_id, id).await?.is_none() {
            return Ok(false);
        }
        let was_pending = self.pending(|p| match p.get_mut(id) {
            Some(x) => {
                x.deleted = true;
                true
            }
            None => false,
        });
        if was_pending {
            return Ok(true);
        }
        self.backend
            .delete(key_id, id)
            .await
            .map_err(|e| unavailable(&e))?;
        // The key's usage is read again at its next admission.
        self.usage_edit(|m| {
            m.remove(key_id);
        });
        Ok(true)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::state::responses) fn rawv(s: &str) -> Box<serde_json::value::RawValue> {
        serde_json::value::RawValue::from_string(s.to_string()).unwrap()
    }

    pub(in crate::state::responses) fn text(s: &str) -> JsonText {
        JsonText::parse(s.to_string()).unwrap()
    }

    /// A record of `key` with one input message `q-ID` and one output message `a-ID`.
    pub(in crate::state::responses) fn rec(
        store: &ResponseStore,
        id: &str,
        key: &str,
        prev: Option<&str>,
    ) -> StoredResponse {
        store.record(
            id.into(),
            key,
            prev.map(str::to_string),
            None,
            crate::state::responses::normalise_input(&rawv(&format!("\"q-{id}\""))),
            text(&format!(
                r#"{{"id":"{id}","output":[{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"a-{id}"}}]}}]}}"#
            )),
        )
    }

    /// The memory backend with `put` and `delete` held until let go.
    #[derive(Debug)]
    struct Gated {
        inner: Memory,
        put_go: tokio::sync::Semaphore,
        delete_go: tokio::sync::Semaphore,
    }

    #[async_trait::async_trait]
    impl Backend for Gated {
        async fn put(&self, rec: &StoredResponse) -> Result<(), StoreError> {
            self.put_go.acquire().await.unwrap().forget();
            self.inner.put(rec).await
        }
        async fn get(&self, id: &str) -> Result<Option<StoredResponse>, StoreError> {
            self.inner.get(id).await
        }
        async fn delete(&self, key_id: &str, id: &str) -> Result<bool, StoreError> {
            self.delete_go.acquire().await.unwrap().forget();
            self.inner.delete(key_id, id).await
        }
        async fn usage(&self, key_id: &str) -> Result<u64, StoreError> {
            self.inner.usage(key_id).await
        }
        fn name(&self) -> &'static str {
            "gated"
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_record_deleted_before_its_write_landed_is_never_read_again() {
        let backend = Arc::new(Gated {
            inner: Memory::default(),
            put_go: tokio::sync::Semaphore::new(0),
            delete_go: tokio::sync::Semaphore::new(0),
        });
        let store = Arc::new(ResponseStore::new(backend.clone(), DEFAULT_TTL));
        assert!(store.save(rec(&store, "r", "k", None)));
        // Deleted while its write is held: answered from the pending entry.
        assert!(store.delete("k", "r").await.unwrap());
        assert!(store.lookup("k", "r").await.unwrap().is_none());
        // The write lands, and the backend's delete is held: the record is
        // in the backend, and still no read finds it.
        backend.put_go.add_permits(1);
        while backend.inner.get("r").await.unwrap().is_none() {
            tokio::task::yield_now().await;
        }
        for _ in 0..50 {
            assert!(store.lookup("k", "r").await.unwrap().is_none());
            assert!(!store.delete("k", "r").await.unwrap());
            tokio::task::yield_now().await;
        }
        backend.delete_go.add_permits(1);
        while store.pending(|p| !p.is_empty()) {
            tokio::task::yield_now().await;
        }
        assert!(backend.inner.get("r").await.unwrap().is_none());
        assert!(store.lookup("k", "r").await.unwrap().is_none());
    }

    /// A record saved to the SQLite backend lands, and leaves the writes in
    /// flight, without the runtime it was saved on running again: the
    /// writer thread reports it (`Backend::hand_over`). A task on that
    /// runtime waiting for the writer would never run while the runtime's
    /// one thread is held here.
    #[tokio::test(flavor = "current_thread")]
    async fn a_saved_record_lands_without_its_runtime_running() {
        let dir = std::env::temp_dir().join(format!("sb-resp-store-landed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = crate::state::responses::sqlite::Sqlite::open(&dir).unwrap();
        let path = db.path().to_path_buf();
        let store = Arc::new(ResponseStore::new(Arc::new(db), DEFAULT_TTL));
        assert!(store.save(rec(&store, "resp_landed", "k", None)));
        // This thread is the runtime's: held here, it runs no task. (Not a
        // measure of speed: a guard against waiting forever.)
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        while store.pending(|p| !p.is_empty()) {
            assert!(
                std::time::Instant::now() < give_up,
                "the write has not landed with the runtime held"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(store.failures(), 0);
        let rows: i64 = rusqlite::Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT COUNT(*) FROM responses WHERE id = 'resp_landed'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, 1);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn expired_records_are_gone() {
        let store = Arc::new(ResponseStore::memory());
        let mut r = rec(&store, "old", "k", None);
        r.expires_at_ms = now_ms() - 1;
        store.save(r);
        assert!(store.lookup("k", "old").await.unwrap().is_none());
    }
}
