//! The usage ledger (docs/operations.md "Usage ledger"): one row per inference request, written off
//! the request path.
//!
//! The request path only builds a [`Row`] and `try_send`s it on a bounded
//! channel ([`Ledger::record`]): it never waits, and a full channel counts the
//! row as dropped. One writer thread drains the channel and writes batches
//! (while a batch fills it polls the channel every few milliseconds rather
//! than waiting on it, so requests never wake it one by one),
//! one transaction each (every [`BATCH_ROWS`] rows or [`FLUSH_EVERY`] after the
//! first row of a batch, whichever comes first), through a [`Backend`]: the
//! embedded SQLite file (`ledger_sqlite`) or PostgreSQL (`ledger_pg`).
//!
//! A failed write keeps its rows for a retry with a growing back-off (a
//! database restarting loses nothing), as long as the rows held stay within
//! the queue bound; past it rows are dropped and counted. Each batch also
//! adds its sums to the daily rollups (per UTC day, key and model) in the same
//! transaction, so a rollup never disagrees with the rows it summarises; rows
//! older than the retention are deleted hourly, rollups are kept.
//! [`Ledger::close`] (graceful shutdown) writes what is queued before exit.

pub mod pg;
pub mod sqlite;

use crate::obs::metrics::{LedgerCounters, Metrics};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Rows written in one transaction, at most.
pub const BATCH_ROWS: usize = 256;
/// The longest a row waits for its batch to fill.
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// How often a writer with a batch filling takes what is queued: short
/// enough that the queue never nears its bound between looks.
const POLL_WHILE_FILLING: Duration = Duration::from_millis(10);
/// Rows queued and held for a retry, at most, unless `--ledger-queue` says otherwise.
pub const DEFAULT_QUEUE: usize = 10_000;
/// Days of rows kept, unless `--ledger-retention-days` says otherwise.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;
/// How often rows past the retention are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(3600);
/// Retry back-off after a failed write: first and longest wait.
const BACKOFF_MIN: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

const DAY_MS: i64 = 86_400_000;

/// One inference request, as the ledger keeps it (the access line's figures).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub request_id: String,
    /// When the request finished, unix milliseconds.
    pub time_ms: i64,
    /// The key's id, never the key.
    pub key_id: String,
    pub family: &'static str,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub upstream_protocol: Option<&'static str>,
    pub upstream_host: Option<String>,
    pub status: u16,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub latency_ms: f64,
    pub ttft_ms: Option<f64>,
}

/// The current time in unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A token count as SQL integer (counts never come near `i64::MAX`).
pub fn sql_int(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// Sums of requests, tokens and cost: a rollup cell, or a group of the usage API.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Sums {
    pub requests: i64,
    /// Requests answered with a status of 400 or more.
    pub errors: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub reasoning_tokens: i64,
    pub cost_usd: f64,
}

impl Sums {
    fn add_row(&mut self, r: &Row) {
        self.requests += 1;
        self.errors += i64::from(r.status >= 400);
        self.input_tokens += sql_int(r.input_tokens).unwrap_or(0);
        self.output_tokens += sql_int(r.output_tokens).unwrap_or(0);
        self.cached_tokens += sql_int(r.cached_tokens).unwrap_or(0);
        self.reasoning_tokens += sql_int(r.reasoning_tokens).unwrap_or(0);
        self.cost_usd += r.cost_usd.unwrap_or(0.0);
    }

    /// Adds `o` into these sums.
    pub fn add(&mut self, o: &Sums) {
        self.requests += o.requests;
        self.errors += o.errors;
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cached_tokens += o.cached_tokens;
        self.reasoning_tokens += o.reasoning_tokens;
        self.cost_usd += o.cost_usd;
    }
}

/// A rollup cell's key: UTC day (`YYYY-MM-DD`), key id, provider, model
/// (`""` for a request that failed before its model was known).
pub type DailyKey = (String, String, String, String);

/// A batch summed per UTC day, key and model: what the batch adds to the rollups.
pub fn rollup(rows: &[Row]) -> BTreeMap<DailyKey, Sums> {
    let mut out: BTreeMap<DailyKey, Sums> = BTreeMap::new();
    for r in rows {
        let k = (
            day_string(r.time_ms.div_euclid(DAY_MS)),
            r.key_id.clone(),
            r.provider.clone().unwrap_or_default(),
            r.model.clone().unwrap_or_default(),
        );
        out.entry(k).or_default().add_row(r);
    }
    out
}

