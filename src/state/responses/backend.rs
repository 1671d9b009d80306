//! Where records live: the backend trait (memory, the embedded SQLite file,
//! Redis) and what a backend fails with.

use super::StoredResponse;
use async_trait::async_trait;
use std::sync::Arc;

/// Told, once, how the write of a record handed over with
/// [`Backend::hand_over`] ended; called on whichever thread finished it.
pub type Landed = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// What a storage backend failed at (logged and counted; on a read, a 503).
#[derive(Debug, Clone)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where records live.
#[async_trait]
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// Stores `rec` (replacing a record of the same id).
    async fn put(&self, rec: &StoredResponse) -> Result<(), StoreError>;
    /// Starts storing `rec` and returns at once; `landed` learns the
    /// outcome. By default [`Backend::put`] runs on a task spawned on
    /// `runtime`; a backend with a writer thread of its own queues the
    /// record there and calls `landed` from that thread, so a stored answer
    /// costs no task, no channel and no wake of the runtime it came from.
    fn hand_over(
        self: Arc<Self>,
        rec: Arc<StoredResponse>,
        runtime: &tokio::runtime::Handle,
        landed: Landed,
    ) {
        runtime.spawn(async move { landed(self.put(&rec).await) });
    }
    /// The record `id`, if stored and not expired.
    async fn get(&self, id: &str) -> Result<Option<StoredResponse>, StoreError>;
    /// Removes `id` (a record of `key_id`); whether it was there.
    async fn delete(&self, key_id: &str, id: &str) -> Result<bool, StoreError>;
    /// The bytes ([`StoredResponse::bytes`]) of `key_id`'s records that have
    /// not expired.
    async fn usage(&self, key_id: &str) -> Result<u64, StoreError>;
    /// Whether other instances write and delete records here too (then a
    /// key's usage is read every time, never from this instance's memory),
    /// and the read is cheap (a total the backend keeps, not a sum).
    fn shared(&self) -> bool {
        false
    }
    /// Waits, at most `within`, until every record handed to `put` so far
    /// is written (a backend that writes as `put` runs has nothing to wait
    /// for); whether it is.
    fn flush(&self, within: std::time::Duration) -> bool {
        let _ = within;
        true
    }
    /// A short name for logs (`memory`, `sqlite`, `redis`).
    fn name(&self) -> &'static str;
}
