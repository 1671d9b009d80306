//! Where the writer puts rows (the embedded SQLite file or PostgreSQL), and
//! opening the one the flags ask for along with the admin API's reader.

use super::handle::Ledger;
use super::query::Reader;
use super::writer::LedgerSettings;
use super::{pg, sqlite, Row};
use crate::obs::metrics::Metrics;
use std::sync::Arc;

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

/// Opens the ledger the flags ask for: PostgreSQL when `database` is given,
/// else `DIR/ledger.sqlite` (the directory and tables created when missing).
/// Checks what can be checked now (the URL parses; the file opens), so a
/// mistake stops the start; the writer connects when it starts. Returns the
/// ledger and the admin API's reader.
pub fn open(
    data_dir: &std::path::Path,
    database: Option<&str>,
    settings: LedgerSettings,
    metrics: Arc<Metrics>,
) -> Result<(Ledger, Reader), String> {
    let (factory, reader): (BackendFactory, Reader) = match database {
        Some(url) => {
            pg::parse_url(url)?;
            let owned = url.to_string();
            (
                Box::new(move || Ok(Box::new(pg::Postgres::new(&owned)?) as Box<dyn Backend>)),
                Reader::Postgres(url.to_string()),
            )
        }
        None => {
            std::fs::create_dir_all(data_dir)
                .map_err(|e| format!("cannot create {}: {e}", data_dir.display()))?;
            let path = data_dir.join("ledger.sqlite");
            // Opened here to fail early, closed before Pingora may fork.
            drop(sqlite::Sqlite::open(&path)?);
            let p = path.clone();
            (
                Box::new(move || Ok(Box::new(sqlite::Sqlite::open(&p)?) as Box<dyn Backend>)),
                Reader::Sqlite(path),
            )
        }
    };
    Ok((Ledger::new(factory, settings, metrics), reader))
}
