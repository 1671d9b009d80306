//! The embedded budget store, `DATA/limits.sqlite`, shared by every process
//! on one data directory: the old and the new process of an upgrade serve at
//! once, and they enforce one budget exactly.
//!
//! The file holds each budget's settled spend and what reservations in flight
//! hold (`budget_spend`: key, period, `spent_nanos`, `held_nanos`; a team's
//! budgets in `team_spend`, of the same shape, so a key and a team of one
//! name never share one) and each reservation (`budget_held`: id, key or
//! team, period, cost, owner, lease expiry, `team` 1 for a team's). A
//! reserve reads the spend and the holds and writes its own in one
//! `BEGIN IMMEDIATE` transaction (SQLite's write lock, taken before the read),
//! so two processes cannot both take the last of a budget; a request of a
//! key in a team reserves in both budgets in that one transaction, or in
//! neither (docs/configuration.md "Teams"); a settlement deletes its
//! reservations and adds the spend in one transaction.
//!
//! One thread per process owns the connection and runs what requests queue
//! for it, a batch per transaction (group commit: under load one commit
//! serves many requests); each request waits for its answer, sent after the
//! commit. WAL, `synchronous=NORMAL` (a commit is not an `fsync`: durable
//! across a process crash, not a power cut), a busy timeout for the other
//! process's transaction. The thread starts on the first call, so a
//! daemonizing fork after start-up does not lose it.
//!
//! A request waits at most [`ANSWER_WITHIN`] for its answer: a file that
//! answers later (a stalled disk, another process holding the write lock)
//! does not hold requests up; they go on without their budget checked
//! (counted in `switchboard_limits_store_late_total`, logged), and what they
//! asked stays queued and is written in order when the file answers.
//!
//! A process that dies holds its reservations until their lease ends
//! ([`LEASE_SECS`]; a running process renews its own every
//! [`MAINTAIN_EVERY`]); a process that starts alone on the directory (no
//! other holds the shared lock on `DATA/limits.lock`) drops them at once.
//!
//! When the file cannot be written (a full disk, an I/O error), requests
//! are still served and checked, from what this process knows: the file as
//! last read plus what it could not write, kept in memory (settlements, and
//! reservations made meanwhile). That is logged, counted
//! (`switchboard_limits_store_*`) and retried every [`RETRY_EVERY`]; once a
//! write succeeds, everything kept is written (the spend and the
//! reservations still in flight) and the processes share the budget again.

use super::Nanos;
use crate::obs::metrics::Metrics;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// File name of the budget store inside the data directory.
pub const FILE: &str = "limits.sqlite";
/// The lock file every process on the data directory holds shared.
pub const LOCK_FILE: &str = "limits.lock";
/// How long a reservation whose process died holds its budget.
pub const LEASE_SECS: u64 = 60;
/// How often a process renews its reservations' leases and drops the
/// expired ones of processes that died.
pub const MAINTAIN_EVERY: Duration = Duration::from_secs(10);
/// How often writes kept in memory are tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(1);
/// How often a store that still cannot write says so again.
const REMIND_EVERY: Duration = Duration::from_secs(30);
/// Requests run in one transaction, at most.
const BATCH: usize = 1024;
/// How long a request waits for the store's answer. A slower one (a stalled
/// disk, another process holding the write lock) is admitted without it;
/// what it asked is still queued and runs when the store can.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// The store's answer to a reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Reserved: the budget left after it (the lesser of the key's and the
    /// team's).
    Reserved(Nanos),
    /// Refused by the key's budget (`team` false) or the team's: that
    /// budget's left.
    Refused { team: bool, left: Nanos },
    /// Not answered within [`ANSWER_WITHIN`]: the reserve still runs, later.
    Late,
    /// The store's thread is gone (logged).
    Gone,
}

/// One budget in one period: a key's, or a team's (`team`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Slot {
    /// The key's or the team's id.
    pub key: String,
    pub period: String,
    pub team: bool,
}

/// One budget a reservation holds: its slot and its cap.
#[derive(Debug, Clone)]
pub(crate) struct Cap {
    pub slot: Slot,
    pub budget: Nanos,
}

/// The budgets one reservation holds: the key's, its team's, or both.
pub(crate) type Caps = [Option<Cap>; 2];

/// The row id of reservation `id`'s hold on `slot` (a team's hold has its own).
fn row_id<'a>(id: &'a str, slot: &Slot) -> std::borrow::Cow<'a, str> {
    if slot.team {
        std::borrow::Cow::Owned(format!("{id}:team"))
    } else {
        std::borrow::Cow::Borrowed(id)
    }
}

