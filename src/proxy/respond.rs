//! Writing whole responses (JSON bodies and family-shaped errors) to the client.

use super::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::family::Family;
use crate::listener::Session;
use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING,
};
use pingora_core::{ErrorType, OrErr};
use pingora_http::ResponseHeader;

/// Renders `e` in `family`'s error shape (the one renderer, in `protocol`).
pub use crate::protocol::error_body;

/// The headers Pingora adds to a response head (HTTP/1): `date` and
/// `connection`.
const PINGORA_ADDS: usize = 2;

/// A response header with the headers every response carries.
///
/// Pingora keeps a response's head for the request's whole life (a
/// stream's too), so it is sized once for all its headers, and keeps no
/// map of the names' case (HTTP/1 names are case-insensitive): Pingora
/// writes the standard names title-cased (`Content-Type`, `Date`) and
/// the others as given (`x-request-id`). With the case map and the growth
/// it had, a stream's head was about 2.4 KB (docs/performance.md "Issue
/// 28, eighth pass").
pub fn header(
    ctx: &RequestCtx,
    status: u16,
    content_type: &str,
    content_length: Option<usize>,
) -> pingora_core::Result<ResponseHeader> {
    // Ours, Pingora's, and a stream's `cache-control`; an error's rare
    // extras (`retry-after`, `allow`) grow the map.
    let count = 3
        + usize::from(!ctx.outcome.adjusted.is_empty())
        + usize::from(ctx.outcome.answered_by.is_some())
        + usize::from(ctx.budget_remaining.is_some())
        + PINGORA_ADDS
        + usize::from(content_length.is_none());
    // Set by their typed names in the head's map: Pingora's `insert_header`
    // parses a name again from its bytes each time (about 600
    // instructions a header).
    let mut parts: http::response::Parts =
        ResponseHeader::build_no_case(status, Some(count))?.into();
    let h = &mut parts.headers;
    h.insert(CONTENT_TYPE, value(content_type)?);
    match content_length {
        Some(n) => h.insert(CONTENT_LENGTH, HeaderValue::from(n)),
        // A stream (`relay::head`).
        None => {
            h.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
            h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"))
        }
    };
    h.insert(X_REQUEST_ID, value(&ctx.request_id)?);
    if !ctx.outcome.adjusted.is_empty() {
        // What the gateway changed in the request (docs/api.md "Adapt or refuse").
        h.insert(X_ADJUSTED, value(&ctx.outcome.adjusted.render())?);
    }
    if let Some(m) = &ctx.outcome.answered_by {
        h.insert(X_MODEL, value(m)?);
    }
    if let Some(left) = ctx.budget_remaining {
        let left = crate::state::limits::format_usd(left.max(0));
        h.insert(X_BUDGET_REMAINING, value(&left)?);
    }
    Ok(parts.into())
}

pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const X_ADJUSTED: HeaderName = HeaderName::from_static("x-switchboard-adjusted");
const X_MODEL: HeaderName = HeaderName::from_static("x-switchboard-model");
const X_BUDGET_REMAINING: HeaderName = HeaderName::from_static("x-switchboard-budget-remaining");

/// A header value from text, refused as Pingora's `insert_header` refuses one.
fn value(text: &str) -> pingora_core::Result<HeaderValue> {
    HeaderValue::from_str(text).explain_err(ErrorType::InvalidHTTPHeader, |_| {
        "invalid value while insert"
    })
}

/// During a graceful shutdown (SIGTERM, or SIGQUIT to a successor), an
/// answer on HTTP/1.1 carries `connection: close` and its connection is not
/// kept: the client sends its next request on a new connection, to the
/// successor or elsewhere, instead of racing the drain on this one. The
/// listener says when (`listener::draining`: once it has stopped
/// accepting).
pub fn close_if_draining(
    session: &mut Session,
    h: &mut ResponseHeader,
) -> pingora_core::Result<()> {
    if crate::listener::draining() {
        session.set_keepalive(None);
        if !session.is_http2() {
            h.insert_header("connection", "close")?;
        }
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
    Ok(())
}

/// Sends a complete JSON response.
pub async fn json(
    session: &mut Session,
    ctx: &mut RequestCtx,
    status: u16,
    body: Bytes,
) -> pingora_core::Result<()> {
    let h = Box::new(header(ctx, status, "application/json", Some(body.len()))?);
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
    let mut h = Box::new(header(ctx, e.status, "application/json", Some(body.len()))?);
    if let Some(s) = e.retry_after {
        h.insert_header("retry-after", s.to_string())?;
    }
    if let Some(allow) = e.allow {
        h.insert_header("allow", allow)?;
    }
    // Bedrock's `x-amzn-errortype`, beside its `{"message"}` body.
    if let Some((name, kind)) = crate::protocol::spoke(family).error_type_header {
        h.insert_header(name, kind(e))?;
    }
    send(session, ctx, h, body).await
}

/// The head comes boxed, as Pingora takes it: by value (232 bytes) it
/// had two slots in this future (an `async fn` argument and its
/// rebinding) and one more in each caller's.
async fn send(
    session: &mut Session,
    ctx: &mut RequestCtx,
    mut h: Box<ResponseHeader>,
    body: Bytes,
) -> pingora_core::Result<()> {
    close_if_draining(session, &mut h)?;
    ctx.outcome.status = h.status.as_u16();
    let head = session.req_header().method == http::Method::HEAD;
    // Boxed: the write futures (Pingora's HTTP/2 ones are about 1.2 KB)
    // would otherwise be part of every future that may answer this way,
    // and the ones that wait on a stream (the request's, the connection's)
    // hold that room for the stream's whole life. One allocation per answer.
    let data = (!head && !body.is_empty()).then_some(body);
    Box::pin(session.write_response(Some(h), data, true)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head holds every header it will carry without growing, and no
    /// map of the names' case beside its headers.
    #[test]
    fn a_head_is_sized_once_for_its_headers_and_pingoras() {
        let mut ctx = RequestCtx::new();
        ctx.request_id = "req_1".into();
        ctx.outcome.answered_by = Some("openai/gpt-5".into());
        for stream in [false, true] {
            let mut h = header(&ctx, 200, "text/event-stream", (!stream).then_some(2)).unwrap();
            let room = h.headers.capacity();
            if stream {
                h.insert_header("cache-control", "no-cache").unwrap();
            }
            // What Pingora's HTTP/1 writer adds.
            h.insert_header(http::header::DATE, "Sat, 28 Nov 2026 11:00:00 GMT")
                .unwrap();
            h.insert_header(http::header::CONNECTION, "keep-alive")
                .unwrap();
            assert_eq!(h.headers.capacity(), room, "stream {stream}: the map grew");
            assert_eq!(h.headers.len(), 6 + usize::from(stream));
            assert!(!h.has_case());
            let mut wire = Vec::new();
            h.header_to_h1_wire(&mut wire);
            let wire = String::from_utf8(wire).unwrap();
            assert!(
                wire.starts_with("Content-Type: text/event-stream\r\n"),
                "{wire}"
            );
            assert!(wire.contains("\r\nDate: Sat"), "{wire}");
            assert!(wire.contains("x-switchboard-model: openai/gpt-5"), "{wire}");
        }
    }
}
