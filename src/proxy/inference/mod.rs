//! The inference exchange, run from `Gateway::serve` for an authenticated
//! inference route. `run` is the list of its steps, each in its own file:
//! 1. `body`: read the client's body (any size up to the limit), refuse deep nesting;
//! 2. Responses routes: the stored turn (`proxy::stored`);
//! 3. peek at the request (`admit::validate`), `resolve` the model, start the span, check the key may use it;
//! 4. `count`: a count-tokens route is answered here;
//! 5. `chain`: `plan`, reserve (`budget`) and call the model,
//!    then its fallbacks (`proxy::attempt` for each model's upstreams);
//! 6. `deliver`: answer whole or relay the stream, record the usage, settle.

mod body;
mod budget;
mod chain;
pub(super) mod count;
mod deliver;
mod embed;
mod plan;
mod rerank;
mod rescue;
mod resolve;

use super::attempt::SessionKey;
use super::ctx::RequestCtx;
use super::respond;
use super::route::{Endpoint, GeminiStream, Route};
use super::Gateway;
use crate::admit::validate;
use crate::config::ApiKey;
use crate::error::GatewayError;
use crate::family::Family;
use crate::listener::Session;
use crate::protocol::spoke;
use crate::runtime::Snapshot;
use crate::state::limits::Reservation;
use crate::translate::passthrough::Framing;
use bytes::Bytes;
use http::header::HeaderName;

/// Why the exchange stopped early.
pub enum Stop {
    /// Tell the client, in its family's shape (only possible before the response header).
    Client(GatewayError),
    /// The downstream connection failed; nothing more can be sent.
    Io(Box<pingora_core::Error>),
}

impl From<GatewayError> for Stop {
    fn from(e: GatewayError) -> Self {
        Stop::Client(e)
    }
}

/// Handles an authenticated inference request.
///
/// `handle` and `run` are functions returning an `async move` block, not
/// `async fn`s: an `async fn` keeps each argument twice (the argument and
/// its rebinding), and these futures are held for a stream's whole life.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn keeps each argument twice"
)]
pub fn handle<'a>(
    gw: &'a Gateway,
    session: &'a mut Session,
    ctx: &'a mut RequestCtx,
    route: &'a Route,
    snap: &'a Snapshot,
    key: &'a ApiKey,
) -> impl std::future::Future<Output = pingora_core::Result<()>> + Send + 'a {
    async move {
        let mut held = None;
        let result = run(gw, session, ctx, route, snap, key, &mut held).await;
        if let Some(r) = held.take() {
            // The request failed after its reservation: give it back before the
            // error goes out, so the budget header is the real remainder.
            if let Some(left) = Box::pin(r.release()).await {
                ctx.budget_remaining = Some(left);
            }
        }
        if !ctx.outcome.adjusted.is_empty() {
            gw.metrics.adapted(
                ctx.outcome.model.as_deref().unwrap_or(""),
                ctx.outcome.adjusted.parameters(),
            );
        }
        match result {
            Ok(()) => Ok(()),
            Err(Stop::Client(e)) if ctx.outcome.status == 0 => {
                respond::error(session, ctx, route.family, &e).await
            }
            Err(Stop::Client(e)) => {
                log::warn!("{}: error after the response started: {e}", ctx.request_id);
                ctx.outcome.error = Some((&e).into());
                Ok(())
            }
            Err(Stop::Io(e)) => Err(e),
        }
    }
}

