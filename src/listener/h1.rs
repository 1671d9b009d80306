//! One HTTP/1.x request on a client connection, read and answered: the
//! head parsed with `httparse` into the `RequestHeader` the application
//! reads, the body decoded off the connection's read buffer
//! (`util::h1_body`), and the answer written into the connection's write
//! buffer ([`Batched`]) and sent once per call.
//!
//! Pingora's HTTP/1 server session did this before, and was the largest
//! fixed cost of a request (docs/performance.md "Issue 28, eighteenth
//! pass"): it records each header name's case beside the header map
//! (`RequestHeader::build`, `append_header_value`: a second map insert a
//! header), serializes a response head into a fresh 4 KiB buffer, flushes
//! after a chunked head, after every chunk and after the terminator (held
//! by `Batched` until this session), and wraps each read and write in its
//! own timer. This one keeps Pingora's wire behaviour where a client can
//! see it:
//!
//! - the same limits on a head (1 MiB, 256 headers) and the same refusals
//!   (RFC 9112): a `Transfer-Encoding` on HTTP/1.0 or one whose last coding
//!   is not `chunked`, and a `Content-Length` that is not digits or differs
//!   from another, are `400`; with both `Transfer-Encoding` and
//!   `Content-Length` the length is dropped and the connection closed after
//!   the answer;
//! - keep-alive as the client asks (HTTP/1.1 unless `Connection: close`,
//!   HTTP/1.0 only with `Connection: keep-alive`), and the `Date` and
//!   `Connection` headers on every final answer;
//! - the answer framed by its head: `Transfer-Encoding: chunked`, else its
//!   `Content-Length`, else until close; none for `HEAD`, `204` and `304`;
//! - a request's remaining body drained (within the drain timeout, up to
//!   1 MiB: a longer one closes the connection) before the connection is
//!   reused, and a pipelined request's bytes kept for it.

use super::batch::Batched;
use super::head::AnswerHead;
use crate::util::h1_body::{self, last_coding_is_chunked, BadLength, Body, Chunk};
use bytes::{Bytes, BytesMut};
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version};
use pingora_core::protocols::http::date::get_cached_date;
use pingora_core::{Error, ErrorType, OrErr, Result};
use pingora_http::{RequestHeader, ResponseHeader};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The largest request head accepted (Pingora's `MAX_HEADER_SIZE`).
const MAX_HEAD: usize = 1_048_575;
/// Headers in one request head, at most (Pingora's `MAX_HEADERS`).
const MAX_HEADERS: usize = 256;
/// A body read takes up to this much at once.
const BODY_READ: usize = 64 * 1024;
/// A head read's room when the buffer is empty.
const HEAD_READ: usize = 4 * 1024;
/// The most of a request body left unread (an answer before it, such as a
/// `401`) that is read and dropped to keep the connection; past it the
/// connection is closed (nginx's lingering close bounds the same).
const MAX_DRAIN: usize = 1024 * 1024;
/// Body data from this size on is written from where it is, beside what
/// the buffer holds (`Batched::write_through`), not copied into it: a
/// stream's burst of frames (15 kB on S2) was copied, into a buffer grown
/// for it and freed after the send.
const WRITE_THROUGH: usize = 4 * 1024;

/// How the answer's body is framed, and how far it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    /// No final head written yet.
    Unstarted,
    /// This many bytes still due.
    Length(u64),
    Chunked,
    /// Until the connection closes.
    UntilClose,
    /// Complete (a chunked body's terminator written, a length reached).
    Done,
}

/// One HTTP/1.x request and its answer (see the module doc).
pub struct Http1 {
    conn: Box<Batched>,
    /// What was read and not yet taken: the head until it is parsed, then
    /// body bytes, then a pipelined request's start.
    buf: BytesMut,
    req: Option<Box<RequestHeader>>,
    body: Body,
    /// The client allows keep-alive (its version and `Connection`).
    client_keeps: bool,
    /// The server's wish ([`Http1::set_keepalive`]); off once a framing
    /// anomaly or a close-delimited answer rules reuse out.
    server_keeps: bool,
    out: Out,
    continue_sent: bool,
    /// The client closed its side (seen while waiting for it).
    half_closed: bool,
    /// A read while the body was done brought the next request's start.
    next_stashed: bool,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    drain_timeout: Option<Duration>,
}

