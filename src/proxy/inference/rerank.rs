//! The `rerank` action (docs/api.md "Rerank"): `POST /v1/rerank` (X3). The
//! body is decoded by the rerank wire (`protocol::rerank`), the model
//! resolved and checked for `rerank`, the key's limits reserved, and one
//! call made through the provider's upstreams (`cohere`: Cohere v2
//! `/rerank`; `openai`: an OpenAI-compatible `/rerank`) with the embeddings'
//! steps (`super::embed`: failover, retries, cool-downs as completions get).
//! The usage is the upstream's token count, else the gateway's own; the
//! cost is the catalog's formula (`pricing.request` per call, plus input
//! tokens at `pricing.prompt`). No fallbacks.

use super::embed::{admit, call_job, count_input, settle, Admit};
use super::resolve::client_model_name;
use super::{body, Stop};
use crate::config::ApiKey;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::ir::embed::Retrieval;
use crate::listener::Session;
use crate::protocol::rerank;
use crate::proxy::ctx::RequestCtx;
use crate::proxy::{respond, Gateway};
use crate::runtime::Snapshot;
use crate::state::limits::Reservation;
use bytes::Bytes;
use std::sync::Arc;

/// Answers a rerank request.
pub(super) async fn run(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    snap: &Snapshot,
    key: &ApiKey,
    held: &mut Option<Reservation>,
) -> Result<(), Stop> {
    let body = body::read_request_body(gw, session).await?;
    crate::protocol::common::peek::check_nesting(&body)?;
    let (name, req) = rerank::decode_request(&body)?;
    let at = Admit {
        family: Family::OpenAi,
        name: &name,
        path_model: None,
        action: "rerank",
        body_len: body.len(),
    };
    let target = admit(gw, session, ctx, snap, key, held, &at).await?;
    let job = Arc::new(Retrieval::Rerank(req));
    let Retrieval::Rerank(req) = &*job else {
        return Err(GatewayError::new(ErrorKind::Internal, "not a rerank").into());
    };
    let resp = call_job(gw, ctx, snap, &target, &job, |_, raw| {
        rerank::decode_response(raw, req)
    })
    .await?;
    let tokens = match resp.tokens {
        Some(n) => n,
        None => count_input(gw, session, job.clone()).await?,
    };
    settle(ctx, held, target.model, tokens).await;
    let model = client_model_name(Family::OpenAi, target.model);
    let out = rerank::encode_response(&resp, req, &ctx.request_id, model, tokens);
    respond::json(session, ctx, 200, Bytes::from(out))
        .await
        .map_err(Stop::Io)
}
