//! The shutdown drain (docs/operations.md "Shutdown and upgrades"): the
//! requests in flight, waited for when the process is told to stop, and the
//! signal that ends the streams still open when the grace period runs out,
//! each with its protocol's error event (so every request still gets its
//! access line and ledger row, with the usage so far).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// Requests in flight and the end-the-streams signal.
#[derive(Debug)]
pub struct Drain {
    in_flight: AtomicUsize,
    /// Woken each time the last request in flight ends.
    idle: Notify,
    /// True once the open streams must end.
    cut: watch::Sender<bool>,
}

/// One request in flight; dropping it ends it.
#[derive(Debug)]
pub struct InFlight(Arc<Drain>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            cut: watch::Sender::new(false),
        }
    }
}

impl Drain {
    /// Counts a request in flight until the guard drops.
    pub fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// A receiver that changes to true when the open streams must end.
    pub fn cut_signal(&self) -> watch::Receiver<bool> {
        self.cut.subscribe()
    }

    /// Tells every open stream to end now.
    pub fn cut_streams(&self) {
        self.cut.send_replace(true);
    }

    /// Waits until no request is in flight or `deadline` passes; true when
    /// nothing is left.
    pub async fn wait_idle(&self, deadline: Instant) -> bool {
        loop {
            let woken = self.idle.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.in_flight() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return self.in_flight() == 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn waits_for_the_last_request_or_the_deadline() {
        let drain = Arc::new(Drain::default());
        assert!(drain.wait_idle(Instant::now()).await);
        let a = drain.enter();
        let b = drain.enter();
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!drain.wait_idle(soon).await, "two are in flight");
        let waiter = {
            let drain = drain.clone();
            tokio::spawn(async move {
                drain
                    .wait_idle(Instant::now() + Duration::from_secs(60))
                    .await
            })
        };
        drop(a);
        drop(b);
        assert!(waiter.await.unwrap());
        let mut cut = drain.cut_signal();
        drain.cut_streams();
        cut.changed().await.unwrap();
        assert!(*cut.borrow());
    }
}