impl Http1 {
    /// A request on `conn`, starting with the bytes read ahead on it.
    pub fn new(mut conn: Box<Batched>) -> Http1 {
        let buf = conn.take_ahead();
        Http1 {
            conn,
            buf,
            req: None,
            body: Body::Done,
            client_keeps: false,
            server_keeps: true,
            out: Out::Unstarted,
            continue_sent: false,
            half_closed: false,
            next_stashed: false,
            read_timeout: None,
            write_timeout: None,
            drain_timeout: None,
        }
    }

    /// Reads and parses the request head: true when there is one, false
    /// when the client closed the connection before sending a byte of it.
    /// A head that is no HTTP, too large, or framed ambiguously is an
    /// `InvalidHTTPHeader` error (answered `400` by the caller).
    pub async fn read_request(&mut self) -> Result<bool> {
        // Bytes already looked through for a head's end (a trickled head
        // is parsed again only when its end may have come, not per read).
        let mut scanned = 0;
        loop {
            if !self.buf.is_empty() && worth_parsing(&self.buf, scanned) {
                if let Some(parsed) = parse_head(&self.buf)? {
                    let head = self.buf.split_to(parsed.len).freeze();
                    self.take_head(&head, &parsed)?;
                    return Ok(true);
                }
            }
            if self.buf.len() > MAX_HEAD {
                return Error::e_explain(
                    ErrorType::InvalidHTTPHeader,
                    format!("request head larger than {MAX_HEAD}"),
                );
            }
            scanned = self.buf.len();
            self.buf.reserve(HEAD_READ);
            let n = self
                .conn
                .read_buf(&mut self.buf)
                .await
                .or_err(ErrorType::ReadError, "while reading the request head")?;
            if n == 0 {
                if self.buf.is_empty() {
                    return Ok(false);
                }
                return Error::e_explain(
                    ErrorType::ConnectionClosed,
                    "the client closed the connection within a request head",
                );
            }
        }
    }

