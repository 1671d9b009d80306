//! The embedded limits backend (no Redis): rpm and tpm windows in memory
//! under one lock, per process; budgets in `DATA/limits.sqlite`
//! ([`super::store`]), shared by every process on the data directory (the
//! old and the new process of an upgrade enforce one budget), or in memory
//! when there is no data directory.
//!
//! A request's rpm slot and tpm tokens are taken under the lock first; its
//! budget is then reserved in the store (one transaction that reads and
//! writes); a budget that refuses gives the slot and the tokens back.

use super::store::{Reply, Slot, SpendStore};
use super::{
    period_at, Ask, BudgetState, Held, KeyState, Nanos, Refusal, Reserved, Window, WINDOW_SECS,
};
use crate::config::ApiKey;
use crate::obs::metrics::Metrics;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

pub use super::store::FILE;

#[derive(Debug, Default)]
struct PeriodSpend {
    spent: Nanos,
    held: Nanos,
}

#[derive(Debug, Default)]
struct KeyLocal {
    requests: Window,
    tokens: Window,
    /// Per period id, when budgets are kept in memory.
    spend: HashMap<String, PeriodSpend>,
}

/// A reservation waiting for the store's answer: released if its request
/// is dropped meanwhile.
struct Waiting<'a> {
    limits: &'a LocalLimits,
    held: Option<Held>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.held.take() {
            self.limits.release_now(&h);
        }
    }
}

/// Embedded limits: windows in memory, budgets in the store or in memory.
pub struct LocalLimits {
    keys: Mutex<HashMap<String, KeyLocal>>,
    store: Option<SpendStore>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Default for LocalLimits {
    fn default() -> Self {
        LocalLimits::new()
    }
}

impl LocalLimits {
    /// In-memory limits, nothing persisted.
    pub fn new() -> LocalLimits {
        LocalLimits {
            keys: Mutex::new(HashMap::new()),
            store: None,
        }
    }

    /// Opens the budget store in `dir` (none: memory only).
    pub fn open(dir: Option<&Path>, metrics: Arc<Metrics>) -> Result<LocalLimits, String> {
        let store = match dir {
            Some(d) => Some(SpendStore::open(d, metrics)?),
            None => None,
        };
        Ok(LocalLimits {
            keys: Mutex::new(HashMap::new()),
            store,
        })
    }

