//! The inference exchange (E4, E8, E8c, E12–E14), run from `request_filter`:
//! read the body (any size up to the limit), inspect and validate it, resolve
//! the model, answer count-tokens locally, call the upstream (`dispatch`), and
//! answer whole or relay the stream (`relay`).

use super::ctx::RequestCtx;
use super::dispatch::Failed;
use super::dispatch::{self, translate_error, Call};
use super::relay::{relay_stream, StreamEnd};
use super::respond;
use super::route::{Endpoint, GeminiStream, Route};
use super::tokenize::{self, Counted};
use super::Gateway;
use crate::admit::policy;
use crate::admit::validate;
use crate::config::{ApiKey, Model, Provider};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::protocol::{self, spoke};
use crate::runtime::Snapshot;
use crate::state::limits::{cost_nanos, Ask, Reservation};
use crate::translate::passthrough::{self, Framing, Usage};
use crate::translate::stream::ClientStream;
use crate::upstream::pool::Cause;
use crate::util::jsonedit;
use bytes::Bytes;
use pingora_proxy::Session;
use std::time::Instant;

/// Why the exchange stopped early.
enum Stop {
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

/// Runs a token count in a tokenizer slot: its figure, or the stop for a
/// client that went away (noticed by the gate, or by the count itself).
async fn count_tokens<F>(gw: &Gateway, session: &mut Session, work: F) -> Result<u64, Stop>
where
    F: FnOnce(&crate::admit::tokens::Cancel) -> Result<Option<u64>, GatewayError> + Send + 'static,
{
    match tokenize::run(gw, session, work).await? {
        Counted::Done(r) => r?.ok_or_else(client_gone),
        Counted::ClientGone => Err(client_gone()),
    }
}

fn client_gone() -> Stop {
    Stop::Io(pingora_core::Error::explain(
        pingora_core::ErrorType::ConnectionClosed,
        "the client went away during token counting",
    ))
}

/// Re-encodes an upstream response of `upstream` for a client of `family`.
fn translate_response(
    upstream: Family,
    family: Family,
    raw: &[u8],
    client_model: &str,
) -> Result<(Vec<u8>, Usage), GatewayError> {
    let resp = protocol::decode_response(upstream, raw).map_err(translate_error)?;
    let usage = resp
        .usage
        .as_ref()
        .map(Usage::from_canonical)
        .unwrap_or_default();
    let out = protocol::encode_response(family, &resp, client_model).map_err(translate_error)?;
    Ok((out, usage))
}

/// Handles an authenticated inference request.
pub async fn handle(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    route: &Route,
    snap: &Snapshot,
    key: &ApiKey,
) -> pingora_core::Result<()> {
    let mut held = None;
    let result = run(gw, session, ctx, route, snap, key, &mut held).await;
    if let Some(r) = held.take() {
        // The request failed after its reservation: give it back before the
        // error goes out, so the budget header is the real remainder.
        if let Some(left) = Box::pin(r.release()).await {
            ctx.budget_remaining = Some(left);
        }
    }
    if !ctx.adjusted.is_empty() {
        gw.metrics.adapted(
            ctx.model.as_deref().unwrap_or(""),
            ctx.adjusted.parameters(),
        );
    }
    match result {
        Ok(()) => Ok(()),
        Err(Stop::Client(e)) if ctx.status == 0 => {
            respond::error(session, ctx, route.family, &e).await
        }
        Err(Stop::Client(e)) => {
            log::warn!("{}: error after the response started: {e}", ctx.request_id);
            ctx.error = Some((&e).into());
            Ok(())
        }
        Err(Stop::Io(e)) => Err(e),
    }
}

async fn read_body(gw: &Gateway, session: &mut Session) -> Result<Bytes, Stop> {
    let limit = gw.settings.max_body_bytes;
    let too_large = || {
        GatewayError::new(
            ErrorKind::PayloadTooLarge,
            format!("request body is larger than the limit of {limit} bytes"),
        )
    };
    let req = session.req_header();
    let declared = req
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large().into());
    }
    let expects_continue = req
        .headers
        .get("expect")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if expects_continue {
        session.write_continue_response().await.map_err(Stop::Io)?;
    }
    // Pieces are joined into one buffer sized from content-length.
    let mut body = crate::util::gather::Gathered::expecting(declared.unwrap_or(0).min(limit));
    let started = tokio::time::Instant::now();
    loop {
        let read = match crate::listener::body_deadline(started, body.len()) {
            Some(at) => tokio::time::timeout_at(at, session.read_request_body()).await,
            None => Ok(session.read_request_body().await),
        };
        let chunk = match read {
            Ok(Ok(Some(c))) => c,
            Ok(Ok(None)) => break,
            Ok(Err(e)) => return Err(body_fault(session, e)),
            Err(_) => {
                session.set_keepalive(None);
                return Err(body_timeout().into());
            }
        };
        if body.len() + chunk.len() > limit {
            return Err(too_large().into());
        }
        body.push(chunk);
    }
    Ok(body.finish())
}

