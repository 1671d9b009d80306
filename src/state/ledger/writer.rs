//! The writer thread: takes rows off the channel, writes them in batches
//! (one transaction each) through the backend, holds them for a retry with a
//! growing back-off when a write fails, and deletes rows past the retention.

use super::backend::Backend;
use super::calendar::DAY_MS;
use super::{now_ms, Row};
use crate::obs::metrics::{LedgerCounters, Metrics};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// What the handle sends the writer.
pub(super) enum Msg {
    Row(Box<Row>),
    /// Write everything queued, then stop.
    Close,
}

pub(super) struct Writer {
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
    pub(super) fn new(
        backend: Box<dyn Backend>,
        settings: LedgerSettings,
        metrics: Arc<Metrics>,
    ) -> Writer {
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

    pub(super) fn run(mut self, rx: Receiver<Msg>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ledger::row::test_row as row;
    use crate::state::ledger::Ledger;
    use std::sync::Mutex;

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