    /// Builds the request header from a parsed head (its values are
    /// slices of `head`, not copies) and judges its framing.
    fn take_head(&mut self, head: &Bytes, parsed: &Parsed) -> Result<()> {
        let at = |[a, b]: [u32; 2]| &head[a as usize..b as usize];
        let method = std::str::from_utf8(at(parsed.method)).unwrap_or("");
        let version = if parsed.minor == 0 {
            Version::HTTP_10
        } else {
            Version::HTTP_11
        };
        let mut headers = HeaderMap::with_capacity(parsed.headers.len());
        let mut te: Option<&[u8]> = None;
        let mut length: Option<u64> = None;
        let mut keep_alive = None;
        for &[n0, n1, v0, v1] in &parsed.headers {
            let (name, value) = (at([n0, n1]), at([v0, v1]));
            let name = HeaderName::from_bytes(name)
                .or_err(ErrorType::InvalidHTTPHeader, "invalid header name")?;
            if name == header::TRANSFER_ENCODING {
                te = Some(value);
            } else if name == header::CONTENT_LENGTH {
                length = Some(content_length(value, length)?);
            } else if name == header::CONNECTION {
                // `close` in any of them wins, as within one.
                if let Some(k) = connection_keeps(value) {
                    keep_alive = Some(keep_alive != Some(false) && k);
                }
            }
            let value = HeaderValue::from_maybe_shared(head.slice(v0 as usize..v1 as usize))
                .or_err(ErrorType::InvalidHTTPHeader, "invalid header value")?;
            headers
                .try_append(name, value)
                .or_err(ErrorType::InvalidHTTPHeader, "too many headers")?;
        }
        self.client_keeps = keep_alive.unwrap_or(version == Version::HTTP_11);
        self.body = match (te, length) {
            (Some(te), _) => {
                if version == Version::HTTP_10 {
                    return Error::e_explain(
                        ErrorType::InvalidHTTPHeader,
                        "HTTP/1.0 requests cannot include Transfer-Encoding",
                    );
                }
                if !last_coding_is_chunked(te) {
                    return Error::e_explain(
                        ErrorType::InvalidHTTPHeader,
                        "non-chunked final Transfer-Encoding",
                    );
                }
                if length.is_some() {
                    // RFC 9112 6.3: the length is ignored, and the
                    // connection is not reused.
                    headers.remove(header::CONTENT_LENGTH);
                    self.server_keeps = false;
                }
                Body::Chunked(Chunk::Size)
            }
            (None, Some(0) | None) => Body::Done,
            (None, Some(n)) => Body::Length(n),
        };
        // The headers set as one map (Pingora's `append_header` parses each
        // name again from its bytes, about 900 instructions a header). An
        // origin-form target of plain ASCII, nearly every request's, is the
        // URI as it is, over the head's bytes; any other goes through
        // Pingora's builder (a fragment dropped, a target not UTF-8 kept
        // for the wire beside its lossy text).
        let mut parts: http::request::Parts = match origin_form(head, parsed.path) {
            Some(uri) => {
                let mut parts = http::Request::new(()).into_parts().0;
                parts.method = Method::from_bytes(method.as_bytes())
                    .or_err(ErrorType::InvalidHTTPHeader, "invalid method")?;
                parts.uri = uri;
                parts
            }
            None => RequestHeader::build_no_case(method, at(parsed.path), Some(0))?.into(),
        };
        parts.version = version;
        parts.headers = headers;
        self.req = Some(Box::new(parts.into()));
        Ok(())
    }

    /// The request head; an empty `GET /` before [`Http1::read_request`]
    /// succeeded (Pingora's session panics there).
    pub fn req_header(&self) -> &RequestHeader {
        static NONE: std::sync::LazyLock<RequestHeader> =
            std::sync::LazyLock::new(|| http::Request::new(()).into_parts().0.into());
        self.req.as_deref().unwrap_or(&NONE)
    }

    /// `None`: the connection is closed after this answer. `Some`: it is
    /// kept if the client allows it.
    pub fn set_keepalive(&mut self, keep: Option<u64>) {
        self.server_keeps = keep.is_some();
    }

    /// Whether the connection will be kept after this answer.
    fn keeps(&self) -> bool {
        self.server_keeps && self.client_keeps
    }

    pub fn set_read_timeout(&mut self, t: Option<Duration>) {
        self.read_timeout = t;
    }

    pub fn set_write_timeout(&mut self, t: Option<Duration>) {
        self.write_timeout = t;
    }

    pub fn set_total_drain_timeout(&mut self, t: Option<Duration>) {
        self.drain_timeout = t;
    }

    /// The next piece of the request body; `None` once it is complete.
    pub async fn read_request_body(&mut self) -> Result<Option<Bytes>> {
        loop {
            match self.body.decode(&mut self.buf) {
                Ok(Some(data)) => return Ok(Some(data)),
                Ok(None) if self.body.is_done() => return Ok(None),
                Ok(None) => {}
                Err(e) => {
                    self.server_keeps = false;
                    return Error::e_explain(ErrorType::InvalidHTTPHeader, e.0);
                }
            }
            let room = match self.body {
                Body::Length(n) => (n as usize).clamp(1, BODY_READ),
                _ => BODY_READ / 4,
            };
            self.buf.reserve(room);
            let what = "while reading the request body";
            let n = within(self.read_timeout, ErrorType::ReadTimedout, what, async {
                let n = self.conn.read_buf(&mut self.buf).await;
                n.or_err(ErrorType::ReadError, what)
            })
            .await?;
            if n == 0 {
                self.server_keeps = false;
                return Error::e_explain(
                    ErrorType::ConnectionClosed,
                    "the client closed the connection within the request body",
                );
            }
        }
    }

