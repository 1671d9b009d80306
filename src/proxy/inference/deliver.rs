//! Giving the client the answer: a whole answer rewritten (same protocol) or
//! translated, refused as a broken upstream when it is no JSON document, and
//! answered; a stream relayed frame by frame through the client stream. Both
//! record the usage, settle the reservation, and for a stored Responses turn
//! save what the client got.

use super::budget::{cost, settle_to};
use super::chain::Answered;
use super::chain::Chain;
use super::rescue::{continue_answer, Continued, Cut, MAX_CONTINUATIONS};
use super::resolve::client_model_name;
use super::Stop;
use crate::admit::validate::Inspected;
use crate::config::{ApiKey, Continuation, Model};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::ir::Usage as CanonicalUsage;
use crate::listener::Session;
use crate::obs::outcome::ErrorNote;
use crate::protocol::responses::namespace::Namespaces;
use crate::proxy::attempt::cool;
use crate::proxy::ctx::RequestCtx;
use crate::proxy::relay::{self, relay_stream, Relay, StreamEnd};
use crate::proxy::stored::{self, Turn};
use crate::proxy::{respond, Gateway};
use crate::state::limits::Nanos;
use crate::state::limits::Reservation;
use crate::translate::body::translate_response;
use crate::translate::continuation::Partial;
use crate::translate::passthrough::{self, Framing, Usage};
use crate::translate::stream::{ClientStream, Resume};
use crate::upstream::pool::Cause;
use bytes::Bytes;

/// What delivering needs besides the answer.
pub(super) struct Delivery<'a, 's> {
    pub family: Family,
    pub key: &'a ApiKey,
    /// The Responses turn, when the answer is stored or continues one.
    pub turn: Option<Box<Turn>>,
    /// How the client's stream is framed.
    pub framing: Framing,
    /// The chain that answered, for a cut stream's continuation.
    pub chain: &'a Chain<'a, 's>,
    /// The client's body and peek, for a fallback's continuation (None:
    /// the model has no fallbacks, or the answer is whole). Boxed, like the
    /// turn: the delivery is held for a stream's whole life, and these are
    /// rare (280 and 104 bytes by value).
    pub original: Option<Box<(Bytes, Inspected)>>,
}

/// A whole answer: rewritten or translated for the client, usage recorded,
/// the reservation settled, then answered.
pub(super) async fn whole(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    answered: Box<Answered<'_>>,
    d: &mut Delivery<'_, '_>,
    held: &mut Option<Reservation>,
) -> Result<(), Stop> {
    let Answered {
        mut answer,
        model,
        plan,
    } = *answered;
    let client_model = client_model_name(d.family, model);
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
        passthrough::rewrite_body(d.family, &raw, &passthrough::model_json(client_model))
            .ok_or_else(not_json)
    } else if std::str::from_utf8(&raw).is_err() {
        Err(not_json())
    } else {
        let names = client_namespaces(d.family, &plan.body);
        translate_response(answer.up.protocol, d.family, &raw, client_model, &names)
    };
    let (out, usage) = rewritten.inspect_err(|e| {
        if e.kind == ErrorKind::BadGateway {
            gw.metrics.upstream_error(&model.provider, "invalid");
            let member = answer.in_flight.member();
            cool(gw, &model.provider, answer.up, member, Cause::Invalid);
        }
    })?;
    let out = match d.turn.take() {
        Some(t) => stored::finish_body(gw, &d.key.id, *t, out),
        None => out,
    };
    let nanos = record_usage(ctx, model, usage);
    settle_to(ctx, held.take(), usage, nanos, answer.status < 300).await;
    gw.upstream.release(answer.ex);
    respond::json(session, ctx, answer.status, Bytes::from(out))
        .await
        .map_err(Stop::Io)
}

