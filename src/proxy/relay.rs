//! Relaying an upstream stream to the client: what each upstream read
//! brought (one chunk or a burst of them) goes through the stream translator
//! and is written at once, in one send with the response head before it or
//! the stream's end after it when they are due (docs/performance.md "Writes
//! per stream"), while the client connection is watched so a client that
//! goes away drops the upstream request immediately. Failures end the
//! client's stream with its family's error event, or (with `Relay::rescue`)
//! leave it open for a continuation
//! (`StreamEnd::Cut`, `super::inference`'s rescue). Writes to the client are
//! bounded too: each by the send timeout (set on the session,
//! `--write-timeout-ms`) and all of them by the provider's `total` deadline,
//! so a client that reads slowly or not at all cannot keep a stream, or its
//! upstream connection, past either; the upstream connection is closed with
//! the client's.

use super::attempt::Answer;
use super::ctx::RequestCtx;
use super::respond;
use super::Gateway;
use crate::error::{ErrorKind, GatewayError};
use crate::eventstream::decode::EventStreamDecoder;
use crate::family::Family;
use crate::listener::{AnswerHead, Session};
use crate::protocol::bedrock::invoke::Chunks;
use crate::translate::passthrough::{Framing, StreamFault};
use crate::translate::stream::ClientStream;
use crate::upstream::client::{Exchange, ReadFault, UpstreamClient};
use crate::upstream::pool::Cause;
use bytes::Bytes;
use pingora_core::{Error, ErrorType};
use std::time::Instant;

/// The client-bound buffer's least size (a few frames; a burst's is sized
/// by its bytes, [`make_room`], and it grows as needed).
const OUT_START: usize = 1024;
/// A batch stops taking chunks that are already waiting once it is this
/// large (the client connection's write buffer sends larger writes
/// straight through: `listener::batch`).
const BATCH: usize = 64 * 1024;

/// Why the relay stopped early: the downstream connection failed, or a
/// write to it could not finish within the write timeout (`--write-timeout-ms`) or the deadline.
pub type RelayError = Box<pingora_core::Error>;

/// Writes to the client, bounded by `deadline` (the session's own write
/// timeout bounds each write too): the response head when given, then
/// `data`, then the body's end when `end`, in one send on HTTP/1 (on
/// HTTP/2 the data and the end are one DATA frame). The connection's
/// write buffer is given back once sent: the stream waits for its
/// upstream between writes.
async fn write(
    session: &mut Session,
    head: Option<Box<AnswerHead>>,
    data: Option<Bytes>,
    end: bool,
    deadline: Option<Instant>,
) -> Result<(), RelayError> {
    session.shed_after_write();
    let writes = async {
        match head {
            Some(h) => session.write_answer(&h, data, end).await,
            None => session.write_response(None, data, end).await,
        }
    };
    let Some(deadline) = deadline else {
        return writes.await;
    };
    let left = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, writes).await {
        Ok(r) => r,
        Err(_) => Error::e_explain(
            ErrorType::WriteTimedout,
            "the provider's total deadline passed while the client was not reading the stream",
        ),
    }
}

/// How a relayed stream ended.
pub enum StreamEnd {
    /// The upstream finished it.
    Complete,
    /// The client went away; the upstream request was dropped.
    ClientGone,
    /// The upstream failed (idle, deadline, connection, an invalid frame):
    /// the client's stream was ended with its family's error event. No
    /// cause: no upstream is to blame (a continuation that differs from
    /// what the client has).
    Failed(GatewayError, Option<Cause>),
    /// The gateway shut down before the stream ended: the client's stream
    /// was ended with its family's error event; the upstream is not to blame.
    Shutdown(GatewayError),
    /// The upstream failed as in `Failed`, but the client's stream was left
    /// open for a continuation (`super::inference` rescue): the caller goes
    /// on with another upstream, or ends it with [`fail`].
    Cut(GatewayError, Cause),
}

enum Next {
    Upstream(Result<Option<Bytes>, ReadFault>),
    ClientGone,
    /// The gateway is shutting down and its grace period ran out.
    Shutdown,
}

/// The stream's response head (SSE, or a Gemini JSON array), boxed: it
/// would take a slot in `write`'s future and another in the block that
/// writes it, for the stream's life.
fn head(
    session: &mut Session,
    ctx: &mut RequestCtx,
    framing: Framing,
) -> Result<Box<AnswerHead>, RelayError> {
    // A stream's: chunked on HTTP/1.1, `cache-control: no-cache`.
    let h = respond::header(ctx, 200, framing.content_type(), None)?;
    respond::close_if_draining(session);
    ctx.outcome.status = 200;
    Ok(Box::new(h))
}

