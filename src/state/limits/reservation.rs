//! Per-key limits that hold exactly (docs/configuration.md "Limits and budgets"): requests per
//! minute and tokens per minute over a sliding minute, and budgets in USD per day, month or for the
//! key's whole life.
//!
//! Reserve, then settle. Before a request goes upstream its worst case (input
//! bound plus output cap, in tokens and at catalog prices) is reserved in one
//! atomic step that also checks rpm, tpm and the remaining budget; when the
//! usage is known the reservation is settled to the real figures; a request
//! that fails releases it (dropping a [`Reservation`] releases it). So N
//! requests in flight can never spend more than the budget between them.
//!
//! Two backends with the same semantics: embedded (one process: windows and
//! reservations in memory, spend per key and period in `DATA/limits.sqlite`,
//! see [`local`]) and fleet (`--redis`: everything in Redis,
//! each step one Lua script, see [`redis`]).
//!
//! Money is counted in integer nano-USD (1e-9 USD): a request's cost is
//! `tokens × price` computed exactly in pico-USD and rounded up to the next
//! nano-USD, so sums are exact and never below the true cost.
//!
//! The sliding minute is kept in one-second buckets: a request (or token)
//! counts from its second until 61 seconds later, so no 60-second span ever
//! holds more than the limit, and `retry-after` is the number of seconds until
//! enough buckets have left the window.

pub mod local;
pub mod redis;

use crate::config::{ApiKey, Budget, BudgetPeriod, Pricing};
use crate::error::{ErrorKind, GatewayError};
use crate::obs::metrics::Metrics;
use local::LocalLimits;
use redis::RedisLimits;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// An amount of money in nano-USD (1e-9 USD).
pub type Nanos = i64;

/// Nano-USD per USD.
pub const NANOS_PER_USD: i64 = 1_000_000_000;

/// Seconds a bucket stays in the window after its own second (see the module doc).
pub const WINDOW_SECS: u64 = 60;

/// How long a reservation that is never settled (its instance died) holds
/// budget and tokens in Redis before it is dropped.
pub const RESERVATION_LEASE_SECS: u64 = 3600;

/// `n` nano-USD as a decimal USD string with at least two decimals: `50.00`,
/// `0.072`, `0.000000550`-style amounts trimmed to `0.00000055`.
pub fn format_usd(n: Nanos) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let a = n.unsigned_abs();
    let whole = a / NANOS_PER_USD.unsigned_abs();
    let frac = a % NANOS_PER_USD.unsigned_abs();
    let mut f = format!("{frac:09}");
    while f.len() > 2 && f.ends_with('0') {
        f.pop();
    }
    format!("{sign}{whole}.{f}")
}

/// A catalog price (a validated decimal string, USD per token) in pico-USD
/// (1e-12 USD) per token; digits past the twelfth decimal round up.
pub fn price_pico(s: &str) -> i128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let whole: i128 = int.parse().unwrap_or(0);
    let mut f: i128 = 0;
    for b in frac.bytes().chain(std::iter::repeat(b'0')).take(12) {
        f = f * 10 + i128::from(b.saturating_sub(b'0'));
    }
    let rest_nonzero = frac.bytes().skip(12).any(|b| b != b'0');
    whole * 1_000_000_000_000 + f + i128::from(rest_nonzero)
}

/// The cost of `input` prompt tokens and `output` completion tokens at
/// `pricing`, exact in pico-USD, rounded up to nano-USD.
pub fn cost_nanos(pricing: &Pricing, input: u64, output: u64) -> Nanos {
    let pico = i128::from(input) * price_pico(&pricing.prompt)
        + i128::from(output) * price_pico(&pricing.completion);
    let nanos = (pico + 999) / 1000;
    Nanos::try_from(nanos).unwrap_or(Nanos::MAX)
}

/// The current unix time in seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// One budget period: its id (`2026-11-23`, `2026-11`, `total`) and bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    pub id: String,
    /// Unix seconds the period started (0 for `total`).
    pub start: i64,
    /// Unix seconds the next period starts (`None` for `total`).
    pub end: Option<i64>,
}

