//! Writing a reply: the error reply in each protocol's shape, and the
//! HTTP/1.1 writer that sends bodies and streams in small random pieces
//! with the faults the markers ask for.
//! Imports `super::*` (the rest of the mock upstream).

use super::*;

/// `status` with `protocol`'s error body (429 adds `retry-after: 1`).
pub(super) fn error_reply(protocol: Protocol, status: u16, message: &str) -> Reply {
    let (body, content_type) = match protocol {
        Protocol::OpenAi | Protocol::Responses => (
            obj! { "error": openai_error(status, message) },
            "application/json",
        ),
        Protocol::Anthropic => (
            obj! {
                "type": "error",
                "error": obj! { "type": anthropic_error_type(status), "message": message },
            },
            "application/json",
        ),
        Protocol::Gemini => (
            obj! { "error": gemini_error(status, message) },
            "application/json; charset=UTF-8",
        ),
    };
    let reply = Reply::json_ordered(status, content_type, &body);
    if status == 429 {
        reply.header("retry-after", "1")
    } else {
        reply
    }
}

/// A 400 saying the prompt is longer than the model's context, as each
/// provider words it: OpenAI's `code: context_length_exceeded`, Anthropic's
/// "prompt is too long", Gemini's token count over the limit.
pub(super) fn overflow_reply(protocol: Protocol) -> Reply {
    let (body, content_type) = match protocol {
        Protocol::OpenAi | Protocol::Responses => (
            obj! { "error": obj! {
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            } },
            "application/json",
        ),
        Protocol::Anthropic => (
            obj! {
                "type": "error",
                "error": obj! {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 212000 tokens > 200000 maximum",
                },
            },
            "application/json",
        ),
        Protocol::Gemini => (
            obj! { "error": obj! {
                "code": 400u64,
                "message": "The input token count (1100000) exceeds the maximum number of tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            } },
            "application/json; charset=UTF-8",
        ),
    };
    Reply::json_ordered(400, content_type, &body)
}

// ---------------------------------------------------------------------------
// Writing responses

pub(super) enum ReplyBody {
    /// Sent with `content-length`.
    Full(Vec<u8>),
    /// Frames sent with `transfer-encoding: chunked`, in small random writes.
    Stream(Vec<Vec<u8>>),
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Effects {
    pub(super) slow: Option<Duration>,
    pub(super) hold: Option<Duration>,
    pub(super) stall: Option<Duration>,
    /// `[[stall-mid:MS]]`: the wait after half of a stream's frames.
    pub(super) stall_mid: Option<Duration>,
    /// `[[cut-end]]`: a stream's connection closes before its last frame.
    pub(super) cut_end: bool,
    pub(super) cut: bool,
    /// Largest random stream write; 0 writes each frame whole.
    pub(super) max_piece: usize,
    pub(super) seed: u64,
}

pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: Vec<(&'static str, String)>,
    pub(super) body: ReplyBody,
    pub(super) effects: Effects,
}

impl Reply {
    pub(super) fn full(status: u16, content_type: &str, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: vec![("content-type", content_type.to_owned())],
            body: ReplyBody::Full(body),
            effects: Effects::default(),
        }
    }

    pub(super) fn json(status: u16, body: &Value) -> Reply {
        Reply::full(status, "application/json", body.to_string().into_bytes())
    }

    pub(super) fn json_ordered(status: u16, content_type: &str, body: &J) -> Reply {
        Reply::full(status, content_type, body.to_json_string().into_bytes())
    }

    pub(super) fn malformed_json(prefix: &str) -> Reply {
        Reply::full(200, "application/json", prefix.as_bytes().to_vec())
    }

    pub(super) fn stream(content_type: &str, frames: Vec<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: vec![
                ("content-type", content_type.to_owned()),
                ("cache-control", "no-cache".to_owned()),
            ],
            body: ReplyBody::Stream(frames),
            effects: Effects::default(),
        }
    }

    pub(super) fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name, value.to_owned()));
        self
    }

    pub(super) fn with_effects(mut self, effects: Effects) -> Reply {
        self.effects = effects;
        self
    }
}

