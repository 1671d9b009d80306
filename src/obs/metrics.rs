//! Prometheus metrics: per-request counters and histograms recorded once per
//! request (in the logging phase), an active-streams gauge, and the text
//! exposition served on `--metrics`.
//!
//! Label values come from the catalog (provider, model and upstream ids:
//! a request names a model only after it resolved to a catalog entry), from
//! fixed sets (family, outcome, cause, direction), from statuses (three
//! digits) or, for the one label a request can name, the adjusted
//! `parameter`, from a fixed vocabulary with `other` for the rest: no
//! client can add series beyond those.

use crate::family::Family;
use crate::obs::outcome::Outcome;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BUCKETS: [f64; 15] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }
}

/// Counters of one (family, provider, model).
#[derive(Debug, Default)]
struct ModelSeries {
    statuses: Vec<(u16, u64)>,
    input_tokens: u64,
    output_tokens: u64,
    /// In nano-USD, summed exactly.
    cost_nanos: i64,
}

/// Per family, provider, model; nested so a lookup by `&str` allocates
/// nothing (only the first request of a model inserts its names), ordered
/// (a few names each: a lookup is a few comparisons, no hashing).
type PerModel = BTreeMap<String, BTreeMap<String, ModelSeries>>;

#[derive(Debug, Default)]
struct Series {
    // One slot per family (Family::ALL has five).
    per_model: [PerModel; 5],
    latency: [Histogram; 5],
    ttft: [Histogram; 5],
    upstream_errors: BTreeMap<(String, String), u64>,
    /// Upstream attempts by provider, upstream, then outcome: nested, so
    /// the count of a request's attempt is found by its names as they are
    /// (no key made for it but the first time).
    attempts: BTreeMap<String, BTreeMap<String, BTreeMap<&'static str, u64>>>,
    /// Input tokens of answers and those read from the prompt cache, by
    /// provider, then upstream.
    upstream_tokens: BTreeMap<String, BTreeMap<String, (u64, u64)>>,
    /// Cool-downs started by (provider, upstream, reason).
    cooldowns: BTreeMap<(String, String, &'static str), u64>,
    /// Requests answered by a fallback model, by (requested, answering) model.
    fallbacks: BTreeMap<(String, String), u64>,
    continuations: BTreeMap<(String, &'static str), u64>,
    /// Adaptations (docs/api.md "Adapt or refuse") by model and parameter (a fixed
    /// vocabulary, `crate::adjust::metric_label`).
    adaptations: BTreeMap<(String, &'static str), u64>,
}

fn slot(f: Family) -> usize {
    match f {
        Family::OpenAi => 0,
        Family::Anthropic => 1,
        Family::Gemini => 2,
        // The Responses API: counted as its own family.
        Family::Responses => 3,
        Family::Bedrock => 4,
    }
}

/// The process's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    series: Mutex<Series>,
    active_streams: AtomicI64,
    /// Token counts waiting for a tokenizer slot, and running.
    token_counts_waiting: AtomicI64,
    token_counts_running: AtomicI64,
    /// Token counts abandoned because their client went away.
    token_counts_cancelled: AtomicU64,
    /// The usage ledger's rows written, dropped and pending.
    pub ledger: LedgerCounters,
    /// Failed calls to the limits' Redis, by `--redis-fail` mode (open, closed).
    limits_redis_failures: [AtomicU64; 2],
    /// Stored-response writes that failed (docs/api.md "Stored responses").
    pub responses_store_failures: Arc<AtomicU64>,
    /// The embedded budget store (`DATA/limits.sqlite`): writes that failed
    /// and what is kept in memory for a retry.
    pub limits_store: LimitsStoreCounters,
}

/// Decrements the active-streams gauge when dropped.
pub struct StreamGuard(Arc<Metrics>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.active_streams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `map`'s value under `key`, the default inserted the first time: the
/// only time a key is made (a lookup allocates nothing). Always `Some`.
fn named<'m, V: Default>(map: &'m mut BTreeMap<String, V>, key: &str) -> Option<&'m mut V> {
    if !map.contains_key(key) {
        map.insert(key.to_string(), V::default());
    }
    map.get_mut(key)
}

/// Adds an answered request's input and cached tokens to its upstream's
/// series (inserted on first use).
fn upstream_tokens(map: &mut BTreeMap<String, BTreeMap<String, (u64, u64)>>, o: &Outcome) {
    let (Some(a), Some(input)) = (o.answered(), o.prompt_tokens()) else {
        return;
    };
    if let Some(t) = named(map, &a.provider).and_then(|ups| named(ups, &a.upstream)) {
        t.0 += input;
        t.1 += o.usage.cached_tokens.unwrap_or(0);
    }
}

impl Metrics {
    fn with<R>(&self, f: impl FnOnce(&mut Series) -> R) -> R {
        let mut g = match self.series.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut g)
    }

