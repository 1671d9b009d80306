//! Prometheus metrics: per-request counters and histograms recorded once per
//! request (in the logging phase), an active-streams gauge, and the text
//! exposition served on `--metrics`.

use crate::runtime::Runtime;
use async_trait::async_trait;
use http::Response;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, Ordering};
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

/// One finished request, as the metrics see it.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    pub family: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub status: u16,
    pub latency: Duration,
    pub ttft: Option<Duration>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
}

#[derive(Debug, Default)]
struct Series {
    requests: BTreeMap<(String, String, String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    ttft: BTreeMap<String, Histogram>,
    tokens: BTreeMap<(String, String, &'static str), u64>,
    cost: BTreeMap<(String, String), f64>,
    upstream_errors: BTreeMap<(String, String), u64>,
}

/// The process's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    series: Mutex<Series>,
    active_streams: AtomicI64,
}

/// Decrements the active-streams gauge when dropped.
pub struct StreamGuard(Arc<Metrics>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.active_streams.fetch_sub(1, Ordering::Relaxed);
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
    pub fn observe(&self, o: &Observation<'_>) {
        self.with(|s| {
            let key = (
                o.family.to_string(),
                o.provider.to_string(),
                o.model.to_string(),
                o.status,
            );
            *s.requests.entry(key).or_default() += 1;
            s.latency
                .entry(o.family.to_string())
                .or_default()
                .observe(o.latency.as_secs_f64());
            if let Some(t) = o.ttft {
                s.ttft
                    .entry(o.family.to_string())
                    .or_default()
                    .observe(t.as_secs_f64());
            }
            if !o.model.is_empty() {
                for (dir, n) in [("input", o.input_tokens), ("output", o.output_tokens)] {
                    if let Some(n) = n {
                        *s.tokens
                            .entry((o.provider.to_string(), o.model.to_string(), dir))
                            .or_default() += n;
                    }
                }
                if let Some(c) = o.cost_usd {
                    *s.cost
                        .entry((o.provider.to_string(), o.model.to_string()))
                        .or_default() += c;
                }
            }
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

    /// Counts a stream as active until the guard drops.
    pub fn stream_started(self: &Arc<Self>) -> StreamGuard {
        self.active_streams.fetch_add(1, Ordering::Relaxed);
        StreamGuard(self.clone())
    }

    /// The Prometheus text exposition.
    pub fn render(&self, rt: &Runtime) -> String {
        let mut out = String::with_capacity(4096);
        let esc = |s: &str| {
            s.replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n")
        };
        self.with(|s| {
            out.push_str("# HELP switchboard_requests_total Requests by family, provider, model and status.\n# TYPE switchboard_requests_total counter\n");
            for ((f, p, m, st), n) in &s.requests {
                let _ = writeln!(
                    out,
                    "switchboard_requests_total{{family=\"{}\",provider=\"{}\",model=\"{}\",status=\"{st}\"}} {n}",
                    esc(f),
                    esc(p),
                    esc(m)
                );
            }
            for (name, help, map) in [
                ("switchboard_request_duration_seconds", "Request latency.", &s.latency),
                ("switchboard_time_to_first_token_seconds", "Time to the first streamed byte.", &s.ttft),
            ] {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
                for (f, h) in map {
                    for (i, b) in BUCKETS.iter().enumerate() {
                        let _ = writeln!(out, "{name}_bucket{{family=\"{f}\",le=\"{b}\"}} {}", h.counts[i]);
                    }
                    let _ = writeln!(out, "{name}_bucket{{family=\"{f}\",le=\"+Inf\"}} {}", h.count);
                    let _ = writeln!(out, "{name}_sum{{family=\"{f}\"}} {}", h.sum);
                    let _ = writeln!(out, "{name}_count{{family=\"{f}\"}} {}", h.count);
                }
            }
            out.push_str("# HELP switchboard_tokens_total Tokens by provider, model and direction.\n# TYPE switchboard_tokens_total counter\n");
            for ((p, m, d), n) in &s.tokens {
                let _ = writeln!(
                    out,
                    "switchboard_tokens_total{{provider=\"{}\",model=\"{}\",direction=\"{d}\"}} {n}",
                    esc(p),
                    esc(m)
                );
            }
            out.push_str("# HELP switchboard_cost_usd_total Cost in USD (usage times catalog pricing).\n# TYPE switchboard_cost_usd_total counter\n");
            for ((p, m), c) in &s.cost {
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
        });
        let _ = writeln!(
            out,
            "# HELP switchboard_active_streams Streams in flight.\n# TYPE switchboard_active_streams gauge\nswitchboard_active_streams {}",
            self.active_streams.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_catalog_reloads_total Successful configuration reloads.\n# TYPE switchboard_catalog_reloads_total counter\nswitchboard_catalog_reloads_total {}",
            rt.reloads.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchboard_catalog_reload_failures_total Rejected configuration reloads.\n# TYPE switchboard_catalog_reload_failures_total counter\nswitchboard_catalog_reload_failures_total {}",
            rt.reload_failures.load(Ordering::Relaxed)
        );
        out
    }
}

/// The `--metrics` HTTP app: every path answers the exposition.
pub struct MetricsApp {
    pub metrics: Arc<Metrics>,
    pub rt: Arc<Runtime>,
}

#[async_trait]
impl ServeHttp for MetricsApp {
    async fn response(&self, _session: &mut ServerSession) -> Response<Vec<u8>> {
        let body = self.metrics.render(&self.rt).into_bytes();
        let mut resp = Response::new(body);
        if let Ok(v) = http::HeaderValue::from_str("text/plain; version=0.0.4") {
            resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
        }
        resp
    }
}