    /// Checks and reserves `ask` at `now` (unix seconds): rpm and tpm under
    /// the lock, then the budget (in memory under the same lock, or in the
    /// store).
    pub(crate) async fn reserve(&self, ask: &Ask, now: u64) -> Result<Reserved, Refusal> {
        let period = ask.budget.as_ref().map(|b| {
            (
                b.clone(),
                period_at(b.period, i64::try_from(now).unwrap_or(i64::MAX)),
            )
        });
        let mut remaining = None;
        {
            let mut keys = lock(&self.keys);
            let k = keys.entry(ask.key_id.clone()).or_default();
            if let Some(limit) = ask.rpm {
                if let Err(wait) = k.requests.room(now, u64::from(limit), 1) {
                    return Err(Refusal::Rpm {
                        limit,
                        retry_after: wait.unwrap_or(WINDOW_SECS),
                    });
                }
            }
            if let Some(limit) = ask.tpm {
                if let Err(wait) = k.tokens.room(now, limit, ask.tokens) {
                    return Err(Refusal::Tpm {
                        limit,
                        asked: ask.tokens,
                        retry_after: wait,
                    });
                }
            }
            if let (Some((b, p)), None) = (&period, &self.store) {
                let s = k.spend.entry(p.id.clone()).or_default();
                let left = b.nanos - s.spent - s.held;
                if ask.cost > left {
                    return Err(Refusal::Budget {
                        budget: b.clone(),
                        period: p.id.clone(),
                        remaining: left,
                        asked: ask.cost,
                    });
                }
                s.held += ask.cost;
                remaining = Some(left - ask.cost);
            }
            if ask.rpm.is_some() {
                k.requests.add(now, 1);
            }
            if ask.tpm.is_some() {
                k.tokens.add(now, ask.tokens);
            }
        }
        let id = match (&period, &self.store) {
            (Some(_), Some(store)) => store.next_id(),
            _ => String::new(),
        };
        let held = (ask.tpm.is_some() || period.is_some()).then(|| Held {
            key_id: ask.key_id.clone(),
            tokens: if ask.tpm.is_some() { ask.tokens } else { 0 },
            tpm: ask.tpm.is_some(),
            bucket: now,
            cost: if period.is_some() { ask.cost } else { 0 },
            budget: period.as_ref().map(|(b, p)| (b.clone(), p.id.clone())),
            id: id.clone(),
        });
        let (Some((b, p)), Some(store)) = (&period, &self.store) else {
            return Ok(Some((held, remaining)));
        };
        // A request dropped while it waits (its client went away) gives
        // back what it took, the store's hold included (the release queues
        // behind the reserve).
        let mut waiting = Waiting { limits: self, held };
        let slot = Slot {
            key: ask.key_id.clone(),
            period: p.id.clone(),
        };
        match store.reserve(slot, b.nanos, ask.cost, id).await {
            Reply::Reserved(left) => Ok(Some((waiting.held.take(), Some(left)))),
            // Admitted unchecked: the reserve runs when the store can, and
            // this reservation's settlement (or release) queues behind it.
            Reply::Late => Ok(Some((waiting.held.take(), None))),
            Reply::Refused(left) => {
                waiting.held = None;
                // Refused: the rpm slot and the tpm tokens go back.
                let mut keys = lock(&self.keys);
                let k = keys.entry(ask.key_id.clone()).or_default();
                if ask.rpm.is_some() {
                    k.requests.adjust(now, -1);
                }
                if ask.tpm.is_some() {
                    k.tokens.adjust(now, -(ask.tokens as i64));
                }
                Err(Refusal::Budget {
                    budget: b.clone(),
                    period: p.id.clone(),
                    remaining: left,
                    asked: ask.cost,
                })
            }
            // The store's thread is gone (logged): admitted unchecked.
            Reply::Gone => {
                waiting.held = None;
                Ok(Some((None, None)))
            }
        }
    }

    /// Applies a settlement to the windows (and to budgets kept in memory):
    /// the budget left when it is kept in memory.
    fn apply(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        let mut keys = lock(&self.keys);
        let k = keys.entry(held.key_id.clone()).or_default();
        if held.tpm {
            k.tokens
                .adjust(held.bucket, tokens as i64 - held.tokens as i64);
        }
        if self.store.is_some() {
            return None;
        }
        let (b, period) = held.budget.as_ref()?;
        let s = k.spend.entry(period.clone()).or_default();
        s.held -= held.cost;
        s.spent += cost;
        Some(b.nanos - s.spent - s.held)
    }

    /// Settles `held` to the real figures; the budget left, once the spend
    /// is written (or kept in memory for a retry, see [`super::store`]).
    pub(crate) async fn settle(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        let remaining = self.apply(held, tokens, cost);
        match (&self.store, &held.budget) {
            (Some(store), Some((b, period))) => {
                let slot = Slot {
                    key: held.key_id.clone(),
                    period: period.clone(),
                };
                store
                    .settle(slot, b.nanos, held.id.clone(), held.cost, cost)
                    .await
            }
            _ => remaining,
        }
    }

    /// Releases `held` without waiting (a dropped reservation).
    pub(crate) fn release_now(&self, held: &Held) {
        self.apply(held, 0, 0);
        if let (Some(store), Some((_, period))) = (&self.store, &held.budget) {
            let slot = Slot {
                key: held.key_id.clone(),
                period: period.clone(),
            };
            store.release(slot, held.id.clone(), held.cost);
        }
    }

