//! The HTTP/1.1 client codec of upstream calls, without I/O: the request head
//! written straight into the bytes that go on the wire, the response head
//! parsed with `httparse`, and the body's framing (content-length, chunked,
//! until close) decoded incrementally into slices of the read buffer, so a
//! body chunk reaches the translator without a copy.

use bytes::{Buf, Bytes, BytesMut};

use crate::util::h1_body::{content_length, last_coding_is_chunked, BadLength};
pub use crate::util::h1_body::{Body, Chunk, WireError};

/// The largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// Headers parsed in one response head, at most.
const MAX_HEADERS: usize = 128;

/// A request head being written: the request line, then the headers; the
/// blank line and the body follow in [`RequestHead::finish`].
pub struct RequestHead {
    buf: Vec<u8>,
}

/// Whether `v` may stand in a header value (no control bytes but tab).
/// Every byte is looked at (no early end), which the compiler turns into
/// a loop over many bytes a step.
fn valid_value(v: &[u8]) -> bool {
    v.iter()
        .fold(true, |ok, &b| ok & (b == b'\t' || (b >= 0x20 && b != 0x7f)))
}

/// The bytes of an HTTP token (RFC 9110 section 5.6.2), by value.
static TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'..=b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
            );
        b += 1;
    }
    t
};

/// Whether `n` is an HTTP token (a header name).
fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().fold(true, |ok, &b| ok & TOKEN[usize::from(b)])
}

impl RequestHead {
    /// A `POST` of `path`; `capacity` is what the whole message will take
    /// (head and, when it goes in the same write, the body).
    pub fn post(path: &str, capacity: usize) -> Result<RequestHead, WireError> {
        RequestHead::request("POST", path, capacity)
    }

    /// A `GET` of `path` (the metadata server's token).
    pub fn get(path: &str) -> Result<RequestHead, WireError> {
        RequestHead::request("GET", path, 256)
    }

    /// A `PUT` of `path` with no body (IMDSv2's session token).
    pub fn put(path: &str) -> Result<RequestHead, WireError> {
        RequestHead::request("PUT", path, 256)
    }

