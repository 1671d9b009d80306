//! The one fallback loop (docs/resilience.md): the model the client named,
//! then each of its fallbacks in order while attempts are left, each planned
//! afresh from the client's request and tried only if the request fits it
//! (after an upstream said the request overflows a model's context, only a
//! fallback with a larger context);
//! then `last_resort`: when nothing was tried at all (every upstream of the
//! chain cooling down), or the chain ran out on a short `retry-after` (sat
//! out once), one pass at the model's upstream that recovers first. What the
//! loop tried goes into the request's context for the access log and metrics.

use super::budget::{reserve, worst_case};
use super::plan::plan_for;
use super::resolve::fallback_target;
use super::Stop;
use crate::admit::validate::Inspected;
use crate::config::{ApiKey, Model, Policy, Provider};
use crate::error::{ErrorKind, GatewayError};
use crate::listener::Session;
use crate::proxy::attempt::Planned;
use crate::proxy::attempt::{self, Answer, Call, Client, Failed, Tried};
use crate::proxy::ctx::RequestCtx;
use crate::proxy::Gateway;
use crate::runtime::Snapshot;
use crate::state::limits::{Ask, Reservation};
use bytes::Bytes;
use std::time::{Duration, Instant};

/// What the chain needs to know of the request.
pub(super) struct Chain<'a, 's> {
    pub client: &'a Client<'a>,
    pub key: &'a ApiKey,
    pub snap: &'s Snapshot,
    /// The model the client named, and its provider.
    pub model: &'s Model,
    pub provider: &'s Provider,
    pub policy: Policy,
}

/// The answer, the model that gave it and the request as planned for it.
pub(super) struct Answered<'s> {
    pub answer: Answer<'s>,
    pub model: &'s Model,
    pub plan: Planned,
}

/// What the chain has spent and learnt so far.
struct Progress<'s> {
    tried: Tried<'s>,
    attempts_left: u32,
    /// The last failure of a model whose upstreams ran out.
    last: Option<GatewayError>,
    /// An upstream's "longer than the context" for a model of this context
    /// length: only a fallback with a larger context is tried after it.
    overflow: Option<(GatewayError, u64)>,
}

/// Calls the chain until a model answers, from the client's request
/// (`first`: `Some`). `held` carries the reservation of the model being
/// tried (released and re-made for each fallback, released by the caller
/// when the request fails).
///
/// A function returning an `async move` block, not an `async fn`: the
/// request (280 bytes) would be kept twice, as the argument and as its
/// rebinding, in a future boxed and copied whole for every request.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn keeps each argument twice"
)]
pub(super) fn call<'a, 's>(
    gw: &'a Gateway,
    session: &'a mut Session,
    ctx: &'a mut RequestCtx,
    ch: &'a Chain<'a, 's>,
    mut first: Option<(Bytes, Inspected)>,
    held: &'a mut Option<Reservation>,
) -> impl std::future::Future<Output = Result<Answered<'s>, Stop>> + Send + 'a {
    async move {
        let mut pr = Progress {
            tried: Tried::default(),
            attempts_left: ch.provider.retries.saturating_add(1),
            last: None,
            overflow: None,
        };
        let deadline = ch.provider.timeouts.total.map(|t| ctx.started + t);
        // The client's request as it came: each fallback plans from it afresh.
        let original = first
            .as_ref()
            .filter(|_| !ch.model.fallbacks.is_empty())
            .map(|input| Box::new(input.clone()));
        let mut own: Option<Planned> = None;
        let fallbacks = ch.model.fallbacks.iter();
        let candidates = std::iter::once((ch.model, ch.provider))
            .chain(fallbacks.filter_map(|name| fallback_target(ch.snap, name)));
        for (m, p) in candidates {
            let is_own = own.is_none();
            if pr.attempts_left == 0 {
                break;
            }
            if too_small(ctx, &pr, m) {
                continue;
            }
            let Some(input) = first.take().or_else(|| original.as_deref().cloned()) else {
                break;
            };
            let (planned, deadline) = if is_own {
                let planned = plan_own(gw, session, ctx, ch, input, held).await?;
                (planned, deadline)
            } else {
                match Box::pin(plan_fallback(gw, session, ctx, ch, m, input, held)).await {
                    Ok(planned) => (planned, fallback_deadline(deadline, p)),
                    Err(Stop::Client(e)) => {
                        skipped(&ctx.request_id, m, &e);
                        continue;
                    }
                    Err(stop) => return Err(stop),
                }
            };
            let call = model_call(ch, &planned, m, p, deadline)?;
            match call_upstreams(gw, &call, &mut pr.tried, &mut pr.attempts_left, false).await {
                Ok(answer) => {
                    if !is_own {
                        gw.metrics.fallback(&ch.model.qualified_id, &m.qualified_id);
                        ctx.outcome.fallback_from = Some(ch.model.qualified_id.clone());
                    }
                    return Ok(answered(ctx, pr.tried, answer, m, planned));
                }
                Err(Failed::Final(e)) => return Err(fail(ctx, pr.tried, e)),
                Err(Failed::Unfit(e)) if is_own => return Err(fail(ctx, pr.tried, e)),
                Err(Failed::Unfit(e)) => skipped(&ctx.request_id, m, &e),
                Err(Failed::Exhausted(e)) => pr.last = e.or(pr.last),
                Err(Failed::Overflow(e)) => pr.overflow = Some((e, m.context_length)),
            }
            if is_own {
                own = Some(planned);
            }
        }
        // Boxed: reached only when every candidate failed, and its 1.9 KB in
        // place sized this future, which waits for every upstream's answer.
        Box::pin(last_resort(gw, ctx, ch, own, pr, deadline)).await
    }
}

