//! Minimal HTTP/1.1 client for integration tests: one-shot and keep-alive
//! requests, Content-Length / chunked / close-delimited response bodies,
//! chunked request bodies, `Expect: 100-continue`, responses streamed piece by
//! piece as they arrive, and a small SSE parser.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, ToSocketAddrs};

use super::mock_upstream::wire::{
    find_header, has_token, invalid, BodyReader, Framing, Head, WireReader,
};

const MAX_HEAD_BYTES: usize = 64 << 10;
const MAX_RESPONSE_BYTES: usize = 1 << 30;
/// How long a request with `Expect: 100-continue` waits for the interim
/// response before sending its body anyway (as curl does, which waits 1 s).
/// Long, so that a loaded machine never makes a prompt answer look like a
/// missing one: tests read [`Response::expect_answer`], never the clock.
pub const CONTINUE_TIMEOUT: Duration = Duration::from_secs(10);

/// A complete response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Header names lowercased, values trimmed, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// For a request sent with `Expect: 100-continue`: the status that answered
    /// before the body was sent (100, or a final status such as 413); `None`
    /// when nothing came within [`CONTINUE_TIMEOUT`] (the body then went anyway)
    /// or the request did not ask.
    pub expect_answer: Option<u16>,
}

impl Response {
    /// First value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// Every value of a header, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The body as (lossy) UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics (failing the test) with the body shown.
    #[expect(clippy::panic, reason = "test helper: a non-JSON body fails the test")]
    pub fn json(&self) -> Value {
        self.try_json().unwrap_or_else(|e| {
            panic!(
                "response body is not JSON ({e}); status {}, body: {}",
                self.status,
                self.text()
            )
        })
    }

    pub fn try_json(&self) -> serde_json::Result<Value> {
        serde_json::from_slice(&self.body)
    }

    /// The body parsed as a server-sent event stream.
    pub fn sse(&self) -> Vec<SseEvent> {
        parse_sse(&self.body)
    }
}

/// A request to send.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub method: String,
    /// Request target: path and query.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// `Some(n)`: send the body with `transfer-encoding: chunked`, `n` bytes
    /// per chunk. `None`: `content-length`.
    pub chunk_size: Option<usize>,
}

impl Request {
    pub fn new(method: &str, path: &str) -> Request {
        Request {
            method: method.to_owned(),
            path: path.to_owned(),
            ..Request::default()
        }
    }

    pub fn get(path: &str) -> Request {
        Request::new("GET", path)
    }

    pub fn post(path: &str) -> Request {
        Request::new("POST", path)
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn headers(mut self, headers: &[(&str, &str)]) -> Request {
        self.headers.extend(
            headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
        );
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// A JSON body, with `content-type: application/json` unless one is set.
    pub fn json(self, value: &Value) -> Request {
        let with_type = if find_header(&self.headers, "content-type").is_some() {
            self
        } else {
            self.header("content-type", "application/json")
        };
        with_type.body(value.to_string())
    }

    /// Sends the body with `transfer-encoding: chunked`, `chunk_size` bytes
    /// (at least 1) per chunk.
    pub fn chunked(mut self, chunk_size: usize) -> Request {
        self.chunk_size = Some(chunk_size.max(1));
        self
    }

    fn expects_continue(&self) -> bool {
        has_token(find_header(&self.headers, "expect"), "100-continue")
    }

    fn encode_head(&self, host: &str) -> Vec<u8> {
        let has = |name: &str| find_header(&self.headers, name).is_some();
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.path);
        if !has("host") {
            head.push_str(&format!("host: {host}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if self.chunk_size.is_some() {
            if !has("transfer-encoding") {
                head.push_str("transfer-encoding: chunked\r\n");
            }
        } else if !has("content-length")
            && (!self.body.is_empty() || matches!(self.method.as_str(), "POST" | "PUT" | "PATCH"))
        {
            head.push_str(&format!("content-length: {}\r\n", self.body.len()));
        }
        head.push_str("\r\n");
        head.into_bytes()
    }

    async fn write_body(&self, writer: &mut OwnedWriteHalf) -> io::Result<()> {
        match self.chunk_size {
            Some(size) => {
                for piece in self.body.chunks(size) {
                    let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
                    chunk.extend_from_slice(piece);
                    chunk.extend_from_slice(b"\r\n");
                    writer.write_all(&chunk).await?;
                }
                writer.write_all(b"0\r\n\r\n").await?;
            }
            None => writer.write_all(&self.body).await?,
        }
        writer.flush().await
    }
}

/// Reads a response head, skipping interim 1xx responses unless `interim`.
async fn read_head(
    reader: &mut WireReader<OwnedReadHalf>,
    interim: bool,
) -> io::Result<(u16, Head)> {
    loop {
        let head = reader.read_head(MAX_HEAD_BYTES).await?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a response",
            )
        })?;
        let status = head
            .start_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .filter(|_| head.start_line.starts_with("HTTP/1."))
            .ok_or_else(|| invalid(format!("bad status line {:?}", head.start_line)))?;
        if interim || !(100..200).contains(&status) || status == 101 {
            return Ok((status, head));
        }
    }
}

