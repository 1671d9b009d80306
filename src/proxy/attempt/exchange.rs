//! One attempt at one upstream, bounded by the provider's deadlines, in
//! three steps: send the request and wait for the answer's head (a stream:
//! its first token), judge an error status, read a whole answer's body. It
//! ends in an [`Outcome`] for the provider loop (`super::provider`).

use super::answer::{
    parse_retry_after, read_answer_body, refused, upstream_failure, BodyFault, MAX_ERROR_BODY,
};
use super::request::{request_for, upstream_header};
use super::{Answer, Call};
use crate::config::Upstream;
use crate::error::{ErrorKind, GatewayError};
use crate::eventstream::decode::{EventStreamDecoder, Payload};
use crate::protocol::cloud;
use crate::protocol::common::framing::UpstreamFraming;
use crate::protocol::common::spoke::CONTEXT_OVERFLOW;
use crate::protocol::spoke;
use crate::proxy::Gateway;
use crate::upstream::client::{
    bound, deadline_error, Exchange, Message, ReadFault, Resent, UpstreamClient,
};
use crate::upstream::credentials::Secret;
use crate::upstream::pool::{Cause, InFlight};
use crate::util::gather::Gathered;
use bytes::Bytes;

/// How one attempt ended.
pub(super) enum Outcome<'s> {
    Answer(Box<Answer<'s>>),
    /// Goes to the client as it is (with the upstream's status, when it answered).
    Final(GatewayError, Option<u16>),
    /// The upstream failed: cool it and move on.
    Retry(GatewayError, Cause, Option<u16>),
    /// This upstream cannot be used (no key): move on without blaming it.
    Skip(GatewayError),
    /// The request cannot be translated for this upstream.
    Unfit(GatewayError),
    /// The request's total deadline passed waiting for this upstream.
    Expired(GatewayError),
    /// The upstream (alive: it answered with this status) says the request
    /// is longer than the model's context: a model with a larger context
    /// may take it, the same model never will.
    Overflow(GatewayError, u16),
}

/// One attempt at one upstream; `resent` says whether the request had to
/// be sent a second time (a pooled connection that failed before the answer).
pub(super) async fn attempt<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    up: &'s Upstream,
    in_flight: InFlight,
    traceparent: Option<&str>,
    resent: &mut Option<Resent>,
) -> Outcome<'s> {
    let (body, adjusted, usage_injected) = match request_for(c, up).await {
        Ok(r) => r,
        // An embeddings or rerank request this upstream's protocol cannot
        // carry (token arrays to Gemini, a rerank to a cloud), or a
        // completion to a rerank-only `cohere` upstream: another upstream
        // of the provider may; when none can, the last refusal is the answer.
        Err(e) if c.plan.embed.is_some() || up.rerank_only() => return Outcome::Skip(e),
        Err(e) => return Outcome::Unfit(e),
    };
    let (mut ex, status, first, frames) =
        match send_authorized(gw, c, up, body, traceparent, resent).await {
            Ok(r) => r,
            Err(outcome) => return outcome,
        };
    if status >= 300 {
        // Boxed: reached on errors only, and its future (an error body
        // read, a token refresh) would size every attempt's.
        return Box::pin(judge_status(gw, c, up, &mut ex, status)).await;
    }
    // A whole answer is read here, while failing over is still possible.
    let first = if c.plan.req.stream {
        first
    } else {
        match read_whole(gw, c, &mut ex, status).await {
            Ok(b) => Some(b),
            Err(outcome) => return outcome,
        }
    };
    Outcome::Answer(Box::new(Answer {
        up,
        translated: up.protocol != c.client.family,
        ex,
        status,
        usage_injected,
        adjusted,
        first,
        frames,
        in_flight,
        idle: c.provider.timeouts.idle,
        deadline: c.deadline,
    }))
}

/// Sends `body` to `up` with its credential (the catalog's key, or a
/// cloud's access token). A cached token the upstream refuses (401, 403:
/// revoked, or the cloud's clock ahead) is dropped and the request sent
/// once more with a new one; a new token refused is judged like any
/// refused credential.
async fn send_authorized<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    up: &'s Upstream,
    body: Bytes,
    traceparent: Option<&str>,
    resent: &mut Option<Resent>,
) -> Result<Sent, Outcome<'s>> {
    let mut renewed = false;
    loop {
        let token = credential(gw, c, up).await?;
        let msg = match upstream_header(up, c, &body, traceparent, token.as_ref().map(|t| &t.0)) {
            Ok(h) => Message::new(h, &body),
            Err(e) if e.kind == ErrorKind::Unavailable => return Err(Outcome::Skip(e)),
            Err(e) => return Err(Outcome::Final(e, None)),
        };
        let sent = send(gw, c, up, &msg, resent).await?;
        let status = sent.1;
        if matches!(status, 401 | 403) && token.is_some_and(|t| t.1) && !renewed {
            log::info!(
                "{}: upstream {} of {} refused a cached access token ({status}); asking for a new one",
                c.client.request_id,
                up.id,
                c.provider.id
            );
            gw.credentials.forget(&up.auth);
            renewed = true;
            continue;
        }
        return Ok(sent);
    }
}

