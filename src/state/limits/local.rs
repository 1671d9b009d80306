//! The embedded limits backend (no Redis): rpm and tpm windows in memory
//! under one lock, per process; budgets in `DATA/limits.sqlite`
//! ([`super::store`]), shared by every process on the data directory (the
//! old and the new process of an upgrade enforce one budget), or in memory
//! when there is no data directory.
//!
//! A request's rpm slot and tpm tokens, of its key and of its key's team,
//! are checked and taken under the lock first (all of them or none); its
//! budgets (the key's, the team's) are then reserved in the store, both in
//! one transaction; a budget that refuses gives the slots and the tokens
//! back.

use super::store::{Cap, Caps, Reply, Slot, SpendStore};
use super::{
    least, period_at, Ask, BudgetState, Held, KeyState, Nanos, Part, Period, Refusal, Reserved,
    Window, WINDOW_SECS,
};
use crate::config::{ApiKey, Budget, Team};
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

/// One key's or one team's windows (and budgets kept in memory).
#[derive(Debug, Default)]
struct KeyLocal {
    requests: Window,
    tokens: Window,
    /// Per period id, when budgets are kept in memory.
    spend: HashMap<String, PeriodSpend>,
}

impl KeyLocal {
    /// Whether one more request of `tokens` fits the windows at `now`.
    fn room(
        &mut self,
        rpm: Option<u32>,
        tpm: Option<u64>,
        tokens: u64,
        now: u64,
        team: Option<&str>,
    ) -> Result<(), Refusal> {
        if let Some(limit) = rpm {
            if let Err(wait) = self.requests.room(now, u64::from(limit), 1) {
                return Err(Refusal::Rpm {
                    limit,
                    retry_after: wait.unwrap_or(WINDOW_SECS),
                    team: team.map(str::to_string),
                });
            }
        }
        if let Some(limit) = tpm {
            if let Err(wait) = self.tokens.room(now, limit, tokens) {
                return Err(Refusal::Tpm {
                    limit,
                    asked: tokens,
                    retry_after: wait,
                    team: team.map(str::to_string),
                });
            }
        }
        Ok(())
    }

    /// Counts (`sign` 1) or gives back (-1) one request of `tokens` at `now`.
    fn count(&mut self, rpm: bool, tpm: bool, tokens: u64, now: u64, sign: i64) {
        if sign > 0 {
            if rpm {
                self.requests.add(now, 1);
            }
            if tpm {
                self.tokens.add(now, tokens);
            }
        } else {
            if rpm {
                self.requests.adjust(now, -1);
            }
            if tpm {
                self.tokens.adjust(now, -(tokens as i64));
            }
        }
    }

    /// What is left of a budget kept in memory.
    fn left(&mut self, b: &Budget, p: &Period) -> Nanos {
        let s = self.spend.entry(p.id.clone()).or_default();
        b.nanos - s.spent - s.held
    }
}

/// The windows of every key and every team (apart: a key and a team may
/// share a name).
#[derive(Debug, Default)]
struct Windows {
    keys: HashMap<String, KeyLocal>,
    teams: HashMap<String, KeyLocal>,
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
    windows: Mutex<Windows>,
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

/// A budget and its period at `now`.
fn period(b: Option<&Budget>, now: u64) -> Option<(Budget, Period)> {
    b.map(|b| {
        (
            b.clone(),
            period_at(b.period, i64::try_from(now).unwrap_or(i64::MAX)),
        )
    })
}

/// The store's budgets of a held reservation.
fn caps(held: &Held) -> Caps {
    let cap = |p: &Part, team: bool| {
        p.budget.as_ref().map(|(b, period)| Cap {
            slot: Slot {
                key: p.id.clone(),
                period: period.clone(),
                team,
            },
            budget: b.nanos,
        })
    };
    [
        cap(&held.key, false),
        held.team.as_ref().and_then(|t| cap(t, true)),
    ]
}

impl LocalLimits {
    /// In-memory limits, nothing persisted.
    pub fn new() -> LocalLimits {
        LocalLimits {
            windows: Mutex::new(Windows::default()),
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
            windows: Mutex::new(Windows::default()),
            store,
        })
    }

    /// Gives back the request slots and tokens `ask` took at `now`.
    fn give_back(&self, ask: &Ask, now: u64) {
        let mut w = lock(&self.windows);
        let Windows { keys, teams } = &mut *w;
        if let Some(k) = keys.get_mut(&ask.key_id) {
            k.count(ask.rpm.is_some(), ask.tpm.is_some(), ask.tokens, now, -1);
        }
        if let Some(t) = &ask.team {
            if let Some(w) = teams.get_mut(&t.id) {
                w.count(t.rpm.is_some(), t.tpm.is_some(), ask.tokens, now, -1);
            }
        }
    }

