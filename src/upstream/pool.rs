//! Upstream pools (docs/resilience.md): each upstream's passive health (cooled down
//! after a 429, a 5xx, a timeout, a refused connection or a refused
//! credential, for its `retry-after` or a back-off that doubles up to
//! [`BACKOFF_MAX`]; when a cool-down ends the upstream is half-open: one
//! trial request at a time until one succeeds), its requests in flight, and
//! the weighted choice among a provider's usable upstreams: with session
//! affinity, weighted rendezvous hashing of the request's session key (a
//! conversation stays on one upstream while it is open); without, smooth
//! weighted round-robin, the least loaded among equals.
//!
//! A member's state outlives catalog reloads: the `Registry` hands a new
//! snapshot the member of every upstream whose identity (provider, id,
//! protocol, base URL, key variable) did not change.

use crate::config::{Catalog, Provider, Upstream};
use crate::family::Family;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// The first back-off of an upstream that failed without a `retry-after`.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest back-off: with half-open trials (one request at a time once a
/// cool-down ends), a recovered upstream is back in use within this long,
/// and a dead one costs one trial request per this long.
pub const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How long a half-open upstream's trial request keeps other requests away
/// from it when the trial never reports (its request ended without an answer
/// to judge the upstream by).
pub const TRIAL_LEASE: Duration = Duration::from_secs(10);
/// The failures an upstream's admin view keeps (the latest ones).
pub const RECENT_FAILURES: usize = 10;
/// The longest `retry-after` honoured (a longer one is cut to this).
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(3600);

/// Why an upstream attempt failed, as health sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// 429, with the upstream's `retry-after` when it sent one.
    RateLimited(Option<Duration>),
    /// A 5xx status (with its `retry-after`, e.g. 503).
    Status(u16, Option<Duration>),
    /// Connect, first-token, idle or total deadline.
    Timeout,
    /// Refused, reset or unresolvable.
    Unreachable,
    /// A broken answer (invalid body or stream, a redirect).
    Invalid,
    /// 401 or 403: the provider refused the gateway's own credential.
    /// Nothing the client can fix and nothing a retry on this upstream
    /// soon will: it cools with the doubling back-off, and the request
    /// moves on to the next upstream or fallback.
    Credential,
}

