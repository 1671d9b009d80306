//! What one request came to: the one record the request path fills in and
//! that the access log, the usage ledger, the metrics and the request's span
//! all read (each renders it; none keeps a copy of its figures).

use crate::adjust::Adjustments;
use crate::error::GatewayError;
use crate::family::Family;
use serde::Serialize;
use std::time::Duration;

/// A request's outcome, filled in as the request goes.
#[derive(Debug)]
pub struct Outcome {
    /// The client's protocol.
    pub family: Family,
    /// Status sent to the client (0 until a response header is written).
    pub status: u16,
    /// The provider and model asked for (the fallback's, once one answered).
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The upstream last called: its wire protocol and `host[:port]`.
    pub upstream_protocol: Option<Family>,
    pub upstream_host: Option<String>,
    /// Upstream calls made (failover included); 0 when none was made.
    pub attempts: u32,
    /// Every upstream attempt, in order.
    pub tried: Vec<AttemptNote>,
    /// The model that answered (`provider/model_id`): the
    /// `x-switchboard-model` header.
    pub answered_by: Option<String>,
    /// The model the client asked for, when a fallback answered instead.
    pub fallback_from: Option<String>,
    pub usage: Usage,
    /// Why the request failed (the error sent to the client, or the stream failure).
    pub error: Option<ErrorNote>,
    /// Time to the first response body byte, for streams.
    pub ttft: Option<Duration>,
    /// Unreadable upstream stream frames skipped (0: none).
    pub skipped_frames: u32,
    /// Continuations of a cut stream that reached the client (0: none).
    pub continued: u32,
    /// What the gateway changed in the request (docs/api.md "Adapt or refuse").
    pub adjusted: Adjustments,
}

impl Outcome {
    /// Nothing known yet, for a client of `family` (set again once the route is known).
    pub fn new(family: Family) -> Outcome {
        Outcome {
            family,
            status: 0,
            provider: None,
            model: None,
            upstream_protocol: None,
            upstream_host: None,
            attempts: 0,
            tried: Vec::new(),
            answered_by: None,
            fallback_from: None,
            usage: Usage::default(),
            error: None,
            ttft: None,
            skipped_frames: 0,
            continued: 0,
            adjusted: Adjustments::default(),
        }
    }
}

impl Outcome {
    /// The attempt that answered (for a continued stream, its last
    /// segment's): the last one with a status below 400 and no failure.
    pub fn answered(&self) -> Option<&AttemptNote> {
        self.tried
            .iter()
            .rev()
            .find(|n| n.failure.is_none() && n.status.is_some_and(|s| s < 400))
    }

    /// The input tokens of the answer, those read from the prompt cache
    /// included (on every route, docs/pricing.md "Usage").
    pub fn prompt_tokens(&self) -> Option<u64> {
        self.usage.input_tokens
    }
}

/// What the request used, as the upstream reported it, and its price
/// (docs/pricing.md): `input_tokens` counts every prompt token, cached and
/// cache-written ones included; `output_tokens` includes reasoning.
#[derive(Debug, Default, Clone, Copy)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache, when reported.
    pub cached_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache (0 when the
    /// upstream reports none and the usage is known).
    pub cache_write_tokens: Option<u64>,
    /// Of those, the ones written to a one-hour cache.
    pub cache_write_1h_tokens: Option<u64>,
    /// Output tokens spent on reasoning, when reported.
    pub reasoning_tokens: Option<u64>,
    /// The cost in nano-USD (1e-9 USD), from the catalog's formula.
    pub cost_nanos: Option<i64>,
}

impl Usage {
    /// The cost in USD, exact to 1e-9 (a nano-USD count as the nearest f64).
    pub fn cost_usd(&self) -> Option<f64> {
        self.cost_nanos.map(nanos_usd)
    }
}

/// `n` nano-USD in USD (the f64 nearest the nine-decimal amount, which
/// prints as that amount).
pub fn nanos_usd(n: i64) -> f64 {
    n as f64 / 1e9
}

/// One upstream attempt, as the access log reports it (and the ledger keeps).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptNote {
    pub provider: String,
    pub model: String,
    pub upstream: String,
    /// The upstream's status, when it answered.
    pub status: Option<u16>,
    /// Why the attempt failed (`rate_limited`, `status_5xx`, `timeout`,
    /// `unreachable`, `invalid`, `credential_refused`, `context_overflow`,
    /// `stale_connection`, `skipped`, `unfit`), or null when it answered.
    pub failure: Option<&'static str>,
    /// The cool-down it started, in milliseconds.
    pub cooled_ms: Option<u64>,
    pub ms: u64,
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