/// One read (`sse`: the first chunk, SSE already, else through the
/// decoder), the chunks it brought with it, and those already waiting when
/// it filled its room, translated into one batch (`out`, up to [`BATCH`]);
/// `Some` when the stream is over.
async fn gather(
    ex: &mut Exchange,
    pass: &mut ClientStream,
    (read, sse): (Result<Option<Bytes>, ReadFault>, bool),
    mut frames: Option<&mut (Box<EventStreamDecoder>, Vec<u8>)>,
    how: (Family, bool),
    out: &mut Vec<u8>,
) -> Option<StreamEnd> {
    let decode = if sse { None } else { frames.as_deref_mut() };
    let mut end = translate(pass, read, decode, how, (out, ex.waiting()));
    while end.is_none() {
        let read = match UpstreamClient::buffered_chunk(ex) {
            Ok(Some(chunk)) => Ok(chunk),
            Err(fault) => Err(fault),
            Ok(None) if out.len() < BATCH => match UpstreamClient::chunk_at_once(ex).await {
                Some(read) => read,
                None => break,
            },
            Ok(None) => break,
        };
        end = translate(pass, read, frames.as_deref_mut(), how, (out, ex.waiting()));
    }
    end
}

/// Room in `out` for what `input` upstream bytes become, before they are
/// pushed: a frame passed through comes out about as long as it went in
/// (a longer model name, the stored response's fields), so a burst is
/// written into one allocation, not one doubled five times over (each
/// doubling a copy of all written before it). `more`: the bytes still to
/// join the same batch ([`Exchange::waiting`]: those buffered, and the
/// next read's when this one filled its room): room for them too, and in
/// the stream's record (`ClientStream::expect`), so neither is copied to
/// grow as they come (a 19 kB answer in two reads copied 16 kB twice).
fn make_room(pass: &mut ClientStream, out: &mut Vec<u8>, (input, more): (usize, usize)) {
    let all = input + more;
    out.reserve((all + all / 8).max(OUT_START));
    if more > 0 {
        pass.expect(all);
    }
}

/// Puts what the upstream sent (a chunk, its end, or a read fault) through
/// the client stream into `out`; `Some` when the stream is over: complete,
/// failed with the family's error event written, or (`rescue`) cut and left
/// open for a continuation.
fn translate(
    pass: &mut ClientStream,
    read: Result<Option<Bytes>, ReadFault>,
    frames: Option<&mut (Box<EventStreamDecoder>, Vec<u8>)>,
    (family, rescue): (Family, bool),
    (out, more): (&mut Vec<u8>, usize),
) -> Option<StreamEnd> {
    let (e, cause) = match read {
        Ok(Some(chunk)) => {
            // An event-stream upstream's chunk, as the SSE the client stream reads.
            let pushed = match frames {
                Some((d, sse)) => {
                    sse.clear();
                    match d.push(&chunk, sse) {
                        Ok(()) => {
                            make_room(pass, out, (sse.len(), more));
                            pass.push(sse, out)
                        }
                        Err(e) => Err(StreamFault::Malformed(e.to_string())),
                    }
                }
                None => {
                    make_room(pass, out, (chunk.len(), more));
                    pass.push(&chunk, out)
                }
            };
            match pushed {
                Ok(()) => return None,
                Err(fault) => (fault_error(&fault), blame(&fault)),
            }
        }
        Ok(None) => match pass.finish(out) {
            Ok(()) => return Some(StreamEnd::Complete),
            Err(fault) => (fault_error(&fault), blame(&fault)),
        },
        // A read that fails once the answer has its stop reason ends a
        // complete stream: the client gets the terminator.
        Err(_) if pass.is_finished() => match pass.finish(out) {
            Ok(()) => return Some(StreamEnd::Complete),
            Err(fault) => (fault_error(&fault), blame(&fault)),
        },
        Err(fault) => {
            let cause = if fault.is_timeout() {
                Cause::Timeout
            } else {
                Cause::Unreachable
            };
            (fault.error(), Some(cause))
        }
    };
    if let (true, Some(cause)) = (rescue, cause) {
        return Some(StreamEnd::Cut(e, cause));
    }
    pass.fail(&crate::protocol::error_body(family, &e), out);
    Some(StreamEnd::Failed(e, cause))
}