/// The least of the budgets left after a step.
fn min_left(lefts: impl Iterator<Item = Nanos>) -> Nanos {
    lefts.min().unwrap_or(0)
}

enum Op {
    /// Reserve `cost` of every budget in `caps`, or of none: the budget left
    /// after it, or (refused) which budget refused and what it has left.
    Reserve {
        caps: Caps,
        cost: Nanos,
        id: String,
        reply: oneshot::Sender<Result<Nanos, (bool, Nanos)>>,
    },
    /// Settle reservation `id` (which held `held` of every budget in `caps`)
    /// to `cost`: the budget left.
    Settle {
        caps: Caps,
        id: String,
        held: Nanos,
        cost: Nanos,
        reply: Option<oneshot::Sender<Nanos>>,
    },
    /// (spent, held).
    State {
        slot: Slot,
        reply: oneshot::Sender<(Nanos, Nanos)>,
    },
}

impl Op {
    fn writes(&self) -> bool {
        matches!(self, Op::Reserve { .. } | Op::Settle { .. })
    }
}

/// A settlement not written yet.
#[derive(Debug, Clone)]
struct Pending {
    slot: Slot,
    /// The reservation's row, to delete (none: it was held in memory only).
    id: Option<String>,
    held: Nanos,
    cost: Nanos,
}

fn schema(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS budget_spend (
             key_id TEXT NOT NULL,
             period TEXT NOT NULL,
             spent_nanos INTEGER NOT NULL,
             updated_at INTEGER NOT NULL,
             held_nanos INTEGER NOT NULL DEFAULT 0,
             PRIMARY KEY (key_id, period)
         );
         CREATE TABLE IF NOT EXISTS team_spend (
             team_id TEXT NOT NULL,
             period TEXT NOT NULL,
             spent_nanos INTEGER NOT NULL,
             updated_at INTEGER NOT NULL,
             held_nanos INTEGER NOT NULL DEFAULT 0,
             PRIMARY KEY (team_id, period)
         );
         CREATE TABLE IF NOT EXISTS budget_held (
             id TEXT PRIMARY KEY,
             key_id TEXT NOT NULL,
             period TEXT NOT NULL,
             cost INTEGER NOT NULL,
             owner TEXT NOT NULL,
             expires_at INTEGER NOT NULL
         ) WITHOUT ROWID;",
    )?;
    // A file from before reservations were shared.
    let has_held: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('budget_spend') WHERE name = 'held_nanos'")?
        .exists([])?;
    if !has_held {
        conn.execute_batch(
            "ALTER TABLE budget_spend ADD COLUMN held_nanos INTEGER NOT NULL DEFAULT 0",
        )?;
    }
    // A file from before teams: its holds are all keys'. Two processes
    // opening it at once may both try; the second finds the column there.
    let has_team = |c: &Connection| -> rusqlite::Result<bool> {
        c.prepare("SELECT 1 FROM pragma_table_info('budget_held') WHERE name = 'team'")?
            .exists([])
    };
    if !has_team(conn)? {
        if let Err(e) =
            conn.execute_batch("ALTER TABLE budget_held ADD COLUMN team INTEGER NOT NULL DEFAULT 0")
        {
            if !has_team(conn)? {
                return Err(e);
            }
        }
    }
    Ok(())
}

fn open_db(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let _: Option<String> = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .optional()?;
    crate::state::sqlite_wal_settings(&conn)?;
    schema(&conn)?;
    Ok(conn)
}

fn now_secs() -> i64 {
    i64::try_from(super::unix_now()).unwrap_or(i64::MAX)
}