/// Whether a response leaves its connection usable for another request.
fn reusable(head: &Head, framing: Framing) -> bool {
    framing != Framing::UntilClose && !has_token(head.header("connection"), "close")
}

/// One HTTP/1.1 connection, reusable for several requests (keep-alive).
pub struct Connection {
    reader: WireReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    host: String,
    open: bool,
}

impl Connection {
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let host = stream.peer_addr()?.to_string();
        let (read, writer) = stream.into_split();
        Ok(Connection {
            reader: WireReader::new(read),
            writer,
            host,
            open: true,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.writer.local_addr()
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.writer.peer_addr()
    }

    /// False once a response said `connection: close`, was delimited by the
    /// close, or came before the request body was fully sent.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Sends `request` and reads the whole response. The body is written
    /// while the response is read, so an early response (say a 413) is seen.
    pub async fn send(&mut self, request: &Request) -> io::Result<Response> {
        self.writer
            .write_all(&request.encode_head(&self.host))
            .await?;
        let mut expect_answer = None;
        if request.expects_continue() {
            self.writer.flush().await?;
            if let Ok(head) =
                tokio::time::timeout(CONTINUE_TIMEOUT, read_head(&mut self.reader, true)).await
            {
                let (status, head) = head?;
                expect_answer = Some(status);
                if status != 100 {
                    // A final answer before the body: the body is never sent.
                    self.open = false;
                    let mut r = self.read_body(status, head, &request.method).await?;
                    r.expect_answer = expect_answer;
                    return Ok(r);
                }
            }
        }
        let Connection { reader, writer, .. } = self;
        let write = request.write_body(writer);
        let read = async {
            let (status, head) = read_head(reader, false).await?;
            let framing = Framing::of_response(&head, status, &request.method)?;
            let body = BodyReader::new(framing)
                .read_to_end(reader, MAX_RESPONSE_BYTES)
                .await?;
            Ok::<_, io::Error>((
                reusable(&head, framing),
                Response {
                    status,
                    headers: head.headers,
                    body,
                    expect_answer,
                },
            ))
        };
        tokio::pin!(write, read);
        let mut written: Option<io::Result<()>> = None;
        let result = loop {
            tokio::select! {
                done = &mut write, if written.is_none() => written = Some(done),
                response = &mut read => break response,
            }
        };
        match (result, written) {
            (Ok((reuse, response)), written) => {
                self.open = reuse && matches!(written, Some(Ok(())));
                Ok(response)
            }
            (Err(_), Some(Err(write_error))) => {
                self.open = false;
                Err(write_error)
            }
            (Err(read_error), _) => {
                self.open = false;
                Err(read_error)
            }
        }
    }

    async fn read_body(&mut self, status: u16, head: Head, method: &str) -> io::Result<Response> {
        let framing = Framing::of_response(&head, status, method)?;
        let body = BodyReader::new(framing)
            .read_to_end(&mut self.reader, MAX_RESPONSE_BYTES)
            .await?;
        self.open &= reusable(&head, framing);
        Ok(Response {
            status,
            headers: head.headers,
            body,
            expect_answer: None,
        })
    }

    /// Sends `request` and returns once the response head has arrived; the
    /// body is then read piece by piece from the [`StreamingResponse`].
    pub async fn send_streaming(mut self, request: &Request) -> io::Result<StreamingResponse> {
        let mut head = request.encode_head(&self.host);
        if request.chunk_size.is_none() {
            head.extend_from_slice(&request.body);
            self.writer.write_all(&head).await?;
            self.writer.flush().await?;
        } else {
            self.writer.write_all(&head).await?;
            request.write_body(&mut self.writer).await?;
        }
        let (status, head) = read_head(&mut self.reader, false).await?;
        let framing = Framing::of_response(&head, status, &request.method)?;
        Ok(StreamingResponse {
            status,
            headers: head.headers,
            reader: self.reader,
            _writer: self.writer,
            body: BodyReader::new(framing),
        })
    }
}

/// A response whose head has arrived and whose body is read as it comes.
pub struct StreamingResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: WireReader<OwnedReadHalf>,
    /// Kept open: dropping it would half-close the connection.
    _writer: OwnedWriteHalf,
    body: BodyReader,
}

