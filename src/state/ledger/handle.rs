//! The handle the request path records rows through: a bounded channel it
//! never waits on, the writer thread's start (after Pingora daemonizes) and
//! its close at shutdown; opening the backend the flags ask for along with
//! the admin API's reader.

use super::backend::{Backend, BackendFactory};
use super::query::Reader;
use super::writer::{LedgerSettings, Msg, Writer};
use super::{pg, sqlite, Row};
use crate::obs::metrics::Metrics;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
            match std::fs::create_dir_all(data_dir) {
                Ok(()) => {}
                // A full disk: made on a later write (see below).
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => {}
                Err(e) => return Err(format!("cannot create {}: {e}", data_dir.display())),
            }
            let path = data_dir.join("ledger.sqlite");
            // Opened here to fail early, closed before Pingora may fork. A
            // full disk does not stop the start: the writer holds the rows
            // and retries until the file can be written.
            match sqlite::Sqlite::try_open(&path) {
                Ok(db) => drop(db),
                Err(e) if sqlite::is_full(&e) || !data_dir.exists() => log::error!(
                    "usage ledger: {} cannot be written ({e}): starting without it; rows are held (at most --ledger-queue) and written when space returns",
                    path.display()
                ),
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
            let p = path.clone();
            (
                Box::new(move || Ok(Box::new(sqlite::Lazy::new(&p)) as Box<dyn Backend>)),
                Reader::Sqlite(path),
            )
        }
    };
    Ok((Ledger::new(factory, settings, metrics), reader))
}