    fn request(method: &str, path: &str, capacity: usize) -> Result<RequestHead, WireError> {
        if path.is_empty() || !path.bytes().all(|b| b > 0x20 && b != 0x7f) {
            return Err(WireError("the upstream path has a space or a control byte"));
        }
        let mut buf = Vec::with_capacity(capacity.max(256));
        buf.extend_from_slice(method.as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(path.as_bytes());
        buf.extend_from_slice(b" HTTP/1.1\r\n");
        Ok(RequestHead { buf })
    }

    /// Adds `name: value`; a value with a line break or another control
    /// byte is refused (it would split the request).
    pub fn header(&mut self, name: &str, value: &str) -> Result<(), WireError> {
        if !valid_name(name.as_bytes()) {
            return Err(WireError("a header name is not a token"));
        }
        if !valid_value(value.as_bytes()) {
            return Err(WireError("a header value has a control byte"));
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Ends the head with `content-length` and the blank line, and appends
    /// `body` when `with_body`: the bytes of one write.
    pub fn finish(mut self, body: &[u8], with_body: bool) -> Vec<u8> {
        self.buf.extend_from_slice(b"content-length: ");
        let mut digits = itoa::Buffer::new();
        self.buf
            .extend_from_slice(digits.format(body.len()).as_bytes());
        self.buf.extend_from_slice(b"\r\n\r\n");
        if with_body {
            self.buf.extend_from_slice(body);
        }
        self.buf
    }
}

/// A parsed response head: its status and headers, over the head's own bytes.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    pub status: u16,
    /// HTTP/1.1 (keep-alive by default) rather than HTTP/1.0.
    pub http11: bool,
    raw: Bytes,
    /// (name start, name end, value start, value end) in `raw`.
    headers: Vec<[u32; 4]>,
}

impl ResponseHead {
    /// Moves the head's bytes into an allocation of their own: the head
    /// is read into the connection's read buffer and keeps all of it
    /// alive while it shares it (a trickling stream that shrinks its
    /// buffer calls this, so the first buffer is freed).
    pub fn detach(&mut self) {
        self.raw = Bytes::copy_from_slice(&self.raw);
    }

    /// The first value of header `name` (any case), as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// Every `name: value` pair, in order.
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.headers.iter().map(|h| {
            (
                &self.raw[h[0] as usize..h[1] as usize],
                &self.raw[h[2] as usize..h[3] as usize],
            )
        })
    }

    /// Whether `name` lists `token` (comma-separated, any case).
    fn lists(&self, name: &str, token: &str) -> bool {
        self.headers().any(|(n, v)| {
            n.eq_ignore_ascii_case(name.as_bytes())
                && v.split(|&b| b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
        })
    }

    /// Whether the connection may carry another request after this answer.
    pub fn keep_alive(&self) -> bool {
        if self.lists("connection", "close") {
            return false;
        }
        self.http11 || self.lists("connection", "keep-alive")
    }

    /// Whether header `name` is present.
    fn has(&self, name: &str) -> bool {
        self.headers()
            .any(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
    }

    /// Whether the connection may carry another request once this answer's
    /// body has been read to its end: keep-alive, and no framing anomaly
    /// that leaves where the answer ends in doubt. Content-length together
    /// with transfer-encoding is read as chunked and then closed (RFC 9112,
    /// section 6.3, item 3); framing headers on a 204 or 304, which carry no
    /// body, mean the upstream may send one anyway.
    pub fn reusable(&self) -> bool {
        let te = self.has("transfer-encoding");
        let cl = self.has("content-length");
        let bodiless = self.status == 204 || self.status == 304;
        self.keep_alive() && !(te && cl) && !(bodiless && (te || cl))
    }

    /// How this answer's body is framed (RFC 9112, section 6.3).
    pub fn body(&self) -> Result<Body, WireError> {
        if self.status == 101 {
            // Nothing the gateway sends asks to switch protocols; what
            // follows on the connection is not HTTP/1.1.
            return Err(WireError("the upstream switched protocols (101) unasked"));
        }
        if (100..200).contains(&self.status) || self.status == 204 || self.status == 304 {
            return Ok(Body::Done);
        }
        let te = self
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case(b"transfer-encoding"))
            .map(|(_, v)| v)
            .last();
        if let Some(te) = te {
            return if last_coding_is_chunked(te) {
                Ok(Body::Chunked(Chunk::Size))
            } else {
                Ok(Body::UntilClose)
            };
        }
        let mut length: Option<u64> = None;
        for (n, v) in self.headers() {
            if !n.eq_ignore_ascii_case(b"content-length") {
                continue;
            }
            length = Some(content_length(v, length).map_err(|e| match e {
                BadLength::Invalid => WireError("the upstream sent an invalid content-length"),
                BadLength::Conflicting => {
                    WireError("the upstream sent conflicting content-lengths")
                }
            })?);
        }
        Ok(match length {
            Some(0) => Body::Done,
            Some(n) => Body::Length(n),
            None => Body::UntilClose,
        })
    }
}

/// A response head found at the start of a buffer.
struct Parsed {
    status: u16,
    http11: bool,
    /// The head's length in bytes, blank line included.
    len: usize,
    headers: Vec<[u32; 4]>,
}

/// Parses a response head at the start of `buf`: `None` while incomplete.
fn parse_response(buf: &[u8]) -> Result<Option<Parsed>, WireError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut slots);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > MAX_HEAD {
                Err(WireError("the upstream's response head is too large"))
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(WireError(
                "the upstream's response head has too many headers",
            ))
        }
        Err(_) => return Err(WireError("the upstream sent an invalid response head")),
    };
    let base = buf.as_ptr() as usize;
    let at = |s: &[u8]| (s.as_ptr() as usize - base) as u32;
    let headers = resp
        .headers
        .iter()
        .map(|h| {
            let (n, v) = (h.name.as_bytes(), h.value);
            [at(n), at(n) + n.len() as u32, at(v), at(v) + v.len() as u32]
        })
        .collect();
    Ok(Some(Parsed {
        status: resp.code.unwrap_or(0),
        http11: resp.version == Some(1),
        len,
        headers,
    }))
}