pub(super) fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Writes `reply`; returns whether the connection may carry another request.
pub(super) async fn write_reply(
    io: &mut TcpStream,
    reply: Reply,
    keep_alive: bool,
) -> io::Result<bool> {
    let fx = reply.effects;
    if let Some(delay) = fx.slow {
        tokio::time::sleep(delay).await;
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        reply.status,
        reason_phrase(reply.status)
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match &reply.body {
        ReplyBody::Full(body) => head.push_str(&format!("content-length: {}\r\n", body.len())),
        ReplyBody::Stream(_) => head.push_str("transfer-encoding: chunked\r\n"),
    }
    if !keep_alive {
        head.push_str("connection: close\r\n");
    }
    head.push_str("\r\n");
    match reply.body {
        ReplyBody::Full(body) => {
            if fx.cut {
                io.write_all(head.as_bytes()).await?;
                io.write_all(&body[..body.len() / 2]).await?;
                io.flush().await?;
                return Ok(false);
            }
            if let Some(delay) = fx.stall.or(fx.hold) {
                io.write_all(head.as_bytes()).await?;
                io.flush().await?;
                tokio::time::sleep(delay).await;
                io.write_all(&body).await?;
            } else {
                let mut all = head.into_bytes();
                all.extend_from_slice(&body);
                io.write_all(&all).await?;
            }
            io.flush().await?;
            Ok(keep_alive)
        }
        ReplyBody::Stream(frames) => {
            io.write_all(head.as_bytes()).await?;
            io.flush().await?;
            if let Some(delay) = fx.hold {
                if stall_unless_closed(io, delay).await {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the reader closed the connection before the first frame",
                    ));
                }
            }
            let cut_after = if fx.cut {
                (frames.len() / 2).max(1)
            } else if fx.cut_end {
                frames.len().saturating_sub(1)
            } else {
                usize::MAX
            };
            let mut writer = PieceWriter {
                rng: XorShift::new(fx.seed),
                max_piece: fx.max_piece,
                small_budget: SMALL_WRITE_BUDGET,
            };
            for (i, frame) in frames.iter().enumerate() {
                if i == cut_after {
                    // Abrupt end: no last chunk; the caller drops the socket.
                    return Ok(false);
                }
                writer.write_frame(io, frame).await?;
                if i + 1 == (frames.len() / 2).max(1) {
                    if let Some(delay) = fx.stall_mid {
                        if stall_unless_closed(io, delay).await {
                            return Err(io::Error::new(
                                io::ErrorKind::ConnectionAborted,
                                "the reader closed the connection during a stall",
                            ));
                        }
                    }
                }
                if i == 0 {
                    if let Some(delay) = fx.stall {
                        if stall_unless_closed(io, delay).await {
                            return Err(io::Error::new(
                                io::ErrorKind::ConnectionAborted,
                                "the reader closed the connection during a stall",
                            ));
                        }
                    }
                }
            }
            io.write_all(b"0\r\n\r\n").await?;
            io.flush().await?;
            Ok(keep_alive)
        }
    }
}

/// Waits `delay`, watching the connection: true (at once) if the peer closes it.
pub(super) async fn stall_unless_closed(io: &mut TcpStream, delay: Duration) -> bool {
    let sleep = tokio::time::sleep(delay);
    tokio::pin!(sleep);
    let mut probe = [0u8; 1];
    tokio::select! {
        () = &mut sleep => false,
        seen = io.peek(&mut probe) => match seen {
            Ok(0) | Err(_) => true,
            // Bytes of a next request: the reader is still there.
            Ok(_) => {
                sleep.await;
                false
            }
        },
    }
}

/// Writes stream bytes as many small HTTP chunks, each its own TCP write, so
/// the reader sees frames split inside lines and inside UTF-8 characters.
pub(super) struct PieceWriter {
    pub(super) rng: XorShift,
    pub(super) max_piece: usize,
    pub(super) small_budget: usize,
}

impl PieceWriter {
    pub(super) async fn write_frame(&mut self, io: &mut TcpStream, frame: &[u8]) -> io::Result<()> {
        let mut rest = frame;
        while !rest.is_empty() {
            let small = self.max_piece > 0 && self.small_budget > 0;
            let size = if small {
                1 + self.rng.below(self.max_piece)
            } else if self.max_piece == 0 {
                LARGE_WRITE
            } else {
                LARGE_WRITE.max(self.max_piece)
            };
            let (piece, tail) = rest.split_at(size.min(rest.len()));
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(piece);
            chunk.extend_from_slice(b"\r\n");
            io.write_all(&chunk).await?;
            io.flush().await?;
            if small {
                self.small_budget = self.small_budget.saturating_sub(piece.len());
                if self.rng.below(16) == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            rest = tail;
        }
        Ok(())
    }
}

/// xorshift64: a tiny deterministic generator for write sizes.
pub(super) struct XorShift(u64);

impl XorShift {
    pub(super) fn new(seed: u64) -> XorShift {
        XorShift(seed | 1)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-enough value in `0..n` (`n > 0`).
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
