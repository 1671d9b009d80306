//! State kept beyond one request, a folder per store: the usage ledger
//! (embedded SQLite or PostgreSQL), per-key limits and budgets (embedded or in
//! Redis), stored responses (docs/api.md "Stored responses"; embedded or
//! in Redis), and the keys and teams made through the admin API with their
//! audit log (docs/keys.md; embedded SQLite or PostgreSQL).
//!
//! May import: `config`, `error`, `family`, `ir`, `obs`, `util`.

pub mod keys;
pub mod ledger;
pub mod limits;
pub mod responses;

/// Bytes an embedded store's WAL gathers before SQLite checkpoints it into
/// the file (4,000 pages of 4 KiB, not SQLite's 1,000): each checkpoint
/// copies the latest version of every page the commits since the last one
/// rewrote (the B-trees' right edges and their parents, again and again)
/// and fsyncs, so a longer run between them copies fewer rewrites and syncs
/// a quarter as often. The WAL may grow to about 16 MB; it is reused, not grown,
/// after each checkpoint (docs/performance.md "Issue 28, twenty-fourth
/// pass": the ledger's and the stored responses' writers 10% less CPU; the
/// limits store's fsyncs had been a third of a reservation's cost).
const WAL_CHECKPOINT_BYTES: u32 = 4000 * 4096;

/// The WAL settings every embedded SQLite store shares on its connection:
/// `synchronous = NORMAL` (a power cut may lose the last commits, never
/// corrupt the file) and a checkpoint every [`WAL_CHECKPOINT_BYTES`] of
/// the file's pages (4,000 of SQLite's default 4 KiB).
fn sqlite_wal_settings(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let page: u32 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    let pages = WAL_CHECKPOINT_BYTES / page.max(512);
    conn.execute_batch(&format!(
        "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = {pages};"
    ))
}