/// `YYYY-MM-DD` of a day count since 1970-01-01.
pub fn day_string(days: i64) -> String {
    let (y, m, d) = crate::util::rfc3339::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`, the inverse of `rfc3339::civil_from_days`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Where a writer puts rows: the embedded SQLite file or PostgreSQL.
pub trait Backend: Send {
    /// Writes `rows` and adds their sums to the daily rollups, in one transaction.
    fn write(&mut self, rows: &[Row]) -> Result<(), String>;
    /// Deletes the rows older than `before_ms` (rollups stay); how many went.
    fn purge(&mut self, before_ms: i64) -> Result<u64, String>;
    /// For logs: `sqlite FILE` or `postgres HOST`.
    fn describe(&self) -> String;
}

/// Tunables of the writer.
#[derive(Debug, Clone)]
pub struct LedgerSettings {
    /// Rows the channel holds, and rows the writer may hold for a retry.
    pub queue: usize,
    pub batch_rows: usize,
    pub flush_every: Duration,
    /// Rows older than this many days are deleted.
    pub retention_days: u32,
}

impl Default for LedgerSettings {
    fn default() -> Self {
        LedgerSettings {
            queue: DEFAULT_QUEUE,
            batch_rows: BATCH_ROWS,
            flush_every: FLUSH_EVERY,
            retention_days: DEFAULT_RETENTION_DAYS,
        }
    }
}

enum Msg {
    Row(Box<Row>),
    /// Write everything queued, then stop.
    Close,
}

/// Builds the writer's backend, on the writer's thread.
pub type BackendFactory = Box<dyn FnOnce() -> Result<Box<dyn Backend>, String> + Send>;

/// The writer, before and after it starts.
enum WriterState {
    /// Not started: rows queue on the channel meanwhile.
    Idle(Receiver<Msg>, BackendFactory, LedgerSettings),
    Running(JoinHandle<()>),
    Closed,
}

/// The handle the gateway records rows through.
///
/// The writer thread starts in [`Ledger::start_writer`], called from Pingora's
/// services ([`LedgerService`]) so that it starts after Pingora daemonizes
/// (`-d` forks, and a thread started before a fork does not exist in the
/// child); rows recorded before it starts wait on the channel.
pub struct Ledger {
    tx: SyncSender<Msg>,
    metrics: Arc<Metrics>,
    writer: Mutex<WriterState>,
}

impl Ledger {
    /// A ledger whose writer will write through the backend `factory` makes.
    pub fn new(factory: BackendFactory, settings: LedgerSettings, metrics: Arc<Metrics>) -> Ledger {
        let (tx, rx) = std::sync::mpsc::sync_channel(settings.queue.max(1));
        let settings = LedgerSettings {
            batch_rows: settings.batch_rows.clamp(1, settings.queue.max(1)),
            ..settings
        };
        Ledger {
            tx,
            metrics,
            writer: Mutex::new(WriterState::Idle(rx, factory, settings)),
        }
    }

    /// A ledger over `backend` with its writer running.
    pub fn start(
        backend: Box<dyn Backend>,
        settings: LedgerSettings,
        metrics: Arc<Metrics>,
    ) -> Result<Ledger, String> {
        let ledger = Ledger::new(Box::new(move || Ok(backend)), settings, metrics);
        ledger.start_writer()?;
        Ok(ledger)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, WriterState> {
        match self.writer.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Starts the writer thread (once; later calls do nothing).
    pub fn start_writer(&self) -> Result<(), String> {
        let mut state = self.state();
        let WriterState::Idle(..) = &*state else {
            return Ok(());
        };
        let WriterState::Idle(rx, factory, settings) =
            std::mem::replace(&mut *state, WriterState::Closed)
        else {
            return Ok(());
        };
        let m = self.metrics.clone();
        let worker = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || match factory() {
                Ok(backend) => Writer::new(backend, settings, m).run(rx),
                Err(e) => {
                    log::error!("usage ledger unavailable, its rows are dropped: {e}");
                    while let Ok(Msg::Row(_)) = rx.recv() {
                        m.ledger.dropped_failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .map_err(|e| format!("cannot start the ledger writer: {e}"))?;
        *state = WriterState::Running(worker);
        Ok(())
    }

    /// Queues a row; never waits. A full queue (or a stopped writer) counts it as dropped.
    pub fn record(&self, row: Row) {
        match self.tx.try_send(Msg::Row(Box::new(row))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.metrics
                    .ledger
                    .dropped_full
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Writes what is queued and stops the writer, waiting at most `timeout`.
    /// Rows recorded after this are dropped (and counted).
    pub fn close(&self, timeout: Duration) {
        // Rows queued before the writer ever started are written too.
        if let Err(e) = self.start_writer() {
            log::warn!("ledger: {e}");
        }
        let worker = match std::mem::replace(&mut *self.state(), WriterState::Closed) {
            WriterState::Running(w) => w,
            _ => return,
        };
        let deadline = Instant::now() + timeout;
        // The queue may be full: wait for room, but not past the deadline.
        let mut msg = Msg::Close;
        loop {
            match self.tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => break,
                Err(TrySendError::Full(m)) => {
                    if Instant::now() >= deadline {
                        log::warn!("ledger: the writer did not take the close request in time");
                        return;
                    }
                    msg = m;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        while !worker.is_finished() {
            if Instant::now() >= deadline {
                log::warn!(
                    "ledger: {} rows still unwritten at exit",
                    self.metrics.ledger.pending.load(Ordering::Relaxed)
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = worker.join();
    }
}

/// Starts the ledger's writer as one of Pingora's services (after daemonizing).
pub struct LedgerService(pub Arc<Ledger>);

#[async_trait::async_trait]
impl pingora_core::services::background::BackgroundService for LedgerService {
    async fn start(&self, _shutdown: pingora_core::server::ShutdownWatch) {
        if let Err(e) = self.0.start_writer() {
            log::error!("{e}");
        }
    }
}

struct Writer {
    backend: Box<dyn Backend>,
    settings: LedgerSettings,
    metrics: Arc<Metrics>,
    /// Rows taken off the channel, oldest first: the next batches.
    held: VecDeque<Row>,
    /// When the oldest held row arrived (a batch is written by `flush_every` after it).
    oldest: Option<Instant>,
    /// After a failed write: no new attempt before this.
    retry_at: Option<Instant>,
    backoff: Duration,
    next_purge: Instant,
}

impl Writer {
    fn new(backend: Box<dyn Backend>, settings: LedgerSettings, metrics: Arc<Metrics>) -> Writer {
        log::info!(
            "usage ledger: {} (batches of {} rows or {:?}, queue {}, rows kept {} days)",
            backend.describe(),
            settings.batch_rows,
            settings.flush_every,
            settings.queue,
            settings.retention_days
        );
        Writer {
            backend,
            settings,
            metrics,
            held: VecDeque::new(),
            oldest: None,
            retry_at: None,
            backoff: BACKOFF_MIN,
            next_purge: Instant::now(),
        }
    }

    fn counters(&self) -> &LedgerCounters {
        &self.metrics.ledger
    }

    fn set_pending(&self) {
        self.counters().pending.store(
            i64::try_from(self.held.len()).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Takes a row off the channel: held, or dropped when the writer already holds its bound.
    fn hold(&mut self, row: Row) {
        if self.held.len() >= self.settings.queue.max(1) {
            self.counters()
                .dropped_failed
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.held.is_empty() {
            self.oldest = Some(Instant::now());
        }
        self.held.push_back(row);
    }

    /// Writes held rows in batches while a batch is due (full, old enough, or
    /// `all`), unless waiting out a back-off. Stops at the first failure.
    fn flush(&mut self, all: bool) {
        loop {
            if self.held.is_empty() {
                self.oldest = None;
                break;
            }
            let due = all
                || self.held.len() >= self.settings.batch_rows
                || self
                    .oldest
                    .is_some_and(|t| t.elapsed() >= self.settings.flush_every);
            if !due || self.retry_at.is_some_and(|t| Instant::now() < t) {
                break;
            }
            let n = self.held.len().min(self.settings.batch_rows);
            match self.backend.write(&self.held.make_contiguous()[..n]) {
                Ok(()) => {
                    self.held.drain(..n);
                    self.counters()
                        .written
                        .fetch_add(n as u64, Ordering::Relaxed);
                    if self.retry_at.take().is_some() {
                        log::info!("ledger: writing again ({})", self.backend.describe());
                    }
                    self.backoff = BACKOFF_MIN;
                }
                Err(e) => {
                    if self.retry_at.is_none() {
                        log::warn!(
                            "ledger: cannot write {n} rows ({}): {e}; holding them (at most {}) and retrying",
                            self.backend.describe(),
                            self.settings.queue
                        );
                    } else {
                        log::debug!("ledger: retry failed: {e}");
                    }
                    self.retry_at = Some(Instant::now() + self.backoff);
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                    break;
                }
            }
        }
        self.set_pending();
    }

    fn purge_if_due(&mut self) {
        if Instant::now() < self.next_purge {
            return;
        }
        let before = now_ms() - i64::from(self.settings.retention_days) * DAY_MS;
        match self.backend.purge(before) {
            Ok(n) => {
                if n > 0 {
                    log::info!(
                        "ledger: deleted {n} rows older than {} days",
                        self.settings.retention_days
                    );
                }
                self.next_purge = Instant::now() + PURGE_EVERY;
            }
            Err(e) => {
                log::debug!("ledger: retention purge failed: {e}");
                self.next_purge = Instant::now() + Duration::from_secs(60);
            }
        }
    }

    /// How long to wait for the next row before something else is due: the
    /// purge, or the held rows' batch (not before a back-off ends).
    fn wait(&self) -> Duration {
        let now = Instant::now();
        let mut until = self.next_purge;
        if let Some(oldest) = self.oldest.filter(|_| !self.held.is_empty()) {
            let mut due = if self.held.len() >= self.settings.batch_rows {
                now
            } else {
                oldest + self.settings.flush_every
            };
            if let Some(r) = self.retry_at {
                due = due.max(r);
            }
            until = until.min(due);
        }
        until
            .saturating_duration_since(now)
            .max(Duration::from_millis(1))
    }

    fn run(mut self, rx: Receiver<Msg>) {
        loop {
            self.purge_if_due();
            if self.held.is_empty() {
                // Idle: the first row of the next batch wakes the writer.
                match rx.recv_timeout(self.wait()) {
                    Ok(Msg::Row(r)) => self.hold(*r),
                    Ok(Msg::Close) => return self.finish(&rx),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return self.finish(&rx),
                }
            } else {
                // A batch is filling: the writer naps instead of waiting on
                // the channel, so a request's row never has to wake a parked
                // thread (a futex call and a context switch per request).
                std::thread::sleep(self.wait().min(POLL_WHILE_FILLING));
            }
            // Take whatever is queued; it is written in batches below.
            loop {
                match rx.try_recv() {
                    Ok(Msg::Row(r)) => self.hold(*r),
                    Ok(Msg::Close) => return self.finish(&rx),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return self.finish(&rx),
                }
            }
            self.flush(false);
        }
    }

    /// Shutdown: everything queued is written (one more try even in a back-off).
    fn finish(mut self, rx: &Receiver<Msg>) {
        while let Ok(m) = rx.try_recv() {
            if let Msg::Row(r) = m {
                self.hold(*r);
            }
        }
        self.retry_at = None;
        self.flush(true);
        if !self.held.is_empty() {
            let n = self.held.len() as u64;
            log::warn!("ledger: {n} rows could not be written before exit");
            self.counters()
                .dropped_failed
                .fetch_add(n, Ordering::Relaxed);
            self.held.clear();
            self.set_pending();
        } else {
            log::info!("ledger: queue flushed");
        }
    }
}

/// What `GET /admin/usage` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Key,
    Model,
    Day,
}

impl GroupBy {
    pub fn parse(s: &str) -> Option<GroupBy> {
        match s {
            "key" => Some(GroupBy::Key),
            "model" => Some(GroupBy::Model),
            "day" => Some(GroupBy::Day),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Key => "key",
            GroupBy::Model => "model",
            GroupBy::Day => "day",
        }
    }
}

/// A `from` / `to` bound: a whole UTC day (`YYYY-MM-DD`, inclusive) or an
/// instant (RFC 3339; `from` inclusive, `to` exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Days since 1970-01-01.
    Day(i64),
    /// Unix milliseconds.
    Instant(i64),
}

impl Bound {
    /// Parses `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
    pub fn parse(s: &str) -> Option<Bound> {
        let b = s.as_bytes();
        let num = |r: std::ops::Range<usize>| -> Option<i64> {
            let t = s.get(r)?;
            t.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| t.parse().ok())?
        };
        if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
            return None;
        }
        let days = days_from_civil(y, u32::try_from(mo).ok()?, u32::try_from(d).ok()?);
        // Reject dates that do not exist (2026-02-30).
        if day_string(days) != s[..10] {
            return None;
        }
        if b.len() == 10 {
            return Some(Bound::Day(days));
        }
        if !matches!(b[10], b'T' | b't' | b' ') || b.len() < 20 || b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if h > 23 || mi > 59 || sec > 60 {
            return None;
        }
        let mut i = 19;
        let mut ms = 0i64;
        if b[i] == b'.' {
            let start = i + 1;
            i = start;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == start {
                return None;
            }
            let frac = &s[start..i.min(start + 3)];
            ms = frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
        }
        let offset_min = match &s[i..] {
            "Z" | "z" => 0,
            o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
                let oh = num(i + 1..i + 3)?;
                let om = num(i + 4..i + 6)?;
                let sign = if o.starts_with('-') { -1 } else { 1 };
                sign * (oh * 60 + om)
            }
            _ => return None,
        };
        let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
        Some(Bound::Instant(secs * 1000 + ms))
    }

    /// The first millisecond this bound admits (as `from`).
    pub fn start_ms(self) -> i64 {
        match self {
            Bound::Day(d) => d * DAY_MS,
            Bound::Instant(ms) => ms,
        }
    }

    /// The first millisecond past this bound (as `to`).
    pub fn end_ms(self) -> i64 {
        match self {
            Bound::Day(d) => (d + 1) * DAY_MS,
            Bound::Instant(ms) => ms,
        }
    }
}