/// A stream: relayed frame by frame through the client stream (pass-through
/// or translated). An upstream that fails after the first byte is cooled;
/// its cut answer is continued (`super::rescue`, at most
/// `MAX_CONTINUATIONS` times) in the same client stream, or the stream
/// ends with its protocol's error event. The answer comes boxed and the
/// delivery by reference: an `async fn` keeps a by-value argument twice
/// (the argument and its rebinding) for as long as it runs, a stream's
/// whole life (`Answered` is about 700 bytes, `Delivery` about 400).
pub(super) async fn stream(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    answered: Box<Answered<'_>>,
    d: &mut Delivery<'_, '_>,
    held: &mut Option<Reservation>,
) -> Result<(), Stop> {
    // E23's stream is written as SSE, then re-framed by the relay.
    let framing = d.framing.inner();
    let names = client_namespaces(d.family, &answered.plan.body);
    let resume = Resume {
        family: d.family,
        framing,
        model: client_model_name(d.family, answered.model),
        include_usage: answered.plan.req.include_usage,
        max_frame_bytes: gw.settings.max_frame_bytes,
        namespaces: &names,
    };
    let mut pass = ClientStream::for_client(answered.answer.up.protocol, &resume);
    if let ClientStream::Passthrough(p) = &mut pass {
        p.withhold_usage_chunk(answered.answer.usage_injected);
    }
    if let Some(env) = d.turn.as_deref().and_then(Turn::envelope) {
        pass.set_envelope(env);
    }
    let _active = gw.metrics.stream_started();
    let relayed = relay_segments(gw, session, ctx, d, &mut pass, &resume, answered).await?;
    let Relayed {
        end,
        model,
        earlier,
    } = relayed;
    let clean = match end {
        StreamEnd::Complete | StreamEnd::ClientGone => true,
        StreamEnd::Shutdown(e) => {
            ctx.outcome.error = Some(ErrorNote::from(&e));
            false
        }
        StreamEnd::Failed(e, _) | StreamEnd::Cut(e, _) => {
            ctx.outcome.error = Some(ErrorNote {
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
    let nanos = record_segments(ctx, &earlier, model, usage);
    ctx.outcome.skipped_frames = pass.skipped_frames();
    if ctx.outcome.skipped_frames > 0 {
        gw.metrics
            .frames_skipped(&model.provider, ctx.outcome.skipped_frames);
    }
    if let (Some(t), Some(obj)) = (d.turn.take(), pass.final_response()) {
        stored::commit(gw, &d.key.id, *t, obj);
    }
    let completed = clean && !ctx.client_gone;
    settle_to(ctx, held.take(), usage, nanos, completed).await;
    Ok(())
}

/// Responses: the namespaced tools the client's request declared, whose
/// calls a translated answer gives back with their `namespace` (none for
/// other families).
fn client_namespaces(family: Family, body: &[u8]) -> Namespaces {
    if family == Family::Responses {
        Namespaces::declared(body)
    } else {
        Namespaces::default()
    }
}

/// How a stream's relay ended: its end, the model of its last segment, and
/// the models and usage of the segments before it (for the cost).
struct Relayed<'s> {
    end: StreamEnd,
    model: &'s Model,
    earlier: Vec<(&'s Model, CanonicalUsage)>,
}

/// Relays the answer's segments: the first upstream's stream, then, each
/// time an upstream fails mid-stream (cooled and counted here), a
/// continuation taking over the client's stream while there may be one.
async fn relay_segments<'s>(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    d: &Delivery<'_, 's>,
    pass: &mut ClientStream,
    resume: &Resume<'_>,
    answered: Box<Answered<'s>>,
) -> Result<Relayed<'s>, Stop> {
    let Answered {
        mut answer,
        mut model,
        mut plan,
    } = *answered;
    let provider = d.chain.snap.catalog.provider(&model.provider);
    let rescue = provider.is_some_and(|p| p.continuation != Continuation::Off);
    if rescue {
        pass.record();
    }
    let mut earlier = Vec::new();
    let mut relay = Relay {
        family: d.family,
        framing: d.framing,
        resumed: false,
        rescue,
    };
    let end = loop {
        let member = answer.in_flight.member().clone();
        let (up, deadline) = (answer.up, answer.deadline);
        relay.rescue = rescue && earlier.len() < MAX_CONTINUATIONS as usize;
        let end = relay_stream(gw, session, ctx, answer, pass, relay)
            .await
            .map_err(Stop::Io)?;
        let (e, cause) = match end {
            StreamEnd::Cut(e, cause) => (e, Some(cause)),
            StreamEnd::Failed(e, cause @ Some(_)) => (e, cause),
            StreamEnd::Failed(e, None) => {
                // Nobody to blame: a continuation that differed from what
                // the client has.
                gw.metrics.continuation(&model.provider, "diverged");
                break StreamEnd::Failed(e, None);
            }
            other => break other,
        };
        if let Some(cause) = cause {
            gw.metrics.upstream_error(&model.provider, "stream");
            cool(gw, &model.provider, up, &member, cause);
        }
        if !relay.rescue {
            // The relay ended the client's stream with the error event.
            break StreamEnd::Failed(e, cause);
        }
        let cut = Cut {
            chain: d.chain,
            original: d.original.as_deref(),
            model,
            plan: &plan,
            deadline,
            protocol: up.protocol,
        };
        let Some(mut next) = take_over(gw, session, ctx, pass, &cut, resume).await else {
            log::warn!(
                "{}: the upstream stream was cut and could not be continued: {}",
                ctx.request_id,
                e.message
            );
            gw.metrics.continuation(&model.provider, "failed");
            relay::fail(session, pass, relay, &e, deadline)
                .await
                .map_err(Stop::Io)?;
            break StreamEnd::Failed(e, None);
        };
        gw.metrics.continuation(&model.provider, "continued");
        // What the continuation's request changed (its prefill's dropped
        // reasoning settings, a fallback's plan, a translation's drops)
        // goes to the access log's `adjusted`: the answer's head is out.
        ctx.outcome.adjusted.merge(next.plan.adjusted.clone());
        ctx.outcome
            .adjusted
            .merge(std::mem::take(&mut next.answer.adjusted));
        earlier.push((model, next.earlier));
        if next.model.qualified_id != d.chain.model.qualified_id {
            ctx.outcome
                .fallback_from
                .get_or_insert_with(|| d.chain.model.qualified_id.clone());
        }
        (answer, model, plan) = (next.answer, next.model, next.plan);
        relay.resumed = true;
    };
    Ok(Relayed {
        end,
        model,
        earlier,
    })
}

/// After a cut: a continuation found (`rescue::continue_answer`) and put
/// into the client's stream, which goes on with it; None when none could
/// be had (the caller ends the stream with the error event).
async fn take_over<'s>(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    pass: &mut ClientStream,
    cut: &Cut<'_, 's>,
    resume: &Resume<'_>,
) -> Option<Continued<'s>> {
    let partial = pass
        .partial(cut.protocol, gw.settings.max_frame_bytes)
        .filter(Partial::continuable)?;
    let mut next = Box::pin(continue_answer(gw, session, ctx, cut, &partial)).await?;
    next.earlier = estimate_output(&partial, next.splice.base_mut());
    let splice = std::mem::take(&mut next.splice);
    pass.resume(next.answer.up.protocol, splice, &partial, resume);
    ctx.outcome.continued += 1;
    ctx.outcome.answered_by = Some(next.model.qualified_id.clone());
    Some(next)
}