/// Days since 1970-01-01 of a proleptic Gregorian date (inverse of
/// [`crate::util::rfc3339::civil_from_days`]).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The period of kind `kind` that contains `unix_secs` (UTC calendar).
pub fn period_at(kind: BudgetPeriod, unix_secs: i64) -> Period {
    let days = unix_secs.div_euclid(86_400);
    let (y, m, d) = crate::util::rfc3339::civil_from_days(days);
    match kind {
        BudgetPeriod::Day => Period {
            id: format!("{y:04}-{m:02}-{d:02}"),
            start: days * 86_400,
            end: Some((days + 1) * 86_400),
        },
        BudgetPeriod::Month => {
            let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
            Period {
                id: format!("{y:04}-{m:02}"),
                start: days_from_civil(y, m, 1) * 86_400,
                end: Some(days_from_civil(ny, nm, 1) * 86_400),
            }
        }
        BudgetPeriod::Total => Period {
            id: "total".into(),
            start: 0,
            end: None,
        },
    }
}

/// A sliding minute of one-second buckets (the embedded backend's window;
/// the Redis scripts keep the same buckets in a hash).
#[derive(Debug, Default, Clone)]
pub struct Window {
    buckets: VecDeque<(u64, u64)>,
    total: u64,
}

impl Window {
    fn prune(&mut self, now: u64) {
        while let Some(&(s, n)) = self.buckets.front() {
            if s + WINDOW_SECS >= now {
                break;
            }
            self.total -= n;
            self.buckets.pop_front();
        }
    }

    /// What the window holds at `now`.
    pub fn used(&mut self, now: u64) -> u64 {
        self.prune(now);
        self.total
    }

    /// Whether `asked` more fits under `limit` at `now`: `Err(Some(secs))`
    /// until it would, `Err(None)` when it never can (`asked > limit`).
    pub fn room(&mut self, now: u64, limit: u64, asked: u64) -> Result<(), Option<u64>> {
        self.prune(now);
        if self.total + asked <= limit {
            return Ok(());
        }
        if asked > limit {
            return Err(None);
        }
        let excess = self.total + asked - limit;
        let mut freed = 0;
        for &(s, n) in &self.buckets {
            freed += n;
            if freed >= excess {
                return Err(Some((s + WINDOW_SECS + 1).saturating_sub(now).max(1)));
            }
        }
        Err(Some(WINDOW_SECS + 1))
    }

    /// Counts `n` at `now` (seconds).
    pub fn add(&mut self, now: u64, n: u64) {
        match self.buckets.back_mut() {
            Some((s, m)) if *s == now => *m += n,
            _ => self.buckets.push_back((now, n)),
        }
        self.total += n;
    }

    /// Moves the bucket of second `sec` by `delta` (settling a reservation);
    /// nothing when that bucket has left the window.
    pub fn adjust(&mut self, sec: u64, delta: i64) {
        if let Some((_, n)) = self.buckets.iter_mut().find(|(s, _)| *s == sec) {
            let new = (*n as i64 + delta).max(0) as u64;
            self.total = self.total - *n + new;
            *n = new;
        }
    }
}

/// What one request asks of its key's limits.
#[derive(Debug, Clone)]
pub struct Ask {
    pub key_id: String,
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub budget: Option<Budget>,
    /// Worst-case tokens (input bound plus output cap).
    pub tokens: u64,
    /// Worst-case cost.
    pub cost: Nanos,
}

impl Ask {
    /// The request-count-only ask of a route that spends nothing (count tokens).
    pub fn request_only(key: &ApiKey) -> Ask {
        Ask {
            key_id: key.id.clone(),
            rpm: key.rpm,
            tpm: None,
            budget: None,
            tokens: 0,
            cost: 0,
        }
    }

