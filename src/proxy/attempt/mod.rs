//! Calling the upstreams for one model of a request, as a folder whose
//! pieces run in this order:
//! 1. `provider`: the loop over the provider's upstreams (pick, pause,
//!    attempt, judge, note);
//! 2. `request`: the body and head that go to one upstream (spliced or
//!    translated, the provider's key);
//! 3. `exchange`: one attempt (send, wait for the first token, judge the
//!    status, read a whole answer);
//! 4. `answer`: reading an upstream's answer body, refusing what is no
//!    answer (a refused credential, a redirect), its error text scrubbed.
//!
//! What follows the last attempt of a model (its fallbacks, the panic
//! pass) is `super::chain`.

mod answer;
mod exchange;
mod provider;
mod request;

pub use provider::call;

use super::Gateway;
use crate::adjust::Adjustments;
use crate::admit::validate;
use crate::config::{Model, Provider, Upstream};
use crate::error::GatewayError;
use crate::eventstream::decode::EventStreamDecoder;
use crate::family::Family;
pub use crate::obs::outcome::AttemptNote;
use crate::upstream::client::Exchange;
use crate::upstream::pool::{Cause, InFlight, Member, ProviderPool};
use bytes::Bytes;
use std::time::{Duration, Instant};

/// A request planned for one model: the body and peek the upstream sees,
/// what the plan changed, and whether it runs under `adapt`.
pub struct Planned {
    pub body: Bytes,
    pub req: validate::Inspected,
    pub adjusted: crate::adjust::Adjustments,
    pub adapt: bool,
    /// The body ends with an assistant prefill the answer continues (a cut
    /// stream's continuation, docs/resilience.md).
    pub continues: bool,
    /// An embeddings or rerank request (the `embed`, `rerank` actions): the
    /// body each upstream gets is encoded from it for the upstream's
    /// protocol, never spliced.
    pub embed: Option<std::sync::Arc<crate::ir::embed::Retrieval>>,
}

/// What every attempt of one client request shares, whichever model and
/// upstream it goes to.
pub struct Client<'a> {
    pub family: Family,
    /// The Gemini route's model from the path.
    pub path_model: Option<&'a str>,
    /// The client's `anthropic-beta` header, forwarded to Anthropic upstreams
    /// of Anthropic Messages requests only.
    pub anthropic_beta: Option<&'a str>,
    /// The client asked for Anthropic's beta surface with `?beta=true` (Claude
    /// Code does); forwarded to Anthropic upstreams of Anthropic requests.
    pub beta_query: bool,
    pub request_id: &'a str,
    /// The request's span and the exporter (each attempt gets a child span
    /// and sends it upstream as `traceparent`).
    pub trace: Option<(
        &'a crate::obs::telemetry::RequestTrace,
        &'a crate::obs::telemetry::Telemetry,
    )>,
    /// Without telemetry, the client's own valid `traceparent`, forwarded.
    pub traceparent: Option<&'a str>,
    /// The request's session key (docs/resilience.md "Session affinity"):
    /// the pool keeps a conversation on one upstream by it.
    pub affinity: SessionKey,
}

/// A request's session key: a session header's value, hashed at once, or
/// the body's cache key or stable prefix
/// ([`crate::protocol::common::peek::AffinitySource`]), hashed the first
/// time a pick compares upstreams by it, so a provider with one usable
/// upstream, or with affinity off, never hashes the body.
pub struct SessionKey {
    hash: std::sync::OnceLock<u64>,
    /// The body the source's spans point into (a refcount).
    body: Bytes,
    source: crate::protocol::common::peek::AffinitySource,
}

impl SessionKey {
    /// A key already hashed (a session header; a fixed key).
    pub fn known(hash: u64) -> Self {
        SessionKey {
            hash: std::sync::OnceLock::from(hash),
            body: Bytes::new(),
            source: Default::default(),
        }
    }