/// The output tokens of a cut segment the upstream did not report (it
/// reports them at the end): counted from what the client received with
/// the gateway's tokenizer. Returns the segment's usage.
fn estimate_output(partial: &Partial, base: &mut CanonicalUsage) -> CanonicalUsage {
    if base.output_tokens == 0 {
        let cancel = crate::admit::tokens::Cancel::default();
        base.output_tokens = partial
            .output_text()
            .filter_map(|t| crate::admit::tokens::count_text(t, u64::MAX, &cancel))
            .sum();
    }
    base.clone()
}

/// Records the answer's usage (the sum over its segments) and its cost:
/// each earlier segment (its own upstream request) at its model's prices,
/// the rest at `last`'s. Returns the cost for the budget.
fn record_segments(
    ctx: &mut RequestCtx,
    earlier: &[(&Model, CanonicalUsage)],
    last: &Model,
    total: Usage,
) -> Option<Nanos> {
    let nanos = record_usage(ctx, last, total);
    if earlier.is_empty() {
        return nanos;
    }
    let mut left = total.tokens()?;
    let mut sum: Nanos = 0;
    for (m, u) in earlier {
        let segment = Usage::from_canonical(u).tokens().unwrap_or_default();
        sum = sum.saturating_add(m.pricing.cost(&left.take(&segment)));
    }
    let sum = sum.saturating_add(last.pricing.cost(&left));
    ctx.outcome.usage.cost_nanos = Some(sum);
    Some(sum)
}

/// Records the usage `u` of an answer from `m` and its cost at `m`'s
/// prices ([`cost`]); returns the cost.
pub(super) fn record_usage(ctx: &mut RequestCtx, m: &Model, u: Usage) -> Option<Nanos> {
    let o = &mut ctx.outcome.usage;
    o.input_tokens = u.input;
    o.output_tokens = u.output;
    o.cached_tokens = u.cached;
    // Known usage without cache writes reported: none were made.
    o.cache_write_tokens = u.input.map(|_| u.cache_write.unwrap_or(0));
    o.cache_write_1h_tokens = u.cache_write_1h;
    o.reasoning_tokens = u.reasoning;
    o.cost_nanos = cost(m, u);
    o.cost_nanos
}