    /// The request body when there is one to read, else a wait on the
    /// connection: the client closing it is a `ConnectionClosed` error;
    /// bytes from it (a pipelined request) are kept for the next request
    /// and the wait goes on for ever.
    pub async fn read_body_or_idle(&mut self, no_body_expected: bool) -> Result<Option<Bytes>> {
        if !no_body_expected && !self.body.is_done() {
            return self.read_request_body().await;
        }
        if self.half_closed || self.next_stashed {
            if self.half_closed {
                return Error::e_explain(ErrorType::ConnectionClosed, "the client left");
            }
            return std::future::pending().await;
        }
        self.buf.reserve(1);
        let n = self
            .conn
            .read_buf(&mut self.buf)
            .await
            .or_err(ErrorType::ReadError, "while waiting on the client")?;
        if n == 0 {
            self.half_closed = true;
            self.server_keeps = false;
            return Error::e_explain(
                ErrorType::ConnectionClosed,
                if self.out == Out::Unstarted {
                    "the client left before the answer's head"
                } else {
                    "the client left before the answer's end"
                },
            );
        }
        self.next_stashed = true;
        std::future::pending().await
    }

    /// `100 Continue`, before the body is read, once.
    pub async fn write_continue_response(&mut self) -> Result<()> {
        if self.out != Out::Unstarted || self.continue_sent {
            return Ok(());
        }
        self.continue_sent = true;
        self.conn.stage(b"HTTP/1.1 100 Continue\r\n\r\n");
        self.flush().await
    }

    /// Writes the answer's head (when given), then `data`, then the body's
    /// end when `end`, and sends them together.
    pub async fn write_response(
        &mut self,
        head: Option<Box<ResponseHeader>>,
        data: Option<Bytes>,
        end: bool,
    ) -> Result<()> {
        if let Some(h) = head {
            self.stage_head(h)?;
        }
        let big = match data {
            Some(d) if !d.is_empty() => self.stage_data(d)?,
            _ => None,
        };
        if let Some(d) = big {
            // After what is staged, with its chunk's CRLF (and the
            // terminator when this is the end) in the same vectored write:
            // the data is not copied into the buffer.
            let chunked = self.out == Out::Chunked;
            let suffix: &[u8] = match (chunked, end) {
                (true, true) => b"\r\n0\r\n\r\n",
                (true, false) => b"\r\n",
                (false, _) => b"",
            };
            if chunked && end {
                self.out = Out::Done;
            }
            let what = "while writing the response body";
            within(self.write_timeout, ErrorType::WriteError, what, async {
                let w = self.conn.write_through(&d, suffix).await;
                w.or_err(ErrorType::WriteError, what)
            })
            .await?;
        }
        if end {
            self.stage_end();
        }
        self.flush().await
    }

