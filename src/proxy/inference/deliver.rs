//! Giving the client the answer: a whole answer rewritten (same protocol) or
//! translated, refused as a broken upstream when it is no JSON document, and
//! answered; a stream relayed frame by frame through the client stream. Both
//! record the usage, settle the reservation, and for a stored Responses turn
//! save what the client got.

use super::budget::settle;
use super::chain::Answered;
use super::resolve::client_model_name;
use super::Stop;
use crate::config::{ApiKey, Model};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::obs::outcome::ErrorNote;
use crate::proxy::attempt::cool;
use crate::proxy::ctx::RequestCtx;
use crate::proxy::relay::{relay_stream, StreamEnd};
use crate::proxy::route::GeminiStream;
use crate::proxy::stored::{self, Turn};
use crate::proxy::{respond, Gateway};
use crate::state::limits::Reservation;
use crate::translate::body::translate_response;
use crate::translate::passthrough::{self, Framing, Usage};
use crate::translate::stream::ClientStream;
use crate::upstream::pool::Cause;
use bytes::Bytes;
use pingora_proxy::Session;

/// What delivering needs besides the answer.
pub(super) struct Delivery<'a> {
    pub family: Family,
    pub key: &'a ApiKey,
    /// The Responses turn, when the answer is stored or continues one.
    pub turn: Option<Turn>,
    pub gemini_stream: GeminiStream,
}

/// A whole answer: rewritten or translated for the client, usage recorded,
/// the reservation settled, then answered.
pub(super) async fn whole(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    answered: Answered<'_>,
    d: Delivery<'_>,
    held: &mut Option<Reservation>,
) -> Result<(), Stop> {
    let Answered {
        mut answer, model, ..
    } = answered;
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
        translate_response(answer.up.protocol, d.family, &raw, client_model)
    };
    let (out, usage) = rewritten.inspect_err(|e| {
        if e.kind == ErrorKind::BadGateway {
            gw.metrics.upstream_error(&model.provider, "invalid");
            let member = answer.in_flight.member();
            cool(gw, &model.provider, answer.up, member, Cause::Invalid);
        }
    })?;
    let out = match d.turn {
        Some(t) => stored::finish_body(gw, &d.key.id, t, out),
        None => out,
    };
    record_usage(ctx, model, usage);
    settle(ctx, held.take(), model, usage, answer.status < 300).await;
    gw.upstream.release(answer.ex);
    respond::json(session, ctx, answer.status, Bytes::from(out))
        .await
        .map_err(Stop::Io)
}

/// A stream: relayed frame by frame through the client stream (pass-through
/// or translated); a failure after the first byte ends the client's stream
/// with its protocol's error event and cools the upstream.
pub(super) async fn stream(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    answered: Answered<'_>,
    d: Delivery<'_>,
    held: &mut Option<Reservation>,
) -> Result<(), Stop> {
    let Answered {
        answer,
        model,
        plan,
    } = answered;
    let framing = if d.gemini_stream == GeminiStream::JsonArray {
        Framing::JsonArray
    } else {
        Framing::Sse
    };
    let mut pass = ClientStream::new(
        answer.up.protocol,
        d.family,
        framing,
        client_model_name(d.family, model),
        plan.req.include_usage,
        gw.settings.max_frame_bytes,
    );
    if let ClientStream::Passthrough(p) = &mut pass {
        p.withhold_usage_chunk(answer.usage_injected);
    }
    if let Some(env) = d.turn.as_ref().and_then(Turn::envelope) {
        pass.set_envelope(env);
    }
    let _active = gw.metrics.stream_started();
    let member = answer.in_flight.member().clone();
    let up = answer.up;
    let end = relay_stream(gw, session, ctx, answer, &mut pass, d.family, framing)
        .await
        .map_err(Stop::Io)?;
    let clean = match end {
        StreamEnd::Complete | StreamEnd::ClientGone => true,
        StreamEnd::Shutdown(e) => {
            ctx.outcome.error = Some(ErrorNote::from(&e));
            false
        }
        StreamEnd::Failed(e, cause) => {
            gw.metrics.upstream_error(&model.provider, "stream");
            cool(gw, &model.provider, up, &member, cause);
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
    record_usage(ctx, model, usage);
    ctx.outcome.skipped_frames = pass.skipped_frames();
    if ctx.outcome.skipped_frames > 0 {
        gw.metrics
            .frames_skipped(&model.provider, ctx.outcome.skipped_frames);
    }
    if let (Some(t), Some(obj)) = (d.turn, pass.final_response()) {
        stored::commit(gw, &d.key.id, t, obj);
    }
    let completed = clean && !ctx.client_gone;
    settle(ctx, held.take(), model, usage, completed).await;
    Ok(())
}

fn usage_cost(m: &Model, u: Usage) -> Option<f64> {
    let (i, o) = (u.input?, u.output.unwrap_or(0));
    Some(i as f64 * m.pricing.prompt_usd + o as f64 * m.pricing.completion_usd)
}

fn record_usage(ctx: &mut RequestCtx, m: &Model, u: Usage) {
    ctx.outcome.usage.input_tokens = u.input;
    ctx.outcome.usage.output_tokens = u.output;
    ctx.outcome.usage.cached_tokens = u.cached;
    ctx.outcome.usage.reasoning_tokens = u.reasoning;
    ctx.outcome.usage.cost_usd = usage_cost(m, u);
}
