//! The fleet limits backend (`--redis`): rpm and tpm windows, budget spend and
//! reservations live in Redis, and each step is one Lua script, so any number
//! of gateway instances enforce one budget exactly.
//!
//! Keys, per API key id `K` under the prefix `P` (the braces would put them
//! in one Redis Cluster hash slot; the gateway speaks to one Redis endpoint):
//! - `P{K}:rpm`, `P{K}:tpm`: hashes of one-second buckets (`unix second →
//!   count`), pruned as they leave the sliding minute;
//! - `P{K}:spent:PERIOD`: settled spend in nano-USD (`PERIOD` is `2026-11-23`,
//!   `2026-11` or `total`);
//! - `P{K}:held:PERIOD`: the sum of reservations in flight;
//! - `P{K}:resv` (id → `period|cost|second|tokens`) and `P{K}:resvx` (id →
//!   lease expiry): reservations. The instance renews the lease
//!   ([`RESERVATION_LEASE_SECS`]) of each of its reservations in flight
//!   every [`RENEW_EVERY`], so one it never settles (it died, or the
//!   settlement was lost) or never learned of (the reserve's answer was
//!   lost) gives its hold back when its lease ends;
//! - `P{K}:gone:ID`: a reservation whose answer was lost, released by id
//!   by the instance (kept [`GONE_SECS`]): a reserve that Redis runs only
//!   after the release does nothing.
//!
//! Time is Redis' own (`TIME`), so instances with skewed clocks still share
//! one window and roll periods over at one instant. Amounts are integers of
//! nano-USD well inside the 2^53 that Lua's numbers hold exactly.

use super::{
    period_at, Ask, BudgetState, FailMode, Held, KeyState, Nanos, Refusal, Reserved,
    RESERVATION_LEASE_SECS, WINDOW_SECS,
};
use crate::config::{ApiKey, BudgetPeriod};
use crate::obs::metrics::Metrics;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Shared by the scripts: the time, integer formatting, the UTC period of a
/// kind, pruning a window, and dropping reservations whose lease ended.
const PRELUDE: &str = r#"
local base = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1])
local function fmt(n) return string.format('%d', n) end
local function period_id(kind)
  if kind == 'total' then return 'total' end
  local days = math.floor(now / 86400)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  if m <= 2 then y = y + 1 end
  if kind == 'day' then return string.format('%04d-%02d-%02d', y, m, d) end
  return string.format('%04d-%02d', y, m)
end
local function keep(key, kind)
  if kind == 'day' then redis.call('EXPIRE', key, 40 * 86400)
  elseif kind == 'month' then redis.call('EXPIRE', key, 400 * 86400) end
