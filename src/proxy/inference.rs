//! Inference (placeholder until the exchange is written).
use super::ctx::RequestCtx;
use super::route::Route;
use super::{respond, Gateway};
use crate::config::ApiKey;
use crate::error::{ErrorKind, GatewayError};
use crate::runtime::Snapshot;
use pingora_proxy::Session;

/// Handles an authenticated inference request.
pub async fn handle(
    _gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    route: &Route,
    _snap: &Snapshot,
    _key: &ApiKey,
) -> pingora_core::Result<()> {
    let e = GatewayError::new(ErrorKind::Internal, "inference is not built yet").with_status(501);
    respond::error(session, ctx, route.family, &e).await
}
