//! Stored responses in the data directory: `DIR/responses.sqlite` (SQLite,
//! WAL), one row per response (the record as JSON, its owner, expiry and
//! size). Writes go to one writer thread, which gathers the records that
//! come within [`GATHER`] of the first (`--responses-flush-ms`) and inserts them in one transaction (a
//! Responses client stores each answer by default: one commit and one
//! blocking-pool task per answer cost 15-20% of a stream's CPU, and commits
//! of a few records each still 18%, docs/performance.md); each caller learns
//! the outcome of the transaction that held its record (all of a batch are
//! written, or none), and the store serves the record from memory until then.
//! [`Backend::flush`] waits for what was handed over to land (shutdown). Reads run on
//! the blocking pool; expired rows are skipped by reads and purged by a
//! background thread. A key's usage is the sum of its live
//! rows' sizes, read from a covering index (`key_id, expires_at_ms, bytes`),
//! so it shrinks as rows expire or are deleted and survives restarts; a file
//! from before the size column gets it on open, filled from each record.

use super::backend::Landed;
use super::{now_ms, Backend, StoreError, StoredResponse};
use async_trait::async_trait;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The file name under the data directory.
pub const FILE: &str = "responses.sqlite";

/// The page size of a new file: 16 KiB, not SQLite's 4. A record is a few
/// KiB of JSON and each WAL frame is a page written with two `pwrite`s (its
/// header, then the page), and a checkpoint writes each page again: with
/// 4 KiB pages the writer made 3.4 write calls a stored answer and spent
/// most of its time in them (docs/performance.md "Issue 28, twenty-fifth
/// pass": 12.6 µs of CPU an answer on S7, 8.3 with 16 KiB pages, 7.5 with
/// 64 KiB, whose single-record reads would read 64 KiB).
const PAGE_SIZE: u32 = 16384;

/// The most records one write transaction takes.
const BATCH: usize = 256;

/// How long the writer gathers records after the first before it writes
/// them: a record is served from memory meanwhile, and a commit's cost
/// (its WAL frames, and the checkpoints they lead to) is shared by all.
pub const GATHER: Duration = Duration::from_millis(5);

/// The SQLite backend.
#[derive(Debug, Clone)]
pub struct Sqlite {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    /// The writer thread's queue.
    writes: mpsc::Sender<Job>,
}

/// What the writer thread is asked to do.
#[derive(Debug)]
enum Job {
    /// Insert a record.
    Put(Put),
    /// Write what is gathered now and say so (what came before has landed).
    Flush(mpsc::SyncSender<()>),
}

/// One record for the writer, and who learns how its write ended.
struct Put {
    rec: Arc<StoredResponse>,
    landed: Landed,
}

impl std::fmt::Debug for Put {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Put").field("id", &self.rec.id).finish()
    }
}

/// How long the writer naps between looks at its queue while a batch
/// gathers: the longest a flush waits to be seen.
const NAP: Duration = Duration::from_millis(1);