impl StreamingResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The next piece of body as it arrives (transfer coding removed; never
    /// more than one HTTP chunk); `None` at its end. A connection closed
    /// before the end of the body is an `UnexpectedEof` error.
    pub async fn next_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        self.body.next(&mut self.reader).await
    }

    /// The rest of the body.
    pub async fn read_all(mut self) -> io::Result<Vec<u8>> {
        self.body
            .read_to_end(&mut self.reader, MAX_RESPONSE_BYTES)
            .await
    }

    /// The rest of the body, with the head, as a [`Response`].
    pub async fn into_response(mut self) -> io::Result<Response> {
        let body = self
            .body
            .read_to_end(&mut self.reader, MAX_RESPONSE_BYTES)
            .await?;
        Ok(Response {
            status: self.status,
            headers: self.headers,
            body,
            expect_answer: None,
        })
    }

    /// Every piece until the end or an error, and that error (for streams
    /// expected to break mid-way).
    pub async fn read_until_end(mut self) -> (Vec<Vec<u8>>, Option<io::Error>) {
        let mut pieces = Vec::new();
        loop {
            match self.next_chunk().await {
                Ok(Some(piece)) => pieces.push(piece),
                Ok(None) => return (pieces, None),
                Err(e) => return (pieces, Some(e)),
            }
        }
    }
}

/// Sends one request on a new connection and reads the whole response.
pub async fn send<A: ToSocketAddrs>(addr: A, request: &Request) -> io::Result<Response> {
    Connection::connect(addr).await?.send(request).await
}

/// Sends one request on a new connection; returns after the response head.
pub async fn send_streaming<A: ToSocketAddrs>(
    addr: A,
    request: &Request,
) -> io::Result<StreamingResponse> {
    Connection::connect(addr)
        .await?
        .send_streaming(request)
        .await
}

fn build(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Request {
    Request::new(method, path)
        .headers(headers)
        .body(body.to_vec())
}

/// Like [`request`], returning I/O errors instead of failing the test.
pub async fn try_request<A: ToSocketAddrs>(
    addr: A,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<Response> {
    send(addr, &build(method, path, headers, body)).await
}

/// Sends one request on a new connection; an I/O error fails the test.
#[expect(clippy::panic, reason = "test helper: an I/O error fails the test")]
pub async fn request<A: ToSocketAddrs>(
    addr: A,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    try_request(addr, method, path, headers, body)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// [`request`] with a body sent using chunked transfer coding.
#[expect(clippy::panic, reason = "test helper: an I/O error fails the test")]
pub async fn request_chunked<A: ToSocketAddrs>(
    addr: A,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    chunk_size: usize,
) -> Response {
    let request = build(method, path, headers, body).chunked(chunk_size);
    send(addr, &request)
        .await
        .unwrap_or_else(|e| panic!("{method} {path} (chunked): {e}"))
}

/// `POST` of a JSON body; an I/O error fails the test.
pub async fn post_json<A: ToSocketAddrs>(
    addr: A,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Response {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    request(addr, "POST", path, &all, body.to_string().as_bytes()).await
}

/// Sends one request and returns after the response head; an I/O error fails
/// the test.
#[expect(clippy::panic, reason = "test helper: an I/O error fails the test")]
pub async fn request_streaming<A: ToSocketAddrs>(
    addr: A,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> StreamingResponse {
    send_streaming(addr, &build(method, path, headers, body))
        .await
        .unwrap_or_else(|e| panic!("{method} {path} (streaming): {e}"))
}

/// One server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// The event type: the `event:` field or `message`.
    pub fn name(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Parses an SSE stream (LF, CRLF or CR line endings; comments skipped). An
/// event is dispatched at a blank line and only if it had a data line, as the
/// HTML standard says; a trailing unterminated event is dropped.
pub fn parse_sse(body: &[u8]) -> Vec<SseEvent> {
    let text = String::from_utf8_lossy(body)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut events = Vec::new();
    let mut event: Option<String> = None;
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        if line.is_empty() {
            if let Some(data) = data.take() {
                events.push(SseEvent {
                    event: event.take(),
                    data,
                });
            }
            event = None;
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value.to_owned()),
            "data" => match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    events
}