#[allow(
    clippy::manual_async_fn,
    reason = "an async fn keeps each argument twice"
)]
fn run<'a>(
    gw: &'a Gateway,
    session: &'a mut Session,
    ctx: &'a mut RequestCtx,
    route: &'a Route,
    snap: &'a Snapshot,
    key: &'a ApiKey,
    held: &'a mut Option<Reservation>,
) -> impl std::future::Future<Output = Result<(), Stop>> + Send + 'a {
    async move {
        if route.endpoint == Endpoint::Rerank {
            return Box::pin(rerank::run(gw, session, ctx, snap, key, held)).await;
        }
        if route.endpoint.embeds() {
            return Box::pin(embed::run(gw, session, ctx, route, snap, key, held)).await;
        }
        // The protocol of the body: the route's, but Anthropic Messages in
        // Bedrock's InvokeModel envelope on E22/E23 (errors stay in the
        // route's shape, `route.family`).
        let family = route.endpoint.body_family(route.family);
        require_header(session, route.family)?;
        let body = body::read_request_body(gw, session).await?;
        let (body, turn) = stored_turn(gw, route, key, body).await?;
        let (body, invoke_beta) = invoke_envelope(route, body)?;
        let gemini_stream = route.endpoint.gemini_model().1;
        // The model the path names (Gemini, Bedrock Converse; an InvokeModel
        // body carries it from here, unwrapped).
        let path_model = route
            .endpoint
            .path_model()
            .filter(|_| family == route.family);
        let req = validate::inspect(family, &body, route.endpoint.path_stream())?;
        let name = path_model
            .or(req.model.as_deref())
            .ok_or_else(|| GatewayError::invalid_param("model", "model is required"))?;
        // Visibility is the route's: every model for Bedrock routes.
        let (model, provider) = resolve::resolve(
            snap,
            route.family,
            name,
            path_model.is_some() && family == Family::Gemini,
        )?;
        ctx.outcome.provider = Some(provider.id.clone());
        ctx.outcome.model = Some(model.id.clone());
        start_trace(gw, session, ctx, &model.qualified_id);
        embed::require_action(model, "complete")?;
        super::auth::authorize(key, &model.qualified_id)?;
        if route.endpoint.counts_tokens() {
            return Box::pin(count::answer(gw, session, ctx, key, family, body)).await;
        }
        let (beta, beta_query) = anthropic_beta(session);
        let beta = invoke_beta.or(beta);
        let (request_id, trace, telemetry) = (
            ctx.request_id.clone(),
            ctx.trace.clone(),
            gw.telemetry.clone(),
        );
        let traceparent = ctx.traceparent.clone();
        let client = super::attempt::Client {
            family,
            path_model,
            anthropic_beta: beta.as_deref(),
            beta_query,
            request_id: &request_id,
            trace: trace.as_deref().zip(telemetry.as_deref()),
            traceparent: traceparent.as_deref(),
            affinity: affinity(session, &req, &body),
        };
        let ch = chain::Chain {
            client: &client,
            key,
            snap,
            model,
            provider,
            policy: key.policy.unwrap_or(snap.catalog.policy),
        };
        // A stream cut mid-answer may be continued on a fallback, planned from
        // the client's request as it came (a refcount and the peek's copy).
        let original = (req.stream && !model.fallbacks.is_empty())
            .then(|| Box::new((body.clone(), req.clone())));
        let answered =
            Box::pin(chain::call(gw, session, ctx, &ch, Some((body, req)), held)).await?;
        let mut d = deliver::Delivery {
            family,
            key,
            turn: turn.map(Box::new),
            framing: framing(&route.endpoint, gemini_stream),
            chain: &ch,
            original,
        };
        let answered = Box::new(answered);
        if answered.plan.req.stream {
            Box::pin(deliver::stream(gw, session, ctx, answered, &mut d, held)).await
        } else {
            deliver::whole(gw, session, ctx, answered, &mut d, held).await
        }
    }
}

/// The headers that name an agent's session, in the order they are read:
/// Claude Code's, then Codex's (`session_id` in earlier versions, `session-id` in 0.169;
/// both the session's UUID, which Codex also sends as `prompt_cache_key`).
/// Looked up by typed names (a `&str` is parsed as a name again at every
/// lookup).
const SESSION_HEADERS: [HeaderName; 3] = [
    HeaderName::from_static("x-claude-code-session-id"),
    HeaderName::from_static("session_id"),
    HeaderName::from_static("session-id"),
];
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");

/// The request's session key, hashed (docs/resilience.md "Session
/// affinity"): a session header's value, else what the peek found in the
/// body (the client's cache key, else the stable prefix, hashed only if a
/// pick compares upstreams by it). Never logged.
fn affinity(session: &Session, req: &validate::Inspected, body: &Bytes) -> SessionKey {
    let headers = &session.req_header().headers;
    SESSION_HEADERS
        .iter()
        .filter_map(|h| headers.get(h))
        .map(|v| v.as_bytes())
        .find(|v| !v.is_empty())
        .map_or_else(
            || SessionKey::of_body(body.clone(), req.affinity.clone()),
            |v| SessionKey::known(crate::util::hash::key(v)),
        )
}