    /// Records a finished request.
    pub fn observe(&self, o: &Outcome, latency: Duration) {
        let i = slot(o.family);
        let provider = o.provider.as_deref().unwrap_or("");
        let model = o.model.as_deref().unwrap_or("");
        self.with(|s| {
            s.latency[i].observe(latency.as_secs_f64());
            if let Some(t) = o.ttft {
                s.ttft[i].observe(t.as_secs_f64());
            }
            let Some(m) = named(&mut s.per_model[i], provider).and_then(|ms| named(ms, model))
            else {
                return;
            };
            match m.statuses.iter_mut().find(|(st, _)| *st == o.status) {
                Some((_, n)) => *n += 1,
                None => m.statuses.push((o.status, 1)),
            }
            m.input_tokens += o.usage.input_tokens.unwrap_or(0);
            m.output_tokens += o.usage.output_tokens.unwrap_or(0);
            m.cost_nanos += o.usage.cost_nanos.unwrap_or(0);
            upstream_tokens(&mut s.upstream_tokens, o);
        });
    }

    /// Counts an upstream failure of `kind` (a status code, `unreachable`, `timeout`, `stream`).
    pub fn upstream_error(&self, provider: &str, kind: &str) {
        self.with(|s| {
            *s.upstream_errors
                .entry((provider.to_string(), kind.to_string()))
                .or_default() += 1;
        });
    }

    /// Counts `n` unreadable stream frames of `provider` that a stream
    /// skipped (`switchboard_upstream_errors_total`, kind `skipped_frame`).
    pub fn frames_skipped(&self, provider: &str, n: u32) {
        self.with(|s| {
            *s.upstream_errors
                .entry((provider.to_string(), "skipped_frame".to_string()))
                .or_default() += u64::from(n);
        });
    }

    /// Counts one upstream attempt and how it ended (`ok`, `error` for a
    /// final 4xx, or a failure label of `pool::Cause`).
    pub fn upstream_attempt(&self, provider: &str, upstream: &str, outcome: &'static str) {
        self.with(|s| {
            if let Some(outcomes) =
                named(&mut s.attempts, provider).and_then(|u| named(u, upstream))
            {
                *outcomes.entry(outcome).or_default() += 1;
            }
        });
    }

    /// Counts a cool-down of an upstream, by the failure that started it.
    pub fn upstream_cooled(&self, provider: &str, upstream: &str, reason: &'static str) {
        self.with(|s| {
            *s.cooldowns
                .entry((provider.to_string(), upstream.to_string(), reason))
                .or_default() += 1;
        });
    }

    /// Counts a request for `from` answered by the fallback `to` (qualified ids).
    /// Counts a cut stream of `provider` and what came of it: `continued`
    /// (a continuation took the answer on), `diverged` (it did not begin
    /// with what the client had), `failed` (none could be had).
    pub fn continuation(&self, provider: &str, outcome: &'static str) {
        self.with(|s| {
            *s.continuations
                .entry((provider.to_string(), outcome))
                .or_default() += 1;
        });
    }

