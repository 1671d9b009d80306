//! HTTP/1.1 message bodies, decoded without I/O: content-length, chunked
//! (RFC 9112 section 7.1) and until-close framing, taken incrementally off
//! the front of a read buffer as slices of it (no copy). Both ends use it:
//! the upstream client for responses (`upstream::h1`), the client
//! listener for request bodies (`listener::h1`).

use bytes::{Buf, Bytes, BytesMut};

/// The longest chunk-size line (with extensions) or trailer line.
pub const MAX_CHUNK_LINE: usize = 8 * 1024;

/// What is wrong with a peer's bytes (an upstream's answer, a client's request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub &'static str);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Whether a `Transfer-Encoding` value's last coding is `chunked` (RFC
/// 9112 6.3: then the body is chunked; else a request is refused and an
/// answer read until close).
pub fn last_coding_is_chunked(v: &[u8]) -> bool {
    let last = v.rsplit(|&b| b == b',').next().unwrap_or_default();
    last.trim_ascii().eq_ignore_ascii_case(b"chunked")
}

/// Why a `Content-Length` value is refused ([`content_length`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadLength {
    /// Not digits (or digits past a u64).
    Invalid,
    /// Digits that disagree with another length of the same message.
    Conflicting,
}

/// A `Content-Length` value (RFC 9110 8.6: digits, or a comma-separated
/// list of equal ones) agreeing with `earlier`, an earlier field's length
/// in the same message. Leading zeros are digits like any; a value past
/// u64 is invalid. Both ends read lengths by this one rule.
pub fn content_length(v: &[u8], earlier: Option<u64>) -> Result<u64, BadLength> {
    let mut length = earlier;
    // An empty value is one empty part: invalid.
    for part in v.split(|&b| b == b',') {
        let part = part.trim_ascii();
        if part.is_empty() {
            return Err(BadLength::Invalid);
        }
        let n = part.iter().try_fold(0u64, |n, &d| {
            let digit = d.is_ascii_digit().then(|| u64::from(d - b'0'))?;
            n.checked_mul(10)?.checked_add(digit)
        });
        let n = n.ok_or(BadLength::Invalid)?;
        if length.is_some_and(|l| l != n) {
            return Err(BadLength::Conflicting);
        }
        length = Some(n);
    }
    length.ok_or(BadLength::Invalid)
}

/// Where a chunked body's decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last (zero) chunk: trailer lines until a blank one.
    Trailer,
}

/// A response body's framing and how far it has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// This many bytes left.
    Length(u64),
    Chunked(Chunk),
    /// Until the peer closes the connection.
    UntilClose,
    /// Complete.
    Done,
}

impl Body {
    /// Whether the whole body has been read.
    pub fn is_done(&self) -> bool {
        matches!(self, Body::Done)
    }

    /// Takes the next piece of body data off the front of `buf` (framing
    /// bytes are consumed): `None` when `buf` holds no more data yet, or the
    /// body is complete ([`Body::is_done`]).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, WireError> {
        loop {
            match self {
                Body::Done => return Ok(None),
                Body::Length(left) => {
                    let data = take_data(left, buf);
                    if *left == 0 {
                        *self = Body::Done;
                    }
                    return Ok(data);
                }
                Body::UntilClose => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    return Ok(Some(buf.split().freeze()));
                }
                Body::Chunked(Chunk::Data(left)) => {
                    let data = take_data(left, buf);
                    if *left == 0 {
                        *self = Body::Chunked(Chunk::DataEnd);
                        // The CRLF after the data, when it came with it, is
                        // taken now: a stream waiting for its next frame keeps
                        // no bytes for it (nor the read's buffer they share).
                        // Anything else is left for the arm below to judge.
                        let end = match (buf.first(), buf.get(1)) {
                            (Some(b'\n'), _) => 1,
                            (Some(b'\r'), Some(b'\n')) => 2,
                            _ => 0,
                        };
                        if end > 0 {
                            buf.advance(end);
                            *self = Body::Chunked(Chunk::Size);
                        }
                    }
                    return Ok(data);
                }
                Body::Chunked(Chunk::DataEnd) => match buf.first() {
                    None => return Ok(None),
                    Some(b'\n') => {
                        buf.advance(1);
                        *self = Body::Chunked(Chunk::Size);
                    }
                    Some(b'\r') => match buf.get(1) {
                        None => return Ok(None),
                        Some(b'\n') => {
                            buf.advance(2);
                            *self = Body::Chunked(Chunk::Size);
                        }
                        Some(_) => return Err(WireError("a chunk's data is not followed by CRLF")),
                    },
                    Some(_) => return Err(WireError("a chunk's data is not followed by CRLF")),
                },
                Body::Chunked(Chunk::Size) => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(None);
                    };
                    let size = chunk_size(&line)?;
                    *self = Body::Chunked(if size == 0 {
                        Chunk::Trailer
                    } else {
                        Chunk::Data(size)
                    });
                }
                Body::Chunked(Chunk::Trailer) => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(None);
                    };
                    if line.is_empty() {
                        *self = Body::Done;
                    }
                }
            }
        }
    }
}

