//! The fleet limits backend (`--redis`): rpm and tpm windows, budget spend and
//! reservations live in Redis, and each step is one Lua script, so any number
//! of gateway instances enforce one budget exactly.
//!
//! Keys, per subject (an API key, id `K`, or a team, id `T`) under the
//! prefix `P`; a subject's base is `P{K}:` for a key and `Pteam:{T}:` for a
//! team, so a key and a team of one name never share a Redis key (the braces
//! would put a subject's keys in one Redis Cluster hash slot; the gateway
//! speaks to one Redis endpoint, and a request of a key in a team touches
//! both subjects in one script):
//! - `BASE rpm`, `BASE tpm`: hashes of one-second buckets (`unix second →
//!   count`), pruned as they leave the sliding minute;
//! - `BASE spent:PERIOD`: settled spend in nano-USD (`PERIOD` is `2026-11-23`,
//!   `2026-11` or `total`);
//! - `BASE held:PERIOD`: the sum of reservations in flight;
//! - `BASE resv` (id → `period|cost|second|tokens`) and `BASE resvx` (id →
//!   lease expiry): reservations, one record per subject that holds
//!   something (a request of a key in a team has one under each, with one
//!   id). The instance renews the lease ([`RESERVATION_LEASE_SECS`]) of each
//!   of its reservations in flight every [`RENEW_EVERY`], so one it never
//!   settles (it died, or the settlement was lost) or never learned of (the
//!   reserve's answer was lost) gives its hold back, of the key and of the
//!   team, when its lease ends;
//! - `P{K}:gone:ID`: a reservation whose answer was lost, released by id
//!   by the instance (kept [`GONE_SECS`]): a reserve that Redis runs only
//!   after the release does nothing.
//!
//! Time is Redis' own (`TIME`), so instances with skewed clocks still share
//! one window and roll periods over at one instant. Amounts are integers of
//! nano-USD well inside the 2^53 that Lua's numbers hold exactly.

use super::{
    least, period_at, Ask, BudgetState, FailMode, Held, KeyState, Nanos, Part, Refusal, Reserved,
    RESERVATION_LEASE_SECS, WINDOW_SECS,
};
use crate::config::{ApiKey, Budget, BudgetPeriod, Team};
use crate::obs::metrics::Metrics;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Shared by the scripts: the time, integer formatting, the UTC period of a
/// kind, pruning a window, and dropping a subject's reservations whose lease
/// ended.
const PRELUDE: &str = r#"
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
local function purge(base)
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

/// KEYS: the key's base, then its team's (when the request counts against
/// a team). ARGV: tokens, cost, id, lease, answer-by, then per subject: rpm
/// limit, tpm limit, budget, period kind (empty strings for no limit).
/// Every subject is checked before anything is taken: all of it is held,
/// or none. Returns `{"0", now, period, remaining}` and, with a team, its
/// period and remaining after; or `{"1"|"2", retry_after (-1: never),
/// used, subject}` for rpm / tpm, or `{"3", remaining, period, subject}`
/// for a budget (subject: 1 the key, 2 the team); or `{"4"}` (nothing done)
/// when the script runs after its answer-by second: a call the gateway gave
/// up on, run late by a Redis that had stopped answering, must not hold
/// budget; `{"5"}` (nothing done either) when the gateway already released
/// the id ([`RELEASE_LOST`] ran first).
const RESERVE: &str = r#"
if ARGV[5] ~= '' and now > tonumber(ARGV[5]) then return {'4'} end
if redis.call('EXISTS', KEYS[1] .. 'gone:' .. ARGV[3]) == 1 then return {'5'} end
local tokens = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local periods = {}
local lefts = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local o = 5 + (i - 1) * 4
  local rpm, tpm, budget, kind = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3], ARGV[o + 4]
  if rpm ~= '' then
    local limit = tonumber(rpm)
    local total, b = window(base .. 'rpm')
    if total + 1 > limit then return {'1', fmt(wait(total, b, limit, 1)), fmt(total), fmt(i)} end
  end
  if tpm ~= '' then
    local limit = tonumber(tpm)
    local total, b = window(base .. 'tpm')
    if total + tokens > limit then return {'2', fmt(wait(total, b, limit, tokens)), fmt(total), fmt(i)} end
  end
  periods[i] = ''
  lefts[i] = '0'
  if tpm ~= '' or budget ~= '' then purge(base) end
  if budget ~= '' then
    local period = period_id(kind)
    local spent = tonumber(redis.call('GET', base .. 'spent:' .. period) or '0')
    local held = tonumber(redis.call('GET', base .. 'held:' .. period) or '0')
    local left = tonumber(budget) - spent - held
    if cost > left then return {'3', fmt(left), period, fmt(i)} end
    periods[i] = period
    lefts[i] = fmt(left - cost)
  end