    /// The key `source` finds in `body`, hashed when first asked.
    pub fn of_body(body: Bytes, source: crate::protocol::common::peek::AffinitySource) -> Self {
        SessionKey {
            hash: std::sync::OnceLock::new(),
            body,
            source,
        }
    }

    /// The key's hash.
    pub fn get(&self) -> u64 {
        *self.hash.get_or_init(|| self.source.hash(&self.body))
    }
}

/// One model's upstream call: the request as planned for the model, and
/// where it goes.
pub struct Call<'a, 's> {
    pub client: &'a Client<'a>,
    pub plan: &'a Planned,
    pub model: &'s Model,
    pub provider: &'s Provider,
    /// The provider's pool (health, in flight, weights).
    pub pool: &'s ProviderPool,
    /// When the request must be done: its start plus the provider's `total`.
    pub deadline: Option<Instant>,
}

/// Cools `up` (of `provider`) for `cause` and counts it: the one way an
/// upstream is blamed, before an answer (here) or after (a broken whole
/// answer, a failed stream). Returns the cool-down.
pub fn cool(
    gw: &Gateway,
    provider: &str,
    up: &Upstream,
    member: &Member,
    cause: Cause,
) -> Duration {
    let cooled = member.failed(cause, Instant::now());
    gw.metrics.upstream_cooled(provider, &up.id, cause.label());
    cooled
}

/// A successful upstream answer (status below 400), its response header read.
pub struct Answer<'s> {
    pub up: &'s Upstream,
    /// Whether the upstream speaks another protocol than the client.
    pub translated: bool,
    pub ex: Exchange,
    pub status: u16,
    /// Whether the gateway asked an OpenAI upstream for stream usage the client did not ask for.
    pub usage_injected: bool,
    /// What translation for this upstream dropped (empty when not translated).
    pub adjusted: Adjustments,
    /// What was read before anything reached the client: a stream's first
    /// chunk (None: it ended at once), or a whole answer's body. A stream
    /// an upstream frames as AWS's event stream is here as SSE already.
    pub first: Option<Bytes>,
    /// The decoder of a stream the upstream frames as AWS's event stream
    /// (Bedrock): the relay turns each later chunk into SSE through it.
    pub frames: Option<Box<EventStreamDecoder>>,
    /// The request in flight on the upstream's pool member (ends when dropped).
    pub in_flight: InFlight,
    /// The provider's `idle` timeout, and the request's `total` deadline.
    pub idle: Option<Duration>,
    pub deadline: Option<Instant>,
}

/// An attempt of `c`'s model at `up`, its outcome not yet known.
fn note_of(c: &Call<'_, '_>, up: &Upstream) -> AttemptNote {
    AttemptNote {
        provider: c.provider.id.clone(),
        model: c.model.id.clone(),
        upstream: up.id.clone(),
        status: None,
        failure: None,
        cooled_ms: None,
        ms: 0,
    }
}

/// What `call` tried: the upstream calls made, the last upstream, each attempt.
#[derive(Debug, Default)]
pub struct Tried<'s> {
    pub attempts: u32,
    pub last: Option<&'s Upstream>,
    pub notes: Vec<AttemptNote>,
}

/// Why `call` found no answer.
pub enum Failed {
    /// An answer or error that goes to the client as it is (a 4xx from the
    /// upstream, a request that cannot be translated, the deadline).
    Final(GatewayError),
    /// Every upstream it could try failed or was cooling down (None: none
    /// was tried), or the attempts ran out: a fallback may take over.
    Exhausted(Option<GatewayError>),
    /// The request cannot be put to this model's upstream (a translation
    /// refusal): the client's error for the model it named, a reason to skip
    /// a fallback.
    Unfit(GatewayError),
    /// The upstream said the request is longer than the model's context
    /// (the error keeps the upstream's status and code): a fallback whose
    /// context is larger may take it.
    Overflow(GatewayError),
}