/// Takes what `buf` holds of the `left` data bytes still due (`None` when it
/// holds nothing), counting them off.
fn take_data(left: &mut u64, buf: &mut BytesMut) -> Option<Bytes> {
    if buf.is_empty() {
        return None;
    }
    let take = (*left).min(buf.len() as u64);
    *left -= take;
    Some(buf.split_to(take as usize).freeze())
}

/// Takes one line (without its CRLF or LF) off the front of `buf`.
fn take_line(buf: &mut BytesMut) -> Result<Option<BytesMut>, WireError> {
    match memchr::memchr(b'\n', buf) {
        Some(i) => {
            let mut line = buf.split_to(i + 1);
            line.truncate(i);
            if line.last() == Some(&b'\r') {
                line.truncate(i - 1);
            }
            Ok(Some(line))
        }
        None if buf.len() > MAX_CHUNK_LINE => Err(WireError("a chunk-size line is too long")),
        None => Ok(None),
    }
}

/// The size on a chunk-size line (hex digits, then optional extensions).
fn chunk_size(line: &[u8]) -> Result<u64, WireError> {
    let digits = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    let rest = line[digits..].trim_ascii_start();
    if digits == 0 || digits > 15 || !(rest.is_empty() || rest[0] == b';') {
        return Err(WireError("an invalid chunk size"));
    }
    let mut n: u64 = 0;
    for &b in &line[..digits] {
        let d = (b as char).to_digit(16).unwrap_or(0);
        n = n * 16 + u64::from(d);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_lengths_are_digits_and_agree() {
        assert_eq!(content_length(b"42", None), Ok(42));
        assert_eq!(content_length(b"42, 42", None), Ok(42));
        assert_eq!(content_length(b"42", Some(42)), Ok(42));
        assert_eq!(content_length(b" 0042 ", None), Ok(42));
        assert_eq!(content_length(b"18446744073709551615", None), Ok(u64::MAX));
        assert_eq!(content_length(b"000000000000000000000001", None), Ok(1));
        for bad in [
            &b""[..],
            b" ",
            b"-1",
            b"+1",
            b"4 2",
            b"0x10",
            b"42,",
            b"18446744073709551616",
            b"99999999999999999999",
        ] {
            assert_eq!(
                content_length(bad, None),
                Err(BadLength::Invalid),
                "{bad:?}"
            );
        }
        assert_eq!(content_length(b"42, 43", None), Err(BadLength::Conflicting));
        assert_eq!(content_length(b"42", Some(41)), Err(BadLength::Conflicting));
    }

    /// Decodes `raw` fed in pieces of `step` bytes; the data and whether it ended.
    fn decode_in_steps(
        mut body: Body,
        raw: &[u8],
        step: usize,
    ) -> Result<(Vec<u8>, bool), WireError> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in raw.chunks(step.max(1)) {
            buf.extend_from_slice(piece);
            while let Some(d) = body.decode(&mut buf)? {
                assert!(!d.is_empty());
                out.extend_from_slice(&d);
            }
        }
        Ok((out, body.is_done()))
    }

    #[test]
    fn chunked_bodies_decode_at_every_split() {
        let raw =
            b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\n";
        for step in 1..raw.len() + 1 {
            let (data, done) = decode_in_steps(Body::Chunked(Chunk::Size), raw, step).unwrap();
            assert_eq!(data, b"helloabcdefghijklmnopqrstuvwxyz", "step {step}");
            assert!(done, "step {step}");
        }
        // Bare LF line ends are tolerated.
        let (data, done) =
            decode_in_steps(Body::Chunked(Chunk::Size), b"3\nabc\n0\n\n", 1).unwrap();
        assert_eq!(data, b"abc");
        assert!(done);
    }

    #[test]
    fn a_cut_or_broken_chunked_body_is_not_done_or_an_error() {
        let (data, done) =
            decode_in_steps(Body::Chunked(Chunk::Size), b"5\r\nhello\r\n3\r\nab", 4).unwrap();
        assert_eq!(data, b"helloab");
        assert!(!done);
        assert!(decode_in_steps(Body::Chunked(Chunk::Size), b"zz\r\n", 1).is_err());
        assert!(decode_in_steps(Body::Chunked(Chunk::Size), b"3\r\nabcXY", 1).is_err());
        assert!(decode_in_steps(Body::Chunked(Chunk::Size), b"1234567890123456\r\n", 64).is_err());
        let long = vec![b'1'; MAX_CHUNK_LINE + 2];
        assert!(decode_in_steps(Body::Chunked(Chunk::Size), &long, long.len()).is_err());
    }

    #[test]
    fn length_bodies_stop_at_their_length() {
        let mut buf = BytesMut::from(&b"helloEXTRA"[..]);
        let mut b = Body::Length(5);
        assert_eq!(&b.decode(&mut buf).unwrap().unwrap()[..], b"hello");
        assert!(b.is_done());
        assert_eq!(b.decode(&mut buf).unwrap(), None);
        assert_eq!(&buf[..], b"EXTRA");
        let (data, done) = decode_in_steps(Body::Length(3), b"ab", 1).unwrap();
        assert_eq!((data.as_slice(), done), (&b"ab"[..], false));
    }
}