/// A request body that could not be read: the client's fault, answered in
/// its family's shape (408 when it stopped sending for the listener's body
/// timeout, 400 when its framing is broken), and the connection closed after
/// the answer since the body's end is lost. A client that went away is no
/// answer at all (`Stop::Io`, in the access log).
fn body_fault(session: &mut Session, e: Box<pingora_core::Error>) -> Stop {
    use pingora_core::ErrorType;
    session.set_keepalive(None);
    match e.etype() {
        ErrorType::ReadTimedout => body_timeout().into(),
        ErrorType::InvalidHTTPHeader => GatewayError::new(
            ErrorKind::InvalidRequest,
            "the request body's framing is invalid",
        )
        .into(),
        ErrorType::ConnectionClosed => GatewayError::new(
            ErrorKind::InvalidRequest,
            "the request body ended before its declared length",
        )
        .into(),
        t if t.as_str() == "InvalidChunk" => GatewayError::new(
            ErrorKind::InvalidRequest,
            "the request body's chunked encoding is invalid",
        )
        .into(),
        _ => Stop::Io(e),
    }
}

/// A request body that stopped coming (a read waited the body timeout) or
/// came too slowly (`listener::body_deadline`).
fn body_timeout() -> GatewayError {
    GatewayError::new(
        ErrorKind::InvalidRequest,
        "the request body did not arrive in time (the body timeout, or below the minimum rate)",
    )
    .with_status(408)
    .with_code("request_timeout")
}

fn not_found_model(family: Family, name: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!(
            "model {} not found for the {family} protocol",
            crate::error::quote(name)
        ),
    )
    .with_code("model_not_found")
}

/// Resolves `provider/model_id` or a bare id; `from_path` applies family C's provider rule.
fn resolve<'s>(
    snap: &'s Snapshot,
    family: Family,
    name: &str,
    from_path: bool,
) -> Result<(&'s Model, &'s Provider), GatewayError> {
    let name = name.strip_prefix("models/").unwrap_or(name);
    let model = match name.split_once('/') {
        Some((p, id)) => {
            let provider = snap
                .catalog
                .provider(p)
                .filter(|prov| !from_path || prov.accepts(family))
                .ok_or_else(|| not_found_model(family, name))?;
            snap.catalog
                .model(id)
                .filter(|m| m.provider == provider.id)
                .ok_or_else(|| not_found_model(family, name))?
        }
        None => snap
            .catalog
            .model(name)
            .ok_or_else(|| not_found_model(family, name))?,
    };
    if !snap.visible(family, model) {
        return Err(not_found_model(family, name));
    }
    let provider = snap
        .catalog
        .provider_of(model)
        .ok_or_else(|| not_found_model(family, name))?;
    Ok((model, provider))
}

/// The name a client of `family` sees for `m` in responses (docs/api.md "Inference behaviour").
fn client_model_name(family: Family, m: &Model) -> &str {
    spoke(family).client_model(&m.qualified_id, &m.id)
}

fn usage_cost(m: &Model, u: Usage) -> Option<f64> {
    let (i, o) = (u.input?, u.output.unwrap_or(0));
    Some(i as f64 * m.pricing.prompt_usd + o as f64 * m.pricing.completion_usd)
}

fn record_usage(ctx: &mut RequestCtx, m: &Model, u: Usage) {
    ctx.input_tokens = u.input;
    ctx.output_tokens = u.output;
    ctx.cached_tokens = u.cached;
    ctx.reasoning_tokens = u.reasoning;
    ctx.cost_usd = usage_cost(m, u);
}

