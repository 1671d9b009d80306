//! Reading the client's request body: up to `--max-body-bytes`, after a
//! `100 Continue` when asked, each read within the listener's body deadline;
//! a broken or slow body is the client's 400 or 408 and closes the
//! connection.

use super::Stop;
use crate::error::{ErrorKind, GatewayError};
use crate::listener::Session;
use crate::proxy::Gateway;
use bytes::Bytes;

pub(super) async fn read_request_body(gw: &Gateway, session: &mut Session) -> Result<Bytes, Stop> {
    let limit = gw.settings.max_body_bytes;
    let too_large = || {
        GatewayError::new(
            ErrorKind::PayloadTooLarge,
            format!("request body is larger than the limit of {limit} bytes"),
        )
    };
    let req = session.req_header();
    let declared = req
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large().into());
    }
    let expects_continue = req
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if expects_continue {
        session.write_continue_response().await.map_err(Stop::Io)?;
    }
    // Pieces are joined into one buffer sized from content-length.
    let mut body = crate::util::gather::Gathered::expecting(declared.unwrap_or(0).min(limit));
    let started = tokio::time::Instant::now();
    loop {
        let read = match crate::listener::body_deadline(started, body.len()) {
            Some(at) => tokio::time::timeout_at(at, session.read_request_body()).await,
            None => Ok(session.read_request_body().await),
        };
        let chunk = match read {
            Ok(Ok(Some(c))) => c,
            Ok(Ok(None)) => break,
            Ok(Err(e)) => return Err(body_fault(session, e)),
            Err(_) => {
                session.set_keepalive(None);
                return Err(body_timeout().into());
            }
        };
        if body.len() + chunk.len() > limit {
            return Err(too_large().into());
        }
        body.push(chunk);
    }
    Ok(body.finish())
}

/// A request body that could not be read: the client's fault, answered in
/// its family's shape (408 when it stopped sending for the listener's body
/// timeout, 400 when its framing is broken), and the connection closed after
/// the answer since the body's end is lost. A client that went away is no
/// answer at all (`Stop::Io`, in the access log).
fn body_fault(session: &mut Session, e: Box<pingora_core::Error>) -> Stop {
    use pingora_core::ErrorType;
    session.set_keepalive(None);
    match e.etype() {
        ErrorType::ReadTimedout => body_timeout().into(),
        ErrorType::InvalidHTTPHeader => GatewayError::new(
            ErrorKind::InvalidRequest,
            "the request body's framing is invalid",
        )
        .into(),
        ErrorType::ConnectionClosed => GatewayError::new(
            ErrorKind::InvalidRequest,
            "the request body ended before its declared length",
        )
        .into(),
        t if t.as_str() == "InvalidChunk" => GatewayError::new(
            ErrorKind::InvalidRequest,
            "the request body's chunked encoding is invalid",
        )
        .into(),
        _ => Stop::Io(e),
    }
}

/// A request body that stopped coming (a read waited the body timeout) or
/// came too slowly (`listener::body_deadline`).
fn body_timeout() -> GatewayError {
    GatewayError::new(
        ErrorKind::InvalidRequest,
        "the request body did not arrive in time (the body timeout, or below the minimum rate)",
    )
    .with_status(408)
    .with_code("request_timeout")
}
