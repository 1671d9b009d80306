//! The embedded limits backend (one instance): windows and reservations in
//! memory under one lock, so check-and-reserve is atomic; the spend per key
//! and period is also written to `DATA/limits.sqlite` so a budget survives a
//! restart.
//!
//! Writes go to a dedicated thread that commits whatever is queued in one
//! transaction (group commit) and acknowledges each write; a settlement waits
//! for its acknowledgement before the response is sent, so a spend the client
//! has seen is on disk (WAL, `synchronous=NORMAL`: durable across a process
//! crash) and the request path never blocks on disk I/O.

use super::{
    period_at, Ask, BudgetState, Held, KeyState, Nanos, Refusal, Reserved, Window, WINDOW_SECS,
};
use crate::config::ApiKey;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{mpsc, Mutex, MutexGuard};

/// Recorded spend: (key id, period, nano-USD).
type SpendRows = Vec<(String, String, Nanos)>;

/// File name of the spend store inside the data directory.
pub const FILE: &str = "limits.sqlite";

#[derive(Debug, Default)]
struct PeriodSpend {
    spent: Nanos,
    held: Nanos,
}

#[derive(Debug, Default)]
struct KeyLocal {
    requests: Window,
    tokens: Window,
    /// Per period id.
    spend: HashMap<String, PeriodSpend>,
}

struct Write {
    key: String,
    period: String,
    delta: Nanos,
    ack: tokio::sync::oneshot::Sender<bool>,
}

/// The writer thread's queue; the thread (and its connection) start on the
/// first write, so a daemonizing fork after start-up does not lose them.
struct SpendStore {
    path: std::path::PathBuf,
    tx: Mutex<Option<mpsc::Sender<Write>>>,
}

/// In-memory windows and reservations, with spend persisted.
pub struct LocalLimits {
    keys: Mutex<HashMap<String, KeyLocal>>,
    store: Option<SpendStore>,
}

fn open_db(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS budget_spend (
             key_id TEXT NOT NULL,
             period TEXT NOT NULL,
             spent_nanos INTEGER NOT NULL,
             updated_at INTEGER NOT NULL,
             PRIMARY KEY (key_id, period)
         )",
    )?;
    Ok(conn)
}

fn load(conn: &rusqlite::Connection) -> rusqlite::Result<SpendRows> {
    let mut st = conn.prepare("SELECT key_id, period, spent_nanos FROM budget_spend")?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}

fn write_batch(conn: &mut rusqlite::Connection, batch: &[Write]) -> rusqlite::Result<()> {
    let now = i64::try_from(super::unix_now()).unwrap_or(0);
    let tx = conn.transaction()?;
    {
        let mut st = tx.prepare_cached(
            "INSERT INTO budget_spend (key_id, period, spent_nanos, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (key_id, period) DO UPDATE SET spent_nanos = spent_nanos + excluded.spent_nanos, updated_at = excluded.updated_at",
        )?;
        for w in batch {
            st.execute(rusqlite::params![w.key, w.period, w.delta, now])?;
        }
    }
    tx.commit()
}

fn writer(path: &Path, rx: mpsc::Receiver<Write>) {
    let mut conn = match open_db(path) {
        Ok(c) => Some(c),
        Err(e) => {
            log::error!("limits: cannot open {}: {e}", path.display());
            None
        }
    };
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < 4096 {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let written = match conn.as_mut() {
            Some(c) => write_batch(c, &batch),
            None => open_db(path).and_then(|mut c| {
                let r = write_batch(&mut c, &batch);
                conn = Some(c);
                r
            }),
        };
        let ok = match written {
            Ok(()) => true,
            Err(e) => {
                log::error!(
                    "limits: cannot record {} budget settlement(s) in {FILE}: {e}",
                    batch.len()
                );
                false
            }
        };
        for w in batch {
            let _ = w.ack.send(ok);
        }
    }
}

impl SpendStore {
    /// Opens (creating) the store and returns it with every recorded spend.
    fn open(dir: &Path) -> Result<(SpendStore, SpendRows), String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the data directory {}: {e}", dir.display()))?;
        let path = dir.join(FILE);
        let conn = open_db(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let rows = load(&conn).map_err(|e| format!("{}: {e}", path.display()))?;
        drop(conn);
        Ok((
            SpendStore {
                path,
                tx: Mutex::new(None),
            },
            rows,
        ))
    }

