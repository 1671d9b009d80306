//! HTTP/1.1 message framing shared by the mock server and the test client.
//! Imports std and tokio only.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

const READ_RESERVE: usize = 64 << 10;
const MAX_PIECE: u64 = 256 << 10;
const MAX_LINE: usize = 8 << 10;

pub fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

fn eof(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("connection closed {what}"),
    )
}

/// First value of a header (case-insensitive name).
pub fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Whether a comma-separated header value has `token` (case-insensitive).
pub fn has_token(value: Option<&str>, token: &str) -> bool {
    value.is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A start line and header fields (names lowercased, values trimmed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Head {
    pub start_line: String,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    fn header_has(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(name) && has_token(Some(v), token))
    }

    fn parse(bytes: &[u8]) -> io::Result<Head> {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.split("\r\n");
        let start_line = lines.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        for line in lines {
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        Ok(Head {
            start_line,
            headers,
        })
    }
}

/// A buffered reader of HTTP/1.1 framing over any byte stream.
pub struct WireReader<S> {
    io: S,
    buf: Vec<u8>,
    pos: usize,
}

impl<S: AsyncRead + Unpin> WireReader<S> {
    pub fn new(io: S) -> WireReader<S> {
        WireReader {
            io,
            buf: Vec::new(),
            pos: 0,
        }
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.io
    }

    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// Bytes read from the stream and not consumed yet.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
        if self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
    }

    /// Reads more bytes; 0 at end of stream.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.reserve(READ_RESERVE);
        self.io.read_buf(&mut self.buf).await
    }

    /// Reads a start line and headers; `None` at a clean end of stream.
    pub async fn read_head(&mut self, limit: usize) -> io::Result<Option<Head>> {
        loop {
            // Empty lines before a start line are tolerated (RFC 9112 2.2).
            while self.buffered().starts_with(b"\r\n") {
                self.consume(2);
            }
            if let Some(end) = find(self.buffered(), b"\r\n\r\n") {
                let head = Head::parse(&self.buffered()[..end])?;
                self.consume(end + 4);
                return Ok(Some(head));
            }
            if self.buffered().len() > limit {
                return Err(invalid("header section too large"));
            }
            if self.fill().await? == 0 {
                return if self.buffered().is_empty() {
                    Ok(None)
                } else {
                    Err(eof("inside a header section"))
                };
            }
        }
    }

    /// Reads one CRLF-terminated line, without the CRLF.
    pub async fn read_line(&mut self, limit: usize) -> io::Result<Vec<u8>> {
        loop {
            if let Some(end) = find(self.buffered(), b"\r\n") {
                let line = self.buffered()[..end].to_vec();
                self.consume(end + 2);
                return Ok(line);
            }
            if self.buffered().len() > limit {
                return Err(invalid("line too long"));
            }
            if self.fill().await? == 0 {
                return Err(eof("inside a line"));
            }
        }
    }

    /// Up to `max` bytes: what is buffered, else one read. Empty at end of stream.
    pub async fn read_some(&mut self, max: usize) -> io::Result<Vec<u8>> {
        if self.buffered().is_empty() && self.fill().await? == 0 {
            return Ok(Vec::new());
        }
        let n = self.buffered().len().min(max);
        let out = self.buffered()[..n].to_vec();
        self.consume(n);
        Ok(out)
    }
}

/// How a message body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

impl Framing {
    pub fn of_request(head: &Head) -> io::Result<Framing> {
        if head.header_has("transfer-encoding", "chunked") {
            return Ok(Framing::Chunked);
        }
        Ok(content_length(head)?.map_or(Framing::Empty, Framing::Length))
    }

    pub fn of_response(head: &Head, status: u16, request_method: &str) -> io::Result<Framing> {
        if request_method.eq_ignore_ascii_case("HEAD")
            || (100..200).contains(&status)
            || status == 204
            || status == 304
        {
            return Ok(Framing::Empty);
        }
        if head.header_has("transfer-encoding", "chunked") {
            return Ok(Framing::Chunked);
        }
        Ok(content_length(head)?.map_or(Framing::UntilClose, Framing::Length))
    }
}