/// A sent request: the exchange, its status, the stream's first chunk (or
/// nothing yet), and the decoder of an event-stream upstream's stream.
type Sent = (
    Exchange,
    u16,
    Option<Bytes>,
    Option<Box<EventStreamDecoder>>,
);

/// The access token a cloud upstream is called with, and whether it came
/// from the cache (`None`: the catalog's key is used). A source not configured (a variable unset) skips the upstream
/// as a missing key does; a source that failed cools it like any failure,
/// and the error names the provider and the source.
async fn credential<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    up: &'s Upstream,
) -> Result<Option<(Secret, bool)>, Outcome<'s>> {
    match gw
        .credentials
        .token(&gw.upstream, &c.provider.id, &up.auth)
        .await
    {
        None => Ok(None),
        Some(Ok(token)) => Ok(Some((token.value, token.cached))),
        Some(Err(e)) if e.kind == ErrorKind::Unavailable => Err(Outcome::Skip(e)),
        Some(Err(e)) => Err(Outcome::Retry(e, Cause::Credential, None)),
    }
}

/// Sends `msg` to `up` and waits for the answer's head and, for a stream,
/// its first chunk (with a `first_token` timeout: its first token), bounded
/// by `first_token` and the total deadline.
async fn send<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    up: &'s Upstream,
    msg: &Message,
    resent: &mut Option<Resent>,
) -> Result<Sent, Outcome<'s>> {
    // Connections are pooled per provider, base URL and credential.
    let identity =
        gw.upstream
            .identity(&c.provider.id, &up.url, up.api_key.as_deref().unwrap_or(""));
    let timeouts = c.provider.timeouts;
    let stream = c.plan.req.stream;
    let exchange = async {
        let mut ex = gw
            .upstream
            .send(&up.url, identity, timeouts.connect, msg, resent)
            .await?;
        let status = ex.status();
        let mut frames = match cloud::upstream_framing(up.cloud.as_ref(), up.protocol) {
            _ if !stream || status >= 300 => None,
            UpstreamFraming::Sse => None,
            UpstreamFraming::EventStream => Some(Payload::Events),
            UpstreamFraming::EventStreamChunks => Some(Payload::Chunks),
        }
        .map(|p| Box::new(EventStreamDecoder::new(p, gw.settings.max_frame_bytes)));
        let first = if !stream || status >= 400 {
            None
        } else if timeouts.first_token.is_some() {
            let started = spoke(up.protocol).stream_started;
            read_to_first_token(&mut ex, started, frames.as_deref_mut()).await?
        } else {
            let chunk = UpstreamClient::read_chunk(&mut ex, None, None)
                .await
                .map_err(|f| f.error())?;
            match (chunk, frames.as_deref_mut()) {
                (Some(chunk), Some(d)) => Some(as_sse(d, &chunk)?),
                (chunk, _) => chunk,
            }
        };
        Ok::<_, GatewayError>((ex, status, first, frames))
    };
    let done = match bound(timeouts.first_token, c.deadline) {
        None => exchange.await,
        Some((limit, by_deadline)) => match tokio::time::timeout(limit, exchange).await {
            Ok(r) => r,
            Err(_) if by_deadline => {
                gw.metrics.upstream_error(&c.provider.id, "timeout");
                return Err(Outcome::Expired(deadline_error()));
            }
            Err(_) => {
                gw.metrics.upstream_error(&c.provider.id, "timeout");
                let e = GatewayError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the upstream sent no {} within {} ms (the provider's first_token timeout)",
                        if stream { "first token" } else { "answer" },
                        limit.as_millis()
                    ),
                );
                return Err(Outcome::Retry(e, Cause::Timeout, None));
            }
        },
    };
    done.map_err(|e| {
        let (kind, cause) = if e.kind == ErrorKind::Timeout {
            ("timeout", Cause::Timeout)
        } else if e.code.as_deref() == Some(MALFORMED_FRAME) {
            ("invalid", Cause::Invalid)
        } else {
            ("unreachable", Cause::Unreachable)
        };
        gw.metrics.upstream_error(&c.provider.id, kind);
        Outcome::Retry(e, cause, None)
    })
}

