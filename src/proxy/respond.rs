//! Writing whole responses (JSON bodies and family-shaped errors) to the client.

use super::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::family::Family;
use crate::listener::{AnswerHead, Session};
use bytes::Bytes;

/// Renders `e` in `family`'s error shape (the one renderer, in `protocol`).
pub use crate::protocol::error_body;

/// The head of the gateway's own answer: `content-type`, the framing
/// (`content-length`, or a stream's), `x-request-id`, and what the request
/// earned: `x-switchboard-adjusted` (what the gateway changed in it,
/// docs/api.md "Adapt or refuse"), `x-switchboard-model` (the model that
/// answered) and `x-switchboard-budget-remaining`. HTTP/1 copies it into
/// the connection's buffer as it is (`listener::AnswerHead`).
pub fn header(
    ctx: &RequestCtx,
    status: u16,
    content_type: &'static str,
    content_length: Option<usize>,
) -> pingora_core::Result<AnswerHead> {
    let room =
        16 + ctx.request_id.len() + ctx.outcome.answered_by.as_ref().map_or(0, |m| 24 + m.len());
    let mut h = AnswerHead::new(status, content_type, content_length, room)?;
    h.field("x-request-id", &ctx.request_id)?;
    if !ctx.outcome.adjusted.is_empty() {
        h.field("x-switchboard-adjusted", &ctx.outcome.adjusted.render())?;
    }
    if let Some(m) = &ctx.outcome.answered_by {
        h.field("x-switchboard-model", m)?;
    }
    if let Some(left) = ctx.budget_remaining {
        let left = crate::state::limits::format_usd(left.max(0));
        h.field("x-switchboard-budget-remaining", &left)?;
    }
    Ok(h)
}

/// The request id's header, as the client's request may carry it too.
pub(crate) const X_REQUEST_ID: http::HeaderName = http::HeaderName::from_static("x-request-id");

/// During a graceful shutdown (SIGTERM, or SIGQUIT to a successor), an
/// answer on HTTP/1.1 carries `connection: close` and its connection is not
/// kept: the client sends its next request on a new connection, to the
/// successor or elsewhere, instead of racing the drain on this one. The
/// listener says when (`listener::draining`: once it has stopped
/// accepting).
pub fn close_if_draining(session: &mut Session) {
    if crate::listener::draining() {
        // HTTP/1 writes `connection: close` for it.
        session.set_keepalive(None);
    } else if crate::listener::stopping() && session.req_header().version == http::Version::HTTP_11
    {
        // The listener turned keep-alive off when it saw the shutdown at
        // this request's start (`Guarded::serve_h1`), while it was still
        // open: a client told to close now would reconnect into a
        // listen queue about to be dropped. Kept (unless the client asked
        // to close), its next request is served within the listener's
        // linger window and answered with `connection: close`.
        session.set_keepalive(Some(0));
    }
}

/// Sends a complete JSON response.
pub async fn json(
    session: &mut Session,
    ctx: &mut RequestCtx,
    status: u16,
    body: Bytes,
) -> pingora_core::Result<()> {
    let h = header(ctx, status, "application/json", Some(body.len()))?;
    send(session, ctx, h, body).await
}

/// Sends `e` in `family`'s shape, with `retry-after` when it carries one.
pub async fn error(
    session: &mut Session,
    ctx: &mut RequestCtx,
    family: Family,
    e: &GatewayError,
) -> pingora_core::Result<()> {
    ctx.outcome.error = Some(e.into());
    let body = Bytes::from(error_body(family, e));
    let mut h = header(ctx, e.status, "application/json", Some(body.len()))?;
    if let Some(s) = e.retry_after {
        h.field("retry-after", itoa::Buffer::new().format(s))?;
    }
    if let Some(allow) = e.allow {
        h.field("allow", allow)?;
    }
    // Bedrock's `x-amzn-errortype`, beside its `{"message"}` body.
    if let Some((name, kind)) = crate::protocol::spoke(family).error_type_header {
        h.field(name, kind(e))?;
    }
    send(session, ctx, h, body).await
}

async fn send(
    session: &mut Session,
    ctx: &mut RequestCtx,
    h: AnswerHead,
    body: Bytes,
) -> pingora_core::Result<()> {
    close_if_draining(session);
    ctx.outcome.status = h.status().as_u16();
    let head = session.req_header().method == http::Method::HEAD;
    // Boxed: the write futures (Pingora's HTTP/2 ones are about 1.2 KB)
    // would otherwise be part of every future that may answer this way,
    // and the ones that wait on a stream (the request's, the connection's)
    // hold that room for the stream's whole life. One allocation per answer.
    let data = (!head && !body.is_empty()).then_some(body);
    Box::pin(session.write_answer(&h, data, true)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head carries the request's id and what it earned, in order,
    /// and a negative budget reads as none left.
    #[test]
    fn a_head_carries_the_request_id_model_and_budget() {
        let mut ctx = RequestCtx::new();
        ctx.request_id = "req_1".into();
        ctx.outcome.answered_by = Some("openai/gpt-5".into());
        ctx.budget_remaining = Some(-5);
        let h = header(&ctx, 200, "text/event-stream", None).unwrap();
        assert_eq!(h.length(), None);
        assert_eq!(
            h.fields().collect::<Vec<_>>(),
            [
                ("x-request-id", "req_1"),
                ("x-switchboard-model", "openai/gpt-5"),
                ("x-switchboard-budget-remaining", "0.00")
            ]
        );
        ctx.request_id = "bad\nid".into();
        assert!(header(&ctx, 200, "application/json", Some(2)).is_err());
    }
}
