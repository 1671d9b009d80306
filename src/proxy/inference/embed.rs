//! The `embed` action (docs/api.md "Embeddings"): OpenAI `/v1/embeddings`
//! (X1) and Gemini `:embedContent` / `:batchEmbedContents` (X2). The
//! request is decoded into the embeddings hub (`ir::embed`), the model
//! resolved and checked for `embed`, the key's limits reserved, and the
//! provider's upstreams called through the same attempt loop as completions
//! (`proxy::attempt`: failover, retries, cool-downs), the body encoded for
//! each upstream's protocol. The usage is the input tokens: OpenAI's
//! `usage.prompt_tokens`, or (Gemini reports none) the gateway's own o200k
//! count of the input texts; priced at `pricing.prompt`. No fallbacks.
//! The `rerank` action (`super::rerank`) shares the steps here: [`admit`],
//! [`call_job`], [`count_input`], [`settle`].

use super::budget::{reserve, settle_to};
use super::chain::{call_upstreams, note_tried};
use super::deliver::record_usage;
use super::resolve::{client_model_name, resolve};
use super::{body, Stop};
use crate::config::{ApiKey, Model};
use crate::error::{ErrorKind, GatewayError};
use crate::ir::embed::{EmbedInput, EmbedRequest, EmbedResponse, Retrieval};
use crate::listener::Session;
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
    crate::protocol::common::peek::check_nesting(&body)?;
    let (path_model, _) = route.endpoint.gemini_model();
    let batch = matches!(route.endpoint, Endpoint::EmbedContent { batch: true, .. });
    let (body_model, req) = embed::decode_client(family, &body, batch)?;
    let name = path_model
        .or(body_model.as_deref())
        .ok_or_else(|| GatewayError::invalid_param("model", "model is required"))?;
    let at = Admit {
        family,
        name,
        path_model,
        action: "embed",
        body_len: body.len(),
    };
    let target = admit(gw, session, ctx, snap, key, held, &at).await?;
    let (resp, tokens) = embed_in_parts(gw, session, ctx, snap, &target, &req).await?;
    settle(ctx, held, target.model, tokens).await;
    let name = client_model_name(family, target.model);
    let out = embed::encode_client(family, &resp, name, &req, batch, tokens);
    respond::json(session, ctx, 200, Bytes::from(out))
        .await
        .map_err(Stop::Io)
}

/// What [`admit`] checks a request of an action against.
pub(super) struct Admit<'a> {
    pub family: crate::family::Family,
    /// The model the client named (the path's, on a Gemini route).
    pub name: &'a str,
    pub path_model: Option<&'a str>,
    /// `embed` or `rerank`.
    pub action: &'static str,
    /// The body's length: the worst-case input tokens (a token per byte).
    pub body_len: usize,
}

/// Resolves the model, checks its action and the key's model globs, and
/// reserves the key's limits for the worst case: a token per byte of the
/// body, within the context.
pub(super) async fn admit<'a, 's>(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    snap: &'s Snapshot,
    key: &ApiKey,
    held: &mut Option<Reservation>,
    a: &Admit<'a>,
) -> Result<Target<'a, 's>, Stop> {
    let (model, provider) = resolve(snap, a.family, a.name, a.path_model.is_some())?;
    ctx.outcome.provider = Some(provider.id.clone());
    ctx.outcome.model = Some(model.id.clone());
    super::start_trace(gw, session, ctx, &model.qualified_id);
    require_action(model, a.action)?;
    crate::proxy::auth::authorize(key, &model.qualified_id)?;
    let bound = (a.body_len as u64).min(model.context_length);
    let ask = Ask::inference(key, bound, model.pricing.worst_case(bound, 0));
    *held = Some(reserve(gw, ctx, ask).await?);
    Ok(Target {
        family: a.family,
        path_model: a.path_model,
        model,
        provider,
    })
}

/// Records `tokens` input tokens for `model` (priced by the catalog's one
/// formula: input × prompt + request) and settles the reservation to them.
pub(super) async fn settle(
    ctx: &mut RequestCtx,
    held: &mut Option<Reservation>,
    model: &Model,
    tokens: u64,
) {
    let usage = Usage {
        input: Some(tokens),
        output: Some(0),
        ..Usage::default()
    };
    let nanos = record_usage(ctx, model, usage);
    settle_to(ctx, held.take(), usage, nanos, true).await;
}

