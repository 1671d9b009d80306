//! The metrics listener's HTTP app (`--metrics`): `/admin/*` is the admin
//! API (`super::Admin`; the bodies of its writes are read there, bounded:
//! `super::body`), every other path the Prometheus text exposition: the
//! registry's series (`obs::metrics`), each upstream's live state from the
//! runtime snapshot's pools, and the reload counters.

use crate::listener::Session;
use crate::obs::metrics::{escape_label, Metrics};
use crate::runtime::Runtime;
use async_trait::async_trait;
use http::Response;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The `--metrics` HTTP app.
pub struct MetricsApp {
    pub metrics: Arc<Metrics>,
    pub rt: Arc<Runtime>,
    pub admin: Arc<super::Admin>,
}

#[async_trait]
impl crate::listener::Respond for MetricsApp {
    async fn response(&self, session: &mut Session) -> Response<Vec<u8>> {
        if super::Admin::owns(session.req_header().uri.path()) {
            return self.admin.respond(session).await;
        }
        let body = exposition(&self.metrics, &self.rt).into_bytes();
        let mut resp = Response::new(body);
        if let Ok(v) = http::HeaderValue::from_str("text/plain; version=0.0.4") {
            resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
        }
        resp
    }
}

/// The whole Prometheus text exposition.
pub fn exposition(metrics: &Metrics, rt: &Runtime) -> String {
    let mut out = String::with_capacity(4096);
    metrics.render(&mut out);
    render_pools(&mut out, rt);
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

/// Each upstream's live state: healthy or cooling (and for how long), its
/// requests in flight and its weight.
fn render_pools(out: &mut String, rt: &Runtime) {
    let esc = escape_label;
    let snap = rt.snapshot();
    let now = std::time::Instant::now();
    let mut rows = Vec::new();
    for (p, pool) in snap.pools() {
        for (u, m) in p.upstreams.iter().zip(pool.members()) {
            let v = m.view(now);
            let labels = format!(
                "provider=\"{}\",upstream=\"{}\",protocol=\"{}\"",
                esc(&p.id),
                esc(&u.id),
                u.protocol_name
            );
            rows.push((labels, v, u.weight));
        }
    }
    out.push_str("# HELP switchboard_upstream_healthy 1 when the upstream takes traffic, 0 while it cools down.\n# TYPE switchboard_upstream_healthy gauge\n");
    for (l, v, _) in &rows {
        let _ = writeln!(
            out,
            "switchboard_upstream_healthy{{{l}}} {}",
            u8::from(v.cooling.is_none())
        );
    }
    out.push_str("# HELP switchboard_upstream_cooldown_seconds Time left in the upstream's cool-down.\n# TYPE switchboard_upstream_cooldown_seconds gauge\n");
    for (l, v, _) in &rows {
        let secs = v.cooling.map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let _ = writeln!(
            out,
            "switchboard_upstream_cooldown_seconds{{{l}}} {secs:.3}"
        );
    }
    out.push_str("# HELP switchboard_upstream_in_flight Requests in flight on the upstream.\n# TYPE switchboard_upstream_in_flight gauge\n");
    for (l, v, _) in &rows {
        let _ = writeln!(out, "switchboard_upstream_in_flight{{{l}}} {}", v.in_flight);
    }
    out.push_str("# HELP switchboard_upstream_weight The upstream's weight in its pool.\n# TYPE switchboard_upstream_weight gauge\n");
    for (l, _, w) in &rows {
        let _ = writeln!(out, "switchboard_upstream_weight{{{l}}} {w}");
    }
}