end
local function window(key)
  local h = redis.call('HGETALL', key)
  local total = 0
  local b = {}
  for i = 1, #h, 2 do
    local s = tonumber(h[i])
    local n = tonumber(h[i + 1])
    if s + 60 < now then
      redis.call('HDEL', key, h[i])
    else
      total = total + n
      b[#b + 1] = {s, n}
    end
  end
  table.sort(b, function(x, y) return x[1] < y[1] end)
  return total, b
end
local function wait(total, b, limit, asked)
  if asked > limit then return -1 end
  local excess = total + asked - limit
  local freed = 0
  for _, e in ipairs(b) do
    freed = freed + e[2]
    if freed >= excess then
      local w = e[1] + 61 - now
      if w < 1 then w = 1 end
      return w
    end
  end
  return 61
end
local function purge()
  local ids = redis.call('ZRANGEBYSCORE', base .. 'resvx', '-inf', now)
  for _, id in ipairs(ids) do
    local rec = redis.call('HGET', base .. 'resv', id)
    if rec then
      local period, cost = string.match(rec, '^([^|]*)|(-?%d+)|')
      if period and period ~= '' then redis.call('DECRBY', base .. 'held:' .. period, cost) end
      redis.call('HDEL', base .. 'resv', id)
    end
    redis.call('ZREM', base .. 'resvx', id)
  end
end
"#;

/// ARGV: rpm limit, tpm limit, tokens, budget, period kind, cost, id, lease,
/// answer-by (empty strings for no limit). Returns `{"0", remaining, period,
/// now}`, or `{"1"|"2", retry_after (-1: never), used}` for rpm / tpm, or
/// `{"3", remaining, period}` for the budget, or `{"4"}` (nothing done) when
/// the script runs after its answer-by second: a call the gateway gave up
/// on, run late by a Redis that had stopped answering, must not hold budget;
/// `{"5"}` (nothing done either) when the gateway already released the id
/// ([`RELEASE_LOST`] ran first).
const RESERVE: &str = r#"
if ARGV[9] ~= '' and now > tonumber(ARGV[9]) then return {'4'} end
if redis.call('EXISTS', base .. 'gone:' .. ARGV[7]) == 1 then return {'5'} end
local tokens = tonumber(ARGV[3])
local cost = tonumber(ARGV[6])
if ARGV[1] ~= '' then
  local limit = tonumber(ARGV[1])
  local total, b = window(base .. 'rpm')
  if total + 1 > limit then return {'1', fmt(wait(total, b, limit, 1)), fmt(total)} end
end
if ARGV[2] ~= '' then
  local limit = tonumber(ARGV[2])
  local total, b = window(base .. 'tpm')
  if total + tokens > limit then return {'2', fmt(wait(total, b, limit, tokens)), fmt(total)} end
end
local period = ''
local remaining = 0
if ARGV[2] ~= '' or ARGV[4] ~= '' then purge() end
if ARGV[4] ~= '' then
  period = period_id(ARGV[5])
  local spent = tonumber(redis.call('GET', base .. 'spent:' .. period) or '0')
  local held = tonumber(redis.call('GET', base .. 'held:' .. period) or '0')
  local left = tonumber(ARGV[4]) - spent - held
  if cost > left then return {'3', fmt(left), period} end
  remaining = left - cost
  redis.call('INCRBY', base .. 'held:' .. period, ARGV[6])
  keep(base .. 'held:' .. period, ARGV[5])
end
if ARGV[1] ~= '' then
  redis.call('HINCRBY', base .. 'rpm', fmt(now), 1)
  redis.call('EXPIRE', base .. 'rpm', 120)
end
if ARGV[2] ~= '' then
  redis.call('HINCRBY', base .. 'tpm', fmt(now), ARGV[3])
  redis.call('EXPIRE', base .. 'tpm', 120)
end
if ARGV[2] ~= '' or ARGV[4] ~= '' then
  local c = '0'
  if ARGV[4] ~= '' then c = ARGV[6] end
  local tk = '0'
  if ARGV[2] ~= '' then tk = ARGV[3] end
  redis.call('HSET', base .. 'resv', ARGV[7], period .. '|' .. c .. '|' .. fmt(now) .. '|' .. tk)
  redis.call('ZADD', base .. 'resvx', fmt(now + tonumber(ARGV[8])), ARGV[7])
  redis.call('EXPIRE', base .. 'resv', tonumber(ARGV[8]) + 60)
  redis.call('EXPIRE', base .. 'resvx', tonumber(ARGV[8]) + 60)
end
return {'0', fmt(remaining), period, fmt(now)}
"#;

/// ARGV: id, real tokens, real cost, period ('' no budget), period kind,
/// budget, reserved tokens, reserved cost, bucket second, tpm ('1' or '').
/// Returns the budget left (or '' without a budget). A reservation whose
/// lease ended was already given back: only the spend is recorded.
const SETTLE: &str = r#"
if redis.call('HDEL', base .. 'resv', ARGV[1]) == 1 then
  redis.call('ZREM', base .. 'resvx', ARGV[1])
  if ARGV[4] ~= '' then redis.call('DECRBY', base .. 'held:' .. ARGV[4], ARGV[8]) end
  if ARGV[10] ~= '' and redis.call('HEXISTS', base .. 'tpm', ARGV[9]) == 1 then
    local v = redis.call('HINCRBY', base .. 'tpm', ARGV[9], fmt(tonumber(ARGV[2]) - tonumber(ARGV[7])))
    if v < 0 then redis.call('HSET', base .. 'tpm', ARGV[9], '0') end
  end
end
if ARGV[4] == '' then return '' end
local spent = tonumber(redis.call('GET', base .. 'spent:' .. ARGV[4]) or '0')
if ARGV[3] ~= '0' then
  spent = tonumber(redis.call('INCRBY', base .. 'spent:' .. ARGV[4], ARGV[3]))
  keep(base .. 'spent:' .. ARGV[4], ARGV[5])
end
local held = tonumber(redis.call('GET', base .. 'held:' .. ARGV[4]) or '0')
return fmt(tonumber(ARGV[6]) - spent - held)
"#;

/// ARGV: lease seconds, then ids. Extends the lease of each id still held
/// (a reservation settled meanwhile is not brought back). Returns how many.
const RENEW: &str = r#"
local lease = tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', base .. 'resvx', ARGV[i]) then
    redis.call('ZADD', base .. 'resvx', fmt(now + lease), ARGV[i])
    n = n + 1
  end
end
if n > 0 then
  redis.call('EXPIRE', base .. 'resv', lease + 60)
  redis.call('EXPIRE', base .. 'resvx', lease + 60)
end
return n
"#;

/// ARGV: id, seconds to remember it. Releases a reservation whose answer
/// the gateway never got (it timed out): what it holds is read from its
/// record and given back, and the id is remembered, so a reserve that
/// Redis runs only after this (it was still queued) does nothing. Returns
/// 1 when it held something.
const RELEASE_LOST: &str = r#"
redis.call('SET', base .. 'gone:' .. ARGV[1], '1', 'EX', tonumber(ARGV[2]))
local rec = redis.call('HGET', base .. 'resv', ARGV[1])
if not rec then return 0 end
local period, cost, sec, tokens = string.match(rec, '^([^|]*)|(-?%d+)|(%d+)|(%d+)$')
redis.call('HDEL', base .. 'resv', ARGV[1])
redis.call('ZREM', base .. 'resvx', ARGV[1])
if period and period ~= '' then redis.call('DECRBY', base .. 'held:' .. period, cost) end
if tokens and tokens ~= '0' and redis.call('HEXISTS', base .. 'tpm', sec) == 1 then
  local v = redis.call('HINCRBY', base .. 'tpm', sec, fmt(-tonumber(tokens)))
  if v < 0 then redis.call('HSET', base .. 'tpm', sec, '0') end
end
return 1
"#;

/// ARGV: rpm ('1' or ''), tpm ('1' or ''), period kind ('' no budget).
/// Returns `{rpm used, tpm used, period, spent, held, now}`.
const STATE: &str = r#"
local r = 0
local tk = 0
if ARGV[1] ~= '' then r = window(base .. 'rpm') end
if ARGV[2] ~= '' then tk = window(base .. 'tpm') end
local period = ''
local spent = 0
local held = 0
if ARGV[3] ~= '' then
  purge()
  period = period_id(ARGV[3])
  spent = tonumber(redis.call('GET', base .. 'spent:' .. period) or '0')
  held = tonumber(redis.call('GET', base .. 'held:' .. period) or '0')
end
return {fmt(r), fmt(tk), period, fmt(spent), fmt(held), fmt(now)}
"#;

/// How long the gateway waits for one answer from Redis.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How late a reserve script may still run and count: a call the gateway
/// gave up on after [`RESPONSE_TIMEOUT`] and that Redis runs later than
/// this (its clock against the gateway's) does nothing.
const ANSWER_BY_SECS: u64 = 10;
/// How often an instance renews the leases of its reservations in flight
/// (the lease is [`RESERVATION_LEASE_SECS`]).
const RENEW_EVERY: Duration = Duration::from_secs(10);
/// How often the release of a reservation whose answer was lost is tried
/// again, until the reserve's answer-by time has passed.
const RELEASE_RETRY: Duration = Duration::from_secs(1);
/// Failed calls in a row that open the breaker.
const BREAKER_FAILURES: u32 = 3;
/// How long an open breaker answers for Redis (failing open or closed at
/// once) before one call tries Redis again.
const BREAKER_OPEN: Duration = Duration::from_secs(1);

/// Fails fast while Redis keeps failing: after [`BREAKER_FAILURES`] failed
/// calls in a row, calls fail at once for [`BREAKER_OPEN`]; then one call
/// at a time tries Redis until one succeeds.
#[derive(Debug, Default)]
struct Breaker {
    failures: AtomicU32,
    /// Unix milliseconds until which the breaker is open.
    open_until: AtomicU64,
    /// A trial call is out.
    trial: AtomicBool,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Breaker {
    /// Whether a call may go to Redis now.
    fn allow(&self) -> bool {
        if self.failures.load(Ordering::Acquire) < BREAKER_FAILURES {
            return true;
        }
        if unix_ms() < self.open_until.load(Ordering::Acquire) {
            return false;
        }
        // Half-open: one trial at a time.
        self.trial
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn succeeded(&self) {
        self.failures.store(0, Ordering::Release);
        self.trial.store(false, Ordering::Release);
    }

    fn failed(&self) {
        let n = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        if n >= BREAKER_FAILURES {
            let until = unix_ms() + BREAKER_OPEN.as_millis() as u64;
            self.open_until.store(until, Ordering::Release);
        }
        self.trial.store(false, Ordering::Release);
    }
}

/// How long a released id is remembered (longer than a reserve may still
/// run: [`ANSWER_BY_SECS`], with room for the clocks' skew).
const GONE_SECS: u64 = 120;

/// A reservation whose answer was lost (the call failed or timed out after
/// it was sent): released by id until `until` (unix seconds; past its
/// answer-by time the reserve can no longer run).
struct Lost {
    base: String,
    id: String,
    until: u64,
}

/// The reservations this instance holds in Redis, by key base: their
/// leases are renewed while their requests run.
type Live = Arc<std::sync::Mutex<HashMap<String, HashSet<String>>>>;

fn live_lock(live: &Live) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
    match live.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// The instance's background task: renews the leases of its reservations
/// in flight every [`RENEW_EVERY`], and releases those whose answer was
/// lost, again every [`RELEASE_RETRY`] until the release lands or the
/// reserve can no longer run.
struct Housekeeper {
    conn: ConnectionManager,
    renew: Script,
    release: Script,
    live: Live,
    lost: Vec<Lost>,
}

impl Housekeeper {
    async fn run(mut self, mut rx: tokio::sync::mpsc::UnboundedReceiver<Lost>) {
        let mut renew_at = tokio::time::Instant::now() + RENEW_EVERY;
        loop {
            let wake = if self.lost.is_empty() {
                renew_at
            } else {
                renew_at.min(tokio::time::Instant::now() + RELEASE_RETRY)
            };
            tokio::select! {
                m = rx.recv() => match m {
                    Some(l) => {
                        self.lost.push(l);
                        self.release_lost().await;
                    }
                    None => return,
                },
                _ = tokio::time::sleep_until(wake) => {
                    if !self.lost.is_empty() {
                        self.release_lost().await;
                    }
                    if tokio::time::Instant::now() >= renew_at {
                        self.renew().await;
                        renew_at = tokio::time::Instant::now() + RENEW_EVERY;
                    }
                }
            }
        }
    }

    async fn release_lost(&mut self) {
        let now = super::unix_now();
        for l in std::mem::take(&mut self.lost) {
            let r: redis::RedisResult<i64> = self
                .release
                .key(&l.base)
                .arg(&l.id)
                .arg(GONE_SECS)
                .invoke_async(&mut self.conn)
                .await;
            match r {
                Ok(1) => log::info!(
                    "limits: released reservation {} whose answer from Redis was lost",
                    l.id
                ),
                Ok(_) => {}
                Err(_) if now <= l.until => self.lost.push(l),
                Err(e) => log::warn!(
                    "limits: cannot release reservation {} whose answer was lost ({e}); its hold ends with its lease ({RESERVATION_LEASE_SECS} s)",
                    l.id
                ),
            }
        }
    }

    async fn renew(&mut self) {
        let held: Vec<(String, Vec<String>)> = live_lock(&self.live)
            .iter()
            .filter(|(_, ids)| !ids.is_empty())
            .map(|(base, ids)| (base.clone(), ids.iter().cloned().collect()))
            .collect();
        for (base, ids) in held {
            for chunk in ids.chunks(1000) {
                let r: redis::RedisResult<i64> = self
                    .renew
                    .key(&base)
                    .arg(RESERVATION_LEASE_SECS)
                    .arg(chunk)
                    .invoke_async(&mut self.conn)
                    .await;
                if let Err(e) = r {
                    log::debug!(
                        "limits: cannot renew the leases of {} reservation(s): {e}",
                        chunk.len()
                    );
                }
            }
        }
    }
}

/// Limits in Redis.
pub struct RedisLimits {
    client: redis::Client,
    conn: tokio::sync::OnceCell<ConnectionManager>,
    prefix: String,
    fail: FailMode,
    metrics: Arc<Metrics>,
    /// Whether the last call failed (the outage is logged once).
    down: AtomicBool,
    breaker: Breaker,
    reserve: Script,
    settle: Script,
    state: Script,
    renew: Script,
    release_lost: Script,
    /// Reservations held, their leases renewed while their requests run.
    live: Live,
    /// The housekeeper's queue of lost reservations (started on first use).
    keeper: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<Lost>>,
    /// Reservation ids: this instance's nonce and a counter.
    nonce: String,
    seq: AtomicU64,
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn kind_name(p: BudgetPeriod) -> &'static str {
    p.name()
}

impl RedisLimits {
    /// A backend for `url`; the connection is made on first use.
    pub fn new(
        url: &str,
        prefix: &str,
        fail: FailMode,
        metrics: Arc<Metrics>,
    ) -> Result<RedisLimits, String> {
        let client = redis::Client::open(url).map_err(|e| format!("--redis {url:?}: {e}"))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Ok(RedisLimits {
            client,
            conn: tokio::sync::OnceCell::new(),
            prefix: prefix.to_string(),
            fail,
            metrics,
            down: AtomicBool::new(false),
            breaker: Breaker::default(),
            reserve: Script::new(&format!("{PRELUDE}{RESERVE}")),
            settle: Script::new(&format!("{PRELUDE}{SETTLE}")),
            state: Script::new(&format!("{PRELUDE}{STATE}")),
            renew: Script::new(&format!("{PRELUDE}{RENEW}")),
            release_lost: Script::new(&format!("{PRELUDE}{RELEASE_LOST}")),
            live: Arc::default(),
            keeper: std::sync::OnceLock::new(),
            nonce: format!("{:x}{:x}", nanos, std::process::id()),
            seq: AtomicU64::new(0),
        })
    }

    fn base(&self, key_id: &str) -> String {
        format!("{}{{{key_id}}}:", self.prefix)
    }

    async fn conn(&self) -> redis::RedisResult<ConnectionManager> {
        let c = self
            .conn
            .get_or_try_init(|| async {
                // No retries inside a call: during an outage each request
                // fails fast (and fails open or closed) instead of waiting
                // out a back-off; the manager reconnects on the next call.
                let cfg = ConnectionManagerConfig::new()
                    .set_number_of_retries(0)
                    .set_connection_timeout(Some(Duration::from_secs(1)))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT));
                ConnectionManager::new_lazy_with_config(self.client.clone(), cfg)
            })
            .await?;
        Ok(c.clone())
    }

    /// The housekeeper's queue, the task started on first use (on the
    /// runtime of the request that first reserves).
    fn keeper(&self, conn: &ConnectionManager) -> &tokio::sync::mpsc::UnboundedSender<Lost> {
        self.keeper.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let hk = Housekeeper {
                conn: conn.clone(),
                renew: self.renew.clone(),
                release: self.release_lost.clone(),
                live: self.live.clone(),
                lost: Vec::new(),
            };
            tokio::spawn(hk.run(rx));
            tx
        })
    }

    fn up(&self) {
        self.breaker.succeeded();
        if self.down.swap(false, Ordering::Relaxed) {
            log::warn!("limits: Redis is reachable again; limits are enforced");
        }
    }

    fn failed(&self, what: &str, e: &redis::RedisError) {
        self.breaker.failed();
        self.metrics.limits_redis_failure(self.fail.name());
        if !self.down.swap(true, Ordering::Relaxed) {
            let effect = match self.fail {
                FailMode::Open => "requests are admitted without rate limits or budgets",
                FailMode::Closed => "requests are refused with 503",
            };
            log::error!(
                "limits: Redis unreachable ({what}: {e}); failing {} (--redis-fail): {effect} until it is back",
                self.fail.name()
            );
        }
    }

    /// Checks and reserves `ask` in one script.
    pub(crate) async fn reserve(&self, ask: &Ask) -> Result<Reserved, Refusal> {
        let id = format!(
            "{}-{}",
            self.nonce,
            self.seq.fetch_add(1, Ordering::Relaxed)
        );
        let budget = ask.budget.as_ref();
        if !self.breaker.allow() {
            // Redis kept failing: answer at once instead of waiting out
            // another timeout.
            self.metrics.limits_redis_failure(self.fail.name());
            return match self.fail {
                FailMode::Open => Ok(None),
                FailMode::Closed => Err(Refusal::Unavailable),
            };
        }
        let answer_by = super::unix_now() + ANSWER_BY_SECS;
        let base = self.base(&ask.key_id);
        let result: redis::RedisResult<Vec<String>> = async {
            let mut c = self.conn().await?;
            let _ = self.keeper(&c);
            self.reserve
                .key(self.base(&ask.key_id))
                .arg(opt(ask.rpm))
                .arg(opt(ask.tpm))
                .arg(ask.tokens.to_string())
                .arg(opt(budget.map(|b| b.nanos)))
                .arg(budget.map_or("", |b| kind_name(b.period)))
                .arg(ask.cost.to_string())
                .arg(&id)
                .arg(RESERVATION_LEASE_SECS.to_string())
                .arg(answer_by.to_string())
                .invoke_async(&mut c)
                .await
        }
        .await;
        let r = match result {
            Ok(r) => {
                self.up();
                r
            }
            Err(e) => {
                self.failed("reserve", &e);
                // The script may still run (or have run): released by id.
                if let Some(k) = self.keeper.get() {
                    let _ = k.send(Lost {
                        base,
                        id,
                        until: answer_by + 2,
                    });
                }
                return match self.fail {
                    FailMode::Open => Ok(None),
                    FailMode::Closed => Err(Refusal::Unavailable),
                };
            }
        };
        let num = |i: usize| r.get(i).and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
        match r.first().map(String::as_str) {
            Some("0") => {
                if ask.tpm.is_some() || budget.is_some() {
                    live_lock(&self.live)
                        .entry(base)
                        .or_default()
                        .insert(id.clone());
                }
                let remaining = budget.map(|_| num(1));
                let period = r.get(2).cloned().unwrap_or_default();
                let now = u64::try_from(num(3)).unwrap_or(0);
                let held = (ask.tpm.is_some() || budget.is_some()).then(|| Held {
                    key_id: ask.key_id.clone(),
                    tokens: if ask.tpm.is_some() { ask.tokens } else { 0 },
                    tpm: ask.tpm.is_some(),
                    bucket: now,
                    cost: if budget.is_some() { ask.cost } else { 0 },
                    budget: budget.map(|b| (b.clone(), period)),
                    id,
                });
                Ok(Some((held, remaining)))
            }
            Some("1") => Err(Refusal::Rpm {
                limit: ask.rpm.unwrap_or(0),
                retry_after: u64::try_from(num(1)).unwrap_or(WINDOW_SECS),
            }),
            Some("2") => Err(Refusal::Tpm {
                limit: ask.tpm.unwrap_or(0),
                asked: ask.tokens,
                retry_after: u64::try_from(num(1)).ok(),
            }),
            Some("3") => match budget {
                Some(b) => Err(Refusal::Budget {
                    budget: b.clone(),
                    period: r.get(2).cloned().unwrap_or_default(),
                    remaining: num(1),
                    asked: ask.cost,
                }),
                None => Ok(None),
            },
            // Redis's clock is ahead of the gateway's by more than the
            // answer-by margin: admitted unchecked, and said loudly.
            // Released by id before it ran (never seen: the gateway gave
            // up on the call first).
            Some("5") => Ok(None),
            Some("4") => {
                log::error!(
                    "limits: Redis ran a reservation past its answer-by time at once: its clock is more than {ANSWER_BY_SECS} s ahead of this host's"
                );
                Ok(None)
            }
            _ => {
                log::error!("limits: unexpected answer from the reserve script: {r:?}");
                Ok(None)
            }
        }
    }

    /// Settles (or, with zeros, releases) `held`.
    pub(crate) async fn settle(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        // No longer renewed: a settlement that does not land ends with the lease.
        {
            let base = self.base(&held.key_id);
            let mut live = live_lock(&self.live);
            if let Some(ids) = live.get_mut(&base) {
                ids.remove(&held.id);
                if ids.is_empty() {
                    live.remove(&base);
                }
            }
        }
        let (period, kind, budget) = match &held.budget {
            Some((b, p)) => (p.as_str(), kind_name(b.period), b.nanos.to_string()),
            None => ("", "", String::new()),
        };
        let result: redis::RedisResult<String> = async {
            let mut c = self.conn().await?;
            self.settle
                .key(self.base(&held.key_id))
                .arg(&held.id)
                .arg(tokens.to_string())
                .arg(cost.to_string())
                .arg(period)
                .arg(kind)
                .arg(budget)
                .arg(held.tokens.to_string())
                .arg(held.cost.to_string())
                .arg(held.bucket.to_string())
                .arg(if held.tpm { "1" } else { "" })
                .invoke_async(&mut c)
                .await
        }
        .await;
        match result {
            Ok(s) => {
                self.up();
                s.parse().ok()
            }
            Err(e) => {
                self.failed("settle", &e);
                // The outage itself is logged once (`failed`), not each loss.
                log::debug!(
                    "limits: a settlement of key {:?} was lost (cost {cost} nano-USD); its reservation ends with its lease",
                    held.key_id
                );
                None
            }
        }
    }

    /// The live state of `key`.
    pub async fn state(&self, key: &ApiKey) -> Result<KeyState, String> {
        if !self.breaker.allow() {
            return Err("Redis unreachable: it kept failing; trying again shortly".to_string());
        }
        let result: redis::RedisResult<Vec<String>> = async {
            let mut c = self.conn().await?;
            self.state
                .key(self.base(&key.id))
                .arg(if key.rpm.is_some() { "1" } else { "" })
                .arg(if key.tpm.is_some() { "1" } else { "" })
                .arg(key.budget.as_ref().map_or("", |b| kind_name(b.period)))
                .invoke_async(&mut c)
                .await
        }
        .await;
        let r = result.map_err(|e| {
            self.failed("state", &e);
            format!("Redis unreachable: {e}")
        })?;
        self.up();
        let num = |i: usize| r.get(i).and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
        let now = num(5);
        let budget = key.budget.as_ref().map(|b| BudgetState {
            budget: b.clone(),
            period: period_at(b.period, now),
            spent: num(3),
            reserved: num(4),
        });
        if let Some(b) = &budget {
            let from_redis = r.get(2).map(String::as_str).unwrap_or("");
            if b.period.id != from_redis {
                log::warn!(
                    "limits: Redis names the period {from_redis:?}, the gateway {:?}",
                    b.period.id
                );
            }
        }
        Ok(KeyState {
            rpm: key.rpm.map(|l| (l, u64::try_from(num(0)).unwrap_or(0))),
            tpm: key.tpm.map(|l| (l, u64::try_from(num(1)).unwrap_or(0))),
            budget,
        })
    }
}
