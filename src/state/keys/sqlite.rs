//! The key store in `DATA/keys.sqlite` (one instance, or several processes on
//! one data directory). One connection, used off the reactor
//! (`spawn_blocking`); a change is one `BEGIN IMMEDIATE` transaction (SQLite's
//! write lock, taken before the read, so two processes never both change from
//! the same record): read the row, write it with the next version, append the
//! audit entry. WAL and a busy timeout, as the other embedded stores.

use super::audit::{self, Entry};
use super::record::{Kind, Row, Written};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// File name of the key store inside the data directory.
pub const FILE: &str = "keys.sqlite";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS keystore_entries (
    kind    TEXT NOT NULL,
    id      TEXT NOT NULL,
    body    TEXT,
    version INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS keystore_entries_version ON keystore_entries (version);
CREATE TABLE IF NOT EXISTS keystore_version (
    one     INTEGER PRIMARY KEY CHECK (one = 1),
    version INTEGER NOT NULL
);
INSERT OR IGNORE INTO keystore_version VALUES (1, 0);
CREATE TABLE IF NOT EXISTS keystore_audit (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    at     TEXT NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    kind   TEXT NOT NULL,
    id     TEXT NOT NULL,
    before TEXT,
    after  TEXT
);";

/// The embedded key store.
#[derive(Clone)]
pub struct Sqlite {
    conn: Arc<Mutex<Connection>>,
}

fn store_err(e: impl std::fmt::Display) -> String {
    format!("{FILE}: {e}")
}

impl Sqlite {
    /// Opens (or makes) `dir/keys.sqlite`.
    pub fn open(dir: &Path) -> Result<Sqlite, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let conn = Connection::open(dir.join(FILE)).map_err(store_err)?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(store_err)?;
        let _: Option<String> = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .optional()
            .map_err(store_err)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL;")
            .map_err(store_err)?;
        conn.execute_batch(SCHEMA).map_err(store_err)?;
        Ok(Sqlite {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` on the connection, off the reactor.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, String> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut c).map_err(store_err)
        })
        .await
        .map_err(store_err)?
    }

    /// The store's version: one row read, what the watch compares every 250 ms.
    pub async fn version(&self) -> Result<i64, String> {
        self.with(|c| c.query_row("SELECT version FROM keystore_version", [], |r| r.get(0)))
            .await
    }

    /// The rows changed past `version`.
    pub async fn since(&self, version: i64) -> Result<Vec<Row>, String> {
        self.with(move |c| {
            let mut st = c.prepare_cached(
                "SELECT kind, id, body, version FROM keystore_entries WHERE version > ?1 ORDER BY version",
            )?;
            let rows = st.query_map([version], |r| {
                let kind: String = r.get(0)?;
                Ok((kind, r.get(1)?, r.get(2)?, r.get(3)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (kind, id, body, version) = row?;
                if let Some(kind) = Kind::from_name(&kind) {
                    out.push(Row { kind, id, body, version });
                }
            }
            Ok(out)
        })
        .await
    }

    /// Reads the record `kind`/`id`, lets `change` decide, writes what it
    /// returns with the next version and its audit entry, in one
    /// transaction. `change`'s refusal is handed back and nothing is written.
    pub async fn change<E: Send + 'static>(
        &self,
        kind: Kind,
        id: String,
        actor: String,
        at: String,
        change: impl FnOnce(Option<Value>) -> Result<Written, E> + Send + 'static,
    ) -> Result<Result<Option<Value>, E>, String> {
        self.with(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let old: Option<Option<String>> = tx
                .query_row(
                    "SELECT body FROM keystore_entries WHERE kind = ?1 AND id = ?2",
                    params![kind.name(), id],
                    |r| r.get(0),
                )
                .optional()?;
            let old = old.flatten().and_then(|t| serde_json::from_str(&t).ok());
            let before = audit::text(old.as_ref());
            let (new, action) = match change(old) {
                Ok(w) => w,
                Err(e) => return Ok(Err(e)),
            };
            let version: i64 = tx.query_row(
                "UPDATE keystore_version SET version = version + 1 RETURNING version",
                [],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO keystore_entries (kind, id, body, version) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body, version = excluded.version",
                params![kind.name(), id, new.as_ref().map(Value::to_string), version],
            )?;
            tx.execute(
                "INSERT INTO keystore_audit (at, actor, action, kind, id, before, after) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![at, actor, action, kind.name(), id, before, audit::text(new.as_ref())],
            )?;
            tx.commit()?;
            Ok(Ok(new))
        })
        .await
    }

    /// Audit entries, newest first: at most `limit`, older than `before` (a `seq`).
    pub async fn audit(&self, limit: usize, before: Option<i64>) -> Result<Vec<Entry>, String> {
        self.with(move |c| {
            let mut st = c.prepare_cached(
                "SELECT seq, at, actor, action, kind, id, before, after FROM keystore_audit
                 WHERE seq < ?1 ORDER BY seq DESC LIMIT ?2",
            )?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = st.query_map(params![before.unwrap_or(i64::MAX), limit], |r| {
                Ok(Entry {
                    seq: r.get(0)?,
                    at: r.get(1)?,
                    actor: r.get(2)?,
                    action: r.get(3)?,
                    kind: r.get(4)?,
                    id: r.get(5)?,
                    before: audit::parse(r.get(6)?),
                    after: audit::parse(r.get(7)?),
                })
            })?;
            rows.collect()
        })
        .await
    }
}