/// The writer thread: waits for a record, gathers what comes within
/// `gather` (up to [`BATCH`]; a flush ends the gathering once seen), writes
/// them in one transaction, answers each. It ends when the last [`Sqlite`]
/// handle is dropped, after writing what it holds.
///
/// While a batch gathers the writer naps ([`NAP`]) and takes what is queued
/// without waiting on the channel: a record sent to a thread waiting on it
/// wakes that thread (a futex call and a context switch per stored answer,
/// 8% of the gateway's CPU samples under load on S7, docs/performance.md
/// "Issue 28, sixteenth pass"), where a napping one costs a wake per nap.
fn write_loop(conn: &Mutex<Connection>, queue: &mpsc::Receiver<Job>, gather: Duration) {
    let mut open = true;
    // Each record's JSON, in turn: one buffer for all.
    let mut json = Vec::new();
    while open {
        let Ok(mut job) = queue.recv() else { break };
        let (mut batch, mut flushes) = (Vec::new(), Vec::new());
        let until = Instant::now() + gather;
        loop {
            match job {
                Job::Put(p) => batch.push(p),
                Job::Flush(done) => flushes.push(done),
            }
            if batch.len() >= BATCH || !flushes.is_empty() {
                break;
            }
            match next_job(queue, until) {
                Ok(next) => job = next,
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        if !batch.is_empty() {
            let result = {
                let g = match conn.lock() {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
                insert_all(&g, &batch, &mut json)
            };
            for p in batch {
                (p.landed)(result.clone());
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// The next job queued before `until`, looked for every [`NAP`] without
/// waiting on the channel; `Timeout` once `until` passes with none.
fn next_job(queue: &mpsc::Receiver<Job>, until: Instant) -> Result<Job, mpsc::RecvTimeoutError> {
    loop {
        match queue.try_recv() {
            Ok(job) => return Ok(job),
            Err(mpsc::TryRecvError::Disconnected) => {
                return Err(mpsc::RecvTimeoutError::Disconnected)
            }
            Err(mpsc::TryRecvError::Empty) => {}
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(mpsc::RecvTimeoutError::Timeout);
        }
        std::thread::sleep(left.min(NAP));
    }
}

/// The records of `batch`, in one transaction: all or none; `json` holds
/// each record's JSON in turn.
fn insert_all(c: &Connection, batch: &[Put], json: &mut Vec<u8>) -> Result<(), StoreError> {
    let tx = c.unchecked_transaction().map_err(err)?;
    {
        // Prepared once per connection, not compiled per response.
        let mut st = tx
            .prepare_cached(
                "INSERT OR REPLACE INTO responses (id, key_id, created_at, expires_at_ms, record, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(err)?;
        for Put { rec, .. } in batch {
            json.clear();
            rec.write_json(json);
            st.execute(params![
                rec.id,
                rec.key_id,
                i64::try_from(rec.created_at).unwrap_or(i64::MAX),
                i64::try_from(rec.expires_at_ms).unwrap_or(i64::MAX),
                ToSqlOutput::Borrowed(ValueRef::Text(json)),
                i64::try_from(rec.bytes()).unwrap_or(i64::MAX)
            ])
            .map_err(err)?;
        }
    }
    tx.commit().map_err(err)
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(format!("sqlite: {e}"))
}

impl Sqlite {
    /// Opens (creating) `dir/responses.sqlite` and its table.
    pub fn open(dir: &Path) -> Result<Sqlite, String> {
        Sqlite::open_unless_full(dir, GATHER)?
            .ok_or_else(|| format!("{}: database or disk is full", dir.join(FILE).display()))
    }

    /// [`Sqlite::open`], but `None` when the disk is full (the file cannot
    /// be made or brought up to date); the writer gathers records for
    /// `gather` before each commit.
    pub fn open_unless_full(dir: &Path, gather: Duration) -> Result<Option<Sqlite>, String> {
        match std::fs::create_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "cannot create the data directory {}: {e}",
                    dir.display()
                ))
            }
        }
        let path = dir.join(FILE);
        match Sqlite::connect(&path) {
            Ok(conn) => {
                let conn = Arc::new(Mutex::new(conn));
                let (writes, queue) = mpsc::channel();
                let writer = conn.clone();
                std::thread::Builder::new()
                    .name("responses-write".into())
                    .spawn(move || write_loop(&writer, &queue, gather))
                    .map_err(|e| format!("{}: no writer thread: {e}", path.display()))?;
                Ok(Some(Sqlite { conn, path, writes }))
            }
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::DiskFull =>
            {
                Ok(None)
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    fn connect(path: &Path) -> rusqlite::Result<Connection> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        // A new file's pages are 16 KiB ([`PAGE_SIZE`]); a file made before
        // keeps its own (SQLite sets the size only before the first table).
        conn.execute_batch(&format!(
            "PRAGMA page_size = {PAGE_SIZE}; PRAGMA journal_mode=WAL;"
        ))?;
        crate::state::sqlite_wal_settings(&conn)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS responses (
                 id TEXT PRIMARY KEY,
                 key_id TEXT NOT NULL,
                 created_at INTEGER NOT NULL,
                 expires_at_ms INTEGER NOT NULL,
                 record TEXT NOT NULL,
                 bytes INTEGER NOT NULL DEFAULT 0
             );
             CREATE INDEX IF NOT EXISTS responses_expiry ON responses(expires_at_ms);",
        )?;
        let sized: bool = conn
            .prepare("SELECT 1 FROM pragma_table_info('responses') WHERE name = 'bytes'")
            .and_then(|mut st| st.exists([]))?;
        if !sized {
            // A file from before the quota: each row's size from its record.
            conn.execute_batch(
                "ALTER TABLE responses ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
                 UPDATE responses SET bytes = length(CAST(record AS BLOB));",
            )?;
        }
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS responses_key ON responses(key_id, expires_at_ms, bytes);",
        )?;
        Ok(conn)
    }

    /// Queues `put` for the writer thread, which tells its `landed` once
    /// its transaction has ended; told here if the writer has stopped.
    fn send(&self, put: Put) {
        if let Err(mpsc::SendError(Job::Put(put))) = self.writes.send(Job::Put(put)) {
            (put.landed)(Err(err("the writer thread has stopped")));
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        let g = match self.conn.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&g)
    }

    async fn blocking<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.with(f))
            .await
            .map_err(err)?
    }

    /// Deletes expired rows; how many.
    pub fn purge(&self) -> Result<usize, StoreError> {
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        self.with(|c| {
            c.execute(
                "DELETE FROM responses WHERE expires_at_ms <= ?1",
                params![now],
            )
            .map_err(err)
        })
    }

    /// Purges expired rows every `every`, on a thread of its own.
    pub fn spawn_purger(&self, every: Duration) {
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("responses-purge".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                match me.purge() {
                    Ok(0) => {}
                    Ok(n) => log::debug!("purged {n} expired stored responses"),
                    Err(e) => log::warn!("purging expired stored responses failed: {e}"),
                }
            });
        if let Err(e) = spawned {
            log::warn!("no purge thread for stored responses: {e}");
        }
    }
}

#[async_trait]
impl Backend for Sqlite {
    async fn put(&self, rec: &StoredResponse) -> Result<(), StoreError> {
        let (done, outcome) = oneshot::channel();
        self.send(Put {
            rec: Arc::new(rec.clone()),
            landed: Box::new(move |r| {
                let _ = done.send(r);
            }),
        });
        outcome
            .await
            .map_err(|_| err("the writer thread has stopped"))?
    }

    fn hand_over(
        self: Arc<Self>,
        rec: Arc<StoredResponse>,
        _runtime: &tokio::runtime::Handle,
        landed: Landed,
    ) {
        self.send(Put { rec, landed });
    }

    async fn get(&self, id: &str) -> Result<Option<StoredResponse>, StoreError> {
        let id = id.to_string();
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        let text: Option<String> = self
            .blocking(move |c| {
                c.query_row(
                    "SELECT record FROM responses WHERE id = ?1 AND expires_at_ms > ?2",
                    params![id, now],
                    |row| row.get(0),
                )
                .optional()
                .map_err(err)
            })
            .await?;
        match text {
            Some(t) => serde_json::from_str(&t).map(Some).map_err(err),
            None => Ok(None),
        }
    }

    async fn delete(&self, _key_id: &str, id: &str) -> Result<bool, StoreError> {
        let id = id.to_string();
        self.blocking(move |c| {
            c.execute("DELETE FROM responses WHERE id = ?1", params![id])
                .map(|n| n > 0)
                .map_err(err)
        })
        .await
    }

    async fn usage(&self, key_id: &str) -> Result<u64, StoreError> {
        let key = key_id.to_string();
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        let n: i64 = self
            .blocking(move |c| {
                c.prepare_cached(
                    "SELECT COALESCE(SUM(bytes), 0) FROM responses WHERE key_id = ?1 AND expires_at_ms > ?2",
                )
                .and_then(|mut st| st.query_row(params![key, now], |row| row.get(0)))
                .map_err(err)
            })
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn flush(&self, within: Duration) -> bool {
        let (done, landed) = mpsc::sync_channel(1);
        self.writes.send(Job::Flush(done)).is_ok() && landed.recv_timeout(within).is_ok()
    }

    fn name(&self) -> &'static str {
        "sqlite"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::json_text::JsonText;

    #[test]
    fn new_files_have_16_kib_pages_and_every_file_the_same_wal() {
        let dir = std::env::temp_dir().join(format!("sb-resp-sqlite-wal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pragmas = |db: &Sqlite| -> (i64, i64) {
            db.with(|c| {
                let get = |p: &str| {
                    c.query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
                        .unwrap()
                };
                (get("page_size"), get("wal_autocheckpoint"))
            })
        };
        let db = Sqlite::open(&dir).unwrap();
        assert_eq!(pragmas(&db), (16384, 1000));
        drop(db);
        // Reopened, and a file made before with SQLite's 4 KiB pages: each
        // keeps its pages, the WAL the same 16 MB (4,000 pages of 4 KiB).
        assert_eq!(pragmas(&Sqlite::open(&dir).unwrap()), (16384, 1000));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let old = Connection::open(dir.join(FILE)).unwrap();
        old.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE responses (id TEXT PRIMARY KEY, key_id TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL, record TEXT NOT NULL);",
        )
        .unwrap();
        drop(old);
        assert_eq!(pragmas(&Sqlite::open(&dir).unwrap()), (4096, 4000));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_file_from_before_the_quota_gets_its_sizes() {
        let dir = std::env::temp_dir().join(format!("sb-resp-sqlite-old-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let c = Connection::open(dir.join(FILE)).unwrap();
        c.execute_batch(
            "CREATE TABLE responses (id TEXT PRIMARY KEY, key_id TEXT NOT NULL, created_at INTEGER NOT NULL,
                 expires_at_ms INTEGER NOT NULL, record TEXT NOT NULL);",
        )
        .unwrap();
        c.execute(
            "INSERT INTO responses VALUES ('resp_x', 'k', 1, ?1, 'héllo')",
            params![i64::try_from(now_ms() + 60_000).unwrap()],
        )
        .unwrap();
        drop(c);
        let db = Sqlite::open(&dir).unwrap();
        assert_eq!(db.usage("k").await.unwrap(), 6, "bytes, not characters");
        drop(db);
        let db = Sqlite::open(&dir).unwrap();
        assert_eq!(db.usage("k").await.unwrap(), 6, "migrated once");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_gathering_writer_takes_what_comes_before_its_time_and_no_more() {
        let (tx, rx) = mpsc::channel();
        // Sent while the writer naps: taken.
        let late = std::thread::spawn({
            let tx = tx.clone();
            move || {
                std::thread::sleep(Duration::from_millis(3));
                let (done, _) = mpsc::sync_channel(1);
                tx.send(Job::Flush(done)).unwrap();
            }
        });
        let got = next_job(&rx, Instant::now() + Duration::from_secs(60));
        assert!(matches!(got, Ok(Job::Flush(_))), "{got:?}");
        late.join().unwrap();
        // Nothing comes: the gathering ends at its time.
        let until = Instant::now() + Duration::from_millis(5);
        let got = next_job(&rx, until);
        assert!(
            matches!(got, Err(mpsc::RecvTimeoutError::Timeout)),
            "{got:?}"
        );
        assert!(Instant::now() >= until);
        // Every handle gone: the writer stops.
        drop(tx);
        let got = next_job(&rx, Instant::now() + Duration::from_secs(60));
        assert!(
            matches!(got, Err(mpsc::RecvTimeoutError::Disconnected)),
            "{got:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_puts_are_written_in_batches_and_each_answered() {
        let dir = std::env::temp_dir().join(format!("sb-resp-sqlite-many-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = Sqlite::open(&dir).unwrap();
        let raw = |s: &str| JsonText::parse(s.to_string()).unwrap();
        let expires = now_ms() + 60_000;
        let puts = (0..600).map(|i| {
            let db = db.clone();
            let rec = StoredResponse {
                id: format!("resp_{i}"),
                key_id: format!("k{}", i % 3),
                created_at: 1,
                expires_at_ms: expires,
                previous_response_id: None,
                instructions: None,
                input_items: vec![raw(r#"{"role":"user","content":"hi"}"#)],
                response: raw(r#"{"id":"x","output":[]}"#),
            };
            tokio::spawn(async move { db.put(&rec).await.map(|()| rec.bytes()) })
        });
        let mut per_key = 0u64;
        for (i, h) in puts.enumerate() {
            let bytes = h.await.unwrap().unwrap();
            if i % 3 == 0 {
                per_key += bytes;
            }
        }
        for i in [0, 299, 599] {
            let got = db.get(&format!("resp_{i}")).await.unwrap().unwrap();
            assert_eq!(got.key_id, format!("k{}", i % 3));
        }
        assert_eq!(db.usage("k0").await.unwrap(), per_key);
        let rows: i64 = db.with(|c| {
            c.query_row("SELECT COUNT(*) FROM responses", [], |r| r.get(0))
                .unwrap()
        });
        assert_eq!(rows, 600);
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn put_get_delete_purge_and_reopen() {
        let dir = std::env::temp_dir().join(format!("sb-resp-sqlite-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = Sqlite::open(&dir).unwrap();
        let raw = |s: &str| JsonText::parse(s.to_string()).unwrap();
        let mut rec = StoredResponse {
            id: "resp_a".into(),
            key_id: "k".into(),
            created_at: 1,
            expires_at_ms: now_ms() + 60_000,
            previous_response_id: None,
            instructions: Some(raw("\"be brief\"")),
            input_items: vec![raw(r#"{"type":"message","role":"user","content":[]}"#)],
            response: raw(r#"{"id":"resp_a","output":[]}"#),
        };
        db.put(&rec).await.unwrap();
        assert_eq!(db.usage("k").await.unwrap(), rec.bytes());
        assert_eq!(db.usage("other").await.unwrap(), 0);
        let got = db.get("resp_a").await.unwrap().unwrap();
        assert_eq!(got.response.get(), r#"{"id":"resp_a","output":[]}"#);
        assert_eq!(got.instructions.unwrap().get(), "\"be brief\"");
        drop(db);
        let db = Sqlite::open(&dir).unwrap();
        assert!(db.get("resp_a").await.unwrap().is_some());
        assert_eq!(
            db.usage("k").await.unwrap(),
            rec.bytes(),
            "kept across a reopen"
        );
        let live = rec.bytes();
        rec.id = "resp_old".into();
        rec.expires_at_ms = now_ms() - 1;
        db.put(&rec).await.unwrap();
        assert!(db.get("resp_old").await.unwrap().is_none());
        assert_eq!(
            db.usage("k").await.unwrap(),
            live,
            "expired rows do not count"
        );
        assert_eq!(db.purge().unwrap(), 1);
        assert!(db.delete("k", "resp_a").await.unwrap());
        assert!(!db.delete("k", "resp_a").await.unwrap());
        assert_eq!(db.usage("k").await.unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
