//! Token counting off the reactor, bounded and cancellable: at most
//! `Settings::token_workers` counts run at once on blocking threads (the rest
//! wait their turn, so large requests queue instead of taking every core), and
//! a count whose client goes away is abandoned, waiting or running.

use super::Gateway;
use crate::admit::tokens::Cancel;
use crate::error::{ErrorKind, GatewayError};
use crate::listener::Session;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The slots for token counting, shared by every request of the process.
#[derive(Debug, Clone)]
pub struct TokenGate(Arc<Semaphore>);

impl TokenGate {
    /// A gate letting `workers` counts run at once (at least one).
    pub fn new(workers: usize) -> TokenGate {
        TokenGate(Arc::new(Semaphore::new(workers.max(1))))
    }
}

/// The default number of slots: half the cores, at least one, so counting
/// never takes the cores the reactor threads need.
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get() / 2)
        .unwrap_or(1)
        .max(1)
}

/// Sets the cancel flag when the request's future is dropped or returns early.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Moves the gauges back when a waiting or running count ends, however it ends.
struct Gauge<'a> {
    gw: &'a Gateway,
    waiting: i64,
    running: i64,
}

impl Gauge<'_> {
    fn start_running(&mut self) {
        self.gw.metrics.token_count_moved(-1, 1);
        self.waiting = 0;
        self.running = 1;
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.gw
            .metrics
            .token_count_moved(-self.waiting, -self.running);
    }
}

/// The outcome of a count that was not abandoned.
pub enum Counted<T> {
    Done(T),
    /// The client went away; the count was abandoned.
    ClientGone,
}

/// Runs `work` (given a cancel flag to poll) in a tokenizer slot on a blocking
/// thread, while watching the client connection.
pub async fn run<T, F>(
    gw: &Gateway,
    session: &mut Session,
    work: F,
) -> Result<Counted<T>, GatewayError>
where
    T: Send + 'static,
    F: FnOnce(&Cancel) -> T + Send + 'static,
{
    let cancel = Cancel::default();
    let _cancel_on_drop = CancelOnDrop(cancel.clone());
    gw.metrics.token_count_moved(1, 0);
    let mut gauge = Gauge {
        gw,
        waiting: 1,
        running: 0,
    };
    let job = async {
        let permit =
            gw.tokens.0.clone().acquire_owned().await.map_err(|_| {
                GatewayError::new(ErrorKind::Internal, "token counting is shut down")
            })?;
        gauge.start_running();
        let flag = cancel.clone();
        // The permit moves into the blocking task: the slot stays taken until
        // the work really ends, even when this future is dropped first.
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(&flag)
        })
        .await
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("token counting failed: {e}")))
    };
    tokio::select! {
        r = job => r.map(Counted::Done),
        _ = session.read_body_or_idle(true) => {
            cancel.cancel();
            gw.metrics.token_count_cancelled();
            Ok(Counted::ClientGone)
        }
    }
}