end
local out = {'0', fmt(now)}
for i = 1, #KEYS do
  local base = KEYS[i]
  local o = 5 + (i - 1) * 4
  local rpm, tpm, budget, kind = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3], ARGV[o + 4]
  local period = periods[i]
  if rpm ~= '' then
    redis.call('HINCRBY', base .. 'rpm', fmt(now), 1)
    redis.call('EXPIRE', base .. 'rpm', 120)
  end
  if tpm ~= '' then
    redis.call('HINCRBY', base .. 'tpm', fmt(now), ARGV[1])
    redis.call('EXPIRE', base .. 'tpm', 120)
  end
  if budget ~= '' then
    redis.call('INCRBY', base .. 'held:' .. period, ARGV[2])
    keep(base .. 'held:' .. period, kind)
  end
  if tpm ~= '' or budget ~= '' then
    local c = '0'
    if budget ~= '' then c = ARGV[2] end
    local tk = '0'
    if tpm ~= '' then tk = ARGV[1] end
    redis.call('HSET', base .. 'resv', ARGV[3], period .. '|' .. c .. '|' .. fmt(now) .. '|' .. tk)
    redis.call('ZADD', base .. 'resvx', fmt(now + tonumber(ARGV[4])), ARGV[3])
    redis.call('EXPIRE', base .. 'resv', tonumber(ARGV[4]) + 60)
    redis.call('EXPIRE', base .. 'resvx', tonumber(ARGV[4]) + 60)
  end
  out[#out + 1] = period
  out[#out + 1] = lefts[i]
end
return out
"#;

/// KEYS: the key's base, then its team's. ARGV: id, real tokens, real
/// cost, reserved tokens, reserved cost, bucket second, then per subject:
/// period ('' no budget), period kind, budget, tpm ('1' or ''). Returns
/// each subject's budget left ('' without a budget). A reservation whose
/// lease ended was already given back: only the spend is recorded.
const SETTLE: &str = r#"
local out = {}
for i = 1, #KEYS do
  local base = KEYS[i]
  local o = 6 + (i - 1) * 4
  local period, kind, budget, tpm = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3], ARGV[o + 4]
  if redis.call('HDEL', base .. 'resv', ARGV[1]) == 1 then
    redis.call('ZREM', base .. 'resvx', ARGV[1])
    if period ~= '' then redis.call('DECRBY', base .. 'held:' .. period, ARGV[5]) end
    if tpm ~= '' and redis.call('HEXISTS', base .. 'tpm', ARGV[6]) == 1 then
      local v = redis.call('HINCRBY', base .. 'tpm', ARGV[6], fmt(tonumber(ARGV[2]) - tonumber(ARGV[4])))
      if v < 0 then redis.call('HSET', base .. 'tpm', ARGV[6], '0') end
    end
  end
  if period == '' then
    out[i] = ''
  else
    local spent = tonumber(redis.call('GET', base .. 'spent:' .. period) or '0')
    if ARGV[3] ~= '0' then
      spent = tonumber(redis.call('INCRBY', base .. 'spent:' .. period, ARGV[3]))
      keep(base .. 'spent:' .. period, kind)
    end
    local held = tonumber(redis.call('GET', base .. 'held:' .. period) or '0')
    out[i] = fmt(tonumber(budget) - spent - held)
  end
end
return out
"#;

/// KEYS: a subject's base. ARGV: lease seconds, then ids. Extends the lease
/// of each id still held (a reservation settled meanwhile is not brought
/// back). Returns how many.
const RENEW: &str = r#"
local base = KEYS[1]
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

/// KEYS: the key's base, then its team's. ARGV: id, seconds to remember it.
/// Releases a reservation whose answer the gateway never got (it timed
/// out): what it holds of each subject is read from its record there and
/// given back, and the id is remembered under the key, so a reserve that
/// Redis runs only after this (it was still queued) does nothing. Returns
/// 1 when it held something.
const RELEASE_LOST: &str = r#"
redis.call('SET', KEYS[1] .. 'gone:' .. ARGV[1], '1', 'EX', tonumber(ARGV[2]))
local found = 0
for i = 1, #KEYS do
  local base = KEYS[i]
  local rec = redis.call('HGET', base .. 'resv', ARGV[1])
  if rec then
    found = 1
    local period, cost, sec, tokens = string.match(rec, '^([^|]*)|(-?%d+)|(%d+)|(%d+)$')
    redis.call('HDEL', base .. 'resv', ARGV[1])
    redis.call('ZREM', base .. 'resvx', ARGV[1])
    if period and period ~= '' then redis.call('DECRBY', base .. 'held:' .. period, cost) end
    if tokens and tokens ~= '0' and redis.call('HEXISTS', base .. 'tpm', sec) == 1 then
      local v = redis.call('HINCRBY', base .. 'tpm', sec, fmt(-tonumber(tokens)))
      if v < 0 then redis.call('HSET', base .. 'tpm', sec, '0') end
    end
  end
end
return found
"#;

/// KEYS: a subject's base. ARGV: rpm ('1' or ''), tpm ('1' or ''), period
/// kind ('' no budget). Returns `{rpm used, tpm used, period, spent, held,
/// now}`.
const STATE: &str = r#"
local base = KEYS[1]
local r = 0
local tk = 0
if ARGV[1] ~= '' then r = window(base .. 'rpm') end
if ARGV[2] ~= '' then tk = window(base .. 'tpm') end
local period = ''
local spent = 0
local held = 0
if ARGV[3] ~= '' then
  purge(base)
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
    /// The team's base, when the reservation counted against a team.
    team_base: Option<String>,
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
            let mut call = self.release.key(&l.base);
            if let Some(t) = &l.team_base {
                call.key(t);
            }
            let r: redis::RedisResult<i64> = call
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

/// A subject's limits as the reserve script takes them: rpm, tpm, budget
/// and its period kind.
fn limit_args(
    call: &mut redis::ScriptInvocation<'_>,
    rpm: Option<u32>,
    tpm: Option<u64>,
    budget: Option<&Budget>,
) {
    call.arg(opt(rpm))
        .arg(opt(tpm))
        .arg(opt(budget.map(|b| b.nanos)))
        .arg(budget.map_or("", |b| kind_name(b.period)));
}

/// A held part as the settle script takes it: period, kind, budget, tpm.
fn part_args(call: &mut redis::ScriptInvocation<'_>, part: &Part) {
    match &part.budget {
        Some((b, p)) => call
            .arg(p.as_str())
            .arg(kind_name(b.period))
            .arg(b.nanos.to_string()),
        None => call.arg("").arg("").arg(""),
    }
    .arg(if part.tpm { "1" } else { "" });
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

    /// A key's base (see the module doc).
    fn base(&self, key_id: &str) -> String {
        format!("{}{{{key_id}}}:", self.prefix)
    }

    /// A team's base: apart from every key's (see the module doc).
    fn team_base(&self, team_id: &str) -> String {
        format!("{}team:{{{team_id}}}:", self.prefix)
    }

    /// Adds or removes reservation `id` from the ones renewed under `base`.
    fn track(&self, base: &str, id: &str, live: bool) {
        let mut l = live_lock(&self.live);
        if live {
            l.entry(base.to_string())
                .or_default()
                .insert(id.to_string());
        } else if let Some(ids) = l.get_mut(base) {
            ids.remove(id);
            if ids.is_empty() {
                l.remove(base);
            }
        }
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

    /// Checks and reserves `ask`, of the key and of its team, in one script.
    pub(crate) async fn reserve(&self, ask: &Ask) -> Result<Reserved, Refusal> {
        let id = format!(
            "{}-{}",
            self.nonce,
            self.seq.fetch_add(1, Ordering::Relaxed)
        );
        let budget = ask.budget.as_ref();
        let team = ask.team.as_ref();
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
        let team_base = team.map(|t| self.team_base(&t.id));
        let result: redis::RedisResult<Vec<String>> = async {
            let mut c = self.conn().await?;
            let _ = self.keeper(&c);
            let mut call = self.reserve.key(&base);
            if let Some(tb) = &team_base {
                call.key(tb);
            }
            call.arg(ask.tokens.to_string())
                .arg(ask.cost.to_string())
                .arg(&id)
                .arg(RESERVATION_LEASE_SECS.to_string())
                .arg(answer_by.to_string());
            limit_args(&mut call, ask.rpm, ask.tpm, budget);
            if let Some(t) = team {
                limit_args(&mut call, t.rpm, t.tpm, t.budget.as_ref());
            }
            call.invoke_async(&mut c).await
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
                        team_base,
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
        // Whose limit refused: subject 2 is the team.
        let whose = || team.filter(|_| num(3) == 2);
        match r.first().map(String::as_str) {
            Some("0") => {
                let remaining = least(
                    budget.map(|_| num(3)),
                    team.and_then(|t| t.budget.as_ref()).map(|_| num(5)),
                );
                if !ask.holds() {
                    // Request slots only: nothing to settle.
                    return Ok(Some((None, remaining)));
                }
                let now = u64::try_from(num(1)).unwrap_or(0);
                let key_part = Part {
                    id: ask.key_id.clone(),
                    tpm: ask.tpm.is_some(),
                    budget: budget.map(|b| (b.clone(), r.get(2).cloned().unwrap_or_default())),
                };
                let team_part = team.map(|t| Part {
                    id: t.id.clone(),
                    tpm: t.tpm.is_some(),
                    budget: t
                        .budget
                        .as_ref()
                        .map(|b| (b.clone(), r.get(4).cloned().unwrap_or_default())),
                });
                if key_part.holds() {
                    self.track(&base, &id, true);
                }
                if let (Some(tb), Some(tp)) = (&team_base, &team_part) {
                    if tp.holds() {
                        self.track(tb, &id, true);
                    }
                }
                let held = Held {
                    key: key_part,
                    team: team_part,
                    tokens: ask.tokens,
                    cost: ask.cost,
                    bucket: now,
                    id,
                };
                Ok(Some((Some(held), remaining)))
            }
            Some("1") => Err(Refusal::Rpm {
                limit: match whose() {
                    Some(t) => t.rpm,
                    None => ask.rpm,
                }
                .unwrap_or(0),
                retry_after: u64::try_from(num(1)).unwrap_or(WINDOW_SECS),
                team: whose().map(|t| t.id.clone()),
            }),
            Some("2") => Err(Refusal::Tpm {
                limit: match whose() {
                    Some(t) => t.tpm,
                    None => ask.tpm,
                }
                .unwrap_or(0),
                asked: ask.tokens,
                retry_after: u64::try_from(num(1)).ok(),
                team: whose().map(|t| t.id.clone()),
            }),
            Some("3") => match whose().map_or(budget, |t| t.budget.as_ref()) {
                Some(b) => Err(Refusal::Budget {
                    budget: b.clone(),
                    period: r.get(2).cloned().unwrap_or_default(),
                    remaining: num(1),
                    asked: ask.cost,
                    team: whose().map(|t| t.id.clone()),
                }),
                None => Ok(None),
            },
            // Released by id before it ran (never seen: the gateway gave
            // up on the call first).
            Some("5") => Ok(None),
            // Redis's clock is ahead of the gateway's by more than the
            // answer-by margin: admitted unchecked, and said loudly.
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

    /// Settles (or, with zeros, releases) `held`, of the key and of its
    /// team, in one script.
    pub(crate) async fn settle(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        // No longer renewed: a settlement that does not land ends with the lease.
        let base = self.base(&held.key.id);
        let team_base = held.team.as_ref().map(|t| self.team_base(&t.id));
        self.track(&base, &held.id, false);
        if let Some(tb) = &team_base {
            self.track(tb, &held.id, false);
        }
        let result: redis::RedisResult<Vec<String>> = async {
            let mut c = self.conn().await?;
            let mut call = self.settle.key(&base);
            if let Some(tb) = &team_base {
                call.key(tb);
            }
            call.arg(&held.id)
                .arg(tokens.to_string())
                .arg(cost.to_string())
                .arg(held.tokens.to_string())
                .arg(held.cost.to_string())
                .arg(held.bucket.to_string());
            part_args(&mut call, &held.key);
            if let Some(t) = &held.team {
                part_args(&mut call, t);
            }
            call.invoke_async(&mut c).await
        }
        .await;
        match result {
            Ok(lefts) => {
                self.up();
                lefts
                    .iter()
                    .filter_map(|s| s.parse().ok())
                    .fold(None, |a, l| least(a, Some(l)))
            }
            Err(e) => {
                self.failed("settle", &e);
                // The outage itself is logged once (`failed`), not each loss.
                log::debug!(
                    "limits: a settlement of key {:?} was lost (cost {cost} nano-USD); its reservation ends with its lease",
                    held.key.id
                );
                None
            }
        }
    }

    /// The live state of `key` (its own limits).
    pub async fn state(&self, key: &ApiKey) -> Result<KeyState, String> {
        self.subject_state(&self.base(&key.id), key.rpm, key.tpm, key.budget.as_ref())
            .await
    }

    /// The live state of `team`, across its keys.
    pub async fn team_state(&self, team: &Team) -> Result<KeyState, String> {
        self.subject_state(
            &self.team_base(&team.id),
            team.rpm,
            team.tpm,
            team.budget.as_ref(),
        )
        .await
    }

    /// The live state of the subject at `base`.
    async fn subject_state(
        &self,
        base: &str,
        rpm: Option<u32>,
        tpm: Option<u64>,
        budget: Option<&Budget>,
    ) -> Result<KeyState, String> {
        if !self.breaker.allow() {
            return Err("Redis unreachable: it kept failing; trying again shortly".to_string());
        }
        let result: redis::RedisResult<Vec<String>> = async {
            let mut c = self.conn().await?;
            self.state
                .key(base)
                .arg(if rpm.is_some() { "1" } else { "" })
                .arg(if tpm.is_some() { "1" } else { "" })
                .arg(budget.map_or("", |b| kind_name(b.period)))
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
        let budget = budget.map(|b| BudgetState {
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
            rpm: rpm.map(|l| (l, u64::try_from(num(0)).unwrap_or(0))),
            tpm: tpm.map(|l| (l, u64::try_from(num(1)).unwrap_or(0))),
            budget,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KeyStore;

    const URL: &str = "redis://127.0.0.1:6379";

    /// Key `a` (0.05 USD of its own) and `b` (none) of team `t` (0.10 USD),
    /// on a prefix of this test's own.
    fn setup(name: &str) -> (RedisLimits, ApiKey, ApiKey, String) {
        let ks = KeyStore::from_str(
            "k.json",
            r#"{"teams":[{"id":"t","budget":{"usd":"0.10","period":"total"}}],
                "keys":[{"id":"a","key":"sa","team":"t","budget":{"usd":"0.05","period":"total"}},
                        {"id":"b","key":"sb","team":"t"}]}"#,
        )
        .unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let prefix = format!("sbunit:{}:{nanos}:{name}:", std::process::id());
        let r =
            RedisLimits::new(URL, &prefix, FailMode::Closed, Arc::new(Metrics::default())).unwrap();
        let a = ks.find("sa").unwrap().clone();
        let b = ks.find("sb").unwrap().clone();
        (r, a, b, prefix)
    }

    async fn cleanup(r: &RedisLimits, prefix: &str) {
        let mut c = r.conn().await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut c)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: i64 = redis::cmd("DEL")
                .arg(keys)
                .query_async(&mut c)
                .await
                .unwrap();
        }
    }

    async fn held(r: &RedisLimits, ask: &Ask) -> (Held, Option<Nanos>) {
        let (h, left) = r.reserve(ask).await.unwrap().unwrap();
        (h.unwrap(), left)
    }

    async fn team_budget(r: &RedisLimits, a: &ApiKey) -> (Nanos, Nanos) {
        let b = r
            .team_state(a.team.as_deref().unwrap())
            .await
            .unwrap()
            .budget
            .unwrap();
        (b.spent, b.reserved)
    }

    /// One script reserves in both budgets or in neither; settling and
    /// releasing reach both.
    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one)"]
    async fn a_team_reserves_settles_and_releases_with_its_key() {
        let (r, a, b, prefix) = setup("joint");
        let cost = 30_000_000;
        let (h1, left) = held(&r, &Ask::inference(&a, 0, cost)).await;
        // The lesser of a's 0.02 and the team's 0.07.
        assert_eq!(left, Some(20_000_000));
        // a's own budget refuses: the team holds nothing more.
        match r.reserve(&Ask::inference(&a, 0, cost)).await {
            Err(Refusal::Budget {
                team: None,
                remaining: 20_000_000,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(team_budget(&r, &a).await, (0, cost));
        let (h2, _) = held(&r, &Ask::inference(&b, 0, cost)).await;
        let (h3, left) = held(&r, &Ask::inference(&b, 0, cost)).await;
        assert_eq!(left, Some(10_000_000));
        // The team's budget refuses a's request, which fits a's own: a's
        // holds nothing more.
        match r.reserve(&Ask::inference(&a, 0, 15_000_000)).await {
            Err(e @ Refusal::Budget { .. }) => {
                assert_eq!(e.team(), Some("t"));
                assert_eq!(e.remaining(), Some(10_000_000));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.state(&a).await.unwrap().budget.unwrap().reserved, cost);
        // Settle a's below its hold: the lesser left is the team's 0.03.
        assert_eq!(r.settle(&h1, 0, 10_000_000).await, Some(30_000_000));
        let ka = r.state(&a).await.unwrap().budget.unwrap();
        assert_eq!((ka.spent, ka.reserved), (10_000_000, 0));
        r.settle(&h2, 0, 0).await;
        r.settle(&h3, 0, 25_000_000).await;
        assert_eq!(team_budget(&r, &a).await, (35_000_000, 0));
        cleanup(&r, &prefix).await;
    }

    /// A reservation whose answer was lost is released of both subjects by
    /// id; one whose lease ended gives the team's hold back too.
    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one)"]
    async fn lost_and_expired_reservations_release_the_team_part() {
        let (r, a, _b, prefix) = setup("lost");
        let cost = 20_000_000;
        let (h, _) = held(&r, &Ask::inference(&a, 0, cost)).await;
        assert_eq!(team_budget(&r, &a).await, (0, cost));
        let mut c = r.conn().await.unwrap();
        let n: i64 = r
            .release_lost
            .key(r.base("a"))
            .key(r.team_base("t"))
            .arg(&h.id)
            .arg(GONE_SECS)
            .invoke_async(&mut c)
            .await
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(team_budget(&r, &a).await, (0, 0));
        assert_eq!(r.state(&a).await.unwrap().budget.unwrap().reserved, 0);
        // A reservation whose instance died: its lease ends (made to end
        // now), and the next look at the team gives its hold back.
        let (h, _) = held(&r, &Ask::inference(&a, 0, cost)).await;
        for base in [r.base("a"), r.team_base("t")] {
            let _: i64 = redis::cmd("ZADD")
                .arg(format!("{base}resvx"))
                .arg(0)
                .arg(&h.id)
                .query_async(&mut c)
                .await
                .unwrap();
        }
        assert_eq!(team_budget(&r, &a).await, (0, 0));
        assert_eq!(r.state(&a).await.unwrap().budget.unwrap().reserved, 0);
        // Its late settlement records the spend once, in both.
        r.settle(&h, 0, cost).await;
        assert_eq!(team_budget(&r, &a).await, (cost, 0));
        assert_eq!(r.state(&a).await.unwrap().budget.unwrap().spent, cost);
        cleanup(&r, &prefix).await;
    }
}