/// Checks and reserves `ask` against the key's rpm, tpm and budget
/// (docs/configuration.md "Limits and budgets"); a request that does not fit stops with 429 (503
/// when the shared store is unreachable and fails closed).
async fn reserve(gw: &Gateway, ctx: &mut RequestCtx, ask: Ask) -> Result<Reservation, Stop> {
    // Boxed, here and below: the limits backends' futures (Redis calls) are
    // large, and inline they would sit in every request's state for its
    // whole life (a stream's included).
    match Box::pin(gw.limits.reserve(ask)).await {
        Ok(r) => {
            ctx.budget_remaining = r.budget_remaining();
            Ok(r)
        }
        Err(refusal) => {
            ctx.budget_remaining = refusal.remaining();
            Err(refusal.to_error().into())
        }
    }
}

/// Settles a reservation to the usage `u`. Unknown usage keeps the worst
/// case for an answer that completed (the upstream did not say what it
/// cost) and releases it for one that did not (failed, client gone).
async fn settle(
    ctx: &mut RequestCtx,
    resv: Option<Reservation>,
    m: &Model,
    u: Usage,
    completed: bool,
) {
    let Some(resv) = resv else {
        return;
    };
    let left = match (u.input, completed) {
        (Some(i), _) => {
            let o = u.output.unwrap_or(0);
            Box::pin(resv.settle(i + o, cost_nanos(&m.pricing, i, o))).await
        }
        (None, true) => Box::pin(resv.settle_reserved()).await,
        (None, false) => Box::pin(resv.release()).await,
    };
    if left.is_some() {
        ctx.budget_remaining = left;
    }
}

/// Carries out the policy's plan on the client's body: the upstream (same
/// protocol or translated) sees the lowered cap and not the dropped fields,
/// and every change is recorded for the response header, log and metric.
fn apply_plan(
    plan: &policy::Plan,
    body: Bytes,
    mut req: validate::Inspected,
) -> (Bytes, validate::Inspected, crate::adjust::Adjustments) {
    if plan.is_empty() {
        return (body, req, crate::adjust::Adjustments::default());
    }
    let adjusted = plan.adjustments(&req);
    let body = match plan.apply(&req, &body) {
        Some(edited) => {
            let edited = Bytes::from(edited);
            if req.model_span.is_some() {
                req.model_span = jsonedit::member_span(&edited, "model");
            }
            edited
        }
        None => body,
    };
    req.max_tokens = plan.output_cap(&req);
    (body, req, adjusted)
}

/// The client's Anthropic beta surface, forwarded to Anthropic upstreams.
struct BetaSurface {
    header: Option<String>,
    query: bool,
}

/// A request planned for one model: the body and peek the upstream sees,
/// what the plan changed, and whether it runs under `adapt`.
struct Prepared {
    body: Bytes,
    req: validate::Inspected,
    adjusted: crate::adjust::Adjustments,
    adapt: bool,
}

impl Prepared {
    #[allow(clippy::too_many_arguments)]
    fn call<'a, 's>(
        &'a self,
        family: Family,
        path_model: Option<&'a str>,
        model: &'s Model,
        provider: &'s Provider,
        snap: &'s Snapshot,
        beta: &BetaSurface,
        request_id: &'a str,
        deadline: Option<Instant>,
        trace: &'a Tracing,
    ) -> Result<Call<'a, 's>, GatewayError> {
        let pool = snap.pool(&provider.id).ok_or_else(|| {
            GatewayError::new(
                ErrorKind::Internal,
                format!("provider {} has no pool", provider.id),
            )
        })?;
        Ok(Call {
            family,
            body: &self.body,
            req: &self.req,
            path_model,
            model,
            provider,
            anthropic_beta: beta.header.clone(),
            beta_query: beta.query,
            adapt: self.adapt,
            request_id,
            pool,
            deadline,
            trace: trace.span.as_deref().zip(trace.telemetry.as_deref()),
            client_traceparent: trace.client.as_deref(),
        })
    }
}