    /// Puts the final head in the write buffer and sets the body's framing.
    fn stage_head(&mut self, h: Box<ResponseHeader>) -> Result<()> {
        if self.out != Out::Unstarted {
            log::warn!("a response head was already sent; not sending another");
            return Ok(());
        }
        let status = h.status;
        let chunked = h
            .headers
            .get(header::TRANSFER_ENCODING)
            .is_some_and(|v| last_coding_is_chunked(v.as_bytes()));
        let length = match h.headers.get(header::CONTENT_LENGTH) {
            Some(v) if !chunked => content_length(v.as_bytes(), None).ok(),
            _ => None,
        };
        self.frame(status, chunked, length);
        // Set in the head's map by their typed names (Pingora's
        // `insert_header` parses each name again from its bytes). No
        // answer here sets its own reason phrase, which the map's parts
        // would not carry.
        let mut parts: http::response::Parts = (*h).into();
        if self.out == Out::UntilClose {
            parts.headers.remove(header::TRANSFER_ENCODING);
        }
        parts.headers.insert(header::DATE, get_cached_date());
        let connection = if self.keeps() { "keep-alive" } else { "close" };
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static(connection));
        let h = ResponseHeader::from(parts);
        let version: &[u8] = if h.version == Version::HTTP_10 {
            b"HTTP/1.0 "
        } else {
            b"HTTP/1.1 "
        };
        let reason = status.canonical_reason().unwrap_or("");
        let room = 32 + reason.len() + h.headers.len() * 48;
        self.conn.stage_with(room, |buf| {
            status_line(buf, version, status, reason);
            h.header_to_h1_wire(buf);
            buf.extend_from_slice(b"\r\n");
        });
        Ok(())
    }

    /// Sets the answer's framing from its status and what its head says
    /// (`chunked`, else a `length`, else none: until close), and whether
    /// the connection outlives it.
    fn frame(&mut self, status: StatusCode, chunked: bool, length: Option<u64>) {
        let head_only = self.req.as_ref().is_some_and(|r| r.method == Method::HEAD);
        self.out = if head_only
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            Out::Done
        } else if chunked {
            if self
                .req
                .as_ref()
                .is_some_and(|r| r.version == Version::HTTP_10)
            {
                // An HTTP/1.0 client reads no chunks: the body runs to the
                // connection's close (RFC 9112 6.1).
                Out::UntilClose
            } else {
                Out::Chunked
            }
        } else {
            match length {
                Some(0) => Out::Done,
                Some(n) => Out::Length(n),
                None => Out::UntilClose,
            }
        };
        if self.out == Out::UntilClose
            || matches!(self.body, Body::Length(n) if n > MAX_DRAIN as u64)
        {
            // A close-delimited answer, or a request body left too long to
            // drain (`finish`): this is the connection's last answer.
            self.server_keeps = false;
        }
    }

    /// Puts the gateway's own final head in the write buffer, its bytes
    /// copied as they are (no header map), and sets the body's framing as
    /// [`Http1::stage_head`] does.
    pub fn stage_answer(&mut self, head: &AnswerHead) -> Result<()> {
        if self.out != Out::Unstarted {
            log::warn!("a response head was already sent; not sending another");
            return Ok(());
        }
        let status = head.status();
        let length = head.length();
        self.frame(status, length.is_none(), length.map(|n| n as u64));
        // A stream's `transfer-encoding` goes but to an HTTP/1.0 client.
        let chunked = length.is_none() && self.out != Out::UntilClose;
        let reason = status.canonical_reason().unwrap_or("");
        let date = get_cached_date();
        let connection: &[u8] = if self.keeps() {
            b"keep-alive"
        } else {
            b"close"
        };
        let room = 64 + reason.len() + head.h1_fields_len() + date.len();
        self.conn.stage_with(room, |buf| {
            status_line(buf, b"HTTP/1.1 ", status, reason);
            head.write_h1_fields(buf, chunked);
            buf.extend_from_slice(b"Date: ");
            buf.extend_from_slice(date.as_bytes());
            buf.extend_from_slice(b"\r\nConnection: ");
            buf.extend_from_slice(connection);
            buf.extend_from_slice(b"\r\n\r\n");
        });
        Ok(())
    }

    /// Puts body data in the write buffer as its framing says; data of
    /// [`WRITE_THROUGH`] bytes or more is given back (its chunk-size line
    /// staged) for the caller to write after the buffer.
    fn stage_data(&mut self, data: Bytes) -> Result<Option<Bytes>> {
        let data = match self.out {
            Out::Unstarted => {
                return Error::e_explain(ErrorType::WriteError, "body before the response head")
            }
            Out::Done => return Ok(None),
            Out::Length(left) => {
                let take = left.min(data.len() as u64);
                if take < data.len() as u64 {
                    log::warn!("response body longer than its content-length; cut");
                }
                self.out = match left - take {
                    0 => Out::Done,
                    n => Out::Length(n),
                };
                data.slice(..take as usize)
            }
            Out::Chunked => {
                let mut line = [0u8; 18];
                let n = chunk_line(data.len(), &mut line);
                self.conn.stage(&line[..n]);
                data
            }
            Out::UntilClose => data,
        };
        if data.len() >= WRITE_THROUGH {
            return Ok(Some(data));
        }
        self.conn.stage(&data);
        if self.out == Out::Chunked {
            self.conn.stage(b"\r\n");
        }
        Ok(None)
    }

    /// Ends the body: a chunked body's terminator.
    fn stage_end(&mut self) {
        match self.out {
            Out::Chunked => {
                self.conn.stage(b"0\r\n\r\n");
                self.out = Out::Done;
            }
            Out::UntilClose => self.out = Out::Done,
            _ => {}
        }
    }

    /// Sends what is staged, within the write timeout.
    async fn flush(&mut self) -> Result<()> {
        let what = "while writing the response";
        within(self.write_timeout, ErrorType::WriteTimedout, what, async {
            self.conn.flush().await.or_err(ErrorType::WriteError, what)
        })
        .await
    }

    /// A bare error answer (`Content-Length: 0`), the connection closed after it.
    pub async fn respond_error(&mut self, code: u16) -> Result<()> {
        self.server_keeps = false;
        if self.out != Out::Unstarted {
            return Ok(());
        }
        let head = pingora_core::protocols::http::error_resp::gen_error_response(code);
        self.write_response(Some(Box::new(head)), None, true).await
    }

    /// Closes the connection (what is staged is sent first).
    pub async fn shutdown(&mut self) {
        let _ = self.conn.shutdown().await;
    }

    /// The request is answered: the connection back for the next request
    /// (the rest of this one's body drained, up to [`MAX_DRAIN`] bytes and
    /// within the drain timeout, a pipelined request's start kept for it),
    /// or `None` when it is not to be reused (then closed).
    pub async fn finish(mut self: Box<Self>) -> Result<Option<Box<Batched>>> {
        if self.out == Out::Chunked {
            self.stage_end();
            self.flush().await?;
        }
        if !self.keeps() || self.out != Out::Done || self.half_closed {
            self.shutdown().await;
            return Ok(None);
        }
        if matches!(self.body, Body::Length(n) if n > MAX_DRAIN as u64) {
            // Not worth reading to keep the connection.
            self.shutdown().await;
            return Ok(None);
        }
        if !self.body.is_done() {
            let limit = self.drain_timeout;
            let drain = async {
                let mut drained = 0;
                while let Some(piece) = self.read_request_body().await? {
                    drained += piece.len();
                    if drained > MAX_DRAIN {
                        return Error::e_explain(
                            ErrorType::InvalidHTTPHeader,
                            "an unread request body too long to drain",
                        );
                    }
                }
                Ok::<(), Box<Error>>(())
            };
            // Boxed: a body left unread is rare, and this read with its
            // timer would size every request's `finish`, which is boxed
            // and copied whole.
            Box::pin(within(
                limit,
                ErrorType::ReadTimedout,
                "draining the request body",
                drain,
            ))
            .await?;
        }
        let Http1 { mut conn, buf, .. } = *self;
        conn.put_ahead(buf);
        Ok(Some(conn))
    }

    /// The connection's write buffer is given back once the next write
    /// has sent it (a stream's relay waits for its upstream between writes).
    pub fn shed_after_write(&mut self) {
        self.conn.shed_next();
    }
}

