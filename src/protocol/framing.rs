//! How a client stream is framed, and how an upstream stream can fail: the
//! vocabulary shared by every spoke's stream codec and the relay.

/// How a stream is framed for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events.
    Sse,
    /// Family C's JSON array stream (E13j): `[obj,\r\nobj,…]`.
    JsonArray,
}

/// Why a stream could not be passed on to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamFault {
    /// The upstream sent bytes that are not a valid frame.
    Malformed(String),
    /// The upstream stream ended before its terminal event.
    Truncated,
}

impl std::fmt::Display for StreamFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFault::Malformed(m) => write!(f, "upstream sent a malformed stream frame: {m}"),
            StreamFault::Truncated => f.write_str("upstream stream ended before it was complete"),
        }
    }
}
