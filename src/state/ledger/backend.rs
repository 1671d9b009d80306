//! Where the writer puts rows: the embedded SQLite file or PostgreSQL.

use super::Row;

/// Where a writer puts rows: the embedded SQLite file or PostgreSQL.
pub trait Backend: Send {
    /// Writes `rows` and adds their sums to the daily rollups, in one transaction.
    fn write(&mut self, rows: &[Row]) -> Result<(), String>;
    /// Deletes the rows older than `before_ms` (rollups stay); how many went.
    fn purge(&mut self, before_ms: i64) -> Result<u64, String>;
    /// For logs: `sqlite FILE` or `postgres HOST`.
    fn describe(&self) -> String;
}

/// Builds the writer's backend, on the writer's thread.
pub type BackendFactory = Box<dyn FnOnce() -> Result<Box<dyn Backend>, String> + Send>;