/// A `GET /admin/usage` query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageQuery {
    /// Key id.
    pub key: Option<String>,
    /// `model_id` or `provider/model_id`.
    pub model: Option<String>,
    pub from: Option<Bound>,
    pub to: Option<Bound>,
    pub group_by: Option<GroupBy>,
}

impl UsageQuery {
    /// The day range (`YYYY-MM-DD`, inclusive) when every bound is a whole
    /// day: then the rollups answer (they outlive the rows' retention).
    /// `None` when a bound is an instant: then the rows answer.
    pub fn day_range(&self) -> Option<(Option<String>, Option<String>)> {
        let day = |b: Option<Bound>| match b {
            None => Some(None),
            Some(Bound::Day(d)) => Some(Some(day_string(d))),
            Some(Bound::Instant(_)) => None,
        };
        Some((day(self.from)?, day(self.to)?))
    }
}

/// One group of a usage answer: its key (absent without `group_by`) and sums.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The key id, `provider/model_id` (`""` when the model was never
    /// resolved), or `YYYY-MM-DD`.
    pub value: String,
    pub sums: Sums,
}

/// The answer to a usage query.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    /// `rollups` (whole days) or `rows` (a bound was an instant).
    pub source: &'static str,
    pub groups: Vec<Group>,
}