/// Whether `buf`, looked through up to `scanned` before its last read, is
/// worth parsing: while short (so bytes that are no HTTP are refused at
/// once), or when its new bytes may end the head (a blank line, CRLF or
/// bare LF, which `httparse` both accepts). A head trickled a few bytes a
/// read is not parsed again from its start at each one.
fn worth_parsing(buf: &[u8], scanned: usize) -> bool {
    if buf.len() <= HEAD_READ {
        return true;
    }
    let from = scanned.saturating_sub(3);
    let new = &buf[from..];
    memchr::memmem::find(new, b"\n\n").is_some() || memchr::memmem::find(new, b"\n\r\n").is_some()
}

/// `f`'s result, or a `kind` error (`what`) when `limit` passes first.
async fn within<T>(
    limit: Option<Duration>,
    kind: ErrorType,
    what: &'static str,
    f: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match limit {
        Some(t) => tokio::time::timeout(t, f)
            .await
            .unwrap_or_else(|_| Error::e_explain(kind, what)),
        None => f.await,
    }
}

/// Where a parsed request head's parts are, as offsets into it.
struct Parsed {
    /// The head's length, blank line included.
    len: usize,
    /// HTTP/1.`minor`.
    minor: u8,
    method: [u32; 2],
    path: [u32; 2],
    /// Each header's name and value.
    headers: Vec<[u32; 4]>,
}