/// An answer of status 300 or more: a refused credential or a redirect (the
/// gateway's fault: retried elsewhere, never relayed), a 429 or a 5xx
/// (retried elsewhere), any other 4xx (the client's, as it is).
async fn judge_status<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    up: &'s Upstream,
    ex: &mut Exchange,
    status: u16,
) -> Outcome<'s> {
    gw.metrics
        .upstream_error(&c.provider.id, &status.to_string());
    let retry_after = ex.header("retry-after").and_then(parse_retry_after);
    let raw = if status >= 400 {
        read_answer_body(ex, MAX_ERROR_BODY, c.provider.timeouts.idle, c.deadline)
            .await
            .unwrap_or_default()
    } else {
        Bytes::new()
    };
    if let Some((e, cause)) = refused(c, up, status, &raw) {
        if cause == Cause::Credential {
            // A token the upstream refuses (revoked, or a clock off) is
            // not used again: the next request fetches a new one.
            gw.credentials.forget(&up.auth);
        }
        return Outcome::Retry(e, cause, Some(status));
    }
    let mut e = upstream_failure(up.protocol, status, &raw, retry_after);
    e.retry_after = retry_after.map(|d| d.as_secs().max(1));
    match status {
        429 => Outcome::Retry(e, Cause::RateLimited(retry_after), Some(status)),
        s if s >= 500 => Outcome::Retry(e, Cause::Status(s, retry_after), Some(status)),
        s if e.code.as_deref() == Some(CONTEXT_OVERFLOW) => Outcome::Overflow(e, s),
        s => Outcome::Final(e, Some(s)),
    }
}

/// A whole answer's body, within `--max-response-bytes`, the provider's
/// `idle` timeout per read and the total deadline.
async fn read_whole<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    ex: &mut Exchange,
    status: u16,
) -> Result<Bytes, Outcome<'s>> {
    let limit = gw.settings.max_response_bytes;
    read_answer_body(ex, limit, c.provider.timeouts.idle, c.deadline)
        .await
        .map_err(|f| {
            let e = f.error();
            if matches!(f, BodyFault::Read(ReadFault::Deadline)) {
                return Outcome::Expired(e);
            }
            if matches!(f, BodyFault::TooLarge(_)) {
                // The upstream is healthy and another would answer the
                // same: the client learns the limit. The connection is
                // closed (dropped with the exchange), its rest unread.
                gw.metrics.upstream_error(&c.provider.id, "too_large");
                return Outcome::Final(e, Some(status));
            }
            let cause = if f.is_timeout() {
                Cause::Timeout
            } else {
                Cause::Unreachable
            };
            Outcome::Retry(e, cause, Some(status))
        })
}

/// The most of a stream's preamble held back while waiting for its first token.
const MAX_PREAMBLE: usize = 256 * 1024;

/// The code of a first chunk whose event-stream frame is not AWS's encoding.
const MALFORMED_FRAME: &str = "upstream_malformed_frame";

/// An event-stream chunk as SSE (an empty chunk while a frame is
/// incomplete); a frame that is not AWS's encoding is the upstream's fault.
fn as_sse(d: &mut EventStreamDecoder, chunk: &[u8]) -> Result<Bytes, GatewayError> {
    let mut out = Vec::with_capacity(chunk.len() + 64);
    d.push(chunk, &mut out).map_err(|e| {
        GatewayError::new(ErrorKind::BadGateway, format!("upstream sent {e}"))
            .with_code(MALFORMED_FRAME)
    })?;
    Ok(Bytes::from(out))
}

/// Reads a stream's first chunks until they carry the answer's first token
/// (`started`, the upstream protocol's test, over SSE: an event-stream
/// upstream's chunks are decoded by `frames` first), the stream ends, or
/// the held bytes pass `MAX_PREAMBLE`: a preamble alone (a role chunk, a
/// `message_start`) does not meet a `first_token` deadline. Nothing has
/// reached the client yet; the caller bounds the wait.
async fn read_to_first_token(
    ex: &mut Exchange,
    started: fn(&[u8]) -> bool,
    mut frames: Option<&mut EventStreamDecoder>,
) -> Result<Option<Bytes>, GatewayError> {
    let mut held = Gathered::default();
    loop {
        let Some(chunk) = UpstreamClient::read_chunk(ex, None, None)
            .await
            .map_err(|f| f.error())?
        else {
            break;
        };
        let chunk = match frames.as_deref_mut() {
            Some(d) => as_sse(d, &chunk)?,
            None => chunk,
        };
        let scanned = held.len();
        held.push(chunk);
        let all = held.as_slice();
        // Only the new bytes need a look, with enough before them for a
        // marker split across chunks.
        if started(&all[scanned.saturating_sub(64)..]) || all.len() > MAX_PREAMBLE {
            break;
        }
    }
    Ok((!held.is_empty()).then(|| held.finish()))
}