fn read(c: &Connection, slot: &Slot) -> rusqlite::Result<(Nanos, Nanos)> {
    Ok(c.prepare_cached(if slot.team {
        "SELECT spent_nanos, held_nanos FROM team_spend WHERE team_id = ?1 AND period = ?2"
    } else {
        "SELECT spent_nanos, held_nanos FROM budget_spend WHERE key_id = ?1 AND period = ?2"
    })?
    .query_row(params![slot.key, slot.period], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .optional()?
    .unwrap_or((0, 0)))
}

fn add(c: &Connection, slot: &Slot, spent: Nanos, held: Nanos) -> rusqlite::Result<()> {
    if spent == 0 && held == 0 {
        return Ok(());
    }
    c.prepare_cached(if slot.team {
        "INSERT INTO team_spend (team_id, period, spent_nanos, held_nanos, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (team_id, period) DO UPDATE SET spent_nanos = spent_nanos + excluded.spent_nanos,
             held_nanos = held_nanos + excluded.held_nanos, updated_at = excluded.updated_at"
    } else {
        "INSERT INTO budget_spend (key_id, period, spent_nanos, held_nanos, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (key_id, period) DO UPDATE SET spent_nanos = spent_nanos + excluded.spent_nanos,
             held_nanos = held_nanos + excluded.held_nanos, updated_at = excluded.updated_at"
    })?
    .execute(params![slot.key, slot.period, spent, held, now_secs()])?;
    Ok(())
}

fn hold(c: &Connection, id: &str, slot: &Slot, cost: Nanos, owner: &str) -> rusqlite::Result<()> {
    let expires = now_secs().saturating_add(LEASE_SECS as i64);
    c.prepare_cached(
        "INSERT INTO budget_held (id, key_id, period, cost, owner, expires_at, team) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![id, slot.key, slot.period, cost, owner, expires, slot.team])?;
    add(c, slot, 0, cost)
}

/// Deletes reservation `id`'s row and its hold; whether it was there (a
/// lease that ended was already given back).
fn unhold(c: &Connection, id: &str, slot: &Slot, held: Nanos) -> rusqlite::Result<bool> {
    let n = c
        .prepare_cached("DELETE FROM budget_held WHERE id = ?1")?
        .execute(params![id])?;
    if n == 1 {
        add(c, slot, 0, -held)?;
    }
    Ok(n == 1)
}

/// Renews `owner`'s leases and gives back the holds of leases that ended.
fn maintain(c: &Connection, owner: &str) -> rusqlite::Result<usize> {
    let now = now_secs();
    c.prepare_cached("UPDATE budget_held SET expires_at = ?1 WHERE owner = ?2")?
        .execute(params![now.saturating_add(LEASE_SECS as i64), owner])?;
    drop_held(c, Some(now))
}

/// Gives back the holds of leases ended by `now` (every hold: `None`).
fn drop_held(c: &Connection, now: Option<i64>) -> rusqlite::Result<usize> {
    let expired: Vec<(String, Slot, Nanos)> = c
        .prepare_cached(
            "SELECT id, key_id, period, cost, team FROM budget_held WHERE expires_at <= ?1",
        )?
        .query_map(params![now.unwrap_or(i64::MAX)], |r| {
            Ok((
                r.get(0)?,
                Slot {
                    key: r.get(1)?,
                    period: r.get(2)?,
                    team: r.get(4)?,
                },
                r.get(3)?,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (id, slot, cost) in &expired {
        unhold(c, id, slot, *cost)?;
    }
    Ok(expired.len())
}

fn is_full(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull)
}

/// The store's handle, held by the embedded limits.
pub(crate) struct SpendStore {
    path: PathBuf,
    owner: String,
    seq: AtomicU64,
    metrics: Arc<Metrics>,
    tx: Mutex<Option<mpsc::Sender<Op>>>,
    /// The shared lock on `DATA/limits.lock`, held for the process's life.
    _lock: Option<std::fs::File>,
    /// Unix milliseconds a late answer was last logged.
    late_said: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl SpendStore {
    /// Opens (creating) the store in `dir`. A full disk does not stop the
    /// start: the store begins degraded (logged, counted) and retries.
    pub(crate) fn open(dir: &Path, metrics: Arc<Metrics>) -> Result<SpendStore, String> {
        match std::fs::create_dir_all(dir) {
            Ok(()) => {}
            // Made on a later try (the store's thread makes it too).
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => {}
            Err(e) => {
                return Err(format!(
                    "cannot create the data directory {}: {e}",
                    dir.display()
                ))
            }
        }
        let path = dir.join(FILE);
        let lock = Self::lock(dir);
        let alone = lock.as_ref().is_some_and(|(_, alone)| *alone);
        match open_db(&path).and_then(|c| {
            // No other process uses the directory: the holds in the file are
            // of processes that died, given back now rather than at their
            // lease's end.
            let dropped = if alone { drop_held(&c, None)? } else { 0 };
            if dropped > 0 {
                log::warn!(
                    "limits: gave back {dropped} budget reservation(s) of a process that ended without settling them"
                );
            }
            Ok(())
        }) {
            Ok(()) => {}
            Err(e) if is_full(&e) || !dir.exists() => {
                log::error!(
                    "limits: {} cannot be written ({e}): starting degraded; budgets are checked against what the file held, spend is kept in memory and written when space returns",
                    path.display()
                );
                metrics.limits_store.degraded.store(1, Ordering::Relaxed);
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Ok(SpendStore {
            path,
            owner: format!("{:x}-{:x}", std::process::id(), nanos),
            seq: AtomicU64::new(0),
            metrics,
            tx: Mutex::new(None),
            _lock: lock.map(|(f, _)| f),
            late_said: AtomicU64::new(0),
        })
    }

    /// Takes the shared lock on the directory's lock file, and tells whether
    /// this process is alone on it (an exclusive lock was free).
    fn lock(dir: &Path) -> Option<(std::fs::File, bool)> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .map_err(|e| log::warn!("limits: cannot open {LOCK_FILE}: {e}"))
            .ok()?;
        let alone = f.try_lock().is_ok();
        if let Err(e) = f.lock_shared() {
            log::warn!("limits: cannot lock {LOCK_FILE}: {e}");
            return None;
        }
        Some((f, alone))
    }

    /// A new reservation id.
    pub(crate) fn next_id(&self) -> String {
        format!(
            "{}-{}",
            self.owner,
            self.seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Queues `op` for the store's thread, started on first use (and again
    /// if it ended).
    // The channel's own error hands a large `Op` back (a reservation's two
    // budgets); it is taken apart here at once, never passed on.
    #[allow(clippy::result_large_err)]
    fn send(&self, mut op: Op) -> bool {
        let mut tx = lock(&self.tx);
        for _ in 0..2 {
            if tx.is_none() {
                let (s, rx) = mpsc::channel();
                let mut w =
                    Worker::new(self.path.clone(), self.owner.clone(), self.metrics.clone());
                match std::thread::Builder::new()
                    .name("limits-store".into())
                    .spawn(move || w.run(rx))
                {
                    Ok(_) => *tx = Some(s),
                    Err(e) => {
                        log::error!("limits: cannot start the budget store's thread: {e}");
                        return false;
                    }
                }
            }
            match tx.as_ref().map(|s| s.send(op)) {
                Some(Ok(())) => return true,
                Some(Err(mpsc::SendError(back))) => {
                    log::error!("limits: the budget store's thread ended; starting another");
                    *tx = None;
                    op = back;
                }
                None => return false,
            }
        }
        false
    }

    /// Waits for `answer` up to [`ANSWER_WITHIN`]: `Err(true)` when late
    /// (counted, logged at most every 30 s), `Err(false)` when the thread
    /// is gone.
    async fn wait<T>(&self, answer: oneshot::Receiver<T>) -> Result<T, bool> {
        match tokio::time::timeout(ANSWER_WITHIN, answer).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => {
                log::error!(
                    "limits: the budget store's thread is gone: request admitted unchecked"
                );
                Err(false)
            }
            Err(_) => {
                self.metrics
                    .limits_store
                    .late
                    .fetch_add(1, Ordering::Relaxed);
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                let said = self.late_said.load(Ordering::Relaxed);
                if now.saturating_sub(said) >= REMIND_EVERY.as_millis() as u64
                    && self
                        .late_said
                        .compare_exchange(said, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    log::error!(
                        "limits: {} did not answer within {} s (a stalled disk, or another process holding its write lock): requests are admitted without their budget checked, and what they reserve and spend is written when it answers",
                        self.path.display(),
                        ANSWER_WITHIN.as_secs()
                    );
                }
                Err(true)
            }
        }
    }

    /// Reserves `cost` of every budget in `caps` (or of none) under `id`.
    pub(crate) async fn reserve(&self, caps: Caps, cost: Nanos, id: String) -> Reply {
        let (reply, answer) = oneshot::channel();
        if !self.send(Op::Reserve {
            caps,
            cost,
            id,
            reply,
        }) {
            return Reply::Gone;
        }
        match self.wait(answer).await {
            Ok(Ok(left)) => Reply::Reserved(left),
            Ok(Err((team, left))) => Reply::Refused { team, left },
            Err(true) => Reply::Late,
            Err(false) => Reply::Gone,
        }
    }

    /// Settles reservation `id` to `cost`; the budget left, once written (or
    /// kept in memory for a retry).
    pub(crate) async fn settle(
        &self,
        caps: Caps,
        id: String,
        held: Nanos,
        cost: Nanos,
    ) -> Option<Nanos> {
        let (reply, answer) = oneshot::channel();
        self.send(Op::Settle {
            caps,
            id,
            held,
            cost,
            reply: Some(reply),
        })
        .then_some(())?;
        // Late: still queued, written when the store can.
        self.wait(answer).await.ok()
    }

    /// Releases reservation `id` without waiting.
    pub(crate) fn release(&self, caps: Caps, id: String, held: Nanos) {
        self.send(Op::Settle {
            caps,
            id,
            held,
            cost: 0,
            reply: None,
        });
    }

    /// A budget's (spent, held).
    pub(crate) async fn state(&self, slot: Slot) -> Option<(Nanos, Nanos)> {
        let (reply, answer) = oneshot::channel();
        self.send(Op::State { slot, reply }).then_some(())?;
        self.wait(answer).await.ok()
    }
}

/// The store's thread: the connection, and what could not be written.
struct Worker {
    path: PathBuf,
    owner: String,
    metrics: Arc<Metrics>,
    conn: Option<Connection>,
    /// Settlements not written yet, oldest first.
    pending: Vec<Pending>,
    /// Reservations held in memory only (made while the file could not be
    /// written): row id → (slot, cost).
    mem_only: HashMap<String, (Slot, Nanos)>,
    /// The last (spent, held) read of each budget, for when even reads fail.
    seen: HashMap<Slot, (Nanos, Nanos)>,
    /// Since when the file cannot be written, and when that was last said.
    degraded: Option<(Instant, Instant)>,
    last_maintain: Instant,
}

/// What one request of a batch comes to.
enum Figure {
    Reserve(Result<Nanos, (bool, Nanos)>),
    Left(Nanos),
    State(Nanos, Nanos),
}

impl Op {
    /// Sends the request its answer.
    fn answer(self, f: Figure) {
        match (self, f) {
            (Op::Reserve { reply, .. }, Figure::Reserve(v)) => {
                let _ = reply.send(v);
            }
            (Op::Settle { reply, .. }, Figure::Left(v)) => {
                if let Some(r) = reply {
                    let _ = r.send(v);
                }
            }
            (Op::State { reply, .. }, Figure::State(s, h)) => {
                let _ = reply.send((s, h));
            }
            // Never: each figure is computed from its own request.
            _ => log::error!("limits: a budget store answer did not match its request"),
        }
    }
}

impl Worker {
    fn new(path: PathBuf, owner: String, metrics: Arc<Metrics>) -> Worker {
        let now = Instant::now();
        Worker {
            path,
            owner,
            metrics,
            conn: None,
            pending: Vec::new(),
            mem_only: HashMap::new(),
            seen: HashMap::new(),
            degraded: None,
            last_maintain: now,
        }
    }

    fn run(&mut self, rx: mpsc::Receiver<Op>) {
        loop {
            let wait = if self.pending.is_empty() && self.mem_only.is_empty() {
                MAINTAIN_EVERY
            } else {
                RETRY_EVERY
            };
            let mut batch = Vec::new();
            match rx.recv_timeout(wait) {
                Ok(op) => batch.push(op),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            self.step(batch);
        }
        // The last chance for what is kept in memory.
        self.step(Vec::new());
        if !self.pending.is_empty() {
            log::error!(
                "limits: {} budget settlement(s) ({} USD) could not be written to {} and are lost",
                self.pending.len(),
                super::format_usd(self.pending.iter().map(|p| p.cost).sum()),
                self.path.display()
            );
        }
    }

    fn conn(&mut self) -> rusqlite::Result<&mut Connection> {
        if self.conn.is_none() {
            if let Some(dir) = self.path.parent() {
                // A start on a full disk may not have made it.
                let _ = std::fs::create_dir_all(dir);
            }
            self.conn = Some(open_db(&self.path)?);
        }
        match self.conn.as_mut() {
            Some(c) => Ok(c),
            None => Err(rusqlite::Error::InvalidQuery),
        }
    }

    /// Runs one batch: what is kept in memory and the maintenance first
    /// (their own transaction), then the batch (one transaction); on a
    /// failure, the batch from memory.
    fn step(&mut self, batch: Vec<Op>) {
        let maintain_due = self.last_maintain.elapsed() >= MAINTAIN_EVERY;
        let flush = !self.pending.is_empty() || !self.mem_only.is_empty();
        let mut failed = None;
        if flush || maintain_due {
            match self.flush(maintain_due) {
                Ok(()) => {
                    if maintain_due {
                        self.last_maintain = Instant::now();
                    }
                }
                Err(e) => failed = Some(e),
            }
        }
        if batch.is_empty() {
            if let Some(e) = failed {
                self.still_failing(&e);
            }
            return;
        }
        if failed.is_none() {
            match self.write_batch(&batch) {
                Ok(figures) => {
                    for (op, f) in batch.into_iter().zip(figures) {
                        op.answer(f);
                    }
                    return;
                }
                Err(e) => failed = Some(e),
            }
        }
        let e = failed.unwrap_or(rusqlite::Error::InvalidQuery);
        self.answer_from_memory(batch, &e);
    }

    /// Writes what is kept in memory (and renews leases, drops ended ones).
    fn flush(&mut self, maintain_due: bool) -> rusqlite::Result<()> {
        let owner = self.owner.clone();
        let pending = self.pending.clone();
        let mem: Vec<(String, Slot, Nanos)> = self
            .mem_only
            .iter()
            .map(|(id, (s, c))| (id.clone(), s.clone(), *c))
            .collect();
        let c = self.conn()?;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for p in &pending {
            if let Some(id) = &p.id {
                unhold(&tx, id, &p.slot, p.held)?;
            }
            add(&tx, &p.slot, p.cost, 0)?;
        }
        for (id, slot, cost) in &mem {
            hold(&tx, id, slot, *cost, &owner)?;
        }
        let dropped = if maintain_due {
            maintain(&tx, &owner)?
        } else {
            0
        };
        tx.commit()?;
        if dropped > 0 {
            log::warn!(
                "limits: gave back {dropped} budget reservation(s) whose lease ended (their process died)"
            );
        }
        self.pending.clear();
        self.mem_only.clear();
        if pending.is_empty() && mem.is_empty() {
            // Nothing was written (a commit without changes succeeds on a
            // full disk): this says nothing about the file.
            return Ok(());
        }
        self.recovered(&format!(
            ": {} budget settlement(s) ({} USD) and {} reservation(s) kept in memory are in it",
            pending.len(),
            super::format_usd(pending.iter().map(|p| p.cost).sum()),
            mem.len()
        ));
        Ok(())
    }

    /// Runs the batch in one transaction: each request's figures.
    fn write_batch(&mut self, batch: &[Op]) -> rusqlite::Result<Vec<Figure>> {
        let owner = self.owner.clone();
        let c = self.conn()?;
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut figures = Vec::with_capacity(batch.len());
        let mut seen = Vec::with_capacity(batch.len());
        let mut wrote = false;
        for op in batch {
            figures.push(match op {
                Op::Reserve { caps, cost, id, .. } => {
                    // Every budget is read first: all fit, or nothing is held.
                    let mut figs = [(0, 0); 2];
                    let mut refused = None;
                    for (i, cap) in caps.iter().enumerate() {
                        let Some(cap) = cap else { continue };
                        let (spent, held) = read(&tx, &cap.slot)?;
                        figs[i] = (spent, held);
                        let left = cap.budget - spent - held;
                        if *cost > left && refused.is_none() {
                            refused = Some((cap.slot.team, left));
                        }
                    }
                    match refused {
                        Some(r) => {
                            for (cap, f) in caps.iter().zip(figs) {
                                if let Some(cap) = cap {
                                    seen.push((cap.slot.clone(), f));
                                }
                            }
                            Figure::Reserve(Err(r))
                        }
                        None => {
                            for (cap, (spent, held)) in caps.iter().zip(figs) {
                                let Some(cap) = cap else { continue };
                                if *cost != 0 {
                                    hold(&tx, &row_id(id, &cap.slot), &cap.slot, *cost, &owner)?;
                                    wrote = true;
                                }
                                seen.push((cap.slot.clone(), (spent, held + cost)));
                            }
                            Figure::Reserve(Ok(min_left(caps.iter().zip(figs).filter_map(
                                |(cap, (spent, held))| {
                                    cap.as_ref().map(|c| c.budget - spent - held - cost)
                                },
                            ))))
                        }
                    }
                }
                Op::Settle {
                    caps,
                    id,
                    held,
                    cost,
                    ..
                } => {
                    let mut left = None;
                    for cap in caps.iter().flatten() {
                        if *held != 0 {
                            unhold(&tx, &row_id(id, &cap.slot), &cap.slot, *held)?;
                        }
                        add(&tx, &cap.slot, *cost, 0)?;
                        wrote |= *held != 0 || *cost != 0;
                        let (spent, held) = read(&tx, &cap.slot)?;
                        seen.push((cap.slot.clone(), (spent, held)));
                        left = super::least(left, Some(cap.budget - spent - held));
                    }
                    Figure::Left(left.unwrap_or(0))
                }
                Op::State { slot, .. } => {
                    let (spent, held) = read(&tx, slot)?;
                    seen.push((slot.clone(), (spent, held)));
                    Figure::State(spent, held)
                }
            });
        }
        tx.commit()?;
        // What the file held, for when it later cannot even be read.
        self.seen.extend(seen);
        if wrote {
            self.recovered("");
        }
        Ok(figures)
    }

    /// A budget as this process sees it while the file cannot be written:
    /// the file as read now (as last read, if even that fails), the
    /// settlements not written yet, the reservations held in memory.
    fn view(&mut self, slot: &Slot) -> (Nanos, Nanos) {
        let fresh = self.conn().ok().and_then(|c| read(c, slot).ok());
        let (mut spent, mut held) = match fresh {
            Some(v) => {
                self.seen.insert(slot.clone(), v);
                v
            }
            None => self.seen.get(slot).copied().unwrap_or((0, 0)),
        };
        for p in self.pending.iter().filter(|p| &p.slot == slot) {
            spent += p.cost;
            if p.id.is_some() {
                held -= p.held;
            }
        }
        for (s, cost) in self.mem_only.values() {
            if s == slot {
                held += cost;
            }
        }
        (spent, held.max(0))
    }

    /// Answers a batch that could not be written, from memory.
    fn answer_from_memory(&mut self, batch: Vec<Op>, e: &rusqlite::Error) {
        let writes = batch.iter().filter(|op| op.writes()).count() as u64;
        self.metrics
            .limits_store
            .write_failures
            .fetch_add(writes, Ordering::Relaxed);
        for op in batch {
            let figure = match &op {
                Op::Reserve { caps, cost, id, .. } => {
                    let mut lefts = [0; 2];
                    let mut refused = None;
                    for (i, cap) in caps.iter().enumerate() {
                        let Some(cap) = cap else { continue };
                        let (spent, held) = self.view(&cap.slot);
                        lefts[i] = cap.budget - spent - held;
                        if *cost > lefts[i] && refused.is_none() {
                            refused = Some((cap.slot.team, lefts[i]));
                        }
                    }
                    match refused {
                        Some(r) => Figure::Reserve(Err(r)),
                        None => {
                            for cap in caps.iter().flatten() {
                                if *cost != 0 {
                                    self.mem_only.insert(
                                        row_id(id, &cap.slot).into_owned(),
                                        (cap.slot.clone(), *cost),
                                    );
                                }
                            }
                            Figure::Reserve(Ok(min_left(
                                caps.iter()
                                    .zip(lefts)
                                    .filter_map(|(c, l)| c.as_ref().map(|_| l - cost)),
                            )))
                        }
                    }
                }
                Op::Settle {
                    caps,
                    id,
                    held,
                    cost,
                    ..
                } => {
                    let mut left = None;
                    for cap in caps.iter().flatten() {
                        let row = row_id(id, &cap.slot).into_owned();
                        let in_file = self.mem_only.remove(&row).is_none() && *held != 0;
                        if in_file || *cost != 0 {
                            self.pending.push(Pending {
                                slot: cap.slot.clone(),
                                id: in_file.then_some(row),
                                held: *held,
                                cost: *cost,
                            });
                        }
                        let (spent, held) = self.view(&cap.slot);
                        left = super::least(left, Some(cap.budget - spent - held));
                    }
                    Figure::Left(left.unwrap_or(0))
                }
                Op::State { slot, .. } => {
                    let (spent, held) = self.view(slot);
                    Figure::State(spent, held)
                }
            };
            op.answer(figure);
        }
        self.still_failing(e);
    }

    /// Updates the gauges and says (at most every [`REMIND_EVERY`]) that the
    /// file cannot be written.
    fn still_failing(&mut self, e: &rusqlite::Error) {
        // A connection that failed is opened afresh on the next try.
        if !matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull || f.code == rusqlite::ErrorCode::DatabaseBusy)
        {
            self.conn = None;
        }
        let unwritten: Nanos = self.pending.iter().map(|p| p.cost).sum();
        let m = &self.metrics.limits_store;
        m.degraded.store(1, Ordering::Relaxed);
        m.unwritten
            .store(self.pending.len() as i64, Ordering::Relaxed);
        m.unwritten_nanos.store(unwritten, Ordering::Relaxed);
        let now = Instant::now();
        let say = match &mut self.degraded {
            None => {
                self.degraded = Some((now, now));
                true
            }
            Some((_, said)) if said.elapsed() >= REMIND_EVERY => {
                *said = now;
                true
            }
            Some(_) => false,
        };
        if say {
            let since = self.degraded.map_or(0, |(s, _)| s.elapsed().as_secs());
            log::error!(
                "limits: cannot write {} ({e}) for {since} s: serving degraded; {} budget settlement(s) ({} USD) and {} reservation(s) kept in memory, retried every second; other processes on this data directory do not see them until it is written",
                self.path.display(),
                self.pending.len(),
                super::format_usd(unwritten),
                self.mem_only.len()
            );
        }
    }

    /// After a write succeeded: the gauges back to normal, and said once.
    fn recovered(&mut self, what: &str) {
        let m = &self.metrics.limits_store;
        let was = self.degraded.take().is_some();
        if m.degraded.swap(0, Ordering::Relaxed) != 0 || was {
            m.unwritten.store(0, Ordering::Relaxed);
            m.unwritten_nanos.store(0, Ordering::Relaxed);
            log::warn!(
                "limits: {} is written again{what}; budgets are shared with the other processes on this data directory again",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("switchboard-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A file from before reservations were shared keeps its spend and
    /// gets the new column and table.
    #[test]
    fn a_file_from_before_is_brought_up_to_date() {
        let dir = tmp("migrate");
        let path = dir.join(FILE);
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE budget_spend (key_id TEXT NOT NULL, period TEXT NOT NULL,
                     spent_nanos INTEGER NOT NULL, updated_at INTEGER NOT NULL,
                     PRIMARY KEY (key_id, period));
                 INSERT INTO budget_spend VALUES ('k', 'total', 70, 1);",
            )
            .unwrap();
        }
        let c = open_db(&path).unwrap();
        let slot = Slot {
            key: "k".into(),
            period: "total".into(),
            team: false,
        };
        assert_eq!(read(&c, &slot).unwrap(), (70, 0));
        hold(&c, "a-1", &slot, 20, "a").unwrap();
        assert_eq!(read(&c, &slot).unwrap(), (70, 20));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A live process renews its leases; the ended lease of one that died
    /// is given back by the next check of any process.
    #[test]
    fn ended_leases_are_given_back_and_live_ones_renewed() {
        let dir = tmp("lease");
        let c = open_db(&dir.join(FILE)).unwrap();
        let slot = Slot {
            key: "k".into(),
            period: "total".into(),
            team: false,
        };
        hold(&c, "dead-1", &slot, 30, "dead").unwrap();
        hold(&c, "live-1", &slot, 20, "live").unwrap();
        assert_eq!(read(&c, &slot).unwrap(), (0, 50));
        // Both leases ended a while ago; the live process renews its own.
        c.execute("UPDATE budget_held SET expires_at = 0", [])
            .unwrap();
        assert_eq!(maintain(&c, "live").unwrap(), 1);
        assert_eq!(read(&c, &slot).unwrap(), (0, 20));
        // The dead one's settlement, if it ever came, holds nothing back twice.
        assert!(!unhold(&c, "dead-1", &slot, 30).unwrap());
        assert!(unhold(&c, "live-1", &slot, 20).unwrap());
        assert_eq!(read(&c, &slot).unwrap(), (0, 0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A reserve over a key's budget and its team's holds both or neither
    /// (a key and a team of one name apart), and its settlement reaches both.
    #[test]
    fn a_joint_reserve_holds_both_budgets_or_neither() {
        let dir = tmp("joint");
        let mut w = Worker::new(dir.join(FILE), "o".into(), Arc::new(Metrics::default()));
        let slot = |team| Slot {
            key: "ml".into(),
            period: "total".into(),
            team,
        };
        let caps = |key_cap, team_cap| {
            [
                Some(Cap {
                    slot: slot(false),
                    budget: key_cap,
                }),
                Some(Cap {
                    slot: slot(true),
                    budget: team_cap,
                }),
            ]
        };
        let reserve = |caps, id: &str| Op::Reserve {
            caps,
            cost: 40,
            id: id.into(),
            reply: oneshot::channel().0,
        };
        let figures = w
            .write_batch(&[
                reserve(caps(100, 50), "r1"),
                // The team's 10 left refuses; the key's 60 would fit.
                reserve(caps(100, 50), "r2"),
                // The key's refuses; the team's would fit.
                reserve(caps(70, 1000), "r3"),
            ])
            .unwrap();
        let got: Vec<_> = figures
            .iter()
            .map(|f| match f {
                Figure::Reserve(r) => *r,
                _ => panic!("not a reserve's figure"),
            })
            .collect();
        assert_eq!(got, [Ok(10), Err((true, 10)), Err((false, 30))]);
        let c = w.conn().unwrap();
        assert_eq!(read(c, &slot(false)).unwrap(), (0, 40));
        assert_eq!(read(c, &slot(true)).unwrap(), (0, 40));
        let figures = w
            .write_batch(&[Op::Settle {
                caps: caps(100, 50),
                id: "r1".into(),
                held: 40,
                cost: 25,
                reply: None,
            }])
            .unwrap();
        assert!(matches!(figures[..], [Figure::Left(25)]));
        let c = w.conn().unwrap();
        assert_eq!(read(c, &slot(false)).unwrap(), (25, 0));
        assert_eq!(read(c, &slot(true)).unwrap(), (25, 0));
        let rows: i64 = c
            .query_row("SELECT COUNT(*) FROM budget_held", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
