//! The `embed` action (docs/api.md "Embeddings"): OpenAI `/v1/embeddings`
//! (X1) and Gemini `:embedContent` / `:batchEmbedContents` (X2). The
//! request is decoded into the embeddings hub (`ir::embed`), the model
//! resolved and checked for `embed`, the key's limits reserved, and the
//! provider's upstreams called through the same attempt loop as completions
//! (`proxy::attempt`: failover, retries, cool-downs), the body encoded for
//! each upstream's protocol. The usage is the input tokens: OpenAI's
//! `usage.prompt_tokens`, or (Gemini reports none) the gateway's own o200k
//! count of the input texts; priced at `pricing.prompt`. No fallbacks.

use super::budget::{reserve, settle_to};
use super::chain::{call_upstreams, fail, note_tried};
use super::deliver::record_usage;
use super::resolve::{client_model_name, resolve};
use super::{body, Stop};
use crate::config::{ApiKey, Model};
use crate::error::{ErrorKind, GatewayError};
use crate::ir::embed::{EmbedInput, EmbedRequest, EmbedResponse};
use crate::protocol::registry::embed;
use crate::proxy::attempt::{self, Answer, Call, Failed, Planned, Tried};
use crate::proxy::ctx::RequestCtx;
use crate::proxy::route::{Endpoint, Route};
use crate::proxy::{respond, Gateway};
use crate::runtime::Snapshot;
use crate::state::limits::{Ask, Reservation};
use crate::translate::passthrough::Usage;
use crate::upstream::pool::Cause;
use bytes::Bytes;
use pingora_proxy::Session;
use std::sync::Arc;

/// The 400 for a model whose `supported_actions` lack `action`.
pub(super) fn require_action(model: &Model, action: &str) -> Result<(), GatewayError> {
    if model.supported_actions.iter().any(|a| a == action) {
        return Ok(());
    }
    Err(GatewayError::invalid_param(
        "model",
        format!(
            "model {} does not support the {action} action (its supported_actions: {})",
            model.qualified_id,
            model.supported_actions.join(", ")
        ),
    )
    .with_code("unsupported_action"))
}

/// Answers an embeddings request.
pub(super) async fn run(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    route: &Route,
    snap: &Snapshot,
    key: &ApiKey,
    held: &mut Option<Reservation>,
) -> Result<(), Stop> {
    let family = route.family;
    let body = body::read_request_body(gw, session).await?;
    body::check_depth(&body)?;
    let (path_model, _) = route.endpoint.gemini_model();
    let batch = matches!(route.endpoint, Endpoint::EmbedContent { batch: true, .. });
    let (body_model, req) = embed::decode_client(family, &body, batch)?;
    let name = path_model
        .or(body_model.as_deref())
        .ok_or_else(|| GatewayError::invalid_param("model", "model is required"))?;
    let (model, provider) = resolve(snap, family, name, path_model.is_some())?;
    ctx.outcome.provider = Some(provider.id.clone());
    ctx.outcome.model = Some(model.id.clone());
    super::start_trace(gw, session, ctx, &model.qualified_id);
    require_action(model, "embed")?;
    crate::proxy::auth::authorize(key, &model.qualified_id)?;
    // The worst case: a token per byte of the body, within the context.
    let bound = (body.len() as u64).min(model.context_length);
    let ask = Ask::inference(key, bound, model.pricing.worst_case(bound, 0));
    *held = Some(reserve(gw, ctx, ask).await?);
    let req = Arc::new(req);
    let plan = Planned {
        body,
        req: Default::default(),
        adjusted: Default::default(),
        adapt: false,
        continues: false,
        embed: Some(req.clone()),
    };
    let (request_id, traceparent) = (ctx.request_id.clone(), ctx.traceparent.clone());
    let client = attempt::Client {
        family,
        path_model,
        anthropic_beta: None,
        beta_query: false,
        request_id: &request_id,
        trace: None,
        traceparent: traceparent.as_deref(),
        affinity: 0,
    };
    let pool = snap.pool(&provider.id).ok_or_else(|| {
        GatewayError::new(
            ErrorKind::Internal,
            format!("provider {} has no pool", provider.id),
        )
    })?;
    let call = Call {
        client: &client,
        plan: &plan,
        model,
        provider,
        pool,
        deadline: provider.timeouts.total.map(|t| ctx.started + t),
    };
    let answer = call_provider(gw, ctx, &call).await?;
    let resp = read_answer(gw, model, &req, answer.0.up, &answer.0, answer.1)?;
    let tokens = match resp.prompt_tokens {
        Some(n) => n,
        None => count_input(gw, session, &req).await?,
    };
    let usage = Usage {
        input: Some(tokens),
        output: Some(0),
        ..Usage::default()
    };
    let nanos = record_usage(ctx, model, usage);
    settle_to(ctx, held.take(), usage, nanos, true).await;
    gw.upstream.release(answer.0.ex);
    let name = client_model_name(family, model);
    let out = embed::encode_client(family, &resp, name, &req, batch, tokens);
    respond::json(session, ctx, 200, Bytes::from(out))
        .await
        .map_err(Stop::Io)
}