    /// The full ask of an inference request.
    pub fn inference(key: &ApiKey, tokens: u64, cost: Nanos) -> Ask {
        Ask {
            key_id: key.id.clone(),
            rpm: key.rpm,
            tpm: key.tpm,
            budget: key.budget.clone(),
            tokens,
            cost,
        }
    }

    /// Whether nothing needs to be counted (no limit on this key).
    pub fn is_free(&self) -> bool {
        self.rpm.is_none() && self.tpm.is_none() && self.budget.is_none()
    }
}

/// Why a request does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Over the requests-per-minute limit; `retry_after` seconds until a slot frees.
    Rpm { limit: u32, retry_after: u64 },
    /// Over the tokens-per-minute limit; `retry_after` is `None` when the
    /// request alone asks more than the limit.
    Tpm {
        limit: u64,
        asked: u64,
        retry_after: Option<u64>,
    },
    /// The worst case does not fit what is left of the budget.
    Budget {
        budget: Budget,
        period: String,
        remaining: Nanos,
        asked: Nanos,
    },
    /// The shared store is unreachable and `--redis-fail closed` refuses.
    Unavailable,
}

impl Refusal {
    /// The client's error (429, or 503 for [`Refusal::Unavailable`]).
    pub fn to_error(&self) -> GatewayError {
        match self {
            Refusal::Rpm { limit, retry_after } => GatewayError::new(
                ErrorKind::RateLimited,
                format!("rate limit of {limit} requests per minute exceeded for this key"),
            )
            .with_retry_after(*retry_after),
            Refusal::Tpm {
                limit,
                asked,
                retry_after: Some(s),
            } => GatewayError::new(
                ErrorKind::RateLimited,
                format!(
                    "rate limit of {limit} tokens per minute exceeded for this key (this request may use up to {asked} tokens: input bound plus output cap)"
                ),
            )
            .with_retry_after(*s),
            Refusal::Tpm { limit, asked, .. } => GatewayError::new(
                ErrorKind::RateLimited,
                format!(
                    "this request may use up to {asked} tokens (input bound plus output cap), more than this key's limit of {limit} tokens per minute: lower max_tokens or shorten the input"
                ),
            ),
            Refusal::Budget {
                budget,
                period,
                remaining,
                asked,
            } => {
                let per = match budget.period {
                    BudgetPeriod::Day => format!("per day ({period} UTC)"),
                    BudgetPeriod::Month => format!("per month ({period} UTC)"),
                    BudgetPeriod::Total => "in total".to_string(),
                };
                GatewayError::new(
                    ErrorKind::RateLimited,
                    format!(
                        "budget of {} USD {per} exhausted for this key: {} USD left, and this request may cost up to {} USD (input bound plus output cap at catalog prices; a lower max_tokens may fit)",
                        format_usd(budget.nanos),
                        format_usd((*remaining).max(0)),
                        format_usd(*asked)
                    ),
                )
                .with_code("insufficient_quota")
            }
            Refusal::Unavailable => GatewayError::new(
                ErrorKind::Unavailable,
                "rate limits and budgets cannot be checked (the limits store is unreachable) and this gateway refuses rather than admit unchecked requests (--redis-fail closed)",
            )
            .with_retry_after(1),
        }
    }

    /// What is left of the budget, when the refusal knows.
    pub fn remaining(&self) -> Option<Nanos> {
        match self {
            Refusal::Budget { remaining, .. } => Some(*remaining),
            _ => None,
        }
    }
}

/// What a reservation holds until it is settled or released.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub key_id: String,
    /// Tokens reserved against tpm (0 when the key has no tpm).
    pub tokens: u64,
    /// Whether the key's tpm window holds the tokens.
    pub tpm: bool,
    /// The second the tokens were counted in (their window bucket).
    pub bucket: u64,
    /// Cost reserved against the budget (0 when the key has no budget).
    pub cost: Nanos,
    /// The budget and the period the cost was reserved in.
    pub budget: Option<(Budget, String)>,
    /// The reservation's id in the shared store.
    pub id: String,
}