    /// The live state of `key` at `now`.
    pub async fn state(&self, key: &ApiKey, now: u64) -> KeyState {
        let period = key.budget.as_ref().map(|b| {
            (
                b.clone(),
                period_at(b.period, i64::try_from(now).unwrap_or(i64::MAX)),
            )
        });
        let (rpm, tpm, mem) = {
            let mut keys = lock(&self.keys);
            let k = keys.entry(key.id.clone()).or_default();
            let mem = period
                .as_ref()
                .map(|(_, p)| k.spend.get(&p.id).map_or((0, 0), |s| (s.spent, s.held)));
            (
                key.rpm.map(|l| (l, k.requests.used(now))),
                key.tpm.map(|l| (l, k.tokens.used(now))),
                mem,
            )
        };
        let budget = match period {
            Some((b, p)) => {
                let (spent, reserved) = match &self.store {
                    Some(store) => store
                        .state(Slot {
                            key: key.id.clone(),
                            period: p.id.clone(),
                        })
                        .await
                        .unwrap_or((0, 0)),
                    None => mem.unwrap_or((0, 0)),
                };
                Some(BudgetState {
                    budget: b,
                    period: p,
                    spent,
                    reserved,
                })
            }
            None => None,
        };
        KeyState { rpm, tpm, budget }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Budget, BudgetPeriod, KeyStore};