    fn send(&self, w: Write) -> bool {
        let mut tx = lock(&self.tx);
        if tx.is_none() {
            let (s, rx) = mpsc::channel();
            let path = self.path.clone();
            match std::thread::Builder::new()
                .name("limits-store".into())
                .spawn(move || writer(&path, rx))
            {
                Ok(_) => *tx = Some(s),
                Err(e) => {
                    log::error!("limits: cannot start the spend writer: {e}");
                    return false;
                }
            }
        }
        tx.as_ref().is_some_and(|s| s.send(w).is_ok())
    }

    async fn add(&self, key: &str, period: &str, delta: Nanos) {
        let (ack, done) = tokio::sync::oneshot::channel();
        let sent = self.send(Write {
            key: key.to_string(),
            period: period.to_string(),
            delta,
            ack,
        });
        if !sent || !matches!(done.await, Ok(true)) {
            log::warn!("limits: the spend of key {key:?} in {period} is kept in memory only");
        }
    }
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
    /// In-memory limits over an optional store.
    fn with_store(store: Option<SpendStore>) -> LocalLimits {
        LocalLimits {
            keys: Mutex::new(HashMap::new()),
            store,
        }
    }

    /// In-memory limits, nothing persisted.
    pub fn new() -> LocalLimits {
        LocalLimits::with_store(None)
    }

    /// Opens the spend store in `dir` (none: memory only).
    pub fn open(dir: Option<&Path>) -> Result<LocalLimits, String> {
        match dir {
            Some(d) => LocalLimits::open_dir(d),
            None => Ok(LocalLimits::with_store(None)),
        }
    }

    fn open_dir(dir: &Path) -> Result<LocalLimits, String> {
        let (store, rows) = SpendStore::open(dir)?;
        let l = LocalLimits::with_store(Some(store));
        {
            let mut keys = lock(&l.keys);
            for (key, period, spent) in rows {
                keys.entry(key)
                    .or_default()
                    .spend
                    .entry(period)
                    .or_default()
                    .spent = spent;
            }
        }
        Ok(l)
    }

    /// Checks and reserves `ask` at `now` (unix seconds) under one lock.
    pub(crate) fn reserve(&self, ask: &Ask, now: u64) -> Result<Reserved, Refusal> {
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
        let mut remaining = None;
        let mut budget = None;
        if let Some(b) = &ask.budget {
            let period = period_at(b.period, i64::try_from(now).unwrap_or(i64::MAX));
            let s = k.spend.entry(period.id.clone()).or_default();
            let left = b.nanos - s.spent - s.held;
            if ask.cost > left {
                return Err(Refusal::Budget {
                    budget: b.clone(),
                    period: period.id,
                    remaining: left,
                    asked: ask.cost,
                });
            }
            s.held += ask.cost;
            remaining = Some(left - ask.cost);
            budget = Some((b.clone(), period.id));
        }
        if ask.rpm.is_some() {
            k.requests.add(now, 1);
        }
        if ask.tpm.is_some() {
            k.tokens.add(now, ask.tokens);
        }
        let held = (ask.tpm.is_some() || budget.is_some()).then(|| Held {
            key_id: ask.key_id.clone(),
            tokens: if ask.tpm.is_some() { ask.tokens } else { 0 },
            tpm: ask.tpm.is_some(),
            bucket: now,
            cost: if budget.is_some() { ask.cost } else { 0 },
            budget,
            id: String::new(),
        });
        Ok(Some((held, remaining)))
    }

    /// Applies a settlement in memory; returns the budget left.
    fn apply(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        let mut keys = lock(&self.keys);
        let k = keys.entry(held.key_id.clone()).or_default();
        if held.tpm {
            k.tokens
                .adjust(held.bucket, tokens as i64 - held.tokens as i64);
        }
        let (b, period) = held.budget.as_ref()?;
        let s = k.spend.entry(period.clone()).or_default();
        s.held -= held.cost;
        s.spent += cost;
        Some(b.nanos - s.spent - s.held)
    }

    /// Settles `held` to the real figures, persisting the spend.
    pub(crate) async fn settle(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        let remaining = self.apply(held, tokens, cost);
        if let (Some(store), Some((_, period))) = (&self.store, &held.budget) {
            if cost != 0 {
                store.add(&held.key_id, period, cost).await;
            }
        }
        remaining
    }