impl Cause {
    /// The short label used in metrics, the access log and the admin view.
    pub fn label(self) -> &'static str {
        match self {
            Cause::RateLimited(_) => "rate_limited",
            Cause::Status(..) => "status_5xx",
            Cause::Timeout => "timeout",
            Cause::Unreachable => "unreachable",
            Cause::Invalid => "invalid",
            Cause::Credential => "credential_refused",
        }
    }

    /// The upstream's status, when it answered with one.
    pub fn status(self) -> Option<u16> {
        match self {
            Cause::RateLimited(_) => Some(429),
            Cause::Status(s, _) => Some(s),
            _ => None,
        }
    }

    fn retry_after(self) -> Option<Duration> {
        match self {
            Cause::RateLimited(r) | Cause::Status(_, r) => r,
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
struct Health {
    /// Skipped until then.
    until: Option<Instant>,
    /// Failures since the last success.
    streak: u32,
    /// The last [`RECENT_FAILURES`] failures, oldest first, for the admin view.
    recent: VecDeque<(Cause, Instant)>,
    /// When a half-open upstream's trial request was sent.
    trial: Option<Instant>,
}

/// One upstream's live state.
#[derive(Debug)]
pub struct Member {
    key: String,
    /// The upstream's own hash for rendezvous hashing: of its provider's
    /// and its own id, so it holds across reloads and instances.
    seed: u64,
    in_flight: AtomicU32,
    health: Mutex<Health>,
    /// Attempts, failures and cool-downs since start.
    pub attempts: AtomicU64,
    pub failures: AtomicU64,
    pub cooldowns: AtomicU64,
}

/// Holds one request in flight on a member; dropping it ends the request.
#[derive(Debug)]
pub struct InFlight(Arc<Member>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl InFlight {
    /// The member this request runs on.
    pub fn member(&self) -> &Arc<Member> {
        &self.0
    }
}

/// What the admin view and the metrics show of a member.
#[derive(Debug, Clone)]
pub struct MemberView {
    pub in_flight: u32,
    /// Time left in the cool-down (None: healthy).
    pub cooling: Option<Duration>,
    pub streak: u32,
    pub last_failure: Option<(&'static str, Duration)>,
    /// The latest failures, newest first: what went wrong and how long ago.
    pub recent: Vec<(Cause, Duration)>,
    pub attempts: u64,
    pub failures: u64,
    pub cooldowns: u64,
}

impl Member {
    fn new(key: String, seed: u64) -> Member {
        Member {
            key,
            seed,
            in_flight: AtomicU32::new(0),
            health: Mutex::new(Health::default()),
            attempts: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            cooldowns: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one attempt and holds it in flight until the guard drops.
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The time left in the cool-down at `now`, if cooling.
    pub fn cooling(&self, now: Instant) -> Option<Duration> {
        self.lock()
            .until
            .and_then(|u| u.checked_duration_since(now))
            .filter(|d| !d.is_zero())
    }

    /// Whether a request may go to this upstream at `now`: it is healthy,
    /// or half-open (a cool-down after a failure is over) with no trial
    /// request out.
    fn open_at(&self, now: Instant) -> bool {
        let h = self.lock();
        if h.until.is_some_and(|u| u > now) {
            return false;
        }
        h.streak == 0 || h.trial.is_none_or(|at| now >= at + TRIAL_LEASE)
    }

    /// Claims the trial of a half-open upstream for the request about to be
    /// sent (always granted to a healthy one); false when another request
    /// holds it.
    fn claim(&self, now: Instant) -> bool {
        let mut h = self.lock();
        if h.streak == 0 {
            return true;
        }
        if h.trial.is_some_and(|at| now < at + TRIAL_LEASE) {
            return false;
        }
        h.trial = Some(now);
        true
    }

    /// The upstream answered: its failure streak ends.
    pub fn succeeded(&self) {
        let mut h = self.lock();
        h.streak = 0;
        h.until = None;
        h.trial = None;
    }

    /// The upstream failed: cools it for its `retry-after`, else for a
    /// back-off that doubles with each failure in a row. Returns the cool-down.
    pub fn failed(&self, cause: Cause, now: Instant) -> Duration {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.cooldowns.fetch_add(1, Ordering::Relaxed);
        let mut h = self.lock();
        h.streak = h.streak.saturating_add(1);
        if h.recent.len() >= RECENT_FAILURES {
            h.recent.pop_front();
        }
        h.recent.push_back((cause, now));
        h.trial = None;
        let cool = match cause.retry_after() {
            Some(r) => r.min(RETRY_AFTER_MAX),
            None => backoff(h.streak),
        };
        let until = now + cool;
        // A later cool-down never shortens an earlier, longer one.
        if h.until.is_none_or(|u| u < until) {
            h.until = Some(until);
        }
        cool
    }

    /// A copy of the state for display.
    pub fn view(&self, now: Instant) -> MemberView {
        let h = self.lock();
        MemberView {
            in_flight: self.in_flight(),
            cooling: h
                .until
                .and_then(|u| u.checked_duration_since(now))
                .filter(|d| !d.is_zero()),
            streak: h.streak,
            last_failure: h
                .recent
                .back()
                .map(|(c, at)| (c.label(), now.saturating_duration_since(*at))),
            recent: h
                .recent
                .iter()
                .rev()
                .map(|(c, at)| (*c, now.saturating_duration_since(*at)))
                .collect(),
            attempts: self.attempts.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            cooldowns: self.cooldowns.load(Ordering::Relaxed),
        }
    }
}

/// The back-off after `streak` failures in a row: 1 s, then 2 s ([`BACKOFF_MAX`]).
pub fn backoff(streak: u32) -> Duration {
    let shift = streak.saturating_sub(1).min(16);
    (BACKOFF_BASE * (1u32 << shift)).min(BACKOFF_MAX)
}

/// An upstream's hash for rendezvous hashing ([`Member::seed`]).
fn member_seed(provider: &Provider, u: &Upstream) -> u64 {
    let mut h = crate::util::hash::Hasher::new();
    h.piece(provider.id.as_bytes());
    h.piece(u.id.as_bytes());
    h.finish()
}

/// The identity of an upstream across reloads.
fn member_key(provider: &Provider, u: &Upstream) -> String {
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
        provider.id,
        u.id,
        u.protocol_name,
        u.base_url,
        u.api_key_env.as_deref().unwrap_or("")
    )
}

/// One provider's upstreams as a pool: members parallel to `Provider::upstreams`.
#[derive(Debug)]
pub struct ProviderPool {
    members: Vec<Arc<Member>>,
    /// Smooth weighted round-robin: each member's current weight.
    current: Mutex<Vec<i64>>,
}

/// A set of upstream indices already tried by one request (a provider has
/// at most 64 upstreams in a pool that is tracked; the rest are never tried twice either).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tried(u64);

/// A request's session key for [`Pool::pick`] (docs/resilience.md "Session
/// affinity"), computed only if the pick compares upstreams by it.
pub type SessionKey<'k> = &'k (dyn Fn() -> u64 + Sync);

impl Tried {
    pub fn contains(self, i: usize) -> bool {
        i < 64 && self.0 & (1 << i) != 0
    }

    pub fn insert(&mut self, i: usize) {
        if i < 64 {
            self.0 |= 1 << i;
        }
    }
}

impl ProviderPool {
    /// The member of upstream `i`.
    pub fn member(&self, i: usize) -> &Arc<Member> {
        &self.members[i]
    }

    /// The members, parallel to the provider's upstreams.
    pub fn members(&self) -> &[Arc<Member>] {
        &self.members
    }

    /// The next upstream to try for a client of `family`: among those not yet
    /// tried and not cooling down, the ones speaking `family`; when none of
    /// those is left, the ones speaking the protocol of the first other
    /// upstream in catalog order, then the next protocol's (docs/resilience.md: a
    /// provider without the client's protocol uses its first upstream).
    /// Within a protocol the choice goes by weight: with a session key
    /// (`affinity`), the upstream the key ranks first ([`Self::rendezvous`]);
    /// without, round-robin, and among upstreams of equal weight the one with
    /// the fewest requests in flight.
    pub fn pick(
        &self,
        upstreams: &[Upstream],
        family: Family,
        tried: Tried,
        now: Instant,
        affinity: Option<SessionKey<'_>>,
    ) -> Option<usize> {
        let n = upstreams.len().min(self.members.len());
        let protocols = std::iter::once(family).chain(
            upstreams
                .iter()
                .enumerate()
                .filter(|&(i, u)| {
                    u.protocol != family && !upstreams[..i].iter().any(|o| o.protocol == u.protocol)
                })
                .map(|(_, u)| u.protocol),
        );
        for protocol in protocols {
            let usable = |i: usize| {
                !tried.contains(i)
                    && upstreams[i].protocol == protocol
                    && self.members[i].open_at(now)
            };
            let found = match affinity {
                Some(key) => self.rendezvous(upstreams, n, &usable, key, now),
                None => self.round_robin(upstreams, n, &usable, now),
            };
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// Weighted rendezvous (highest random weight) hashing: each usable
    /// upstream scores `weight / -ln(u)`, `u` uniform in (0, 1) from the
    /// session key mixed with the upstream's seed, and the highest score
    /// takes the request (a half-open one whose trial is out gives way to
    /// the next). A key keeps its upstream while that one is usable; when it
    /// cools, its keys spread over the others by weight and come back when
    /// it recovers, and no other key moves. Over many keys each upstream
    /// gets its weight's share. Nothing is allocated.
    fn rendezvous(
        &self,
        upstreams: &[Upstream],
        n: usize,
        usable: &dyn Fn(usize) -> bool,
        key_of: SessionKey<'_>,
        now: Instant,
    ) -> Option<usize> {
        // Asked for only when two upstreams are compared: a lone usable one
        // takes the request without the key being computed.
        let key = std::cell::OnceCell::new();
        let score = |i: usize| {
            let h = crate::util::hash::mix(*key.get_or_init(key_of), self.members[i].seed);
            // 53 random bits, strictly inside (0, 1).
            let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            f64::from(upstreams[i].weight) / -u.ln()
        };
        // A half-open upstream's trial out: the next in the key's order.
        let mut passed = Tried::default();
        for _ in 0..n {
            let best = (0..n)
                .filter(|&i| usable(i) && !passed.contains(i))
                .max_by(|&a, &b| score(a).total_cmp(&score(b)))?;
            if self.members[best].claim(now) {
                return Some(best);
            }
            passed.insert(best);
        }
        None
    }

    /// Smooth weighted round-robin among the usable upstreams ([`Self::choose`]);
    /// a half-open one whose trial is out gives way to the next.
    fn round_robin(
        &self,
        upstreams: &[Upstream],
        n: usize,
        usable: &dyn Fn(usize) -> bool,
        now: Instant,
    ) -> Option<usize> {
        let mut candidates: Vec<usize> = (0..n).filter(|&i| usable(i)).collect();
        while !candidates.is_empty() {
            let i = self.choose(upstreams, &candidates);
            // A half-open upstream takes one trial request at a time.
            if self.members[i].claim(now) {
                return Some(i);
            }
            candidates.retain(|&c| c != i);
        }
        None
    }

    /// Whether an upstream not in `tried` could take a request now (of any
    /// protocol; a half-open one's trial not claimed).
    pub fn any_open(&self, upstreams: &[Upstream], tried: Tried, now: Instant) -> bool {
        let n = upstreams.len().min(self.members.len());
        (0..n).any(|i| !tried.contains(i) && self.members[i].open_at(now))
    }

    /// When every upstream is cooling down: the untried one whose cool-down
    /// ends first (the client's protocol first among equals).
    pub fn soonest(
        &self,
        upstreams: &[Upstream],
        family: Family,
        tried: Tried,
        now: Instant,
    ) -> Option<usize> {
        (0..upstreams.len().min(self.members.len()))
            .filter(|&i| !tried.contains(i))
            .min_by_key(|&i| {
                (
                    self.members[i].cooling(now).unwrap_or_default(),
                    upstreams[i].protocol != family,
                )
            })
    }

    /// Smooth weighted round-robin over `candidates` (nginx's: every
    /// candidate gains its weight, the highest is chosen and pays the total),
    /// then the least loaded of the chosen one's equals in weight.
    fn choose(&self, upstreams: &[Upstream], candidates: &[usize]) -> usize {
        if candidates.len() == 1 {
            return candidates[0];
        }
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let mut total = 0i64;
        let mut best = candidates[0];
        for &i in candidates {
            let w = i64::from(upstreams[i].weight);
            cur[i] += w;
            total += w;
            if cur[i] > cur[best] {
                best = i;
            }
        }
        let weight = upstreams[best].weight;
        let mut chosen = best;
        for &i in candidates {
            if upstreams[i].weight == weight
                && self.members[i].in_flight() < self.members[chosen].in_flight()
            {
                chosen = i;
            }
        }
        // The one that goes pays the total, so the split by weight holds
        // (an equal that was passed over keeps its lead for the next turn).
        cur[chosen] -= total;
        chosen
    }
}

/// Members by identity, so a reload keeps the state of unchanged upstreams.
#[derive(Debug, Default)]
pub struct Registry {
    members: Mutex<HashMap<String, Weak<Member>>>,
}

impl Registry {
    /// Pools for every provider of `catalog` (parallel to `catalog.providers`),
    /// reusing the member of every upstream this registry already knows.
    pub fn pools(&self, catalog: &Catalog) -> Vec<Arc<ProviderPool>> {
        let mut known = self.members.lock().unwrap_or_else(|p| p.into_inner());
        known.retain(|_, m| m.strong_count() > 0);
        catalog
            .providers
            .iter()
            .map(|p| {
                let members: Vec<Arc<Member>> = p
                    .upstreams
                    .iter()
                    .map(|u| {
                        let key = member_key(p, u);
                        if let Some(m) = known.get(&key).and_then(Weak::upgrade) {
                            return m;
                        }
                        let m = Arc::new(Member::new(key.clone(), member_seed(p, u)));
                        known.insert(key, Arc::downgrade(&m));
                        m
                    })
                    .collect();
                let current = Mutex::new(vec![0; members.len()]);
                Arc::new(ProviderPool { members, current })
            })
            .collect()
    }

    /// Remembers the members of pools built elsewhere (the first snapshot).
    pub fn remember(&self, pools: &[Arc<ProviderPool>]) {
        let mut known = self.members.lock().unwrap_or_else(|p| p.into_inner());
        for m in pools.iter().flat_map(|p| p.members.iter()) {
            known.insert(m.key.clone(), Arc::downgrade(m));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn catalog(weights: &[u32], protocols: &[&str]) -> Catalog {
        let ups: Vec<String> = weights
            .iter()
            .zip(protocols)
            .enumerate()
            .map(|(i, (w, p))| {
                format!(
                    r#"{{"protocol":"{p}","base_url":"http://127.0.0.1:{}/v1","weight":{w}}}"#,
                    1000 + i
                )
            })
            .collect();
        Catalog::from_str(
            "c.json",
            &format!(
                r#"{{"providers":[{{"id":"p","families":["openai"],"upstreams":[{}]}}],"models":[]}}"#,
                ups.join(",")
            ),
            &|_| None,
        )
        .unwrap()
    }

    #[test]
    fn recent_failures_are_a_bounded_ring_newest_first() {
        let m = Member::new("k".into(), 1);
        let t0 = Instant::now();
        for i in 0..(RECENT_FAILURES as u64 + 3) {
            m.failed(
                Cause::Status(500 + i as u16, None),
                t0 + Duration::from_millis(i),
            );
        }
        m.failed(Cause::Timeout, t0 + Duration::from_millis(100));
        let v = m.view(t0 + Duration::from_millis(200));
        assert_eq!(v.recent.len(), RECENT_FAILURES);
        assert_eq!(v.recent[0], (Cause::Timeout, Duration::from_millis(100)));
        assert_eq!(v.recent[1].0.status(), Some(512));
        assert_eq!(v.recent[RECENT_FAILURES - 1].0.status(), Some(504));
        assert_eq!(v.last_failure.map(|l| l.0), Some("timeout"));
        // A success ends the streak, not the history.
        m.succeeded();
        assert_eq!(m.view(t0).recent.len(), RECENT_FAILURES);
    }

    #[test]
    fn weights_split_traffic_exactly() {
        let c = catalog(&[3, 1], &["openai", "openai"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let mut n = [0; 2];
        for _ in 0..400 {
            n[pool
                .pick(ups, Family::OpenAi, Tried::default(), Instant::now(), None)
                .unwrap()] += 1;
        }
        assert_eq!(n, [300, 100]);
    }

    #[test]
    fn least_in_flight_among_equals() {
        let c = catalog(&[1, 1, 1], &["openai", "openai", "openai"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let _busy0 = pool.member(0).start();
        let _busy1 = pool.member(1).start();
        for _ in 0..5 {
            assert_eq!(
                pool.pick(ups, Family::OpenAi, Tried::default(), Instant::now(), None),
                Some(2)
            );
        }
    }

    #[test]
    fn cooled_members_are_skipped_and_other_protocols_wait_their_turn() {
        let c = catalog(&[1, 1, 1], &["openai", "openai", "anthropic"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let now = Instant::now();
        let cool = pool
            .member(0)
            .failed(Cause::RateLimited(Some(Duration::from_secs(7))), now);
        assert_eq!(cool, Duration::from_secs(7));
        for _ in 0..4 {
            assert_eq!(
                pool.pick(ups, Family::OpenAi, Tried::default(), now, None),
                Some(1)
            );
        }
        let mut tried = Tried::default();
        tried.insert(1);
        assert_eq!(pool.pick(ups, Family::OpenAi, tried, now, None), Some(2));
        tried.insert(2);
        assert_eq!(pool.pick(ups, Family::OpenAi, tried, now, None), None);
        assert_eq!(pool.soonest(ups, Family::OpenAi, tried, now), Some(0));
        // The cool-down ends on its own.
        let later = now + Duration::from_secs(8);
        assert_eq!(
            pool.pick(ups, Family::OpenAi, Tried::default(), later, None),
            Some(0)
        );
    }

    #[test]
    fn without_the_clients_protocol_the_first_upstreams_protocol_is_used() {
        let c = catalog(&[1, 1, 1], &["anthropic", "gemini", "anthropic"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let now = Instant::now();
        let mut n = [0; 3];
        for _ in 0..10 {
            n[pool
                .pick(ups, Family::OpenAi, Tried::default(), now, None)
                .unwrap()] += 1;
        }
        assert_eq!(n, [5, 0, 5]);
        let mut tried = Tried::default();
        tried.insert(0);
        tried.insert(2);
        assert_eq!(pool.pick(ups, Family::OpenAi, tried, now, None), Some(1));
    }

    #[test]
    fn a_half_open_upstream_takes_one_trial_at_a_time() {
        let c = catalog(&[1, 1], &["openai", "openai"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let now = Instant::now();
        let cool = pool.member(0).failed(Cause::Unreachable, now);
        // Cooling: only the other upstream is picked.
        assert_eq!(
            pool.pick(ups, Family::OpenAi, Tried::default(), now, None),
            Some(1)
        );
        // Half-open: the first pick that lands on it holds its trial, the
        // next ones go elsewhere until the trial reports.
        let later = now + cool;
        let mut only_first = Tried::default();
        only_first.insert(1);
        assert_eq!(
            pool.pick(ups, Family::OpenAi, only_first, later, None),
            Some(0)
        );
        assert_eq!(
            pool.pick(ups, Family::OpenAi, only_first, later, None),
            None
        );
        assert_eq!(
            pool.pick(ups, Family::OpenAi, Tried::default(), later, None),
            Some(1)
        );
        // A trial that never reports gives way after its lease.
        assert_eq!(
            pool.pick(ups, Family::OpenAi, only_first, later + TRIAL_LEASE, None),
            Some(0)
        );
        // The trial succeeded: the upstream is healthy, open to everyone.
        pool.member(0).succeeded();
        assert_eq!(
            pool.pick(ups, Family::OpenAi, only_first, later, None),
            Some(0)
        );
        assert_eq!(
            pool.pick(ups, Family::OpenAi, only_first, later, None),
            Some(0)
        );
    }

    /// A deterministic set of session keys.
    fn keys(n: u64) -> impl Iterator<Item = u64> {
        (0..n).map(|k| crate::util::hash::key(format!("session-{k}").as_bytes()))
    }

    fn sticky(pool: &ProviderPool, ups: &[Upstream], key: u64, now: Instant) -> Option<usize> {
        pool.pick(ups, Family::OpenAi, Tried::default(), now, Some(&|| key))
    }

    #[test]
    fn the_session_key_is_computed_only_to_compare_upstreams() {
        use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
        let asked = AtomicU32::new(0);
        let key = || {
            asked.fetch_add(1, Relaxed);
            7
        };
        let one = catalog(&[1], &["openai"]);
        let pool = &Registry::default().pools(&one)[0];
        let ups = &one.providers[0].upstreams;
        let now = Instant::now();
        assert_eq!(
            pool.pick(ups, Family::OpenAi, Tried::default(), now, Some(&key)),
            Some(0)
        );
        assert_eq!(asked.load(Relaxed), 0, "a lone upstream takes it unasked");
        let three = catalog(&[1, 1, 1], &["openai", "openai", "openai"]);
        let pool = &Registry::default().pools(&three)[0];
        let ups = &three.providers[0].upstreams;
        assert!(pool
            .pick(ups, Family::OpenAi, Tried::default(), now, Some(&key))
            .is_some());
        assert_eq!(asked.load(Relaxed), 1, "asked once however many scores");
    }

    #[test]
    fn a_session_key_picks_the_same_upstream_every_time() {
        let c = catalog(&[1, 1, 1], &["openai", "openai", "openai"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let now = Instant::now();
        let mut seen = [0; 3];
        for key in keys(60) {
            let first = sticky(pool, ups, key, now).unwrap();
            // Load does not move a session (round-robin's least-in-flight
            // rule is not applied): the member stays busy meanwhile.
            let _busy = pool.member(first).start();
            for _ in 0..20 {
                assert_eq!(sticky(pool, ups, key, now), Some(first));
            }
            seen[first] += 1;
        }
        // Different sessions spread over every member.
        assert!(seen.iter().all(|&n| n >= 10), "{seen:?}");
        // Another pool built from the same catalog (a reload, another
        // instance) ranks every key the same way.
        let other = &Registry::default().pools(&c)[0];
        for key in keys(60) {
            assert_eq!(sticky(other, ups, key, now), sticky(pool, ups, key, now));
        }
    }

    #[test]
    fn a_cooled_upstreams_sessions_move_and_come_back_and_no_other_moves() {
        let c = catalog(&[1, 1, 1], &["openai", "openai", "openai"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let now = Instant::now();
        let before: Vec<usize> = keys(300)
            .map(|k| sticky(pool, ups, k, now).unwrap())
            .collect();
        let cool = pool.member(0).failed(Cause::Unreachable, now);
        let during: Vec<usize> = keys(300)
            .map(|k| sticky(pool, ups, k, now).unwrap())
            .collect();
        let mut moved_to = [0; 3];
        for (b, d) in before.iter().zip(&during) {
            if *b == 0 {
                moved_to[*d] += 1;
            } else {
                assert_eq!(b, d, "a session of a healthy upstream moved");
            }
        }
        // Upstream 0's sessions went to both others, none to it.
        assert_eq!(moved_to[0], 0);
        assert!(moved_to[1] > 20 && moved_to[2] > 20, "{moved_to:?}");
        // Recovered (its trial succeeded): every session is back where it was.
        let later = now + cool;
        pool.member(0).succeeded();
        let after: Vec<usize> = keys(300)
            .map(|k| sticky(pool, ups, k, later).unwrap())
            .collect();
        assert_eq!(after, before);
    }

    #[test]
    fn sessions_split_by_weight() {
        let c = catalog(&[5, 3, 2], &["openai", "openai", "openai"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let now = Instant::now();
        let mut n = [0usize; 3];
        for key in keys(10_000) {
            n[sticky(pool, ups, key, now).unwrap()] += 1;
        }
        // Expected 5000, 3000, 2000; the key set is fixed, so this is exact
        // every run, and the band only says the split follows the weights.
        for (got, want) in n.iter().zip([5000, 3000, 2000]) {
            assert!(got.abs_diff(want) < 250, "{n:?}");
        }
    }

    #[test]
    fn a_retry_goes_to_the_sessions_next_upstream_and_the_protocol_comes_first() {
        let c = catalog(&[1, 1, 1, 1], &["openai", "openai", "openai", "anthropic"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let now = Instant::now();
        for key in keys(50) {
            let mut tried = Tried::default();
            let mut order = Vec::new();
            while let Some(i) = pool.pick(ups, Family::OpenAi, tried, now, Some(&|| key)) {
                tried.insert(i);
                order.push(i);
            }
            // Every upstream once, the other protocol's last.
            assert_eq!(order.len(), 4);
            assert_eq!(order[3], 3);
            // The order a key gives is its own: the second choice is the one
            // it gets while its first cools.
            let mut without = Tried::default();
            without.insert(order[0]);
            assert_eq!(
                pool.pick(ups, Family::OpenAi, without, now, Some(&|| key)),
                Some(order[1])
            );
        }
    }

    #[test]
    fn a_half_open_upstream_takes_one_session_request_as_its_trial() {
        let c = catalog(&[1, 1], &["openai", "openai"]);
        let pool = &Registry::default().pools(&c)[0];
        let ups = &c.providers[0].upstreams;
        let now = Instant::now();
        let key = keys(100)
            .find(|&k| sticky(pool, ups, k, now) == Some(0))
            .unwrap();
        let cool = pool.member(0).failed(Cause::Unreachable, now);
        assert_eq!(sticky(pool, ups, key, now), Some(1));
        let later = now + cool;
        // The first request after the cool-down is the trial; the next
        // ones wait for it on the other upstream.
        assert_eq!(sticky(pool, ups, key, later), Some(0));
        assert_eq!(sticky(pool, ups, key, later), Some(1));
        pool.member(0).succeeded();
        assert_eq!(sticky(pool, ups, key, later), Some(0));
    }

    #[test]
    fn backoff_grows_and_success_resets_it() {
        let c = catalog(&[1], &["openai"]);
        let pool = &Registry::default().pools(&c)[0];
        let m = pool.member(0);
        let now = Instant::now();
        assert_eq!(m.failed(Cause::Unreachable, now), Duration::from_secs(1));
        assert_eq!(m.failed(Cause::Timeout, now), Duration::from_secs(2));
        assert_eq!(m.failed(Cause::Status(502, None), now), BACKOFF_MAX);
        assert_eq!(backoff(30), BACKOFF_MAX);
        m.succeeded();
        assert!(m.cooling(now).is_none());
        assert_eq!(
            m.failed(Cause::Status(500, None), now),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn reloads_keep_the_state_of_unchanged_upstreams() {
        let reg = Registry::default();
        let c = catalog(&[1, 1], &["openai", "openai"]);
        let first = reg.pools(&c);
        first[0]
            .member(1)
            .failed(Cause::Unreachable, Instant::now());
        let again = reg.pools(&c);
        assert!(Arc::ptr_eq(again[0].member(1), first[0].member(1)));
        let changed = catalog(&[1, 2], &["openai", "anthropic"]);
        let other = reg.pools(&changed);
        assert!(Arc::ptr_eq(other[0].member(0), first[0].member(0)));
        assert!(!Arc::ptr_eq(other[0].member(1), first[0].member(1)));
    }
}