    pub fn fallback(&self, from: &str, to: &str) {
        self.with(|s| {
            *s.fallbacks
                .entry((from.to_string(), to.to_string()))
                .or_default() += 1;
        });
    }

    /// Counts one adaptation of each of `parameters` in a request to
    /// `model` (a catalog id). A parameter outside the fixed vocabulary
    /// counts as `other`: the client chose its name.
    pub fn adapted<'p>(&self, model: &str, parameters: impl Iterator<Item = &'p str>) {
        self.with(|s| {
            for p in parameters {
                *s.adaptations
                    .entry((model.to_string(), crate::adjust::metric_label(p)))
                    .or_default() += 1;
            }
        });
    }

    /// Counts a stream as active until the guard drops.
    pub fn stream_started(self: &Arc<Self>) -> StreamGuard {
        self.active_streams.fetch_add(1, Ordering::Relaxed);
        StreamGuard(self.clone())
    }

    /// Moves the token-count gauges: `waiting` and `running` by +1 / -1.
    pub fn token_count_moved(&self, waiting: i64, running: i64) {
        self.token_counts_waiting
            .fetch_add(waiting, Ordering::Relaxed);
        self.token_counts_running
            .fetch_add(running, Ordering::Relaxed);
    }

    /// Counts a failed call to the limits' Redis under `--redis-fail` `mode`.
    pub fn limits_redis_failure(&self, mode: &str) {
        let i = usize::from(mode == "closed");
        self.limits_redis_failures[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a token count abandoned because its client went away.
    pub fn token_count_cancelled(&self) {
        self.token_counts_cancelled.fetch_add(1, Ordering::Relaxed);
    }

    /// The registry's part of the Prometheus text exposition, appended to `out`.
    pub fn render(&self, out: &mut String) {
        let esc = escape_label;
        self.with(|s| {
            // sorted rows: (family, provider, model) -> series
            let mut rows: Vec<(&str, &str, &str, &ModelSeries)> = Vec::new();
            for f in Family::ALL {
                for (p, models) in &s.per_model[slot(f)] {
                    for (m, series) in models {
                        rows.push((f.name(), p, m, series));
                    }
                }
            }
            rows.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
            out.push_str("# HELP switchboard_requests_total Requests by family, provider, model and status.\n# TYPE switchboard_requests_total counter\n");
            for (f, p, m, series) in &rows {
                let mut statuses = series.statuses.clone();
                statuses.sort_unstable();
                for (st, n) in statuses {
                    let _ = writeln!(
                        out,
                        "switchboard_requests_total{{family=\"{f}\",provider=\"{}\",model=\"{}\",status=\"{st}\"}} {n}",
                        esc(p),
                        esc(m)
                    );
                }
            }
            for (name, help, hists) in [
                ("switchboard_request_duration_seconds", "Request latency.", &s.latency),
                ("switchboard_time_to_first_token_seconds", "Time to the first streamed byte.", &s.ttft),
            ] {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
                for f in Family::ALL {
                    let h = &hists[slot(f)];
                    if h.count == 0 {
                        continue;
                    }
                    let f = f.name();
                    for (i, b) in BUCKETS.iter().enumerate() {
                        let _ = writeln!(out, "{name}_bucket{{family=\"{f}\",le=\"{b}\"}} {}", h.counts[i]);
                    }
                    let _ = writeln!(out, "{name}_bucket{{family=\"{f}\",le=\"+Inf\"}} {}", h.count);
                    let _ = writeln!(out, "{name}_sum{{family=\"{f}\"}} {}", h.sum);
                    let _ = writeln!(out, "{name}_count{{family=\"{f}\"}} {}", h.count);
                }
            }
            // tokens and cost per provider and model, over all families
            let mut totals: BTreeMap<(&str, &str), (u64, u64, i64)> = BTreeMap::new();
            for (_, p, m, series) in &rows {
                if m.is_empty() {
                    continue;
                }
                let t = totals.entry((p, m)).or_default();
                t.0 += series.input_tokens;
                t.1 += series.output_tokens;
                t.2 += series.cost_nanos;
            }
            out.push_str("# HELP switchboard_tokens_total Tokens by provider, model and direction.\n# TYPE switchboard_tokens_total counter\n");
            for ((p, m), (i, o, _)) in &totals {
                for (dir, n) in [("input", i), ("output", o)] {
                    let _ = writeln!(
                        out,
                        "switchboard_tokens_total{{provider=\"{}\",model=\"{}\",direction=\"{dir}\"}} {n}",
                        esc(p),
                        esc(m)
                    );
                }
            }
            out.push_str("# HELP switchboard_cost_usd_total Cost in USD (the catalog pricing's formula, docs/pricing.md).\n# TYPE switchboard_cost_usd_total counter\n");
            for ((p, m), (_, _, c)) in &totals {
                let c = super::outcome::nanos_usd(*c);
                let _ = writeln!(
                    out,
                    "switchboard_cost_usd_total{{provider=\"{}\",model=\"{}\"}} {c}",
                    esc(p),
                    esc(m)
                );
            }
            out.push_str("# HELP switchboard_upstream_errors_total Upstream failures by provider and kind.\n# TYPE switchboard_upstream_errors_total counter\n");
            for ((p, k), n) in &s.upstream_errors {
                let _ = writeln!(
                    out,
                    "switchboard_upstream_errors_total{{provider=\"{}\",kind=\"{}\"}} {n}",
                    esc(p),
                    esc(k)
                );
            }
            out.push_str("# HELP switchboard_upstream_attempts_total Upstream attempts by provider, upstream and outcome (ok; error: a 4xx passed to the client; rate_limited, status_5xx, timeout, unreachable, invalid, credential_refused: failed and cooled; skipped: no key; unfit: the request cannot be translated for it; stale_connection: a pooled connection failed before the answer and the request was sent once more on a new one).\n# TYPE switchboard_upstream_attempts_total counter\n");
            for (p, ups) in &s.attempts {
                for (u, outcomes) in ups {
                    for (o, n) in outcomes {
                        let _ = writeln!(
                            out,
                            "switchboard_upstream_attempts_total{{provider=\"{}\",upstream=\"{}\",outcome=\"{o}\"}} {n}",
                            esc(p),
                            esc(u)
                        );
                    }
                }
            }
            for (name, help, part) in [
                ("switchboard_upstream_input_tokens_total", "Input tokens of the answers of each upstream, those read from the prompt cache included.", 0),
                ("switchboard_upstream_cached_tokens_total", "Input tokens each upstream read from its prompt cache (the hit ratio: this over switchboard_upstream_input_tokens_total).", 1),
            ] {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
                for (p, ups) in &s.upstream_tokens {
                    for (u, t) in ups {
                        let n = if part == 0 { t.0 } else { t.1 };
                        let _ = writeln!(
                            out,
                            "{name}{{provider=\"{}\",upstream=\"{}\"}} {n}",
                            esc(p),
                            esc(u)
                        );
                    }
                }
            }
            out.push_str("# HELP switchboard_upstream_cooldowns_total Cool-downs started, by provider, upstream and the failure that started them.\n# TYPE switchboard_upstream_cooldowns_total counter\n");
            for ((p, u, r), n) in &s.cooldowns {
                let _ = writeln!(
                    out,
                    "switchboard_upstream_cooldowns_total{{provider=\"{}\",upstream=\"{}\",reason=\"{r}\"}} {n}",
                    esc(p),
                    esc(u)
                );
            }
            out.push_str("# HELP switchboard_fallbacks_total Requests answered by a fallback model, by the model asked for and the one that answered.\n# TYPE switchboard_fallbacks_total counter\n");
            for ((from, to), n) in &s.fallbacks {
                let _ = writeln!(
                    out,
                    "switchboard_fallbacks_total{{model=\"{}\",fallback=\"{}\"}} {n}",
                    esc(from),
                    esc(to)
                );
            }
            out.push_str("# HELP switchboard_stream_continuations_total Streams cut after the client got bytes, by the provider that cut them and what came of it (continued, diverged, failed).\n# TYPE switchboard_stream_continuations_total counter\n");
            for ((p, o), n) in &s.continuations {
                let _ = writeln!(
                    out,
                    "switchboard_stream_continuations_total{{provider=\"{}\",outcome=\"{o}\"}} {n}",
                    esc(p)
                );
            }
            out.push_str("# HELP switchboard_adaptations_total Changes the gateway made to requests (lowered output caps, dropped fields, CONTRACT 5.1) by model and parameter.\n# TYPE switchboard_adaptations_total counter\n");
            for ((m, p), n) in &s.adaptations {
                let _ = writeln!(
                    out,
                    "switchboard_adaptations_total{{model=\"{}\",parameter=\"{}\"}} {n}",
                    esc(m),
                    esc(p)
                );
            }
        });
        #[cfg(feature = "alloc-count")]
        {
            let (n, bytes, freed) = crate::obs::alloc_count::totals();
            let live = bytes.saturating_sub(freed);
            let _ = writeln!(
                out,
                "# HELP switchboard_heap_live_bytes_by_size Heap bytes in use by allocation size, up to le bytes (alloc-count build).\n# TYPE switchboard_heap_live_bytes_by_size gauge"
            );
            for (k, b) in crate::obs::alloc_count::live_by_class().iter().enumerate() {
                if *b != 0 {
                    let _ = writeln!(
                        out,
                        "switchboard_heap_live_bytes_by_size{{le=\"{}\"}} {b}",
                        1u64 << k
                    );
                }
            }
            let _ = writeln!(
                out,
                "# HELP switchboard_heap_allocations_total Heap allocations since start (alloc-count build).\n# TYPE switchboard_heap_allocations_total counter\nswitchboard_heap_allocations_total {n}\n# HELP switchboard_heap_allocated_bytes_total Bytes allocated since start (alloc-count build).\n# TYPE switchboard_heap_allocated_bytes_total counter\nswitchboard_heap_allocated_bytes_total {bytes}\n# HELP switchboard_heap_live_bytes Heap bytes in use (alloc-count build).\n# TYPE switchboard_heap_live_bytes gauge\nswitchboard_heap_live_bytes {live}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP switchboard_active_streams Streams in flight.\n# TYPE switchboard_active_streams gauge\nswitchboard_active_streams {}",
            self.active_streams.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_token_counts Token counts (context checks, count-tokens routes) waiting for a tokenizer slot or running.\n# TYPE switchboard_token_counts gauge\nswitchboard_token_counts{{state=\"waiting\"}} {}\nswitchboard_token_counts{{state=\"running\"}} {}",
            self.token_counts_waiting.load(Ordering::Relaxed),
            self.token_counts_running.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_token_counts_cancelled_total Token counts abandoned because the client went away.\n# TYPE switchboard_token_counts_cancelled_total counter\nswitchboard_token_counts_cancelled_total {}",
            self.token_counts_cancelled.load(Ordering::Relaxed)
        );
        self.ledger.render(out);
        let _ = writeln!(
            out,
            "# HELP switchboard_limits_redis_failures_total Calls to the limits' Redis that failed, by --redis-fail mode (open: admitted unchecked, closed: refused).\n# TYPE switchboard_limits_redis_failures_total counter\nswitchboard_limits_redis_failures_total{{mode=\"open\"}} {}\nswitchboard_limits_redis_failures_total{{mode=\"closed\"}} {}",
            self.limits_redis_failures[0].load(Ordering::Relaxed),
            self.limits_redis_failures[1].load(Ordering::Relaxed)
        );
        self.limits_store.render(out);
        let _ = writeln!(
            out,
            "# HELP switchboard_responses_store_failures_total Stored responses that could not be written.\n# TYPE switchboard_responses_store_failures_total counter\nswitchboard_responses_store_failures_total {}",
            self.responses_store_failures.load(Ordering::Relaxed)
        );
    }
}

/// The ledger's counters, shown on the metrics listener.
#[derive(Debug, Default)]
pub struct LedgerCounters {
    pub written: AtomicU64,
    /// Dropped because the queue was full.
    pub dropped_full: AtomicU64,
    /// Dropped because writes kept failing past the rows the writer may hold.
    pub dropped_failed: AtomicU64,
    /// Rows taken off the queue and not yet written (batch filling, or held for a retry).
    pub pending: AtomicI64,
}

impl LedgerCounters {
    /// Rows written so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Rows dropped so far (queue full or writes failing).
    pub fn dropped(&self) -> u64 {
        self.dropped_full.load(Ordering::Relaxed) + self.dropped_failed.load(Ordering::Relaxed)
    }

    /// The Prometheus text of the ledger's series.
    pub fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP switchboard_ledger_rows_written_total Usage-ledger rows written.\n# TYPE switchboard_ledger_rows_written_total counter\nswitchboard_ledger_rows_written_total {}",
            self.written.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_ledger_rows_dropped_total Usage-ledger rows not written, by reason (queue_full: the writer fell behind; write_failed: the database kept failing).\n# TYPE switchboard_ledger_rows_dropped_total counter\nswitchboard_ledger_rows_dropped_total{{reason=\"queue_full\"}} {}\nswitchboard_ledger_rows_dropped_total{{reason=\"write_failed\"}} {}",
            self.dropped_full.load(Ordering::Relaxed),
            self.dropped_failed.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_ledger_rows_pending Usage-ledger rows taken off the queue and not yet written (batching, or held for a retry).\n# TYPE switchboard_ledger_rows_pending gauge\nswitchboard_ledger_rows_pending {}",
            self.pending.load(Ordering::Relaxed)
        );
    }
}