/// The provider's upstreams, as for completions; when every one is
/// cooling down, one more pass at the one recovering first.
async fn call_provider<'s>(
    gw: &Gateway,
    ctx: &mut RequestCtx,
    call: &Call<'_, 's>,
) -> Result<(Answer<'s>, Bytes), Stop> {
    let mut tried = Tried::default();
    let mut left = call.provider.retries.saturating_add(1);
    let mut result = call_upstreams(gw, call, &mut tried, &mut left, false).await;
    if matches!(result, Err(Failed::Exhausted(None))) && tried.attempts == 0 {
        result = call_upstreams(gw, call, &mut tried, &mut left, true).await;
    }
    match result {
        Ok(mut a) => {
            note_tried(ctx, &mut tried);
            ctx.outcome.answered_by = Some(call.model.qualified_id.clone());
            let raw = a.first.take().unwrap_or_default();
            Ok((a, raw))
        }
        Err(Failed::Final(e) | Failed::Unfit(e) | Failed::Overflow(e)) => Err(fail(ctx, tried, e)),
        Err(Failed::Exhausted(e)) => {
            let e = e.unwrap_or_else(|| {
                GatewayError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "no upstream of provider {} could be tried",
                        call.provider.id
                    ),
                )
            });
            Err(fail(ctx, tried, e))
        }
    }
}

/// The upstream's answer in the hub, one vector per input; anything else
/// is a broken upstream (502, the upstream cooled).
fn read_answer(
    gw: &Gateway,
    model: &Model,
    req: &EmbedRequest,
    up: &crate::config::Upstream,
    answer: &Answer<'_>,
    raw: Bytes,
) -> Result<EmbedResponse, GatewayError> {
    let raw = crate::secrets::redact_key(raw, up.api_key.as_deref());
    let resp = embed::decode_upstream(up.protocol, &raw).and_then(|r| {
        if r.vectors.len() == req.input.len() {
            Ok(r)
        } else {
            Err(GatewayError::new(
                ErrorKind::BadGateway,
                format!(
                    "upstream answered {} embeddings for {} inputs",
                    r.vectors.len(),
                    req.input.len()
                ),
            ))
        }
    });
    resp.inspect_err(|_| {
        gw.metrics.upstream_error(&model.provider, "invalid");
        let member = answer.in_flight.member();
        attempt::cool(gw, &model.provider, up, member, Cause::Invalid);
    })
}

/// The input tokens of a request whose upstream reported none (Gemini):
/// the o200k count of its texts, off the reactor; token arrays count as
/// their length.
async fn count_input(gw: &Gateway, session: &mut Session, req: &EmbedRequest) -> Result<u64, Stop> {
    let input = req.input.clone();
    super::count::count_tokens(gw, session, move |cancel| {
        let mut n = 0u64;
        match &input {
            EmbedInput::Text(texts) => {
                for t in texts {
                    match crate::admit::tokens::count_text(t, u64::MAX, cancel) {
                        Some(c) => n += c,
                        None => return Ok(None),
                    }
                }
            }
            EmbedInput::Tokens(t) => n = t.iter().map(|t| t.len() as u64).sum(),
        }
        Ok(Some(n))
    })
    .await
}