/// Takes a complete response head off the front of `buf`, skipping interim
/// (1xx) answers; `None` while the head is incomplete.
pub fn take_response_head(buf: &mut BytesMut) -> Result<Option<ResponseHead>, WireError> {
    loop {
        let Some(Parsed {
            status,
            http11,
            len,
            headers,
        }) = parse_response(buf)?
        else {
            return Ok(None);
        };
        if (100..200).contains(&status) && status != 101 {
            buf.advance(len);
            continue;
        }
        let raw = buf.split_to(len).freeze();
        return Ok(Some(ResponseHead {
            status,
            http11,
            raw,
            headers,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> (ResponseHead, BytesMut) {
        let mut buf = BytesMut::from(raw.as_bytes());
        let h = take_response_head(&mut buf).unwrap().unwrap();
        (h, buf)
    }

    /// The token table and the value check, byte for byte, against
    /// RFC 9110's definitions written plainly.
    #[test]
    fn names_and_values_are_checked_byte_for_byte() {
        for b in 0..=255u8 {
            let token = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(valid_name(&[b'x', b, b'y']), token, "{b:#x}");
            let value = b == b'\t' || (b >= 0x20 && b != 0x7f);
            assert_eq!(
                valid_value(&[b'v'; 40].iter().copied().chain([b]).collect::<Vec<_>>()),
                value,
                "{b:#x}"
            );
        }
        assert!(!valid_name(b""));
        assert!(valid_value(b""));
    }

    #[test]
    fn a_request_head_is_one_buffer_with_the_body() {
        let mut h = RequestHead::post("/v1/chat/completions", 0).unwrap();
        h.header("host", "api.example.com").unwrap();
        h.header("authorization", "Bearer k").unwrap();
        let wire = h.finish(b"{}", true);
        assert_eq!(
            std::str::from_utf8(&wire).unwrap(),
            "POST /v1/chat/completions HTTP/1.1\r\nhost: api.example.com\r\nauthorization: Bearer k\r\ncontent-length: 2\r\n\r\n{}"
        );
        let h = RequestHead::post("/p", 0).unwrap();
        assert_eq!(
            h.finish(b"abc", false),
            b"POST /p HTTP/1.1\r\ncontent-length: 3\r\n\r\n"
        );
    }

    #[test]
    fn a_detached_head_keeps_its_headers_and_leaves_the_read_buffer() {
        let mut buf = BytesMut::with_capacity(4096);
        buf.extend_from_slice(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: 1\n\n",
        );
        let mut h = take_response_head(&mut buf).unwrap().unwrap();
        // The head is the start of the buffer's allocation, still live.
        let start = h.raw.as_ptr() as usize;
        assert_eq!(buf.as_ptr() as usize, start + h.raw.len());
        let region = start..start + 4096;
        h.detach();
        // Its bytes are elsewhere now: dropping the buffer frees it.
        assert!(!region.contains(&(h.raw.as_ptr() as usize)));
        assert_eq!(h.raw.len(), 52);
        assert_eq!(h.header("Content-Type"), Some("text/event-stream"));
        assert_eq!(&buf[..], b"data: 1\n\n");
    }

    #[test]
    fn header_injection_is_refused() {
        let mut h = RequestHead::post("/p", 0).unwrap();
        assert!(h.header("x-a", "v\r\nx-evil: 1").is_err());
        assert!(h.header("x-a", "v\n").is_err());
        assert!(h.header("x a", "v").is_err());
        assert!(h.header("x-a", "tab\tok").is_ok());
        assert!(RequestHead::post("/p q", 0).is_err());
        assert!(RequestHead::post("/p\r\n", 0).is_err());
    }

    #[test]
    fn response_heads_are_parsed_across_reads_and_interim_answers_skipped() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 2\r\n\r\n{}";
        for cut in 0..raw.len() {
            let mut buf = BytesMut::from(&raw[..cut]);
            if let Some(h) = take_response_head(&mut buf).unwrap() {
                assert_eq!(h.status, 429);
                assert!(cut >= raw.len() - 2);
            }
        }
        let (h, rest) = head(std::str::from_utf8(raw).unwrap());
        assert_eq!(h.status, 429);
        assert_eq!(h.header("retry-after"), Some("7"));
        assert_eq!(h.header("RETRY-AFTER"), Some("7"));
        assert_eq!(h.header("x-none"), None);
        assert_eq!(h.body(), Ok(Body::Length(2)));
        assert_eq!(&rest[..], b"{}");
        assert!(h.keep_alive());
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let (h, _) = head(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n",
        );
        assert_eq!(h.body(), Ok(Body::Chunked(Chunk::Size)));
        let (h, _) = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(h.body(), Ok(Body::UntilClose));
        let (h, _) = head("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(h.body(), Ok(Body::Done));
        let (h, _) = head("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n");
        assert_eq!(h.body(), Ok(Body::Length(5)));
        let (h, _) = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n");
        assert!(h.body().is_err());
        let (h, _) = head("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n");
        assert!(h.body().is_err());
        let (h, _) = head("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.keep_alive());
        assert_eq!(h.body(), Ok(Body::Done));
        let (h, _) = head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.keep_alive());
        let (h, _) = head("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(h.keep_alive());
        // The framing names in any case.
        let (h, _) = head("HTTP/1.1 200 OK\r\nCONNECTION: close\r\ncontent-LENGTH: 3\r\n\r\n");
        assert!(!h.keep_alive());
        assert_eq!(h.body(), Ok(Body::Length(3)));
        let (h, _) =
            head("HTTP/1.1 200 OK\r\nTRANSFER-encoding: chunked\r\nContent-length: 3\r\n\r\n");
        assert_eq!(h.body(), Ok(Body::Chunked(Chunk::Size)));
        assert!(!h.reusable());
        let (h, _) =
            head("HTTP/1.1 204 No Content\r\nX-Content-Length: 5\r\nConnectionX: close\r\n\r\n");
        assert!(h.reusable());
    }

    #[test]
    fn framing_anomalies_make_a_connection_unfit_for_reuse() {
        let (h, _) = head("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n");
        assert!(h.reusable());
        let (h, _) =
            head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(h.body(), Ok(Body::Chunked(Chunk::Size)));
        assert!(!h.reusable());
        let (h, _) = head("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n");
        assert!(!h.reusable());
        let (h, _) = head("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(!h.reusable());
        let (h, _) = head("HTTP/1.1 204 No Content\r\n\r\n");
        assert!(h.reusable());
        let (h, _) = head("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.reusable());
        let (h, _) = head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n");
        assert!(h.body().is_err());
    }

    #[test]
    fn bad_heads_are_errors() {
        let mut buf = BytesMut::from(&b"HTTP/1.1 2x0 OK\r\n\r\n"[..]);
        assert!(take_response_head(&mut buf).is_err());
        let mut big = BytesMut::from(&b"HTTP/1.1 200 OK\r\n"[..]);
        big.extend_from_slice(&vec![b'a'; MAX_HEAD + 1]);
        assert!(take_response_head(&mut big).is_err());
    }
}
