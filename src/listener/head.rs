//! The head of an answer the gateway makes itself (a JSON body, an SSE
//! stream, an error): its status, its framing and a few headers of its own,
//! kept as the HTTP/1 lines they become. HTTP/1 copies it into the
//! connection's write buffer (`Http1::stage_answer`) with no header map
//! built and read back (docs/performance.md "Issue 28, twenty-second
//! pass"); HTTP/2 turns it into Pingora's head ([`AnswerHead::to_pingora`]).

use http::{HeaderName, HeaderValue, StatusCode};
use pingora_core::{Error, ErrorType, OrErr, Result};
use pingora_http::ResponseHeader;

/// An answer's head (see the module doc).
#[derive(Debug, Clone)]
pub struct AnswerHead {
    status: StatusCode,
    content_type: &'static str,
    /// `None`: the body is a stream (chunked on HTTP/1.1, with
    /// `cache-control: no-cache`).
    length: Option<usize>,
    /// The further headers as HTTP/1 lines, `name: value\r\n` each, names
    /// lowercase, values checked ([`AnswerHead::field`]).
    lines: String,
}

impl AnswerHead {
    /// A head with `status`, `content-type` and, for a body of known
    /// `length`, `content-length` (`None`: a stream). `room`: the bytes the
    /// further headers will take, about.
    pub fn new(
        status: u16,
        content_type: &'static str,
        length: Option<usize>,
        room: usize,
    ) -> Result<AnswerHead> {
        let status = StatusCode::from_u16(status)
            .explain_err(ErrorType::InternalError, |_| "invalid response status")?;
        check(content_type)?;
        Ok(AnswerHead {
            status,
            content_type,
            length,
            lines: String::with_capacity(room),
        })
    }

    /// Adds `name: value`. `name` is lowercase and a token (the gateway's
    /// own names); a value with a byte other than visible ASCII, space or
    /// tab is refused, as Pingora's `insert_header` refuses it.
    pub fn field(&mut self, name: &'static str, value: &str) -> Result<()> {
        debug_assert!(HeaderName::from_bytes(name.as_bytes()).is_ok_and(|n| n.as_str() == name));
        check(value)?;
        self.lines.reserve(name.len() + value.len() + 4);
        self.lines.push_str(name);
        self.lines.push_str(": ");
        self.lines.push_str(value);
        self.lines.push_str("\r\n");
        Ok(())
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn length(&self) -> Option<usize> {
        self.length
    }

    /// The further headers, in the order they were added.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.lines
            .split_terminator("\r\n")
            .filter_map(|l| l.split_once(": "))
    }

    /// The HTTP/1 head after the status line, but for `Date` and
    /// `Connection`: the standard names title-cased as Pingora writes them,
    /// a stream's framing as `chunked` says (else none: the body runs to
    /// the connection's close).
    pub(super) fn write_h1_fields(&self, buf: &mut Vec<u8>, chunked: bool) {
        buf.extend_from_slice(b"Content-Type: ");
        buf.extend_from_slice(self.content_type.as_bytes());
        match self.length {
            Some(n) => {
                buf.extend_from_slice(b"\r\nContent-Length: ");
                buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            }
            None => {
                if chunked {
                    buf.extend_from_slice(b"\r\nTransfer-Encoding: chunked");
                }
                buf.extend_from_slice(b"\r\nCache-Control: no-cache");
            }
        }
        buf.extend_from_slice(b"\r\n");
        buf.extend_from_slice(self.lines.as_bytes());
    }

    /// The bytes [`AnswerHead::write_h1_fields`] writes, at most.
    pub(super) fn h1_fields_len(&self) -> usize {
        96 + self.content_type.len() + self.lines.len()
    }