/// The embedded budget store's series (docs/operations.md "Budgets on a
/// full disk").
#[derive(Debug, Default)]
pub struct LimitsStoreCounters {
    /// Budget reservations and settlements that could not be written (kept in memory).
    pub write_failures: AtomicU64,
    /// Settlements kept in memory, not yet written.
    pub unwritten: AtomicI64,
    /// Their spend, in nano-USD.
    pub unwritten_nanos: AtomicI64,
    /// 1 while the store cannot be written.
    pub degraded: AtomicI64,
    /// Requests that did not get the store's answer within its timeout.
    pub late: AtomicU64,
}

impl LimitsStoreCounters {
    /// The Prometheus text of the store's series.
    pub fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP switchboard_limits_store_write_failures_total Budget reservations and settlements that could not be written to DATA/limits.sqlite (kept in memory and retried).\n# TYPE switchboard_limits_store_write_failures_total counter\nswitchboard_limits_store_write_failures_total {}",
            self.write_failures.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_limits_store_unwritten Budget settlements kept in memory, not yet written to DATA/limits.sqlite.\n# TYPE switchboard_limits_store_unwritten gauge\nswitchboard_limits_store_unwritten {}",
            self.unwritten.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_limits_store_unwritten_usd The spend of the budget settlements kept in memory, in USD.\n# TYPE switchboard_limits_store_unwritten_usd gauge\nswitchboard_limits_store_unwritten_usd {}",
            self.unwritten_nanos.load(Ordering::Relaxed) as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_limits_store_late_total Budget reservations, settlements and reads that DATA/limits.sqlite did not answer within 2 s (admitted without their budget checked; written when it answers).\n# TYPE switchboard_limits_store_late_total counter\nswitchboard_limits_store_late_total {}",
            self.late.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_limits_store_degraded 1 while DATA/limits.sqlite cannot be written (budgets checked from memory).\n# TYPE switchboard_limits_store_degraded gauge\nswitchboard_limits_store_degraded {}",
            self.degraded.load(Ordering::Relaxed)
        );
    }
}

/// A label value escaped for the text exposition.
pub fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