/// Where the admin API reads the ledger from.
#[derive(Debug, Clone)]
pub enum Reader {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl Reader {
    /// Sums of the ledger for `q`.
    pub async fn usage(&self, q: &UsageQuery) -> Result<Usage, String> {
        match self {
            Reader::Sqlite(path) => {
                let (path, q) = (path.clone(), q.clone());
                tokio::task::spawn_blocking(move || sqlite::usage(&path, &q))
                    .await
                    .map_err(|e| format!("ledger query task failed: {e}"))?
            }
            Reader::Postgres(url) => pg::usage(url, q).await,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, model: &str, time_ms: i64, status: u16) -> Row {
        Row {
            request_id: "r".into(),
            time_ms,
            key_id: key.into(),
            family: "openai",
            provider: Some("openai".into()),
            model: Some(model.into()),
            upstream_protocol: Some("openai"),
            upstream_host: Some("h".into()),
            status,
            input_tokens: Some(10),
            output_tokens: Some(5),
            cached_tokens: None,
            reasoning_tokens: Some(2),
            cost_usd: Some(0.5),
            latency_ms: 1.0,
            ttft_ms: None,
        }
    }

    #[test]
    fn bounds_parse() {
        assert_eq!(Bound::parse("1970-01-02"), Some(Bound::Day(1)));
        assert_eq!(Bound::parse("2026-02-30"), None);
        assert_eq!(Bound::parse("2026-13-01"), None);
        assert_eq!(
            Bound::parse("1970-01-01T00:00:01Z"),
            Some(Bound::Instant(1000))
        );
        assert_eq!(
            Bound::parse("1970-01-01T00:00:01.5Z"),
            Some(Bound::Instant(1500))
        );
        assert_eq!(
            Bound::parse("1970-01-01T01:00:00+01:00"),
            Some(Bound::Instant(0))
        );
        assert_eq!(Bound::parse("1970-01-01T00:00:00"), None);
        assert_eq!(Bound::parse("yesterday"), None);
        for d in [-1000, 0, 19_000, 20_454, 100_000] {
            assert_eq!(Bound::parse(&day_string(d)), Some(Bound::Day(d)));
        }
        assert_eq!(Bound::Day(1).end_ms(), 2 * DAY_MS);
    }

    #[test]
    fn rollup_sums_per_day_key_model() {
        let rows = [
            row("a", "m", 0, 200),
            row("a", "m", DAY_MS - 1, 500),
            row("a", "m", DAY_MS, 200),
            row("b", "m", 0, 200),
        ];
        let r = rollup(&rows);
        assert_eq!(r.len(), 3);
        let first = &r[&(
            "1970-01-01".to_string(),
            "a".to_string(),
            "openai".to_string(),
            "m".to_string(),
        )];
        assert_eq!((first.requests, first.errors), (2, 1));
        assert_eq!((first.input_tokens, first.reasoning_tokens), (20, 4));
        assert_eq!(first.cost_usd, 1.0);
    }

    #[test]
    fn day_range_only_for_whole_days() {
        let mut q = UsageQuery {
            from: Bound::parse("2026-01-01"),
            ..UsageQuery::default()
        };
        assert_eq!(q.day_range(), Some((Some("2026-01-01".to_string()), None)));
        q.to = Bound::parse("2026-01-01T10:00:00Z");
        assert_eq!(q.day_range(), None);
    }

    struct Flaky {
        fail: Arc<std::sync::atomic::AtomicBool>,
        rows: Arc<Mutex<Vec<Row>>>,
    }

    impl Backend for Flaky {
        fn write(&mut self, rows: &[Row]) -> Result<(), String> {
            if self.fail.load(Ordering::SeqCst) {
                return Err("down".into());
            }
            self.rows.lock().unwrap().extend_from_slice(rows);
            Ok(())
        }
        fn purge(&mut self, _: i64) -> Result<u64, String> {
            Ok(0)
        }
        fn describe(&self) -> String {
            "flaky".into()
        }
    }

    #[test]
    fn failed_writes_are_held_retried_and_bounded() {
        let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let rows = Arc::new(Mutex::new(Vec::new()));
        let metrics = Arc::new(Metrics::default());
        let ledger = Ledger::start(
            Box::new(Flaky {
                fail: fail.clone(),
                rows: rows.clone(),
            }),
            LedgerSettings {
                queue: 5,
                batch_rows: 2,
                flush_every: Duration::from_millis(10),
                retention_days: 1,
            },
            metrics.clone(),
        )
        .unwrap();
        for i in 0..8 {
            ledger.record(row("k", "m", i, 200));
            std::thread::sleep(Duration::from_millis(5));
        }
        let until = |what: &str, f: &dyn Fn() -> bool| {
            let start = Instant::now();
            while !f() {
                assert!(start.elapsed() < Duration::from_secs(10), "{what}");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        // 5 held, 3 over the bound
        until("the drops", &|| metrics.ledger.dropped() == 3);
        assert_eq!(metrics.ledger.pending.load(Ordering::SeqCst), 5);
        assert_eq!(metrics.ledger.written(), 0);
        fail.store(false, Ordering::SeqCst);
        until("the retry", &|| metrics.ledger.written() == 5);
        ledger.record(row("k", "m", 9, 200));
        ledger.close(Duration::from_secs(5));
        assert_eq!(rows.lock().unwrap().len(), 6);
        assert_eq!(metrics.ledger.written(), 6);
        assert_eq!(metrics.ledger.dropped(), 3);
    }

    #[test]
    fn close_writes_what_is_queued() {
        let rows = Arc::new(Mutex::new(Vec::new()));
        let metrics = Arc::new(Metrics::default());
        let ledger = Ledger::start(
            Box::new(Flaky {
                fail: Arc::new(std::sync::atomic::AtomicBool::new(false)),
                rows: rows.clone(),
            }),
            LedgerSettings {
                flush_every: Duration::from_secs(3600),
                ..LedgerSettings::default()
            },
            metrics.clone(),
        )
        .unwrap();
        for i in 0..1000 {
            ledger.record(row("k", "m", i, 200));
        }
        ledger.close(Duration::from_secs(5));
        assert_eq!(rows.lock().unwrap().len(), 1000);
        ledger.record(row("k", "m", 0, 200));
        assert_eq!(metrics.ledger.dropped(), 1, "after close: counted");
    }
}