    /// As Pingora's head (HTTP/2, which frames the body itself: no
    /// `transfer-encoding`).
    pub fn to_pingora(&self) -> Result<Box<ResponseHeader>> {
        let count = 3 + self.lines.len() / 24;
        let mut parts: http::response::Parts =
            ResponseHeader::build_no_case(self.status, Some(count))?.into();
        let h = &mut parts.headers;
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        match self.length {
            Some(n) => h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(n)),
            None => h.insert(
                http::header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache"),
            ),
        };
        for (name, value) in self.fields() {
            let name = HeaderName::from_bytes(name.as_bytes())
                .explain_err(ErrorType::InvalidHTTPHeader, |_| "invalid header name")?;
            let value = HeaderValue::from_str(value)
                .explain_err(ErrorType::InvalidHTTPHeader, |_| {
                    "invalid value while insert"
                })?;
            h.append(name, value);
        }
        Ok(Box::new(parts.into()))
    }
}

/// Visible ASCII, space and tab only (what `HeaderValue::from_str` takes).
fn check(value: &str) -> Result<()> {
    let ok = value
        .bytes()
        .fold(true, |ok, b| ok & (b == b'\t' || (0x20..0x7f).contains(&b)));
    if ok {
        Ok(())
    } else {
        Error::e_explain(ErrorType::InvalidHTTPHeader, "invalid value while insert")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn h1(h: &AnswerHead, chunked: bool) -> String {
        let mut buf = Vec::new();
        h.write_h1_fields(&mut buf, chunked);
        assert!(buf.len() <= h.h1_fields_len());
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn a_json_head_has_its_length_and_fields_in_order() {
        let mut h = AnswerHead::new(200, "application/json", Some(1234), 64).unwrap();
        h.field("x-request-id", "req_1").unwrap();
        h.field("x-switchboard-model", "openai/gpt-5").unwrap();
        assert_eq!(
            h1(&h, false),
            "Content-Type: application/json\r\nContent-Length: 1234\r\n\
             x-request-id: req_1\r\nx-switchboard-model: openai/gpt-5\r\n"
        );
        assert_eq!(
            h.fields().collect::<Vec<_>>(),
            [
                ("x-request-id", "req_1"),
                ("x-switchboard-model", "openai/gpt-5")
            ]
        );
    }

    #[test]
    fn a_stream_head_is_chunked_on_http11_and_not_cached() {
        let mut h = AnswerHead::new(200, "text/event-stream", None, 0).unwrap();
        h.field("x-request-id", "r").unwrap();
        assert_eq!(
            h1(&h, true),
            "Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\
             Cache-Control: no-cache\r\nx-request-id: r\r\n"
        );
        // HTTP/1.0: until the connection closes.
        assert!(!h1(&h, false).contains("Transfer-Encoding"));
    }

    #[test]
    fn values_that_would_split_the_head_are_refused() {
        let mut h = AnswerHead::new(200, "application/json", Some(2), 0).unwrap();
        for bad in ["a\r\nx-evil: 1", "a\nb", "\u{7f}", "é"] {
            assert!(h.field("x-request-id", bad).is_err(), "{bad:?}");
        }
        h.field("x-request-id", "tab\tand space ok").unwrap();
        assert!(AnswerHead::new(1000, "application/json", None, 0).is_err());
    }

    #[test]
    fn the_http2_head_carries_the_same_headers_without_chunking() {
        let mut h = AnswerHead::new(429, "application/json", Some(7), 0).unwrap();
        h.field("x-request-id", "req_2").unwrap();
        h.field("retry-after", "3").unwrap();
        let p = h.to_pingora().unwrap();
        assert_eq!(p.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(p.headers["content-type"], "application/json");
        assert_eq!(p.headers["content-length"], "7");
        assert_eq!(p.headers["x-request-id"], "req_2");
        assert_eq!(p.headers["retry-after"], "3");
        let s = AnswerHead::new(200, "text/event-stream", None, 0)
            .unwrap()
            .to_pingora()
            .unwrap();
        assert!(s.headers.get("transfer-encoding").is_none());
        assert_eq!(s.headers["cache-control"], "no-cache");
    }
}