fn content_length(head: &Head) -> io::Result<Option<u64>> {
    head.header("content-length")
        .map(|v| {
            v.parse()
                .map_err(|_| invalid(format!("bad content-length {v:?}")))
        })
        .transpose()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyState {
    /// Bytes left of a content-length body (or of the stream).
    Remaining(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Done,
}

/// Incremental decoder of one message body.
#[derive(Debug)]
pub struct BodyReader {
    framing: Framing,
    state: BodyState,
}

impl BodyReader {
    pub fn new(framing: Framing) -> BodyReader {
        let state = match framing {
            Framing::Empty | Framing::Length(0) => BodyState::Done,
            Framing::Length(n) => BodyState::Remaining(n),
            Framing::Chunked => BodyState::ChunkSize,
            Framing::UntilClose => BodyState::Remaining(u64::MAX),
        };
        BodyReader { framing, state }
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    pub fn is_done(&self) -> bool {
        self.state == BodyState::Done
    }

    /// The next piece of body as it arrives; `None` at its end. A stream
    /// that ends before the body does is an `UnexpectedEof` error.
    pub async fn next<S: AsyncRead + Unpin>(
        &mut self,
        reader: &mut WireReader<S>,
    ) -> io::Result<Option<Vec<u8>>> {
        loop {
            match self.state {
                BodyState::Done => return Ok(None),
                BodyState::Remaining(left) => {
                    let piece = reader.read_some(left.min(MAX_PIECE) as usize).await?;
                    if piece.is_empty() {
                        if self.framing == Framing::UntilClose {
                            self.state = BodyState::Done;
                            return Ok(None);
                        }
                        return Err(eof("before the end of the body"));
                    }
                    if self.framing != Framing::UntilClose {
                        let left = left - piece.len() as u64;
                        self.state = if left == 0 {
                            BodyState::Done
                        } else {
                            BodyState::Remaining(left)
                        };
                    }
                    return Ok(Some(piece));
                }
                BodyState::ChunkSize => {
                    let line = reader.read_line(MAX_LINE).await?;
                    let line = String::from_utf8_lossy(&line);
                    let size = line.split(';').next().unwrap_or_default().trim();
                    let size = u64::from_str_radix(size, 16)
                        .map_err(|_| invalid(format!("bad chunk size line {line:?}")))?;
                    if size == 0 {
                        // Trailer fields, then the empty line.
                        while !reader.read_line(MAX_LINE).await?.is_empty() {}
                        self.state = BodyState::Done;
                        return Ok(None);
                    }
                    self.state = BodyState::ChunkData(size);
                }
                BodyState::ChunkData(left) => {
                    let piece = reader.read_some(left.min(MAX_PIECE) as usize).await?;
                    if piece.is_empty() {
                        return Err(eof("inside a chunk"));
                    }
                    let left = left - piece.len() as u64;
                    self.state = if left == 0 {
                        BodyState::ChunkEnd
                    } else {
                        BodyState::ChunkData(left)
                    };
                    return Ok(Some(piece));
                }
                BodyState::ChunkEnd => {
                    if !reader.read_line(MAX_LINE).await?.is_empty() {
                        return Err(invalid("chunk data not followed by CRLF"));
                    }
                    self.state = BodyState::ChunkSize;
                }
            }
        }
    }

    /// The rest of the body; a `FileTooLarge` error past `limit` bytes.
    pub async fn read_to_end<S: AsyncRead + Unpin>(
        &mut self,
        reader: &mut WireReader<S>,
        limit: usize,
    ) -> io::Result<Vec<u8>> {
        let too_large = || io::Error::new(io::ErrorKind::FileTooLarge, "body too large");
        let mut body = Vec::new();
        if let Framing::Length(n) = self.framing {
            if n > limit as u64 {
                return Err(too_large());
            }
            body.reserve(n as usize);
        }
        while let Some(piece) = self.next(reader).await? {
            if body.len() + piece.len() > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&piece);
        }
        Ok(body)
    }
}