/// What a backend's reserve step gives back: `None` when nothing is held (a
/// shared store that failed open), else what is held (if anything needs
/// settling) and the budget left.
pub(crate) type Reserved = Option<(Option<Held>, Option<Nanos>)>;

pub(crate) enum Backend {
    Local(LocalLimits),
    Redis(Box<RedisLimits>),
}

impl Backend {
    async fn settle(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        match self {
            Backend::Local(l) => l.settle(held, tokens, cost).await,
            Backend::Redis(r) => r.settle(held, tokens, cost).await,
        }
    }
}

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

    /// The budget left after this reservation (USD nanos), when the key has one.
    pub fn budget_remaining(&self) -> Option<Nanos> {
        self.remaining
    }

    /// Whether the key's budget is being tracked by this reservation.
    pub fn has_budget(&self) -> bool {
        self.held.as_ref().is_some_and(|h| h.budget.is_some())
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

/// What to do when the shared store is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Admit requests unchecked (the default).
    Open,
    /// Refuse them with 503.
    Closed,
}

impl FailMode {
    pub fn name(self) -> &'static str {
        match self {
            FailMode::Open => "open",
            FailMode::Closed => "closed",
        }
    }
}

/// Where limits live.
#[derive(Debug, Clone)]
pub struct LimitsConfig {
    /// The data directory (`--data`); `None` keeps budgets in memory only.
    pub data_dir: Option<PathBuf>,
    /// `--redis redis://host:port`: fleet mode.
    pub redis: Option<String>,
    /// Prefix of every Redis key (`--redis-prefix`).
    pub redis_prefix: String,
    /// `--redis-fail`.
    pub fail: FailMode,
}

/// One key's live state, for `GET /admin/keys/{id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// (limit, requests in the current sliding minute).
    pub rpm: Option<(u32, u64)>,
    /// (limit, tokens in the current sliding minute, reservations included).
    pub tpm: Option<(u64, u64)>,
    pub budget: Option<BudgetState>,
}

/// A budget's state in its current period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetState {
    pub budget: Budget,
    pub period: Period,
    /// Settled spend in this period.
    pub spent: Nanos,
    /// Held by requests in flight.
    pub reserved: Nanos,
}

impl BudgetState {
    /// What a new request could still reserve.
    pub fn remaining(&self) -> Nanos {
        self.budget.nanos - self.spent - self.reserved
    }
}

/// The limits of every key, in one of the two backends.
pub struct Limits {
    backend: Arc<Backend>,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Limits({})", self.backend_name())
    }
}

impl Limits {
    /// Embedded limits kept in memory only (nothing survives a restart).
    pub fn in_memory() -> Limits {
        Limits {
            backend: Arc::new(Backend::Local(LocalLimits::new())),
        }
    }

    /// Opens the configured backend: Redis when `--redis` is given (connected
    /// lazily, so an unreachable Redis does not stop the start), else the
    /// embedded one with its spend file in the data directory.
    pub fn open(cfg: &LimitsConfig, metrics: Arc<Metrics>) -> Result<Limits, String> {
        let backend = match &cfg.redis {
            Some(url) => Backend::Redis(Box::new(RedisLimits::new(
                url,
                &cfg.redis_prefix,
                cfg.fail,
                metrics,
            )?)),
            None => Backend::Local(LocalLimits::open(cfg.data_dir.as_deref())?),
        };
        Ok(Limits {
            backend: Arc::new(backend),
        })
    }

