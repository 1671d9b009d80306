//! Per-request state carried through the Pingora phases, and the request id.

use crate::error::GatewayError;
use crate::family::Family;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the access log and metrics need to know about one request.
#[derive(Debug)]
pub struct RequestCtx {
    pub request_id: String,
    pub family: Family,
    pub started: Instant,
    /// Status sent to the client (0 until a response header is written).
    pub status: u16,
    /// The authenticated key's id (never the key).
    pub key_id: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The upstream last called: its wire protocol and `host[:port]`.
    pub upstream_protocol: Option<Family>,
    pub upstream_host: Option<String>,
    /// Upstream calls made (failover included); 0 when none was made.
    pub attempts: u32,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache, when reported.
    pub cached_tokens: Option<u64>,
    /// Output tokens spent on reasoning, when reported.
    pub reasoning_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// Why the request failed (the error sent to the client, or the stream failure).
    pub error: Option<ErrorNote>,
    /// Time to the first response body byte, for streams.
    pub ttft: Option<Duration>,
    /// What the gateway changed in the request (docs/api.md "Adapt or refuse").
    pub adjusted: crate::adjust::Adjustments,
    /// An authenticated inference request (not a listing, not a local count):
    /// it gets a usage-ledger row.
    pub billable: bool,
    /// What is left of the key's budget (nano-USD), when it has one: the
    /// `x-switchboard-budget-remaining` header.
    pub budget_remaining: Option<i64>,
    /// The client went away before the response was complete.
    pub client_gone: bool,
    /// The model that answered (`provider/model_id`): the
    /// `x-switchboard-model` header.
    pub answered_by: Option<String>,
    /// The model the client asked for, when a fallback answered instead.
    pub fallback_from: Option<String>,
    /// Every upstream attempt, in order.
    pub tried: Vec<super::attempt::AttemptNote>,
    /// The request's span (with `--otlp-endpoint`), ended in `logging`.
    pub trace: Option<std::sync::Arc<crate::obs::telemetry::RequestTrace>>,
    /// The client's `traceparent`, forwarded upstream as it is when no span
    /// is made.
    pub traceparent: Option<String>,
}

impl RequestCtx {
    /// A fresh context; the request id is filled in by `request_filter`.
    pub fn new() -> Self {
        RequestCtx {
            request_id: String::new(),
            family: Family::OpenAi,
            started: Instant::now(),
            status: 0,
            key_id: None,
            provider: None,
            model: None,
            upstream_protocol: None,
            upstream_host: None,
            attempts: 0,
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            reasoning_tokens: None,
            cost_usd: None,
            error: None,
            ttft: None,
            adjusted: crate::adjust::Adjustments::default(),
            billable: false,
            budget_remaining: None,
            client_gone: false,
            answered_by: None,
            fallback_from: None,
            tried: Vec::new(),
            trace: None,
            traceparent: None,
        }
    }
}

/// The reason a request failed, as the access log reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorNote {
    /// The error kind's name (`invalid_request`, `authentication`, ...).
    pub kind: &'static str,
    pub message: String,
}

impl From<&GatewayError> for ErrorNote {
    fn from(e: &GatewayError) -> Self {
        ErrorNote {
            kind: e.kind.name(),
            message: e.message.clone(),
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
    format!("req_{nanos:016x}{n:06x}")
}

/// Accepts a client-sent `x-request-id` if it is short, printable ASCII.
pub fn client_request_id(v: &[u8]) -> Option<String> {
    if v.is_empty() || v.len() > 128 || !v.iter().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    std::str::from_utf8(v).ok().map(str::to_string)
}