/// How a stream is framed for the client: Gemini's JSON array, Bedrock's
/// event streams (Converse events; Anthropic events in `chunk` messages),
/// else SSE.
fn framing(endpoint: &Endpoint, gemini_stream: GeminiStream) -> Framing {
    match endpoint {
        Endpoint::Bedrock { op, .. } if op.invokes() => Framing::BedrockChunks,
        Endpoint::Bedrock { .. } => Framing::EventStream,
        _ if gemini_stream == GeminiStream::JsonArray => Framing::JsonArray,
        _ => Framing::Sse,
    }
}

/// E22/E23: the Anthropic Messages body inside Bedrock's InvokeModel
/// envelope (the path's model and stream flag set, `anthropic_version`
/// checked and taken off), and the betas it carried (the `anthropic-beta`
/// an Anthropic upstream gets). Other routes: the body as it came.
fn invoke_envelope(route: &Route, body: Bytes) -> Result<(Bytes, Option<String>), GatewayError> {
    match &route.endpoint {
        Endpoint::Bedrock { model, op } if op.invokes() => {
            let (body, betas) =
                crate::protocol::bedrock::invoke::unwrap_body(&body, model, op.streams())?;
            Ok((Bytes::from(body), betas))
        }
        _ => Ok((body, None)),
    }
}

/// A header the client's protocol requires (Anthropic's `anthropic-version`).
fn require_header(session: &Session, family: Family) -> Result<(), GatewayError> {
    match spoke(family).required_header {
        Some(h) if session.req_header().headers.get(h).is_none() => Err(
            GatewayError::invalid_param(h, format!("{h}: header is required")),
        ),
        _ => Ok(()),
    }
}

/// On the Responses routes, what the request means for stored responses: a
/// continuation carries the stored conversation from here on (docs/api.md
/// "Stored responses").
async fn stored_turn(
    gw: &Gateway,
    route: &Route,
    key: &ApiKey,
    body: Bytes,
) -> Result<(Bytes, Option<super::stored::Turn>), Stop> {
    let storing = match route.endpoint {
        Endpoint::Responses => true,
        Endpoint::ResponsesInputTokens => false,
        _ => return Ok((body, None)),
    };
    Ok(Box::pin(super::stored::prepare(gw, &key.id, body, storing)).await?)
}

/// Starts the request's span (with `--otlp-endpoint`), continuing the
/// client's trace; without telemetry, keeps the client's `traceparent` to
/// forward when it is a valid W3C value (re-written in version 00's form;
/// anything else is dropped and the upstream starts its own trace).
fn start_trace(gw: &Gateway, session: &Session, ctx: &mut RequestCtx, model: &str) {
    let client_traceparent = session
        .req_header()
        .headers
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok());
    if let Some(t) = &gw.telemetry {
        let started = std::time::SystemTime::now() - ctx.started.elapsed();
        let span = crate::obs::telemetry::RequestTrace::start(
            t,
            client_traceparent,
            "chat",
            model,
            started,
        );
        span.set("switchboard.request_id", ctx.request_id.as_str());
        span.set("switchboard.family", ctx.outcome.family.name());
        ctx.trace = Some(std::sync::Arc::new(span));
    } else {
        ctx.traceparent = client_traceparent
            .and_then(crate::obs::telemetry::parse_traceparent)
            .map(|sc| crate::obs::telemetry::traceparent(&sc));
    }
}

/// The client's Anthropic beta surface (the `anthropic-beta` header, and
/// `?beta=true`), forwarded to Anthropic upstreams of Anthropic requests.
fn anthropic_beta(session: &Session) -> (Option<String>, bool) {
    let req = session.req_header();
    let header = req
        .headers
        .get(ANTHROPIC_BETA)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let query = req
        .uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "beta=true"));
    (header, query)
}
