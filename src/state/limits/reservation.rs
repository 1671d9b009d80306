//! A reservation: a request's worst case held against its key's (and its
//! team's) tpm window and budget until it is settled to the real usage or released (dropping
//! one releases it).

use super::backend::Backend;
use super::held::Held;
use super::Nanos;
use std::sync::Arc;

/// How long a reservation in Redis holds budget and tokens unless renewed:
/// its instance renews it every 10 s while its request runs, so one whose
/// instance died, or whose answer never reached the gateway, is dropped
/// within this.
pub const RESERVATION_LEASE_SECS: u64 = 30;

/// A reservation: settle it with the real usage, or drop it to release.
#[must_use = "a reservation is released when dropped; settle it when the usage is known"]
pub struct Reservation {
    backend: Option<Arc<Backend>>,
    held: Option<Held>,
    remaining: Option<Nanos>,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("held", &self.held)
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl Reservation {
    /// A reservation that holds nothing (no limits, or the store failed open).
    pub fn none() -> Reservation {
        Reservation {
            backend: None,
            held: None,
            remaining: None,
        }
    }

    pub(crate) fn new(backend: Arc<Backend>, held: Option<Held>, remaining: Option<Nanos>) -> Self {
        Reservation {
            backend: Some(backend),
            held,
            remaining,
        }
    }

    /// The budget left after this reservation (USD nanos), when the key or
    /// its team has one (the lesser of the two when both have).
    pub fn budget_remaining(&self) -> Option<Nanos> {
        self.remaining
    }

    /// Whether settling has anything to give back or count (else it only
    /// answers [`Reservation::budget_remaining`]).
    pub fn holds(&self) -> bool {
        self.backend.is_some() && self.held.is_some()
    }

    /// Whether a budget (the key's or its team's) is being tracked by this
    /// reservation.
    pub fn has_budget(&self) -> bool {
        self.held.as_ref().is_some_and(Held::has_budget)
    }

    /// The worst case this reservation holds: (tokens, cost).
    pub fn reserved(&self) -> (u64, Nanos) {
        self.held.as_ref().map_or((0, 0), |h| (h.tokens, h.cost))
    }

    /// Settles to the real `tokens` and `cost`; returns the budget left.
    pub async fn settle(mut self, tokens: u64, cost: Nanos) -> Option<Nanos> {
        let (Some(backend), Some(held)) = (self.backend.take(), self.held.take()) else {
            return self.remaining;
        };
        backend.settle(&held, tokens, cost).await
    }

    /// Settles to the worst case reserved (the usage is not known).
    pub async fn settle_reserved(self) -> Option<Nanos> {
        let (t, c) = self.reserved();
        self.settle(t, c).await
    }

    /// Gives everything back (a failed request).
    pub async fn release(self) -> Option<Nanos> {
        self.settle(0, 0).await
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let (Some(backend), Some(held)) = (self.backend.take(), self.held.take()) else {
            return;
        };
        match &*backend {
            Backend::Local(l) => l.release_now(&held),
            Backend::Redis(_) => {
                // Released off the request path; outside a runtime (never in
                // the gateway) the lease expiry gives it back.
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        backend.settle(&held, 0, 0).await;
                    });
                }
            }
        }
    }
}