/// Ends a stream left open by [`StreamEnd::Cut`] with the family's error
/// event carrying `e` (or the upstream's own error event, when one was held
/// back for the continuation that did not come).
pub async fn fail(
    session: &mut Session,
    pass: &mut ClientStream,
    relay: Relay,
    e: &GatewayError,
    deadline: Option<Instant>,
) -> Result<(), RelayError> {
    let mut out = Vec::with_capacity(OUT_START);
    pass.fail(&crate::protocol::error_body(relay.family, e), &mut out);
    let mut chunks = Rechunk::new(relay.framing);
    chunks.frame(&mut out);
    let data = (!out.is_empty()).then(|| Bytes::from(out));
    write(session, None, data, true, deadline).await
}

/// What a stream fault says of the upstream: a continuation that differs
/// from what the client has is the answer's end, not a broken upstream; an
/// error event of its own is its failure of that kind.
fn blame(fault: &StreamFault) -> Option<Cause> {
    use crate::ir::stream::StreamErrorKind as K;
    match fault {
        StreamFault::Diverged(_) => None,
        StreamFault::Upstream(e, _) => Some(match e.kind {
            K::RateLimited => Cause::RateLimited(None),
            K::Overloaded => Cause::Status(529, None),
            K::Timeout => Cause::Timeout,
            K::InvalidUpstream => Cause::Invalid,
            _ => Cause::Status(500, None),
        }),
        _ => Some(Cause::Invalid),
    }
}

/// The error a stream fault is logged as (the client gets the family's
/// error event, or the upstream's own).
fn fault_error(fault: &StreamFault) -> GatewayError {
    use crate::ir::stream::StreamErrorKind as K;
    let kind = match fault {
        StreamFault::Upstream(e, _) => match e.kind {
            K::RateLimited => ErrorKind::RateLimited,
            K::Overloaded => ErrorKind::Unavailable,
            K::Timeout => ErrorKind::Timeout,
            _ => ErrorKind::BadGateway,
        },
        _ => ErrorKind::BadGateway,
    };
    GatewayError::new(kind, fault.to_string())
}

/// E23's re-framing of the client stream's SSE as event-stream `chunk`
/// messages (`protocol::bedrock::invoke::Chunks`); nothing for other framings.
struct Rechunk(Option<(Box<Chunks>, Vec<u8>)>);

impl Rechunk {
    fn new(framing: Framing) -> Rechunk {
        Rechunk((framing == Framing::BedrockChunks).then(|| (Box::new(Chunks::new()), Vec::new())))
    }

    /// Replaces the SSE in `out` with its messages.
    fn frame(&mut self, out: &mut Vec<u8>) {
        if let (Some((chunks, framed)), false) = (&mut self.0, out.is_empty()) {
            framed.clear();
            chunks.push(out, framed);
            std::mem::swap(out, framed);
        }
    }
}

/// How to relay one upstream stream.
#[derive(Debug, Clone, Copy)]
pub struct Relay {
    /// The client's protocol (of the body: Anthropic on E23) and framing
    /// (the one the client reads).
    pub family: Family,
    pub framing: Framing,
    /// The client's response is under way (a continuation): no head.
    pub resumed: bool,
    /// A cut leaves the client's stream open for a continuation
    /// ([`StreamEnd::Cut`]) instead of ending it with the error event.
    pub rescue: bool,
}