/// Parses a request head at the start of `buf`: `None` while incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Parsed>> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => {
            return Error::e_explain(
                ErrorType::InvalidHTTPHeader,
                format!("invalid request head ({e})"),
            )
        }
    };
    let base = buf.as_ptr() as usize;
    let span = |s: &[u8]| {
        let a = (s.as_ptr() as usize - base) as u32;
        [a, a + s.len() as u32]
    };
    let headers = req
        .headers
        .iter()
        .map(|h| {
            let ([n0, n1], [v0, v1]) = (span(h.name.as_bytes()), span(h.value));
            [n0, n1, v0, v1]
        })
        .collect();
    Ok(Some(Parsed {
        len,
        minor: req.version.unwrap_or(1),
        method: span(req.method.unwrap_or("").as_bytes()),
        path: span(req.path.unwrap_or("").as_bytes()),
        headers,
    }))
}

/// `HTTP/1.x 200 OK\r\n`: `version` with its space, the code, the reason.
fn status_line(buf: &mut Vec<u8>, version: &[u8], status: StatusCode, reason: &str) {
    buf.extend_from_slice(version);
    buf.extend_from_slice(status.as_str().as_bytes());
    buf.push(b' ');
    buf.extend_from_slice(reason.as_bytes());
    buf.extend_from_slice(b"\r\n");
}

/// The request target at `at` in `head` as a URI sharing the head's
/// bytes, when it is origin-form (`/path?query`), ASCII and without a
/// fragment: what Pingora's `set_raw_path` makes of such a target, without
/// its copy. None for any other (or one the URI refuses).
fn origin_form(head: &Bytes, [a, b]: [u32; 2]) -> Option<http::Uri> {
    let target = &head[a as usize..b as usize];
    if target.first() != Some(&b'/') || !target.is_ascii() || target.contains(&b'#') {
        return None;
    }
    http::Uri::from_maybe_shared(head.slice(a as usize..b as usize)).ok()
}

/// A `Content-Length` value by the rule both ends share
/// ([`h1_body::content_length`]), refused as Pingora refuses one.
fn content_length(v: &[u8], earlier: Option<u64>) -> Result<u64> {
    h1_body::content_length(v, earlier).or_else(|e| match e {
        BadLength::Invalid => {
            Error::e_explain(ErrorType::InvalidHTTPHeader, "invalid Content-Length")
        }
        BadLength::Conflicting => {
            Error::e_explain(ErrorType::InvalidHTTPHeader, "conflicting Content-Length")
        }
    })
}

/// What a `Connection` value says of keep-alive: `close` wins, then
/// `keep-alive`; `None` when it names neither.
fn connection_keeps(v: &[u8]) -> Option<bool> {
    let mut keep = None;
    for token in v.split(|&b| b == b',') {
        let token = token.trim_ascii();
        if token.eq_ignore_ascii_case(b"close") {
            return Some(false);
        }
        if token.eq_ignore_ascii_case(b"keep-alive") {
            keep = Some(true);
        }
    }
    keep
}