/// Where the request goes: the client's family and path model, the model
/// and its provider.
pub(super) struct Target<'a, 's> {
    pub family: crate::family::Family,
    pub path_model: Option<&'a str>,
    pub model: &'s Model,
    pub provider: &'s crate::config::Provider,
}

/// The most inputs one upstream call of `provider` takes: the smallest
/// of its embedding upstreams' limits (`protocol::registry::embed::max_inputs`).
fn batch_limit(provider: &crate::config::Provider, upstream_model: &str) -> usize {
    provider
        .upstreams
        .iter()
        .filter(|u| !u.rerank_only())
        .map(|u| embed::max_inputs(u, upstream_model))
        .min()
        .unwrap_or(crate::protocol::openai::embeddings::MAX_INPUTS)
}

/// The request in parts of at most `limit` inputs, in order.
fn split(req: &EmbedRequest, limit: usize) -> Vec<EmbedRequest> {
    let part = |input| EmbedRequest {
        input,
        ..req.clone()
    };
    match &req.input {
        EmbedInput::Text(t) if t.len() > limit => t
            .chunks(limit)
            .map(|c| part(EmbedInput::Text(c.to_vec())))
            .collect(),
        EmbedInput::Tokens(t) if t.len() > limit => t
            .chunks(limit)
            .map(|c| part(EmbedInput::Tokens(c.to_vec())))
            .collect(),
        _ => vec![req.clone()],
    }
}

/// Embeds `req`, split into parts the upstreams take (each part its own
/// call through the provider's upstreams), the vectors reassembled in
/// order; with the input tokens: the upstream's figure, or the gateway's
/// count of a part whose upstream reported none.
async fn embed_in_parts(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    snap: &Snapshot,
    t: &Target<'_, '_>,
    req: &EmbedRequest,
) -> Result<(EmbedResponse, u64), Stop> {
    let (mut all, mut tokens) = (EmbedResponse::default(), 0u64);
    for part in split(req, batch_limit(t.provider, &t.model.upstream_model)) {
        let n = part.input.len();
        let job = Arc::new(Retrieval::Embed(part));
        let resp = call_job(gw, ctx, snap, t, &job, |up, raw| {
            embed::decode_upstream(up, raw).and_then(|r| {
                if r.vectors.len() == n {
                    Ok(r)
                } else {
                    Err(GatewayError::new(
                        ErrorKind::BadGateway,
                        format!(
                            "upstream answered {} embeddings for {n} inputs",
                            r.vectors.len()
                        ),
                    ))
                }
            })
        })
        .await?;
        tokens += match resp.prompt_tokens {
            Some(n) => n,
            None => count_input(gw, session, job).await?,
        };
        all.vectors.extend(resp.vectors);
    }
    Ok((all, tokens))
}

/// One call of `job` through the provider's upstreams (failover, retries,
/// cool-downs as for completions), its answer read by `decode`: anything
/// `decode` refuses is a broken upstream (502, the upstream cooled). What
/// the answering upstream could not carry goes to `x-switchboard-adjusted`.
pub(super) async fn call_job<T>(
    gw: &Gateway,
    ctx: &mut RequestCtx,
    snap: &Snapshot,
    t: &Target<'_, '_>,
    job: &Arc<Retrieval>,
    decode: impl FnOnce(&crate::config::Upstream, &[u8]) -> Result<T, GatewayError>,
) -> Result<T, Stop> {
    let pool = snap.pool(&t.provider.id).ok_or_else(|| {
        GatewayError::new(
            ErrorKind::Internal,
            format!("provider {} has no pool", t.provider.id),
        )
    })?;
    let (request_id, traceparent) = (ctx.request_id.clone(), ctx.traceparent.clone());
    let (trace, telemetry) = (ctx.trace.clone(), gw.telemetry.clone());
    let client = attempt::Client {
        family: t.family,
        path_model: t.path_model,
        anthropic_beta: None,
        beta_query: false,
        request_id: &request_id,
        trace: trace.as_deref().zip(telemetry.as_deref()),
        traceparent: traceparent.as_deref(),
        affinity: attempt::SessionKey::known(0),
    };
    let plan = Planned {
        body: Bytes::new(),
        req: Default::default(),
        adjusted: Default::default(),
        adapt: false,
        continues: false,
        embed: Some(job.clone()),
    };
    let call = Call {
        client: &client,
        plan: &plan,
        model: t.model,
        provider: t.provider,
        pool,
        deadline: t.provider.timeouts.total.map(|d| ctx.started + d),
    };
    let (mut answer, raw) = call_provider(gw, ctx, &call).await?;
    ctx.outcome
        .adjusted
        .merge(std::mem::take(&mut answer.adjusted));
    let up = answer.up;
    let raw = crate::secrets::redact_key(raw, up.api_key.as_deref());
    let out = decode(up, &raw).inspect_err(|_| {
        gw.metrics.upstream_error(&t.model.provider, "invalid");
        let member = answer.in_flight.member();
        attempt::cool(gw, &t.model.provider, up, member, Cause::Invalid);
    });
    gw.upstream.release(answer.ex);
    Ok(out?)
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
    // A batch in parts: each part's attempts add to the request's.
    note_tried(ctx, &mut tried);
    match result {
        Ok(mut a) => {
            ctx.outcome.answered_by = Some(call.model.qualified_id.clone());
            let raw = a.first.take().unwrap_or_default();
            Ok((a, raw))
        }
        Err(Failed::Final(e) | Failed::Unfit(e) | Failed::Overflow(e)) => Err(Stop::Client(e)),
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
            Err(Stop::Client(e))
        }
    }
}