/// Whether an upstream already said the request overflows a context at
/// least as large as `m`'s (then `m` is skipped, and logged).
fn too_small(ctx: &RequestCtx, pr: &Progress<'_>, m: &Model) -> bool {
    let Some((_, context)) = pr.overflow.as_ref().filter(|(_, c)| m.context_length <= *c) else {
        return false;
    };
    log::info!(
        "{}: fallback {} skipped: its context ({}) is no larger than the one the request overflowed ({context})",
        ctx.request_id,
        m.qualified_id,
        m.context_length
    );
    true
}

/// A fallback's deadline: the request's, or its own provider's `total` from
/// now when that ends sooner.
fn fallback_deadline(deadline: Option<Instant>, p: &Provider) -> Option<Instant> {
    p.timeouts.total.map_or(deadline, |t| {
        let own_end = Instant::now() + t;
        Some(deadline.map_or(own_end, |d| d.min(own_end)))
    })
}

/// What follows the last model of the chain. Nothing was tried (every
/// upstream of the chain is cooling down): a passive health signal must not
/// become an outage of its own, so the model's upstream that recovers first
/// is tried anyway. The chain ran out on a rate limit whose `retry-after` is
/// short: that wait is sat out once (never sooner), then the same pass.
/// Otherwise, or when that fails too, the client's error.
async fn last_resort<'s>(
    gw: &Gateway,
    ctx: &mut RequestCtx,
    ch: &Chain<'_, 's>,
    own: Option<Planned>,
    mut pr: Progress<'s>,
    deadline: Option<Instant>,
) -> Result<Answered<'s>, Stop> {
    let wait = match (&pr.overflow, &pr.last) {
        (None, Some(e)) if pr.tried.attempts > 0 && pr.attempts_left > 0 => short_wait(e, deadline),
        _ => None,
    };
    if let Some(planned) = own.filter(|_| pr.tried.attempts == 0 || wait.is_some()) {
        if let Some(wait) = wait {
            log::info!(
                "{}: every upstream is rate-limited; waiting {} ms as asked, then once more",
                ctx.request_id,
                wait.as_millis()
            );
            tokio::time::sleep(wait).await;
        }
        let call = model_call(ch, &planned, ch.model, ch.provider, deadline)?;
        match call_upstreams(gw, &call, &mut pr.tried, &mut pr.attempts_left, true).await {
            Ok(answer) => return Ok(answered(ctx, pr.tried, answer, ch.model, planned)),
            Err(Failed::Final(e) | Failed::Unfit(e) | Failed::Overflow(e)) => {
                return Err(fail(ctx, pr.tried, e))
            }
            Err(Failed::Exhausted(e)) => pr.last = e.or(pr.last),
        }
    }
    // The overflow is the answer when no model could take the request: it
    // says what to change, where the fallbacks' failures would not.
    let e = pr.overflow.map(|(e, _)| e).or(pr.last).unwrap_or_else(|| {
        GatewayError::new(
            ErrorKind::Unavailable,
            format!("no upstream of provider {} could be tried", ch.provider.id),
        )
    });
    Err(fail(ctx, pr.tried, e))
}

/// The longest `retry-after` a request waits out before trying a
/// rate-limited upstream once more (a longer one is the client's 429).
pub(crate) const RETRY_AFTER_WAIT_MAX: Duration = Duration::from_secs(5);

/// How long to wait before trying again after `e`: a 429 or 503 whose
/// `retry-after` is at most [`RETRY_AFTER_WAIT_MAX`] and ends before the
/// request's deadline.
fn short_wait(e: &GatewayError, deadline: Option<Instant>) -> Option<Duration> {
    if !matches!(e.status, 429 | 503) {
        return None;
    }
    let wait = Duration::from_secs(e.retry_after?);
    let fits = deadline.is_none_or(|d| Instant::now() + wait < d);
    (wait <= RETRY_AFTER_WAIT_MAX && fits).then_some(wait)
}