/// Relays an upstream stream to the client, starting with the chunk the
/// attempt read before committing to this upstream; each later read waits
/// at most the provider's `idle` and never past the `total` deadline.
/// Whatever one read brought (a burst of frames, the stream's end with
/// them), and what was already waiting after a read that filled its room,
/// goes to the client in one write as soon as it is translated: nothing
/// waits for more.
///
/// A function returning an `async move` block that uses the answer's
/// fields in place: an `async fn` keeps a by-value argument twice for as
/// long as it runs (the argument and its rebinding), and destructuring
/// would add a third slot, each for a stream's whole life.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn keeps each argument twice"
)]
pub fn relay_stream<'a>(
    gw: &'a Gateway,
    session: &'a mut Session,
    ctx: &'a mut RequestCtx,
    mut answer: Answer<'a>,
    pass: &'a mut ClientStream,
    relay: Relay,
) -> impl std::future::Future<Output = Result<StreamEnd, RelayError>> + Send + 'a {
    async move {
        let Relay {
            family,
            framing,
            resumed,
            rescue,
        } = relay;
        let (idle, deadline) = (answer.idle, answer.deadline);
        // Sent with the first batch (a continuation has its head already).
        let mut head_due = !resumed;
        let mut out = Vec::new();
        let mut chunks = Rechunk::new(framing);
        // The first chunk was read before the response started (None: the
        // upstream ended the stream at once).
        let mut pending = Some(Ok(answer.first.take()));
        // The first chunk is SSE already; later ones go through the decoder.
        let mut frames = answer.frames.take().map(|d| (d, Vec::new()));
        let mut first_read = true;
        let how = (family, rescue);
        let mut shutdown = gw.drain.cut_signal();
        let end = loop {
            let next = match pending.take() {
                Some(r) => Next::Upstream(r),
                None => tokio::select! {
                    r = UpstreamClient::read_chunk(&mut answer.ex, idle, deadline) => Next::Upstream(r),
                    _ = session.read_body_or_idle(true) => Next::ClientGone,
                    _ = shutdown.wait_for(|cut| *cut) => Next::Shutdown,
                },
            };
            // Sized by what the upstream sent (`make_room`).
            out.clear();
            let end = match next {
                Next::Upstream(read) => {
                    let read = (read, std::mem::take(&mut first_read));
                    gather(&mut answer.ex, pass, read, frames.as_mut(), how, &mut out).await
                }
                Next::ClientGone => {
                    ctx.client_gone = true;
                    log::info!(
                        "{}: client went away mid-stream; dropping the upstream request",
                        ctx.request_id
                    );
                    // The upstream request is dropped with the answer.
                    return Ok(StreamEnd::ClientGone);
                }
                Next::Shutdown => {
                    let e = GatewayError::new(
                    ErrorKind::Unavailable,
                    "the gateway is shutting down and its grace period ended before the stream did",
                );
                    pass.fail(&crate::protocol::error_body(family, &e), &mut out);
                    Some(StreamEnd::Shutdown(e))
                }
            };
            chunks.frame(&mut out);
            let data = (!out.is_empty()).then(|| {
                if ctx.outcome.ttft.is_none() {
                    ctx.outcome.ttft = Some(ctx.started.elapsed());
                }
                // Handed over with its buffer (no copy): between reads an open
                // stream holds no output buffer; the next read takes a new one.
                Bytes::from(std::mem::take(&mut out))
            });
            // The client's stream ends in the same write as its last bytes,
            // unless a continuation is to go on with it.
            let closes = end
                .as_ref()
                .is_some_and(|e| !matches!(e, StreamEnd::Cut(..)));
            let head = if std::mem::take(&mut head_due) {
                Some(head(session, ctx, framing)?)
            } else {
                None
            };
            if head.is_some() || data.is_some() || closes {
                write(session, head, data, closes, deadline).await?;
            }
            if let Some(end) = end {
                break end;
            }
            // The stream waits for its upstream: what it keeps for a
            // continuation is compacted now, not frame by frame as it came.
            pass.settle();
        };
        if matches!(end, StreamEnd::Complete) {
            // Closed instead when its body was not read to the end.
            gw.upstream.release(answer.ex);
        }
        Ok(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::passthrough::Framing;

    #[test]
    fn a_burst_in_two_reads_is_batched_without_growing() {
        let frame = |i: usize| {
            format!("data: {{\"id\":\"c\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i}\"}}}}]}}\n\n")
        };
        let burst: String = (0..300).map(frame).collect();
        let (first, second) = burst.as_bytes().split_at(burst.len() * 4 / 5);
        let mut pass = ClientStream::new(
            Family::OpenAi,
            Family::OpenAi,
            Framing::Sse,
            "m",
            false,
            1 << 20,
        );
        pass.record();
        let mut out = Vec::new();
        let how = (Family::OpenAi, true);
        // The first read filled its room: the second's bytes are expected.
        let read = Ok(Some(Bytes::copy_from_slice(first)));
        assert!(translate(&mut pass, read, None, how, (&mut out, second.len())).is_none());
        let at = out.as_ptr();
        let read = Ok(Some(Bytes::copy_from_slice(second)));
        assert!(translate(&mut pass, read, None, how, (&mut out, 0)).is_none());
        assert_eq!(out.as_ptr(), at, "the batch grew between the reads");
        assert_eq!(out, burst.as_bytes());
    }
}
