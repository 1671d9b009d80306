//! The key's limits around one request (docs/configuration.md "Limits and
//! budgets"): the worst case reserved before anything goes upstream, settled
//! to the usage when it is known, released when the request fails.

use super::Stop;
use crate::config::{ApiKey, Model};
use crate::proxy::attempt::Planned;
use crate::proxy::ctx::RequestCtx;
use crate::proxy::Gateway;
use crate::state::limits::{Ask, Nanos, Reservation};
use crate::translate::passthrough::Usage;

/// Checks and reserves `ask` against the key's rpm, tpm and budget
/// (docs/configuration.md "Limits and budgets"); a request that does not fit stops with 429 (503
/// when the shared store is unreachable and fails closed).
///
/// This and [`settle_to`] are functions returning an `async move` block,
/// not `async fn`s: an `async fn` keeps each argument twice (the ask, the
/// reservation), in futures every request holds inline.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn keeps each argument twice"
)]
pub(super) fn reserve<'a>(
    gw: &'a Gateway,
    ctx: &'a mut RequestCtx,
    ask: Ask,
) -> impl std::future::Future<Output = Result<Reservation, Stop>> + Send + 'a {
    async move {
        if ask.is_free() {
            // No limit on the key or its team: nothing to reserve (and no
            // future of 1.4 KB to box and copy).
            ctx.budget_remaining = None;
            return Ok(Reservation::none());
        }
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
}

/// The cost of an answer from `m` with the usage `u` (the catalog's one
/// formula, `config::Pricing::cost`, docs/pricing.md); None when the
/// upstream reported no usage.
pub(super) fn cost(m: &Model, u: Usage) -> Option<Nanos> {
    u.tokens().map(|t| m.pricing.cost(&t))
}

/// Settles a reservation to the usage `u` at the cost `nanos` (worked out
/// by the caller: an answer's parts may come from models of different
/// prices). Unknown usage keeps the worst case for an answer that
/// completed (the upstream did not say what it cost) and releases it for
/// one that did not (failed, client gone).
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn keeps each argument twice"
)]
pub(super) fn settle_to(
    ctx: &mut RequestCtx,
    resv: Option<Reservation>,
    u: Usage,
    nanos: Option<Nanos>,
    completed: bool,
) -> impl std::future::Future<Output = ()> + Send + '_ {
    async move {
        let Some(resv) = resv else {
            return;
        };
        let left = match (u.input, nanos, completed) {
            _ if !resv.holds() => resv.budget_remaining(),
            (Some(i), Some(nanos), _) => {
                Box::pin(resv.settle(i + u.output.unwrap_or(0), nanos)).await
            }
            (_, _, true) => Box::pin(resv.settle_reserved()).await,
            (_, _, false) => Box::pin(resv.release()).await,
        };
        if left.is_some() {
            ctx.budget_remaining = left;
        }
    }
}

/// The worst case reserved before anything goes upstream: the input is
/// bounded by its bytes (a token is at least one byte) and by the context
/// (no provider bills more input than that), the output by the cap the
/// upstream will see (the model's own when the request sets none); priced
/// at the dearest rate that can apply (`config::Pricing::worst_case`: every
/// input token at the highest of its rates, in the highest tier the bound
/// reaches, plus the request price).
pub(super) fn worst_case(key: &ApiKey, model: &Model, p: &Planned) -> Ask {
    let input_bound = (p.body.len() as u64).min(model.context_length);
    let output_cap = p.req.max_tokens.unwrap_or(model.max_output_tokens);
    Ask::inference(
        key,
        input_bound + output_cap,
        model.pricing.worst_case(input_bound, output_cap),
    )
}
