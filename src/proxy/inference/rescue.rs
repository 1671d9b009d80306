//! Continuing a stream its upstream cut after the client got its first
//! bytes (docs/resilience.md "Continuing a cut stream"): what the client has
//! is rebuilt (`translate::continuation::Partial`), and a continuation is
//! asked of the answering model (the pool: another upstream, or the same one
//! once more), then of the chain's fallbacks: with the text the client has
//! as an assistant prefill where the model takes one (catalog `prefill`) and
//! the provider allows it (`continuation: auto`), else the whole answer again,
//! of which the client gets only what follows what it has. A model that
//! refuses the prefill (a 4xx) is asked again without one, never is its
//! refusal the client's answer.

use super::chain::{call_upstreams, model_call, note_tried, Chain};
use super::plan::plan_for;
use super::resolve::fallback_target;
use crate::admit::validate::{self, Inspected};
use crate::config::{Continuation, Model, Prefill, Provider};
use crate::listener::Session;
use crate::protocol::spoke;
use crate::proxy::attempt::{Answer, Failed, Planned, Tried};
use crate::proxy::ctx::RequestCtx;
use crate::proxy::Gateway;
use crate::translate::continuation::{Partial, Splice};
use bytes::Bytes;
use std::time::Instant;

/// The most continuations one stream gets.
pub(super) const MAX_CONTINUATIONS: u32 = 2;

/// A continuation found: its answer, the model that gives it and its plan,
/// and the splice that puts it into the client's stream.
pub(super) struct Continued<'s> {
    pub answer: Answer<'s>,
    pub model: &'s Model,
    pub plan: Planned,
    pub splice: Splice,
    /// The usage of what the client had before (its output counted when
    /// the upstream did not say), for the cost.
    pub earlier: crate::ir::Usage,
}

/// What the client's request was, for the continuation of its answer.
pub(super) struct Cut<'a, 's> {
    pub chain: &'a Chain<'a, 's>,
    /// The client's body and peek, for a fallback's own plan (None: the
    /// model has no fallbacks).
    pub original: Option<&'a (Bytes, Inspected)>,
    /// The model that was answering, and its plan.
    pub model: &'s Model,
    pub plan: &'a Planned,
    /// When the request must be done.
    pub deadline: Option<Instant>,
    /// The protocol of the stream that was cut.
    pub protocol: crate::family::Family,
}

/// Finds a continuation of the answer the client has `partial` of: the
/// answering model first, then the chain's fallbacks (each planned afresh);
/// None when none could be had before the deadline.
pub(super) async fn continue_answer<'s>(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    cut: &Cut<'_, 's>,
    partial: &Partial,
) -> Option<Continued<'s>> {
    let ch = cut.chain;
    let mut tried = Tried::default();
    let mut attempts_left = ch.provider.retries.saturating_add(1);
    let fallbacks = ch
        .model
        .fallbacks
        .iter()
        .filter_map(|name| fallback_target(ch.snap, name))
        .filter(|(m, _)| m.qualified_id != cut.model.qualified_id);
    let own = ch
        .snap
        .catalog
        .provider(&cut.model.provider)
        .map(|p| (cut.model, p));
    let mut found = None;
    // The pool's open upstreams of the model, then the fallbacks; when
    // nothing could be tried at all (the one that cut is cooling and is the
    // model's only upstream), that upstream once more, as the chain's
    // panic pass does.
    let panic = own;
    let candidates = own
        .into_iter()
        .map(|c| (c, false))
        .chain(fallbacks.map(|c| (c, false)))
        .chain(panic.map(|c| (c, true)));
    for ((m, p), panic) in candidates {
        // (Nothing is found yet here: the loop ends when something is.)
        let spent = attempts_left == 0 || cut.deadline.is_some_and(|d| Instant::now() >= d);
        if spent || (panic && tried.attempts > 0) {
            break;
        }
        if p.continuation == Continuation::Off {
            continue;
        }
        let fresh = if std::ptr::eq(m, cut.model) {
            None
        } else {
            match fallback_plan(gw, session, cut, m).await {
                Some(planned) => Some(planned),
                None => continue,
            }
        };
        let base = fresh.as_ref().unwrap_or(cut.plan);
        for &with_prefill in prefill_modes(m, p) {
            let plan = partial.plan(with_prefill);
            let Some(planned) = continued_plan(ch.client.family, base, plan.prefill.as_deref())
            else {
                continue;
            };
            let call = match model_call(ch, &planned, m, p, cut.deadline) {
                Ok(c) => c,
                Err(_) => break,
            };
            match call_upstreams(gw, &call, &mut tried, &mut attempts_left, panic).await {
                Ok(answer) => {
                    let how = if plan.prefill.is_some() {
                        "prefilled"
                    } else {
                        "asked again"
                    };
                    let id = &ctx.request_id;
                    log::info!(
                        "{id}: continuing the cut stream with {} ({how})",
                        m.qualified_id
                    );
                    found = Some(Continued {
                        answer,
                        model: m,
                        splice: plan.splice,
                        plan: planned,
                        earlier: crate::ir::Usage::default(),
                    });
                    break;
                }
                Err(Failed::Final(e)) if plan.prefill.is_some() && e.status < 500 => {
                    log::info!(
                        "{}: {} refused the continuation's prefill ({}); asking again without",
                        ctx.request_id,
                        m.qualified_id,
                        e.message
                    );
                }
                Err(_) => break,
            }
        }
        if found.is_some() {
            break;
        }
    }
    note_tried(ctx, &mut tried);
    found
}

/// A fallback's own plan for the client's request (None: the chain kept no
/// request to plan, the key may not use `m`, or `m` cannot take it).
async fn fallback_plan(
    gw: &Gateway,
    session: &mut Session,
    cut: &Cut<'_, '_>,
    m: &Model,
) -> Option<Planned> {
    let ch = cut.chain;
    let (body, req) = cut.original?;
    crate::proxy::auth::authorize(ch.key, &m.qualified_id).ok()?;
    let planned = plan_for(
        gw,
        session,
        ch.client.family,
        req.clone(),
        body.clone(),
        m,
        ch.policy,
    );
    Box::pin(planned).await.ok()
}

/// Whether a continuation on `m` is asked with a prefill: first with one
/// where the model takes one (a model that refuses it is asked again
/// without), else without.
fn prefill_modes(m: &Model, p: &Provider) -> &'static [bool] {
    if m.prefill != Prefill::None && p.continuation == Continuation::Auto {
        &[true, false]
    } else {
        &[false]
    }
}

/// The plan of a continuation: `base`'s body with `prefill` added as the
/// last assistant turn (reasoning settings dropped, and said in its
/// adjustments), or as it is.
fn continued_plan(
    family: crate::family::Family,
    base: &Planned,
    prefill: Option<&str>,
) -> Option<Planned> {
    let mut adjusted = base.adjusted.clone();
    let body = match prefill {
        Some(text) => {
            let (body, dropped) = (spoke(family).continue_body)(&base.body, Some(text))?;
            for name in dropped {
                adjusted.drop_field(name);
            }
            Bytes::from(body)
        }
        None => base.body.clone(),
    };
    let mut req = validate::inspect(family, &body, base.req.stream).ok()?;
    req.max_tokens = base.req.max_tokens;
    Some(Planned {
        body,
        req,
        adjusted,
        adapt: base.adapt,
        continues: prefill.is_some(),
        embed: None,
    })
}