    /// Checks and reserves `ask` at `now` (unix seconds): the key's and the
    /// team's rpm and tpm under the lock, then their budgets (in memory
    /// under the same lock, or in the store in one transaction). All of it
    /// is taken, or none.
    pub(crate) async fn reserve(&self, ask: &Ask, now: u64) -> Result<Reserved, Refusal> {
        let key_period = period(ask.budget.as_ref(), now);
        let team = ask.team.as_ref();
        let team_period = period(team.and_then(|t| t.budget.as_ref()), now);
        let budget_refusal = |(b, p): &(Budget, Period), left: Nanos, team: bool| Refusal::Budget {
            budget: b.clone(),
            period: p.id.clone(),
            remaining: left,
            asked: ask.cost,
            team: ask.team.as_ref().filter(|_| team).map(|t| t.id.clone()),
        };
        let mut remaining = None;
        {
            let mut w = lock(&self.windows);
            let Windows { keys, teams } = &mut *w;
            let k = keys.entry(ask.key_id.clone()).or_default();
            k.room(ask.rpm, ask.tpm, ask.tokens, now, None)?;
            let mut t = match team {
                Some(ta) => {
                    let t = teams.entry(ta.id.clone()).or_default();
                    t.room(ta.rpm, ta.tpm, ask.tokens, now, Some(&ta.id))?;
                    Some(t)
                }
                None => None,
            };
            if self.store.is_none() {
                // Both budgets are checked before either is held.
                if let Some(kp) = &key_period {
                    let left = k.left(&kp.0, &kp.1);
                    if ask.cost > left {
                        return Err(budget_refusal(kp, left, false));
                    }
                    remaining = Some(left - ask.cost);
                }
                if let (Some(tp), Some(t)) = (&team_period, t.as_deref_mut()) {
                    let left = t.left(&tp.0, &tp.1);
                    if ask.cost > left {
                        return Err(budget_refusal(tp, left, true));
                    }
                    remaining = least(remaining, Some(left - ask.cost));
                }
                if let Some((_, p)) = &key_period {
                    k.spend.entry(p.id.clone()).or_default().held += ask.cost;
                }
                if let (Some((_, p)), Some(t)) = (&team_period, t.as_deref_mut()) {
                    t.spend.entry(p.id.clone()).or_default().held += ask.cost;
                }
            }
            k.count(ask.rpm.is_some(), ask.tpm.is_some(), ask.tokens, now, 1);
            if let (Some(ta), Some(t)) = (team, t) {
                t.count(ta.rpm.is_some(), ta.tpm.is_some(), ask.tokens, now, 1);
            }
        }
        let budgets = key_period.is_some() || team_period.is_some();
        let id = match (budgets, &self.store) {
            (true, Some(store)) => store.next_id(),
            _ => String::new(),
        };
        let held = ask.holds().then(|| Held {
            key: Part {
                id: ask.key_id.clone(),
                tpm: ask.tpm.is_some(),
                budget: key_period.as_ref().map(|(b, p)| (b.clone(), p.id.clone())),
            },
            team: team.map(|t| Part {
                id: t.id.clone(),
                tpm: t.tpm.is_some(),
                budget: team_period.as_ref().map(|(b, p)| (b.clone(), p.id.clone())),
            }),
            tokens: ask.tokens,
            cost: ask.cost,
            bucket: now,
            id,
        });
        let Some(store) = self.store.as_ref().filter(|_| budgets) else {
            return Ok(Some((held, remaining)));
        };
        let Some(h) = held else {
            return Ok(Some((None, remaining)));
        };
        let caps = caps(&h);
        let id = h.id.clone();
        // A request dropped while it waits (its client went away) gives
        // back what it took, the store's holds included (the release queues
        // behind the reserve).
        let mut waiting = Waiting {
            limits: self,
            held: Some(h),
        };
        match store.reserve(caps, ask.cost, id).await {
            Reply::Reserved(left) => Ok(Some((waiting.held.take(), Some(left)))),
            // Admitted unchecked: the reserve runs when the store can, and
            // this reservation's settlement (or release) queues behind it.
            Reply::Late => Ok(Some((waiting.held.take(), None))),
            Reply::Refused { team, left } => {
                waiting.held = None;
                // Refused: the rpm slots and the tpm tokens go back.
                self.give_back(ask, now);
                let which = if team { &team_period } else { &key_period };
                Err(match which {
                    Some(p) => budget_refusal(p, left, team),
                    None => Refusal::Unavailable,
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
        let mut w = lock(&self.windows);
        let Windows { keys, teams } = &mut *w;
        let in_memory = self.store.is_none();
        let settle = |l: &mut KeyLocal, part: &Part| -> Option<Nanos> {
            if part.tpm {
                l.tokens
                    .adjust(held.bucket, tokens as i64 - held.tokens as i64);
            }
            if !in_memory {
                return None;
            }
            let (b, period) = part.budget.as_ref()?;
            let s = l.spend.entry(period.clone()).or_default();
            s.held -= held.cost;
            s.spent += cost;
            Some(b.nanos - s.spent - s.held)
        };
        let mut left = None;
        if held.key.holds() {
            left = settle(keys.entry(held.key.id.clone()).or_default(), &held.key);
        }
        if let Some(t) = held.team.as_ref().filter(|t| t.holds()) {
            left = least(left, settle(teams.entry(t.id.clone()).or_default(), t));
        }
        left
    }

    /// Settles `held` to the real figures; the budget left, once the spend
    /// is written (or kept in memory for a retry, see [`super::store`]).
    pub(crate) async fn settle(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        let remaining = self.apply(held, tokens, cost);
        match &self.store {
            Some(store) if held.has_budget() => {
                store
                    .settle(caps(held), held.id.clone(), held.cost, cost)
                    .await
            }
            _ => remaining,
        }
    }

    /// Releases `held` without waiting (a dropped reservation).
    pub(crate) fn release_now(&self, held: &Held) {
        self.apply(held, 0, 0);
        if let Some(store) = self.store.as_ref().filter(|_| held.has_budget()) {
            store.release(caps(held), held.id.clone(), held.cost);
        }
    }

    /// The live state of one key (`team` false) or team at `now`.
    async fn subject_state(
        &self,
        id: &str,
        team: bool,
        limits: (Option<u32>, Option<u64>, Option<&Budget>),
        now: u64,
    ) -> KeyState {
        let (rpm, tpm, budget) = limits;
        let period = period(budget, now);
        let (rpm, tpm, mem) = {
            let mut w = lock(&self.windows);
            let map = if team { &mut w.teams } else { &mut w.keys };
            let k = map.entry(id.to_string()).or_default();
            let mem = period
                .as_ref()
                .map(|(_, p)| k.spend.get(&p.id).map_or((0, 0), |s| (s.spent, s.held)));
            (
                rpm.map(|l| (l, k.requests.used(now))),
                tpm.map(|l| (l, k.tokens.used(now))),
                mem,
            )
        };
        let budget = match period {
            Some((b, p)) => {
                let (spent, reserved) = match &self.store {
                    Some(store) => store
                        .state(Slot {
                            key: id.to_string(),
                            period: p.id.clone(),
                            team,
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

    /// The live state of `key` at `now` (its own limits).
    pub async fn state(&self, key: &ApiKey, now: u64) -> KeyState {
        self.subject_state(&key.id, false, (key.rpm, key.tpm, key.budget.as_ref()), now)
            .await
    }

    /// The live state of `team` at `now`, across its keys.
    pub async fn team_state(&self, team: &Team, now: u64) -> KeyState {
        self.subject_state(
            &team.id,
            true,
            (team.rpm, team.tpm, team.budget.as_ref()),
            now,
        )
        .await
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

    /// Keys `a` (with `extra`) and `b` (no limits of their own) of team `ml`
    /// (with `team`).
    fn team_keys(team: &str, extra: &str) -> (ApiKey, ApiKey) {
        let ks = KeyStore::from_str(
            "k.json",
            &format!(
                r#"{{"teams":[{{"id":"ml"{team}}}],"keys":[{{"id":"a","key":"sa","team":"ml"{extra}}},{{"id":"b","key":"sb","team":"ml"}}]}}"#
            ),
        )
        .unwrap();
        (
            ks.find("sa").unwrap().clone(),
            ks.find("sb").unwrap().clone(),
        )
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
                retry_after: 2,
                team: None
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

    /// Two keys of one team share its rpm; the refusal names the team, and
    /// the refused request holds nothing of its key's.
    #[tokio::test]
    async fn a_team_window_is_shared_and_refuses_all_or_nothing() {
        let l = LocalLimits::new();
        let (a, b) = team_keys(r#","rpm":2,"tpm":100"#, r#","rpm":10,"tpm":1000"#);
        assert!(l.reserve(&Ask::inference(&a, 40, 0), 100).await.is_ok());
        assert!(l.reserve(&Ask::inference(&b, 40, 0), 100).await.is_ok());
        match l.reserve(&Ask::inference(&a, 10, 0), 101).await {
            Err(Refusal::Rpm { limit: 2, team, .. }) => assert_eq!(team.as_deref(), Some("ml")),
            other => panic!("{other:?}"),
        }
        // The key's own window kept only its one admitted request.
        let st = l.state(&a, 101).await;
        assert_eq!((st.rpm, st.tpm), (Some((10, 1)), Some((1000, 40))));
        let t = a.team.as_deref().unwrap();
        let ts = l.team_state(t, 101).await;
        assert_eq!((ts.rpm, ts.tpm), (Some((2, 2)), Some((100, 80))));
        // A key of one name as the team keeps its own windows.
        let ml = KeyStore::from_str("k.json", r#"{"keys":[{"id":"ml","key":"m","rpm":1}]}"#)
            .unwrap()
            .find("m")
            .unwrap()
            .clone();
        assert!(l.reserve(&Ask::request_only(&ml), 101).await.is_ok());
        assert_eq!(l.team_state(t, 101).await.rpm, Some((2, 2)));
    }

    /// The key's budget refuses: nothing of the team's is held; the team's
    /// refuses: nothing of the key's. Settling and releasing reach both.
    #[tokio::test]
    async fn a_team_budget_reserves_settles_and_releases_with_the_key() {
        for dir in [None, Some(tmp("team"))] {
            let l = match &dir {
                Some(d) => open(d),
                None => LocalLimits::new(),
            };
            let (a, b) = team_keys(
                r#","budget":{"usd":"0.10","period":"total"}"#,
                r#","budget":{"usd":"0.05","period":"day"}"#,
            );
            let t = a.team.clone().unwrap();
            let cost = 30_000_000;
            // a: 0.03 of its 0.05; the team: 0.03 of 0.10.
            let h1 = reserve(&l, &Ask::inference(&a, 0, cost), 1000).await;
            // a's own budget refuses (0.02 left): the team holds nothing more.
            match l.reserve(&Ask::inference(&a, 0, cost), 1000).await {
                Err(Refusal::Budget {
                    team: None,
                    remaining,
                    ..
                }) => assert_eq!(remaining, 20_000_000),
                other => panic!("{other:?}"),
            }
            assert_eq!(l.team_state(&t, 1000).await.budget.unwrap().reserved, cost);
            // b: the team's 0.07 left takes two more, then refuses.
            let h2 = reserve(&l, &Ask::inference(&b, 0, cost), 1000).await;
            let h3 = reserve(&l, &Ask::inference(&b, 0, cost), 1000).await;
            match l.reserve(&Ask::inference(&b, 0, cost), 1000).await {
                Err(e @ Refusal::Budget { .. }) => {
                    assert_eq!(e.team(), Some("ml"));
                    assert_eq!(e.remaining(), Some(10_000_000));
                    assert!(
                        e.to_error().message.contains("team \"ml\""),
                        "{:?}",
                        e.to_error()
                    );
                }
                other => panic!("{other:?}"),
            }
            // a, still under the team's cap in its own budget, is refused
            // by the team's: its own budget holds nothing more.
            assert!(matches!(
                l.reserve(&Ask::inference(&a, 0, 15_000_000), 1000).await,
                Err(Refusal::Budget { team: Some(_), .. })
            ));
            assert_eq!(l.state(&a, 1000).await.budget.unwrap().reserved, cost);
            // Settle a's below its hold: both budgets see the real cost.
            // What is left is the lesser: the team's 0.03 (b holds 0.06).
            assert_eq!(l.settle(&h1, 0, 10_000_000).await, Some(30_000_000));
            let st = l.state(&a, 1000).await.budget.unwrap();
            assert_eq!((st.spent, st.reserved), (10_000_000, 0));
            // Release one of b's, settle the other.
            l.release_now(&h2);
            l.settle(&h3, 0, 25_000_000).await;
            let ts = l.team_state(&t, 1000).await.budget.unwrap();
            assert_eq!((ts.spent, ts.reserved), (35_000_000, 0));
            if let Some(d) = dir {
                let _ = std::fs::remove_dir_all(&d);
            }
        }
    }
}
