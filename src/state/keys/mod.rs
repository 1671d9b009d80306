//! The key store (docs/keys.md): keys and teams made through the admin API,
//! with their audit log, in `DATA/keys.sqlite` ([`sqlite`]) or, with
//! `--database`, in PostgreSQL ([`pg`]).
//!
//! The pieces:
//! - [`record`]: the rows (a record per key or team, the version of its last
//!   change) and the parsed cache an instance keeps;
//! - [`audit`]: the audit entries, written with each change, never a secret;
//! - [`watch`]: how a change made elsewhere (another process on the data
//!   directory, another instance of the fleet) reaches this one: a version
//!   check every [`watch::POLL`] (SQLite), `LISTEN`/`NOTIFY` (PostgreSQL);
//!   then only the rows past the version seen are read.
//!
//! [`KeyDb::change`] writes one change and puts it in force here at once:
//! the rows past the cache's version are read, and the parsed keys handed
//! to the callback set by [`KeyDb::on_change`] (the runtime's `set_stored`,
//! which rebuilds the live keys).

pub mod audit;
pub mod pg;
pub mod record;
pub mod sqlite;
pub mod watch;

use crate::config::StoredKeys;
use record::{Cache, Kind, Written};
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, OnceLock};

pub use audit::Entry;
pub use record::Kind as EntryKind;

enum Backend {
    Sqlite(sqlite::Sqlite),
    Postgres(Box<pg::Postgres>),
}

/// What is told of every change read.
pub type OnChange = Box<dyn Fn(Arc<StoredKeys>) + Send + Sync>;

/// The key store of this instance.
pub struct KeyDb {
    backend: Backend,
    cache: tokio::sync::Mutex<Cache>,
    on_change: OnceLock<OnChange>,
}

impl std::fmt::Debug for KeyDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

impl KeyDb {
    /// Opens `DATA/keys.sqlite`, or PostgreSQL at `database`.
    pub fn open(data: &Path, database: Option<&str>) -> Result<KeyDb, String> {
        let backend = match database {
            Some(url) => Backend::Postgres(Box::new(pg::Postgres::new(url)?)),
            None => Backend::Sqlite(sqlite::Sqlite::open(data)?),
        };
        Ok(KeyDb {
            backend,
            cache: tokio::sync::Mutex::default(),
            on_change: OnceLock::new(),
        })
    }

    /// `sqlite` or `postgres`, for logs.
    pub fn describe(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Sets what is told of each change read (once; later calls are ignored).
    pub fn on_change(&self, f: OnChange) {
        let _ = self.on_change.set(f);
    }

    /// The store's version (a cheap check before [`KeyDb::refresh`]).
    pub async fn version(&self) -> Result<i64, String> {
        match &self.backend {
            Backend::Sqlite(s) => s.version().await,
            Backend::Postgres(p) => p.version().await,
        }
    }

    /// Reads the rows changed since the last read; when there were any,
    /// tells the `on_change` callback and returns the keys now stored.
    pub async fn refresh(&self) -> Result<Option<Arc<StoredKeys>>, String> {
        let mut cache = self.cache.lock().await;
        let rows = match &self.backend {
            Backend::Sqlite(s) => s.since(cache.version).await?,
            Backend::Postgres(p) => p.since(cache.version).await?,
        };
        if rows.is_empty() && cache.version > 0 {
            return Ok(None);
        }
        cache.apply(rows);
        let stored = Arc::new(cache.stored());
        if let Some(f) = self.on_change.get() {
            f(stored.clone());
        }
        Ok(Some(stored))
    }

    /// Everything stored, read now (at start).
    pub async fn load(&self) -> Result<Arc<StoredKeys>, String> {
        self.refresh().await?;
        Ok(Arc::new(self.cache.lock().await.stored()))
    }

    /// One change, made in one transaction (docs/keys.md): `change` gets the
    /// record `kind`/`id` (`None`: there is none) and returns the new one
    /// (`None`: delete) with the audit action, or refuses (`Err(E)`, handed
    /// back, nothing written). Once written, the change is read back and in
    /// force on this instance before this returns. `Err(String)`: the store
    /// failed.
    pub async fn change<E: Send + 'static>(
        &self,
        kind: Kind,
        id: &str,
        actor: &str,
        change: impl FnOnce(Option<Value>) -> Result<Written, E> + Send + 'static,
    ) -> Result<Result<Option<Value>, E>, String> {
        let at = crate::util::rfc3339::Rfc3339::now().to_string();
        let (id, actor) = (id.to_string(), actor.to_string());
        let out = match &self.backend {
            Backend::Sqlite(s) => s.change(kind, id, actor, at, change).await?,
            Backend::Postgres(p) => p.change(kind, id, actor, at, change).await?,
        };
        if out.is_ok() {
            // Written: a failed read-back is caught up by the watch.
            if let Err(e) = self.refresh().await {
                log::warn!("key store: a change was written but not read back: {e}");
            }
        }
        Ok(out)
    }

    /// Audit entries, newest first: at most `limit`, before the entry `before`.
    pub async fn audit(&self, limit: usize, before: Option<i64>) -> Result<Vec<Entry>, String> {
        match &self.backend {
            Backend::Sqlite(s) => s.audit(limit, before).await,
            Backend::Postgres(p) => p.audit(limit, before).await,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("sb-keys-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[tokio::test]
    async fn changes_audit_and_a_second_process_sees_them() {
        let d = dir("store");
        let a = KeyDb::open(&d, None).unwrap();
        let b = KeyDb::open(&d, None).unwrap();
        assert!(a.load().await.unwrap().keys.is_empty());
        assert!(b.load().await.unwrap().keys.is_empty());
        let made = a
            .change(Kind::Team, "ml", "admin-key", |old| {
                assert!(old.is_none());
                Ok::<_, ()>((Some(json!({"id": "ml", "rpm": 3})), "team.create"))
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(made.unwrap()["rpm"], 3);
        a.change(Kind::Key, "k", "admin-key", |_| {
            Ok::<_, ()>((
                Some(json!({"id": "k", "sha256": SHA, "team": "ml"})),
                "key.create",
            ))
        })
        .await
        .unwrap()
        .unwrap();
        // A refusal writes nothing.
        let refused = a
            .change(Kind::Key, "k", "admin-key", |_| Err::<Written, _>("no"))
            .await
            .unwrap();
        assert_eq!(refused, Err("no"));
        let v = b.version().await.unwrap();
        assert_eq!(v, 2);
        let seen = b.refresh().await.unwrap().unwrap();
        assert_eq!(seen.keys["k"].team.as_deref(), Some("ml"));
        assert_eq!(seen.teams["ml"].rpm, Some(3));
        assert!(b.refresh().await.unwrap().is_none(), "nothing new");
        a.change(Kind::Team, "ml", "jwt:alice", |_| {
            Ok::<_, ()>((None, "team.delete"))
        })
        .await
        .unwrap()
        .unwrap();
        assert!(b.refresh().await.unwrap().unwrap().teams.is_empty());
        let log = b.audit(10, None).await.unwrap();
        let actions: Vec<&str> = log.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, ["team.delete", "key.create", "team.create"]);
        assert_eq!(log[0].actor, "jwt:alice");
        assert_eq!(log[0].before, Some(json!({"id": "ml", "rpm": 3})));
        assert_eq!(log[0].after, None);
        assert!(log[1].after.as_ref().unwrap().get("sha256").is_none());
        let older = b.audit(10, Some(log[1].seq)).await.unwrap();
        assert_eq!(older.len(), 1);
        assert_eq!(older[0].action, "team.create");
        let _ = std::fs::remove_dir_all(&d);
    }
}