/// The input tokens of a request whose upstream reported none (Gemini,
/// Cohere): the o200k count of its texts, off the reactor; token arrays
/// count as their length; a rerank counts the query once per document
/// (each is scored beside it) and every document.
pub(super) async fn count_input(
    gw: &Gateway,
    session: &mut Session,
    job: Arc<Retrieval>,
) -> Result<u64, Stop> {
    super::count::count_tokens(gw, session, move |cancel| {
        let count = |t: &str| crate::admit::tokens::count_text(t, u64::MAX, cancel);
        let mut n = 0u64;
        match &*job {
            Retrieval::Embed(EmbedRequest {
                input: EmbedInput::Tokens(t),
                ..
            }) => n = t.iter().map(|t| t.len() as u64).sum(),
            Retrieval::Embed(EmbedRequest {
                input: EmbedInput::Text(texts),
                ..
            }) => {
                for t in texts {
                    let Some(c) = count(t) else { return Ok(None) };
                    n += c;
                }
            }
            Retrieval::Rerank(r) => {
                let Some(q) = count(&r.query) else {
                    return Ok(None);
                };
                n = q * r.documents.len() as u64;
                for d in &r.documents {
                    let Some(c) = count(d) else { return Ok(None) };
                    n += c;
                }
            }
        }
        Ok(Some(n))
    })
    .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_action_check_names_the_action_and_the_model() {
        let c = crate::config::Catalog::from_str(
            "c.json",
            r#"{"providers":[{"id":"p","families":["openai"],"upstreams":[
                {"protocol":"openai","base_url":"http://127.0.0.1:1/o"}]}],
              "models":[{"id":"e","provider":"p","context_length":100,"max_output_tokens":10,
                "pricing":{"prompt":"0","completion":"0"},"supported_actions":["embed"],
                "protocols":["openai"]}]}"#,
            &|_| None,
        )
        .unwrap();
        let m = c.model("e").unwrap();
        assert!(require_action(m, "embed").is_ok());
        let e = require_action(m, "complete").unwrap_err();
        assert_eq!(e.status, 400);
        assert!(
            e.message.contains("complete") && e.message.contains("p/e"),
            "{e}"
        );
    }

    #[test]
    fn split_keeps_order_and_bounds_each_part() {
        let req = EmbedRequest {
            input: EmbedInput::Text((0..5).map(|i| i.to_string()).collect()),
            dimensions: Some(3),
            task_type: None,
            user: None,
            base64: true,
        };
        let parts = split(&req, 2);
        let texts: Vec<Vec<String>> = parts
            .iter()
            .map(|p| match &p.input {
                EmbedInput::Text(t) => t.clone(),
                EmbedInput::Tokens(_) => unreachable!(),
            })
            .collect();
        assert_eq!(texts, [vec!["0", "1"], vec!["2", "3"], vec!["4"]]);
        assert!(parts.iter().all(|p| p.dimensions == Some(3) && p.base64));
        assert_eq!(split(&req, 5), vec![req.clone()]);
    }
}
