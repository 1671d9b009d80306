//! Token counts for a request: a count-tokens route answered locally (only
//! the request rate applies), and counts run in a tokenizer slot for the
//! context check, abandoned when the client goes away.

use super::budget::reserve;
use super::Stop;
use crate::admit::validate;
use crate::config::ApiKey;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::listener::Session;
use crate::protocol::spoke;
use crate::proxy::ctx::RequestCtx;
use crate::proxy::respond;
use crate::proxy::tokenize::{self, Counted};
use crate::proxy::Gateway;
use crate::state::limits::Ask;
use bytes::Bytes;

/// Answers a count-tokens route: the input counted locally, in the family's shape.
pub(super) async fn answer(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    key: &ApiKey,
    family: Family,
    body: Bytes,
) -> Result<(), Stop> {
    // Counting spends nothing upstream: only the request rate applies.
    let _counted = reserve(gw, ctx, Ask::request_only(key)).await?;
    let counted = Box::pin(count_tokens(gw, session, move |cancel| {
        validate::countable(family, &body)
            .map(|c| crate::admit::tokens::count(&c, u64::MAX, cancel))
    }))
    .await?;
    ctx.outcome.usage.input_tokens = Some(counted);
    let render = spoke(family).count_tokens_body.ok_or_else(|| {
        GatewayError::new(ErrorKind::Internal, "this family has no token-count route")
    })?;
    respond::json(session, ctx, 200, Bytes::from(render(counted)))
        .await
        .map_err(Stop::Io)
}

/// Runs a token count in a tokenizer slot: its figure, or the stop for a
/// client that went away (noticed by the gate, or by the count itself).
pub async fn count_tokens<F>(gw: &Gateway, session: &mut Session, work: F) -> Result<u64, Stop>
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