/// A chunk-size line for `len` bytes (`1A3\r\n`) into `out`; its length.
fn chunk_line(len: usize, out: &mut [u8; 18]) -> usize {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let digits = (usize::BITS - len.leading_zeros()).div_ceil(4).max(1) as usize;
    for i in 0..digits {
        out[digits - 1 - i] = HEX[(len >> (4 * i)) & 0xf];
    }
    out[digits] = b'\r';
    out[digits + 1] = b'\n';
    digits + 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_form_targets_are_the_uri_pingora_makes_of_them() {
        for target in [
            "/v1/chat/completions",
            "/",
            "/google/v1beta/models/m:streamGenerateContent?alt=sse",
            "/a%20b?c=%2F&d",
            "/a#fragment",
            "/\u{e9}",
            "*",
            "http://host/x",
            "?q",
        ] {
            let head = Bytes::from(format!("GET {target} HTTP/1.1"));
            let at = [4, 4 + target.len() as u32];
            let ours = origin_form(&head, at);
            let pingora = RequestHeader::build_no_case("GET", target.as_bytes(), None).unwrap();
            match ours {
                Some(uri) => {
                    assert_eq!(uri, pingora.uri, "{target}");
                    assert_eq!(uri.path_and_query().unwrap().as_str(), target);
                }
                None => assert!(
                    target.contains('#') || !target.starts_with('/') || !target.is_ascii(),
                    "{target}"
                ),
            }
        }
        let head = Bytes::from_static(b"GET /a b HTTP/1.1");
        assert!(origin_form(&head, [4, 7]).is_none(), "a space is no target");
    }

    #[test]
    fn chunk_lines_are_uppercase_hex() {
        let mut out = [0u8; 18];
        for len in [0usize, 1, 9, 10, 15, 16, 255, 4096, 0x1A3, usize::MAX] {
            let n = chunk_line(len, &mut out);
            assert_eq!(&out[..n], format!("{len:X}\r\n").as_bytes());
        }
    }

    #[test]
    fn a_long_head_is_parsed_again_only_when_its_end_may_have_come() {
        let short = b"GET / HTTP/1.1\r\nx: y";
        assert!(worth_parsing(short, short.len()));
        let mut long = b"GET / HTTP/1.1\r\n".to_vec();
        long.resize(HEAD_READ + 100, b'a');
        assert!(!worth_parsing(&long, 0));
        for end in [&b"\r\n\r\n"[..], b"\n\n", b"\n\r\n"] {
            // The end split across the last read: found from 3 bytes back.
            let mut l = long.clone();
            l.extend_from_slice(end);
            assert!(worth_parsing(&l, l.len() - 1), "{end:?}");
            assert!(!worth_parsing(&l, l.len() + 3), "{end:?}");
        }
    }

    #[test]
    fn content_length_errors_are_pingoras() {
        assert_eq!(content_length(b"42", Some(42)).unwrap(), 42);
        for (bad, why) in [(&b"4x"[..], "invalid"), (b"42, 43", "conflicting")] {
            let e = content_length(bad, None).unwrap_err();
            assert_eq!(e.etype(), &ErrorType::InvalidHTTPHeader);
            assert!(format!("{e}").contains(why), "{e}");
        }
    }

    #[test]
    fn connection_and_transfer_encoding_tokens() {
        assert_eq!(connection_keeps(b"close"), Some(false));
        assert_eq!(connection_keeps(b"Keep-Alive"), Some(true));
        assert_eq!(connection_keeps(b"keep-alive, Close"), Some(false));
        assert_eq!(connection_keeps(b"upgrade"), None);
        assert!(last_coding_is_chunked(b"gzip, Chunked "));
        assert!(!last_coding_is_chunked(b"chunked, gzip"));
        assert!(!last_coding_is_chunked(b""));
    }
}
