//! Relaying an upstream stream to the client frame by frame: each upstream
//! chunk goes through the stream translator and is written at once, while the
//! client connection is watched so a client that goes away drops the upstream
//! request immediately. Failures end the client's stream with its family's
//! error event.

use super::ctx::RequestCtx;
use super::respond;
use super::upstream::{transport_error, Exchange};
use super::Gateway;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::passthrough::Framing;
use crate::stream::ClientStream;
use bytes::Bytes;
use pingora_proxy::Session;

/// Why the relay stopped early: the downstream connection failed.
pub type RelayError = Box<pingora_core::Error>;

enum Next {
    Upstream(pingora_core::Result<Option<Bytes>>),
    ClientGone,
}

/// Relays an upstream stream to the client frame by frame.
pub async fn relay_stream(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    mut ex: Exchange,
    pass: &mut ClientStream,
    family: Family,
    framing: Framing,
) -> Result<bool, RelayError> {
    let content_type = match framing {
        Framing::Sse => "text/event-stream",
        Framing::JsonArray => "application/json",
    };
    let mut h = respond::header(ctx, 200, content_type, None)?;
    h.insert_header("cache-control", "no-cache")?;
    if session.as_downstream().is_http2() {
        h.remove_header("transfer-encoding");
    }
    ctx.status = 200;
    session.write_response_header(Box::new(h), false).await?;
    let mut out = Vec::with_capacity(8192);
    let mut failed = false;
    loop {
        let next = tokio::select! {
            r = ex.session.read_response_body() => Next::Upstream(r),
            _ = session.as_downstream_mut().read_body_or_idle(true) => Next::ClientGone,
        };
        out.clear();
        let mut done = false;
        match next {
            Next::ClientGone => {
                ctx.client_gone = true;
                log::info!(
                    "{}: client went away mid-stream; dropping the upstream request",
                    ctx.request_id
                );
                ex.session.shutdown().await;
                return Ok(true);
            }
            Next::Upstream(Ok(Some(chunk))) => {
                if let Err(fault) = pass.push(&chunk, &mut out) {
                    let e = GatewayError::new(ErrorKind::BadGateway, fault.to_string());
                    pass.fail(&crate::protocol::error_body(family, &e), &mut out);
                    done = true;
                    failed = true;
                }
            }
            Next::Upstream(Ok(None)) => {
                if let Err(fault) = pass.finish(&mut out) {
                    let e = GatewayError::new(ErrorKind::BadGateway, fault.to_string());
                    pass.fail(&crate::protocol::error_body(family, &e), &mut out);
                    failed = true;
                }
                done = true;
            }
            Next::Upstream(Err(err)) => {
                let e = transport_error("stream", &err);
                pass.fail(&crate::protocol::error_body(family, &e), &mut out);
                done = true;
                failed = true;
            }
        }
        if !out.is_empty() {
            if ctx.ttft.is_none() {
                ctx.ttft = Some(ctx.started.elapsed());
            }
            session
                .write_response_body(Some(Bytes::copy_from_slice(&out)), false)
                .await?;
        }
        if done {
            break;
        }
    }
    session.write_response_body(None, true).await?;
    if ex.session.response_done() {
        gw.upstream.release(ex).await;
    } else {
        ex.session.shutdown().await;
    }
    Ok(!failed)
}