/// What an upstream call needs of the request's trace.
struct Tracing {
    span: Option<std::sync::Arc<crate::obs::telemetry::RequestTrace>>,
    telemetry: Option<std::sync::Arc<crate::obs::telemetry::Telemetry>>,
    /// The client's `traceparent`, forwarded when no span is made.
    client: Option<String>,
}

/// Plans the client's request for `model` (the policy of docs/api.md "Adapt or refuse", the
/// context check with a real count when the bytes cannot prove the fit)
/// and carries the plan out on the body. An error is the client's 400 for
/// the model asked for, and the reason a fallback is skipped.
async fn prepare(
    gw: &Gateway,
    session: &mut Session,
    family: Family,
    req: validate::Inspected,
    body: Bytes,
    model: &Model,
    policy: crate::config::Policy,
) -> Result<Prepared, Stop> {
    let mut plan = policy::decide(family, &req, &body, model, policy)?;
    if !validate::surely_fits(body.len(), plan.output_cap(&req), model) {
        let (owned, limit) = (body.clone(), model.context_length);
        let n = count_tokens(gw, session, move |cancel| {
            validate::count_input(family, &owned, limit, cancel)
        })
        .await?;
        log::debug!("{n} input tokens counted for {}", model.qualified_id);
        plan.fit_context(family, &req, model, n)?;
    }
    let adapt = plan.policy() == crate::config::Policy::Adapt;
    let (body, req, adjusted) = apply_plan(&plan, body, req);
    Ok(Prepared {
        body,
        req,
        adjusted,
        adapt,
    })
}

/// The worst case reserved before anything goes upstream: the input is
/// bounded by its bytes (a token is at least one byte) and by the context
/// (no provider bills more input than that), the output by the cap the
/// upstream will see (the model's own when the request sets none).
fn worst_case(key: &ApiKey, model: &Model, p: &Prepared) -> Ask {
    let input_bound = (p.body.len() as u64).min(model.context_length);
    let output_cap = p.req.max_tokens.unwrap_or(model.max_output_tokens);
    Ask::inference(
        key,
        input_bound + output_cap,
        cost_nanos(&model.pricing, input_bound, output_cap),
    )
}

/// A fallback named `provider/model_id`, when the catalog still has it.
fn fallback_target<'s>(snap: &'s Snapshot, name: &str) -> Option<(&'s Model, &'s Provider)> {
    let (p, id) = name.split_once('/')?;
    let m = snap.catalog.model(id).filter(|m| m.provider == p)?;
    Some((m, snap.catalog.provider(p)?))
}

/// Logs why a fallback was not tried.
fn skipped(request_id: &str, fb: &Model, e: &GatewayError) {
    log::info!(
        "{request_id}: fallback {} skipped: {}",
        fb.qualified_id,
        e.message
    );
}

/// `dispatch::call`, boxed: its future (connect, write, read, deadlines)
/// is large, and inline it would stay in the request's state for a whole
/// stream.
async fn call_upstreams<'s>(
    gw: &Gateway,
    call: &Call<'_, 's>,
    tried: &mut dispatch::Tried<'s>,
    attempts_left: &mut u32,
    panic: bool,
) -> Result<dispatch::Answer<'s>, Failed> {
    Box::pin(dispatch::call(gw, call, tried, attempts_left, panic)).await
}

/// Moves what `dispatch` tried into the context (access log, metrics).
fn note_tried(ctx: &mut RequestCtx, tried: &mut dispatch::Tried<'_>) {
    ctx.attempts = tried.attempts;
    if let Some(up) = tried.last {
        ctx.upstream_protocol = Some(up.protocol);
        ctx.upstream_host = Some(up.url.authority.clone());
    }
    ctx.tried = std::mem::take(&mut tried.notes);
}

/// The stop for a request no upstream answered.
fn fail(ctx: &mut RequestCtx, mut tried: dispatch::Tried<'_>, e: GatewayError) -> Stop {
    note_tried(ctx, &mut tried);
    Stop::Client(e)
}

