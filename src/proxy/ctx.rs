//! Per-request state carried through the Pingora phases, and the request id.

use crate::family::Family;
use crate::obs::outcome::Outcome;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Per-request state: the request's identity and key, what its phases
/// share, and its outcome (`obs::outcome`), which the access log, the
/// ledger, the metrics and the span read in `logging`.
#[derive(Debug)]
pub struct RequestCtx {
    pub request_id: String,
    pub started: Instant,
    /// The authenticated key's id (never the key).
    pub key_id: Option<String>,
    /// The authenticated key's team, when it is in one.
    pub team: Option<std::sync::Arc<crate::config::Team>>,
    /// An authenticated inference request (not a listing, not a local count):
    /// it gets a usage-ledger row.
    pub billable: bool,
    /// What is left of the key's budget (nano-USD), when it has one: the
    /// `x-switchboard-budget-remaining` header.
    pub budget_remaining: Option<i64>,
    /// The client went away before the response was complete.
    pub client_gone: bool,
    /// The request's span (with `--otlp-endpoint`), ended in `logging`.
    pub trace: Option<std::sync::Arc<crate::obs::telemetry::RequestTrace>>,
    /// The client's `traceparent`, forwarded upstream as it is when no span
    /// is made.
    pub traceparent: Option<String>,
    pub outcome: Outcome,
    /// Counts the request in flight for the shutdown drain until the
    /// context drops (after `logging`).
    pub in_flight: Option<crate::runtime::drain::InFlight>,
}

impl RequestCtx {
    /// A fresh context; the request id is filled in by `Gateway::request`.
    pub fn new() -> Self {
        RequestCtx {
            request_id: String::new(),
            started: Instant::now(),
            key_id: None,
            team: None,
            billable: false,
            budget_remaining: None,
            client_gone: false,
            trace: None,
            traceparent: None,
            outcome: Outcome::new(Family::OpenAi),
            in_flight: None,
        }
    }
}

impl Default for RequestCtx {
    fn default() -> Self {
        RequestCtx::new()
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new request id: unique within the process and unlikely to repeat across restarts.
pub fn new_request_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // `req_{nanos:016x}{n:06x}`, without the formatter's machinery.
    let mut id = String::with_capacity(26);
    id.push_str("req_");
    crate::util::hex::push_u64(&mut id, nanos, 16);
    crate::util::hex::push_u64(&mut id, n, 6);
    id
}

/// Accepts a client-sent `x-request-id` if it is short, printable ASCII.
pub fn client_request_id(v: &[u8]) -> Option<String> {
    if v.is_empty() || v.len() > 128 || !v.iter().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    std::str::from_utf8(v).ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_ids_are_req_and_hex_and_differ() {
        let (a, b) = (super::new_request_id(), super::new_request_id());
        assert_ne!(a, b);
        for id in [&a, &b] {
            let hex = id.strip_prefix("req_").unwrap_or_else(|| panic!("{id}"));
            assert!(hex.len() >= 22, "{id}");
            assert!(
                hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
                "{id}"
            );
        }
    }
}
