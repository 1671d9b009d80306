//! One request on a client connection, as the applications see it: HTTP/1.x
//! on this listener's own session (`h1.rs`), HTTP/2 on Pingora's (one
//! stream of its connection). The methods are the ones the gateway and the
//! admin API use, named as Pingora names them.

use super::batch::Batched;
use super::h1::Http1;
use super::head::AnswerHead;
use bytes::Bytes;
use pingora_core::protocols::http::ServerSession;
use pingora_core::Result;
use pingora_http::{RequestHeader, ResponseHeader};
use std::time::Duration;

/// A request and its answer (see the module doc).
pub enum Session {
    H1(Box<Http1>),
    /// Boxed: Pingora's session is 680 bytes, and every future that holds
    /// a request (a stream's for its whole life) would hold that room.
    H2(Box<ServerSession>),
}

impl Session {
    /// Reads the request head (HTTP/2: read already): false when the client
    /// closed the connection before sending one.
    pub async fn read_request(&mut self) -> Result<bool> {
        match self {
            Session::H1(s) => s.read_request().await,
            Session::H2(s) => s.read_request().await,
        }
    }

    pub fn req_header(&self) -> &RequestHeader {
        match self {
            Session::H1(s) => s.req_header(),
            Session::H2(s) => s.req_header(),
        }
    }

    pub fn is_http2(&self) -> bool {
        matches!(self, Session::H2(_))
    }

    /// HTTP/1: `None` closes the connection after this answer; `Some` keeps
    /// it if the client allows. Nothing on HTTP/2.
    pub fn set_keepalive(&mut self, keep: Option<u64>) {
        match self {
            Session::H1(s) => s.set_keepalive(keep),
            Session::H2(s) => s.set_keepalive(keep),
        }
    }

    pub fn set_read_timeout(&mut self, t: Option<Duration>) {
        match self {
            Session::H1(s) => s.set_read_timeout(t),
            Session::H2(s) => s.set_read_timeout(t),
        }
    }

    pub fn set_write_timeout(&mut self, t: Option<Duration>) {
        match self {
            Session::H1(s) => s.set_write_timeout(t),
            Session::H2(s) => s.set_write_timeout(t),
        }
    }

    pub fn set_total_drain_timeout(&mut self, t: Option<Duration>) {
        match self {
            Session::H1(s) => s.set_total_drain_timeout(t),
            Session::H2(s) => s.set_total_drain_timeout(t),
        }
    }

    /// The next piece of the request body; `None` once it is complete.
    pub async fn read_request_body(&mut self) -> Result<Option<Bytes>> {
        match self {
            Session::H1(s) => s.read_request_body().await,
            Session::H2(s) => s.read_request_body().await,
        }
    }

    /// The body when one is expected, else a wait that ends in an error
    /// when the client goes away.
    pub async fn read_body_or_idle(&mut self, no_body_expected: bool) -> Result<Option<Bytes>> {
        match self {
            Session::H1(s) => s.read_body_or_idle(no_body_expected).await,
            Session::H2(s) => s.read_body_or_idle(no_body_expected).await,
        }
    }

    pub async fn write_continue_response(&mut self) -> Result<()> {
        match self {
            Session::H1(s) => s.write_continue_response().await,
            Session::H2(s) => s.write_continue_response().await,
        }
    }

    /// The answer's head (when given), then `data`, then the body's end
    /// when `end`: on HTTP/1 in one send, on HTTP/2 the data and the end in
    /// one DATA frame.
    pub async fn write_response(
        &mut self,
        head: Option<Box<ResponseHeader>>,
        data: Option<Bytes>,
        end: bool,
    ) -> Result<()> {
        match self {
            Session::H1(s) => s.write_response(head, data, end).await,
            Session::H2(s) => {
                if let Some(h) = head {
                    s.write_response_header(h).await?;
                }
                if data.is_some() || end {
                    s.write_response_body(data.unwrap_or_default(), end).await?;
                }
                Ok(())
            }
        }
    }

    /// As [`Session::write_response`], with the gateway's own head: on
    /// HTTP/1 its bytes go into the write buffer as they are, on HTTP/2 it
    /// becomes Pingora's head.
    pub async fn write_answer(
        &mut self,
        head: &AnswerHead,
        data: Option<Bytes>,
        end: bool,
    ) -> Result<()> {
        match self {
            Session::H1(s) => {
                s.stage_answer(head)?;
                s.write_response(None, data, end).await
            }
            Session::H2(s) => {
                s.write_response_header(head.to_pingora()?).await?;
                if data.is_some() || end {
                    s.write_response_body(data.unwrap_or_default(), end).await?;
                }
                Ok(())
            }
        }
    }

    /// HTTP/1: the connection's write buffer is given back once the next
    /// write has sent it (`Batched::shed_next`). Nothing on HTTP/2, whose
    /// codec keeps its own.
    pub fn shed_after_write(&mut self) {
        if let Session::H1(s) = self {
            s.shed_after_write();
        }
    }

    /// A bare error answer; the connection is not reused.
    pub async fn respond_error(&mut self, code: u16) -> Result<()> {
        match self {
            Session::H1(s) => s.respond_error(code).await,
            Session::H2(s) => s.respond_error(code).await,
        }
    }

    /// Gives the request up: HTTP/1 closes the connection, HTTP/2 resets
    /// the stream.
    pub async fn shutdown(&mut self) {
        match self {
            Session::H1(s) => s.shutdown().await,
            Session::H2(s) => s.shutdown().await,
        }
    }

    /// The request is answered: the HTTP/1 connection back for the next
    /// request when it is to be kept (see [`Http1::finish`]); HTTP/2 ends
    /// its stream.
    pub async fn finish(self) -> Result<Option<Box<Batched>>> {
        match self {
            Session::H1(s) => s.finish().await,
            // Boxed: Pingora's HTTP/2 `finish` (about 2.8 KB more than
            // HTTP/1's) would size every request's `finish`, which the
            // caller boxes: an HTTP/1 request would copy it whole.
            Session::H2(s) => Box::pin(s.finish()).await.map(|_| None),
        }
    }
}