    fn key(extra: &str) -> ApiKey {
        KeyStore::from_str(
            "k.json",
            &format!(r#"{{"keys":[{{"id":"k","key":"s"{extra}}}]}}"#),
        )
        .unwrap()
        .find("s")
        .unwrap()
        .clone()
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("switchboard-limits-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn open(dir: &Path) -> LocalLimits {
        LocalLimits::open(Some(dir), Arc::new(Metrics::default())).unwrap()
    }

    async fn reserve(l: &LocalLimits, ask: &Ask, now: u64) -> Held {
        l.reserve(ask, now).await.unwrap().unwrap().0.unwrap()
    }

    #[tokio::test]
    async fn rpm_slides() {
        let l = LocalLimits::new();
        let k = key(r#","rpm":2"#);
        let ask = Ask::request_only(&k);
        assert!(l.reserve(&ask, 100).await.is_ok());
        assert!(l.reserve(&ask, 130).await.is_ok());
        assert_eq!(
            l.reserve(&ask, 159).await.unwrap_err(),
            Refusal::Rpm {
                limit: 2,
                retry_after: 2
            }
        );
        assert!(l.reserve(&ask, 161).await.is_ok());
        assert_eq!(l.state(&k, 161).await.rpm, Some((2, 2)));
    }

    #[tokio::test]
    async fn tpm_reserves_then_settles() {
        let l = LocalLimits::new();
        let k = key(r#","tpm":100"#);
        let held = reserve(&l, &Ask::inference(&k, 80, 0), 10).await;
        assert!(matches!(
            l.reserve(&Ask::inference(&k, 30, 0), 10).await,
            Err(Refusal::Tpm {
                retry_after: Some(61),
                ..
            })
        ));
        l.settle(&held, 20, 0).await;
        assert!(l.reserve(&Ask::inference(&k, 30, 0), 11).await.is_ok());
        assert_eq!(l.state(&k, 11).await.tpm, Some((100, 50)));
        assert!(matches!(
            l.reserve(&Ask::inference(&k, 101, 0), 11).await,
            Err(Refusal::Tpm {
                retry_after: None,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn budget_holds_and_survives_a_restart() {
        let dir = tmp("restart");
        let k = key(r#","budget":{"usd":"0.10","period":"day"},"rpm":10"#);
        let cost = 30_000_000; // 0.03 USD
        {
            let l = open(&dir);
            let mut held = Vec::new();
            for _ in 0..3 {
                held.push(reserve(&l, &Ask::inference(&k, 0, cost), 1000).await);
            }
            match l.reserve(&Ask::inference(&k, 0, cost), 1000).await {
                Err(Refusal::Budget { remaining, .. }) => assert_eq!(remaining, 10_000_000),
                other => panic!("{other:?}"),
            }
            // The refused request gave its rpm slot back.
            assert_eq!(l.state(&k, 1000).await.rpm, Some((10, 3)));
            // One fails (released), two settle below their reservation.
            l.release_now(&held[0]);
            assert_eq!(l.settle(&held[1], 0, 25_000_000).await, Some(45_000_000));
            assert_eq!(l.settle(&held[2], 0, 25_000_000).await, Some(50_000_000));
            let st = l.state(&k, 1000).await.budget.unwrap();
            assert_eq!(
                (st.spent, st.reserved, st.remaining()),
                (50_000_000, 0, 50_000_000)
            );
        }
        let l = open(&dir);
        let st = l.state(&k, 1000).await.budget.unwrap();
        assert_eq!(st.spent, 50_000_000);
        assert_eq!(st.period.id, "1970-01-01");
        // The next day starts afresh.
        assert_eq!(l.state(&k, 86_400).await.budget.unwrap().spent, 0);
        assert_eq!(
            st.budget,
            Budget {
                nanos: 100_000_000,
                period: BudgetPeriod::Day
            }
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Two stores on one directory (two processes, as in an upgrade): each
    /// sees the other's reservations and settlements at once.
    #[tokio::test]
    async fn two_stores_on_one_directory_share_one_budget() {
        let dir = tmp("shared");
        let k = key(r#","budget":{"usd":"0.10","period":"total"}"#);
        let (a, b) = (open(&dir), open(&dir));
        let cost = 30_000_000;
        let h1 = reserve(&a, &Ask::inference(&k, 0, cost), 1000).await;
        let h2 = reserve(&b, &Ask::inference(&k, 0, cost), 1000).await;
        let h3 = reserve(&a, &Ask::inference(&k, 0, cost), 1000).await;
        assert!(matches!(
            b.reserve(&Ask::inference(&k, 0, cost), 1000).await,
            Err(Refusal::Budget {
                remaining: 10_000_000,
                ..
            })
        ));
        assert_eq!(b.settle(&h1, 0, 20_000_000).await, Some(20_000_000));
        assert_eq!(a.settle(&h2, 0, 30_000_000).await, Some(20_000_000));
        // Queued behind the release on `b`'s own thread.
        b.release_now(&h3);
        let st = b.state(&k, 1000).await.budget.unwrap();
        assert_eq!((st.spent, st.reserved), (50_000_000, 0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A request dropped while it waits for the store (its client went
    /// away) holds nothing.
    #[tokio::test]
    async fn a_reserve_dropped_while_waiting_holds_nothing() {
        let dir = tmp("dropped");
        let k = key(r#","budget":{"usd":"0.10","period":"total"},"tpm":1000"#);
        let l = open(&dir);
        let ask = Ask::inference(&k, 100, 30_000_000);
        match tokio::time::timeout(std::time::Duration::ZERO, l.reserve(&ask, 1000)).await {
            Err(_) => {}
            // The store answered within the first poll: released as usual.
            Ok(r) => l.release_now(&r.unwrap().unwrap().0.unwrap()),
        }
        let st = l.state(&k, 1000).await;
        assert_eq!(st.budget.unwrap().reserved, 0);
        assert_eq!(st.tpm, Some((1000, 0)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store that opens a directory no other process uses gives back the
    /// reservations a dead process left; one that shares it leaves them to
    /// their lease.
    #[tokio::test]
    async fn a_dead_process_reservations_are_given_back() {
        let dir = tmp("dead");
        let k = key(r#","budget":{"usd":"0.10","period":"total"}"#);
        let a = open(&dir);
        let _h = reserve(&a, &Ask::inference(&k, 0, 60_000_000), 1000).await;
        let b = open(&dir);
        assert_eq!(
            b.state(&k, 1000).await.budget.unwrap().reserved,
            60_000_000,
            "a live process's reservation is kept"
        );
        // `a` dies without settling (its handle is leaked: no release).
        std::mem::forget(_h);
        drop((a, b));
        let c = open(&dir);
        assert_eq!(c.state(&k, 1000).await.budget.unwrap().reserved, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