async fn run(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    route: &Route,
    snap: &Snapshot,
    key: &ApiKey,
    held: &mut Option<Reservation>,
) -> Result<(), Stop> {
    let family = route.family;
    if let Some(h) = spoke(family).required_header {
        if session.req_header().headers.get(h).is_none() {
            return Err(GatewayError::invalid_param(h, format!("{h}: header is required")).into());
        }
    }
    let mut body = read_body(gw, session).await?;
    if !crate::util::json_depth::within(&body, crate::util::json_depth::MAX_DEPTH) {
        return Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            format!(
                "the request body is not valid JSON for this route: it nests arrays and objects deeper than {} levels (recursion limit exceeded)",
                crate::util::json_depth::MAX_DEPTH
            ),
        )
        .into());
    }
    // Family D: what the request means for stored responses; a continuation
    // carries the stored conversation from here on (docs/api.md "Stored responses").
    let mut turn = None;
    if matches!(
        route.endpoint,
        Endpoint::Responses | Endpoint::ResponsesInputTokens
    ) {
        let storing = matches!(route.endpoint, Endpoint::Responses);
        let (expanded, t) = Box::pin(super::stored::prepare(gw, &key.id, body, storing)).await?;
        body = expanded;
        turn = t;
    }
    let (path_model, gemini_stream) = match &route.endpoint {
        Endpoint::GenerateContent { model, stream } => (Some(model.as_str()), *stream),
        Endpoint::GeminiCountTokens { model } => (Some(model.as_str()), GeminiStream::None),
        _ => (None, GeminiStream::None),
    };
    let req = validate::inspect(family, &body, gemini_stream != GeminiStream::None)?;
    let name = path_model
        .or(req.model.as_deref())
        .ok_or_else(|| GatewayError::invalid_param("model", "model is required"))?;
    let (model, provider) = resolve(snap, family, name, path_model.is_some())?;
    ctx.provider = Some(provider.id.clone());
    ctx.model = Some(model.id.clone());
    let client_traceparent = session
        .req_header()
        .headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok());
    if let Some(t) = &gw.telemetry {
        let started = std::time::SystemTime::now() - ctx.started.elapsed();
        let span = crate::obs::telemetry::RequestTrace::start(
            t,
            client_traceparent,
            "chat",
            &model.qualified_id,
            started,
        );
        span.set("switchboard.request_id", ctx.request_id.as_str());
        span.set("switchboard.family", family.name());
        ctx.trace = Some(std::sync::Arc::new(span));
    } else {
        // Only a valid W3C value goes on, re-written in version 00's form;
        // anything else is dropped (the upstream starts its own trace).
        ctx.traceparent = client_traceparent
            .and_then(crate::obs::telemetry::parse_traceparent)
            .map(|sc| crate::obs::telemetry::traceparent(&sc));
    }
    super::auth::authorize(key, &model.qualified_id)?;

    if matches!(
        route.endpoint,
        Endpoint::AnthropicCountTokens
            | Endpoint::GeminiCountTokens { .. }
            | Endpoint::ResponsesInputTokens
    ) {
        // Counting spends nothing upstream: only the request rate applies.
        let _counted = reserve(gw, ctx, Ask::request_only(key)).await?;
        let owned = body.clone();
        let counted = Box::pin(count_tokens(gw, session, move |cancel| {
            validate::countable(family, &owned)
                .map(|c| crate::admit::tokens::count(&c, u64::MAX, cancel))
        }))
        .await?;
        ctx.input_tokens = Some(counted);
        let render = spoke(family).count_tokens_body.ok_or_else(|| {
            GatewayError::new(ErrorKind::Internal, "this family has no token-count route")
        })?;
        let out = render(counted);
        return respond::json(session, ctx, 200, Bytes::from(out))
            .await
            .map_err(Stop::Io);
    }

    let policy = key.policy.unwrap_or(snap.catalog.policy);
    let beta = BetaSurface {
        header: session
            .req_header()
            .headers
            .get("anthropic-beta")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        query: session
            .req_header()
            .uri
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "beta=true")),
    };
    // The client's request as it came: a fallback model plans from it afresh.
    let original = (!model.fallbacks.is_empty()).then(|| (body.clone(), req.clone()));
    let own = Box::pin(prepare(gw, session, family, req, body, model, policy)).await?;
    ctx.adjusted.merge(own.adjusted.clone());
    *held = Some(reserve(gw, ctx, worst_case(key, model, &own)).await?);

    let request_id = ctx.request_id.clone();
    let tracing = Tracing {
        span: ctx.trace.clone(),
        telemetry: gw.telemetry.clone(),
        client: ctx.traceparent.clone(),
    };
    let mut attempts_left = provider.retries.saturating_add(1);
    let mut tried = dispatch::Tried::default();
    let deadline = provider.timeouts.total.map(|t| ctx.started + t);
    let mut last: Option<GatewayError> = None;
    let mut answered = None;
    let call = own.call(
        family,
        path_model,
        model,
        provider,
        snap,
        &beta,
        &request_id,
        deadline,
        &tracing,
    )?;
    match call_upstreams(gw, &call, &mut tried, &mut attempts_left, false).await {
        Ok(a) => answered = Some((a, model, None)),
        Err(Failed::Final(e) | Failed::Unfit(e)) => return Err(fail(ctx, tried, e)),
        Err(Failed::Exhausted(e)) => last = e.or(last),
    }
    // Every upstream of the provider failed or is cooling down: the model's
    // fallbacks, in order, each only if the request fits it (docs/resilience.md).
    if let Some((orig_body, orig_req)) = original.as_ref().filter(|_| answered.is_none()) {
        for name in &model.fallbacks {
            if attempts_left == 0 {
                break;
            }
            let Some((fb, fb_provider)) = fallback_target(snap, name) else {
                continue;
            };
            let fits = async {
                super::auth::authorize(key, &fb.qualified_id)?;
                prepare(
                    gw,
                    session,
                    family,
                    orig_req.clone(),
                    orig_body.clone(),
                    fb,
                    policy,
                )
                .await
            };
            let prepared = match Box::pin(fits).await {
                Ok(p) => p,
                Err(Stop::Client(e)) => {
                    skipped(&ctx.request_id, fb, &e);
                    continue;
                }
                Err(stop) => return Err(stop),
            };
            // The budget holds the fallback's worst case, not the model's.
            if let Some(r) = held.take() {
                Box::pin(r.release()).await;
            }
            // The request itself was counted against the rpm already.
            let ask = Ask {
                rpm: None,
                ..worst_case(key, fb, &prepared)
            };
            match reserve(gw, ctx, ask).await {
                Ok(r) => *held = Some(r),
                Err(Stop::Client(e)) => {
                    skipped(&ctx.request_id, fb, &e);
                    continue;
                }
                Err(stop) => return Err(stop),
            }
            let deadline = match fb_provider.timeouts.total {
                Some(t) => {
                    let own_end = Instant::now() + t;
                    Some(deadline.map_or(own_end, |d| d.min(own_end)))
                }
                None => deadline,
            };
            let call = prepared.call(
                family,
                path_model,
                fb,
                fb_provider,
                snap,
                &beta,
                &request_id,
                deadline,
                &tracing,
            )?;
            match call_upstreams(gw, &call, &mut tried, &mut attempts_left, false).await {
                Ok(a) => {
                    gw.metrics.fallback(&model.qualified_id, &fb.qualified_id);
                    ctx.fallback_from = Some(model.qualified_id.clone());
                    answered = Some((a, fb, Some(prepared)));
                    break;
                }
                Err(Failed::Final(e)) => return Err(fail(ctx, tried, e)),
                Err(Failed::Unfit(e)) => {
                    skipped(&ctx.request_id, fb, &e);
                }
                Err(Failed::Exhausted(e)) => last = e.or(last),
            }
        }
    }
    // Nothing was tried: every upstream of the chain is cooling down. A
    // passive health signal must not become an outage of its own: the
    // model's upstream that recovers first is tried anyway.
    if answered.is_none() && tried.attempts == 0 {
        match call_upstreams(gw, &call, &mut tried, &mut attempts_left, true).await {
            Ok(a) => answered = Some((a, model, None)),
            Err(Failed::Final(e) | Failed::Unfit(e)) => return Err(fail(ctx, tried, e)),
            Err(Failed::Exhausted(e)) => last = e.or(last),
        }
    }
    let Some((mut answer, model, prepared)) = answered else {
        let e = last.unwrap_or_else(|| {
            GatewayError::new(
                ErrorKind::Unavailable,
                format!("no upstream of provider {} could be tried", provider.id),
            )
        });
        return Err(fail(ctx, tried, e));
    };
    note_tried(ctx, &mut tried);
    let prepared = prepared.unwrap_or(own);
    if ctx.fallback_from.is_some() {
        // The fallback's own plan replaces the model's (its caps, its drops).
        ctx.adjusted = prepared.adjusted.clone();
        ctx.provider = Some(model.provider.clone());
        ctx.model = Some(model.id.clone());
    }
    ctx.answered_by = Some(model.qualified_id.clone());
    let req = prepared.req;
    let stream = req.stream;
    ctx.adjusted.merge(std::mem::take(&mut answer.adjusted));
    let client_model = client_model_name(family, model);
    if !stream {
        // An answer that quotes the answering upstream's own key loses it
        // (one memmem pass, no copy when absent; `crate::secrets`).
        let raw = crate::secrets::redact_key(
            answer.first.take().unwrap_or_default(),
            answer.up.api_key.as_deref(),
        );
        // A 200 whose body is not a JSON document (UTF-8 included, RFC 8259
        // §8.1; the decoders skip unread members unchecked) is a broken
        // upstream, not an answer: 502, and the upstream cooled, on every route.
        let not_json = || {
            GatewayError::new(
                ErrorKind::BadGateway,
                "upstream sent a response body that is not valid JSON",
            )
        };
        let rewritten = if !answer.translated {
            passthrough::rewrite_body(family, &raw, &passthrough::model_json(client_model))
                .ok_or_else(not_json)
        } else if std::str::from_utf8(&raw).is_err() {
            Err(not_json())
        } else {
            translate_response(answer.up.protocol, family, &raw, client_model)
        };
        let (out, usage) = rewritten.inspect_err(|e| {
            if e.kind == ErrorKind::BadGateway {
                gw.metrics.upstream_error(&model.provider, "invalid");
                answer
                    .in_flight
                    .member()
                    .failed(Cause::Invalid, Instant::now());
                gw.metrics
                    .upstream_cooled(&model.provider, &answer.up.id, "invalid");
            }
        })?;
        let out = match turn {
            Some(t) => super::stored::finish_body(gw, &key.id, t, out),
            None => out,
        };
        record_usage(ctx, model, usage);
        settle(ctx, held.take(), model, usage, answer.status < 300).await;
        gw.upstream.release(answer.ex);
        return respond::json(session, ctx, answer.status, Bytes::from(out))
            .await
            .map_err(Stop::Io);
    }
    let framing = if gemini_stream == GeminiStream::JsonArray {
        Framing::JsonArray
    } else {
        Framing::Sse
    };
    let mut pass = ClientStream::new(
        answer.up.protocol,
        family,
        framing,
        client_model,
        req.include_usage,
        gw.settings.max_frame_bytes,
    );
    if let ClientStream::Passthrough(p) = &mut pass {
        p.withhold_usage_chunk(answer.usage_injected);
    }
    if let Some(env) = turn.as_ref().and_then(super::stored::Turn::envelope) {
        pass.set_envelope(env);
    }
    let _active = gw.metrics.stream_started();
    let member = answer.in_flight.member().clone();
    let up = answer.up;
    let end = relay_stream(gw, session, ctx, answer, &mut pass, family, framing)
        .await
        .map_err(Stop::Io)?;
    let clean = match end {
        StreamEnd::Complete | StreamEnd::ClientGone => true,
        StreamEnd::Failed(e, cause) => {
            gw.metrics.upstream_error(&model.provider, "stream");
            member.failed(cause, Instant::now());
            gw.metrics
                .upstream_cooled(&model.provider, &up.id, cause.label());
            ctx.error = Some(super::ctx::ErrorNote {
                kind: e.kind.name(),
                message: format!(
                    "the upstream stream failed after the response started: {}",
                    e.message
                ),
            });
            false
        }
    };
    let usage = pass.usage();
    record_usage(ctx, model, usage);
    if let (Some(t), Some(obj)) = (turn, pass.final_response()) {
        super::stored::commit(gw, &key.id, t, obj);
    }
    let completed = clean && !ctx.client_gone;
    settle(ctx, held.take(), model, usage, completed).await;
    Ok(())
}