    /// Releases `held` at once (nothing to persist).
    pub(crate) fn release_now(&self, held: &Held) {
        self.apply(held, 0, 0);
    }

    /// The live state of `key` at `now`.
    pub fn state(&self, key: &ApiKey, now: u64) -> KeyState {
        let mut keys = lock(&self.keys);
        let k = keys.entry(key.id.clone()).or_default();
        let budget = key.budget.as_ref().map(|b| {
            let period = period_at(b.period, i64::try_from(now).unwrap_or(i64::MAX));
            let (spent, reserved) = k
                .spend
                .get(&period.id)
                .map_or((0, 0), |s| (s.spent, s.held));
            BudgetState {
                budget: b.clone(),
                period,
                spent,
                reserved,
            }
        });
        KeyState {
            rpm: key.rpm.map(|l| (l, k.requests.used(now))),
            tpm: key.tpm.map(|l| (l, k.tokens.used(now))),
            budget,
        }
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

    #[test]
    fn rpm_slides() {
        let l = LocalLimits::new();
        let k = key(r#","rpm":2"#);
        let ask = Ask::request_only(&k);
        assert!(l.reserve(&ask, 100).is_ok());
        assert!(l.reserve(&ask, 130).is_ok());
        assert_eq!(
            l.reserve(&ask, 159).unwrap_err(),
            Refusal::Rpm {
                limit: 2,
                retry_after: 2
            }
        );
        assert!(l.reserve(&ask, 161).is_ok());
        assert_eq!(l.state(&k, 161).rpm, Some((2, 2)));
    }

    #[tokio::test]
    async fn tpm_reserves_then_settles() {
        let l = LocalLimits::new();
        let k = key(r#","tpm":100"#);
        let (held, _) = l.reserve(&Ask::inference(&k, 80, 0), 10).unwrap().unwrap();
        let held = held.unwrap();
        assert!(matches!(
            l.reserve(&Ask::inference(&k, 30, 0), 10),
            Err(Refusal::Tpm {
                retry_after: Some(61),
                ..
            })
        ));
        l.settle(&held, 20, 0).await;
        assert!(l.reserve(&Ask::inference(&k, 30, 0), 11).is_ok());
        assert_eq!(l.state(&k, 11).tpm, Some((100, 50)));
        assert!(matches!(
            l.reserve(&Ask::inference(&k, 101, 0), 11),
            Err(Refusal::Tpm {
                retry_after: None,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn budget_holds_and_survives_a_restart() {
        let dir = tmp("restart");
        let k = key(r#","budget":{"usd":"0.10","period":"day"}"#);
        let cost = 30_000_000; // 0.03 USD
        {
            let l = LocalLimits::open(Some(&dir)).unwrap();
            let mut held = Vec::new();
            for _ in 0..3 {
                let (h, _) = l
                    .reserve(&Ask::inference(&k, 0, cost), 1000)
                    .unwrap()
                    .unwrap();
                held.push(h.unwrap());
            }
            match l.reserve(&Ask::inference(&k, 0, cost), 1000) {
                Err(Refusal::Budget { remaining, .. }) => assert_eq!(remaining, 10_000_000),
                other => panic!("{other:?}"),
            }
            // One fails (released), two settle below their reservation.
            l.release_now(&held[0]);
            assert_eq!(l.settle(&held[1], 0, 25_000_000).await, Some(45_000_000));
            assert_eq!(l.settle(&held[2], 0, 25_000_000).await, Some(50_000_000));
            let st = l.state(&k, 1000).budget.unwrap();
            assert_eq!(
                (st.spent, st.reserved, st.remaining()),
                (50_000_000, 0, 50_000_000)
            );
        }
        let l = LocalLimits::open(Some(&dir)).unwrap();
        let st = l.state(&k, 1000).budget.unwrap();
        assert_eq!(st.spent, 50_000_000);
        assert_eq!(st.period.id, "1970-01-01");
        // The next day starts afresh.
        assert_eq!(l.state(&k, 86_400).budget.unwrap().spent, 0);
        assert_eq!(
            st.budget,
            Budget {
                nanos: 100_000_000,
                period: BudgetPeriod::Day
            }
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