    /// `embedded` or `redis`.
    pub fn backend_name(&self) -> &'static str {
        match &*self.backend {
            Backend::Local(_) => "embedded",
            Backend::Redis(_) => "redis",
        }
    }

    /// Checks rpm, tpm and the budget and reserves the ask, in one atomic step.
    pub async fn reserve(&self, ask: Ask) -> Result<Reservation, Refusal> {
        if ask.is_free() {
            return Ok(Reservation::none());
        }
        let r = match &*self.backend {
            Backend::Local(l) => l.reserve(&ask, unix_now()),
            Backend::Redis(r) => r.reserve(&ask).await,
        }?;
        Ok(match r {
            Some((held, remaining)) => Reservation::new(self.backend.clone(), held, remaining),
            None => Reservation::none(),
        })
    }

    /// The live state of `key`.
    pub async fn state(&self, key: &ApiKey) -> Result<KeyState, String> {
        match &*self.backend {
            Backend::Local(l) => Ok(l.state(key, unix_now())),
            Backend::Redis(r) => r.state(key).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pricing(p: &str, c: &str) -> Pricing {
        Pricing {
            prompt: p.into(),
            completion: c.into(),
            prompt_usd: 0.0,
            completion_usd: 0.0,
        }
    }

    #[test]
    fn money_is_exact_and_rounds_up() {
        assert_eq!(price_pico("0.00000055"), 550_000);
        assert_eq!(price_pico("2"), 2_000_000_000_000);
        assert_eq!(price_pico("0.0000000000001"), 1);
        let p = pricing("0.00000055", "0.0000022");
        assert_eq!(cost_nanos(&p, 1000, 100), 550_000 + 220_000);
        assert_eq!(cost_nanos(&pricing("0.0000000375", "0"), 1, 0), 38);
        assert_eq!(cost_nanos(&pricing("0", "0.001"), 0, 8), 8_000_000);
        assert_eq!(format_usd(50 * NANOS_PER_USD), "50.00");
        assert_eq!(format_usd(72_000_000), "0.072");
        assert_eq!(format_usd(550), "0.00000055");
        assert_eq!(format_usd(-10_000_000), "-0.01");
    }

    #[test]
    fn periods_follow_the_utc_calendar() {
        // 2026-11-23T21:34:23Z
        let t = 1_795_469_663;
        let d = period_at(BudgetPeriod::Day, t);
        assert_eq!(d.id, "2026-11-23");
        assert_eq!(d.end.unwrap() - d.start, 86_400);
        assert!(d.start <= t && t < d.end.unwrap());
        let m = period_at(BudgetPeriod::Month, t);
        assert_eq!(m.id, "2026-11");
        assert_eq!(
            crate::util::rfc3339::Rfc3339::seconds(m.start).to_string(),
            "2026-11-01T00:00:00Z"
        );
        assert_eq!(
            crate::util::rfc3339::Rfc3339::seconds(m.end.unwrap()).to_string(),
            "2026-12-01T00:00:00Z"
        );
        let dec = period_at(BudgetPeriod::Month, m.end.unwrap() + 31 * 86_400 - 1);
        assert_eq!(dec.id, "2026-12");
        assert_eq!(
            crate::util::rfc3339::Rfc3339::seconds(dec.end.unwrap()).to_string(),
            "2027-01-01T00:00:00Z"
        );
        assert_eq!(period_at(BudgetPeriod::Total, t).id, "total");
        // The last second of a day is still that day.
        assert_eq!(
            period_at(BudgetPeriod::Day, d.end.unwrap() - 1).id,
            "2026-11-23"
        );
        assert_eq!(
            period_at(BudgetPeriod::Day, d.end.unwrap()).id,
            "2026-11-24"
        );
    }

    #[test]
    fn window_slides_by_the_second() {
        let mut w = Window::default();
        w.add(1000, 1);
        w.add(1030, 1);
        assert_eq!(w.room(1030, 2, 1), Err(Some(31)));
        // Crossing a calendar minute changes nothing: 1000 still counts at 1060.
        assert_eq!(w.room(1060, 2, 1), Err(Some(1)));
        assert_eq!(w.room(1061, 2, 1), Ok(()));
        assert_eq!(w.used(1061), 1);
        assert_eq!(w.room(1061, 2, 3), Err(None));
        w.add(1061, 5);
        w.adjust(1061, -3);
        assert_eq!(w.used(1061), 3);
        w.adjust(999, 100);
        assert_eq!(w.used(1091), 2);
        assert_eq!(w.used(1200), 0);
    }
}