/// The model's own plan and its worst case reserved: a refusal of either is
/// the client's answer.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn keeps each argument twice"
)]
fn plan_own<'a>(
    gw: &'a Gateway,
    session: &'a mut Session,
    ctx: &'a mut RequestCtx,
    ch: &'a Chain<'_, '_>,
    (body, req): (Bytes, Inspected),
    held: &'a mut Option<Reservation>,
) -> impl std::future::Future<Output = Result<Planned, Stop>> + Send + 'a {
    async move {
        let family = ch.client.family;
        let planned = Box::pin(plan_for(
            gw, session, family, req, body, ch.model, ch.policy,
        ))
        .await?;
        ctx.outcome.adjusted.merge(planned.adjusted.clone());
        *held = Some(reserve(gw, ctx, worst_case(ch.key, ch.model, &planned)).await?);
        Ok(planned)
    }
}

/// A fallback's plan, the key allowed to use it, and its worst case
/// reserved in place of the model's; a client error here is a reason to
/// skip the fallback.
async fn plan_fallback(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    ch: &Chain<'_, '_>,
    fb: &Model,
    (body, req): (Bytes, Inspected),
    held: &mut Option<Reservation>,
) -> Result<Planned, Stop> {
    crate::proxy::auth::authorize(ch.key, &fb.qualified_id)?;
    let family = ch.client.family;
    let planned = plan_for(gw, session, family, req, body, fb, ch.policy).await?;
    // The budget holds the fallback's worst case, not the model's.
    if let Some(r) = held.take() {
        Box::pin(r.release()).await;
    }
    // The request itself was counted against the rpm already.
    let ask = Ask {
        rpm: None,
        ..worst_case(ch.key, fb, &planned)
    };
    *held = Some(reserve(gw, ctx, ask).await?);
    Ok(planned)
}

/// The call of `model` at `provider` with the request as planned for it.
pub(super) fn model_call<'a, 's>(
    ch: &Chain<'a, 's>,
    plan: &'a Planned,
    model: &'s Model,
    provider: &'s Provider,
    deadline: Option<Instant>,
) -> Result<Call<'a, 's>, GatewayError> {
    let pool = ch.snap.pool(&provider.id).ok_or_else(|| {
        GatewayError::new(
            ErrorKind::Internal,
            format!("provider {} has no pool", provider.id),
        )
    })?;
    Ok(Call {
        client: ch.client,
        plan,
        model,
        provider,
        pool,
        deadline,
    })
}

/// `attempt::call`, boxed: its future (connect, write, read, deadlines)
/// is large, and inline it would stay in the request's state for a whole
/// stream.
pub(super) async fn call_upstreams<'s>(
    gw: &Gateway,
    call: &Call<'_, 's>,
    tried: &mut Tried<'s>,
    attempts_left: &mut u32,
    panic: bool,
) -> Result<Answer<'s>, Failed> {
    Box::pin(attempt::call(gw, call, tried, attempts_left, panic)).await
}

/// The chain's answer, with what was tried, who answered and what the
/// answering model's plan changed written into the context.
fn answered<'s>(
    ctx: &mut RequestCtx,
    mut tried: Tried<'_>,
    mut answer: Answer<'s>,
    model: &'s Model,
    plan: Planned,
) -> Answered<'s> {
    note_tried(ctx, &mut tried);
    if ctx.outcome.fallback_from.is_some() {
        // The fallback's own plan replaces the model's (its caps, its drops).
        ctx.outcome.adjusted = plan.adjusted.clone();
        ctx.outcome.provider = Some(model.provider.clone());
        ctx.outcome.model = Some(model.id.clone());
    }
    ctx.outcome.answered_by = Some(model.qualified_id.clone());
    ctx.outcome
        .adjusted
        .merge(std::mem::take(&mut answer.adjusted));
    Answered {
        answer,
        model,
        plan,
    }
}

/// Moves what the attempts tried into the context (access log, metrics),
/// after what earlier calls of the same request tried (a batch's parts, a
/// cut stream's continuation).
pub(super) fn note_tried(ctx: &mut RequestCtx, tried: &mut Tried<'_>) {
    ctx.outcome.attempts += tried.attempts;
    if let Some(up) = tried.last {
        ctx.outcome.upstream_protocol = Some(up.protocol);
        ctx.outcome.upstream_host = Some(up.url.authority.clone());
    }
    ctx.outcome.tried.append(&mut tried.notes);
}

/// The stop for a request no upstream answered.
fn fail(ctx: &mut RequestCtx, mut tried: Tried<'_>, e: GatewayError) -> Stop {
    note_tried(ctx, &mut tried);
    Stop::Client(e)
}

/// Logs why a fallback was not tried.
fn skipped(request_id: &str, fb: &Model, e: &GatewayError) {
    log::info!(
        "{request_id}: fallback {} skipped: {}",
        fb.qualified_id,
        e.message
    );
}
