//! Pieces shared by the families' stream parsers and encoders: the event
//! sink type, a recycled buffer for delta text, small JSON writers that append
//! to the output without intermediate values, serde helpers that keep only the
//! first choice / candidate without allocating, and error rendering.

use super::framing::StreamFault;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::ir::stream::{BlockDelta, StreamError, StreamErrorKind, StreamEvent};
use serde::de::{Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Serialize;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a parser hands its canonical events (the translator's encoder).
pub type Emit<'a> = dyn FnMut(&StreamEvent) + 'a;

/// Which kind of [`BlockDelta`] a text fragment becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaKind {
    /// [`BlockDelta::Text`].
    Text,
    /// [`BlockDelta::Thinking`].
    Thinking,
    /// [`BlockDelta::Signature`].
    Signature,
    /// [`BlockDelta::ToolArguments`].
    ToolArguments,
}

/// A `String` lent to each emitted delta event and taken back afterwards, so
/// that emitting a delta allocates only until the buffer has grown once.
#[derive(Debug, Default)]
pub struct DeltaBuf(String);

impl DeltaBuf {
    /// Emits `BlockDelta { index, delta: kind(text) }`.
    pub fn emit(&mut self, index: usize, kind: DeltaKind, text: &str, emit: &mut Emit<'_>) {
        let mut s = std::mem::take(&mut self.0);
        s.clear();
        s.push_str(text);
        let delta = match kind {
            DeltaKind::Text => BlockDelta::Text(s),
            DeltaKind::Thinking => BlockDelta::Thinking(s),
            DeltaKind::Signature => BlockDelta::Signature(s),
            DeltaKind::ToolArguments => BlockDelta::ToolArguments(s),
        };
        let event = StreamEvent::BlockDelta { index, delta };
        emit(&event);
        if let StreamEvent::BlockDelta {
            delta:
                BlockDelta::Text(s)
                | BlockDelta::Thinking(s)
                | BlockDelta::Signature(s)
                | BlockDelta::ToolArguments(s),
            ..
        } = event
        {
            self.0 = s;
        }
    }
}

/// Appends `s` as a JSON string literal.
pub fn json_str(out: &mut Vec<u8>, s: &str) {
    crate::util::json_write::string(out, s);
}

/// Appends a decimal number.
pub fn json_u64(out: &mut Vec<u8>, n: u64) {
    crate::util::json_write::u64(out, n);
}

/// Appends `value` as JSON; on a serialization error (a value whose
/// `Serialize` fails, which our wire types never do) appends `null`.
pub fn json_value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let mark = out.len();
    if let Err(e) = serde_json::to_writer(&mut *out, value) {
        log::error!("could not serialize a stream frame: {e}");
        out.truncate(mark);
        out.extend_from_slice(b"null");
    }
}

/// An unreadable-frame fault (a frame whose data does not parse at all: the
/// stream may skip it), naming the upstream family, with a short excerpt.
pub fn unreadable(family: Family, what: &str, data: &[u8]) -> StreamFault {
    match malformed(family, what, data) {
        StreamFault::Malformed(m) => StreamFault::Unreadable(m),
        other => other,
    }
}

/// A malformed-frame fault naming the upstream family, with a short excerpt of the frame.
pub fn malformed(family: Family, what: &str, data: &[u8]) -> StreamFault {
    let excerpt = String::from_utf8_lossy(&data[..data.len().min(120)]);
    StreamFault::Malformed(format!("{family} stream: {what}: {excerpt}"))
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A fresh id for a response or call that came without one: `prefix` and 16
/// hex digits, unique within the process (time and a counter, hashed).
pub fn fresh_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    crate::ir::ids::stable_id(prefix, &[&nanos.to_le_bytes(), &n.to_le_bytes()])
}

/// The gateway error a canonical stream error is rendered as for `client`.
pub fn gateway_error(client: Family, e: &StreamError) -> GatewayError {
    let kind = match e.kind {
        StreamErrorKind::InvalidRequest => ErrorKind::InvalidRequest,
        StreamErrorKind::Authentication => ErrorKind::Authentication,
        StreamErrorKind::Permission => ErrorKind::PermissionDenied,
        StreamErrorKind::NotFound => ErrorKind::NotFound,
        StreamErrorKind::RateLimited => ErrorKind::RateLimited,
        StreamErrorKind::Overloaded => ErrorKind::Unavailable,
        StreamErrorKind::Api => ErrorKind::Internal,
        StreamErrorKind::Timeout => ErrorKind::Timeout,
        StreamErrorKind::InvalidUpstream => ErrorKind::BadGateway,
    };
    let g = GatewayError::new(kind, e.message.clone());
    // Anthropic's own status for "overloaded".
    if e.kind == StreamErrorKind::Overloaded && client == Family::Anthropic {
        g.with_status(529)
    } else {
        g
    }
}

/// The whole error body (`{"error":…}`, or Anthropic's `{"type":"error",…}`)
/// that `client`'s stream ends with for a canonical stream error, rendered by
/// `render` (the client spoke's own `error::error_body`).
pub fn error_body(
    client: Family,
    e: &StreamError,
    render: fn(&GatewayError) -> Vec<u8>,
) -> Vec<u8> {
    render(&gateway_error(client, e))
}

/// The canonical error kind for an upstream's error `type` / `status` / `code` text.
pub fn error_kind(name: &str) -> StreamErrorKind {
    match name {
        "invalid_request_error" | "INVALID_ARGUMENT" | "FAILED_PRECONDITION" => {
            StreamErrorKind::InvalidRequest
        }
        "authentication_error" | "invalid_api_key" | "UNAUTHENTICATED" => {
            StreamErrorKind::Authentication
        }
        "permission_error" | "PERMISSION_DENIED" => StreamErrorKind::Permission,
        "not_found_error" | "NOT_FOUND" => StreamErrorKind::NotFound,
        "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => {
            StreamErrorKind::RateLimited
        }
        "overloaded_error" | "UNAVAILABLE" => StreamErrorKind::Overloaded,
        "timeout_error" | "DEADLINE_EXCEEDED" => StreamErrorKind::Timeout,
        _ => StreamErrorKind::Api,
    }
}

/// The canonical error kind for an HTTP-like status code carried in an
/// error object (read through the one status table, [`ErrorKind::for_status`]).
pub fn error_kind_for_status(code: u64) -> StreamErrorKind {
    let status = u16::try_from(code).unwrap_or(500);
    match ErrorKind::for_status(status) {
        ErrorKind::InvalidRequest | ErrorKind::ContextLengthExceeded => {
            StreamErrorKind::InvalidRequest
        }
        ErrorKind::Authentication => StreamErrorKind::Authentication,
        ErrorKind::PermissionDenied => StreamErrorKind::Permission,
        ErrorKind::NotFound => StreamErrorKind::NotFound,
        ErrorKind::RateLimited => StreamErrorKind::RateLimited,
        ErrorKind::Unavailable => StreamErrorKind::Overloaded,
        ErrorKind::Timeout => StreamErrorKind::Timeout,
        ErrorKind::MethodNotAllowed
        | ErrorKind::PayloadTooLarge
        | ErrorKind::Internal
        | ErrorKind::BadGateway => StreamErrorKind::Api,
    }
}

/// The element of a JSON array whose `index` is 0 (or the first element
/// without an index), without collecting the array: `choices` and
/// `candidates` hold one element in practice, and the gateway translates
/// only the first. `null` and a missing field give `None`.
#[derive(Debug)]
pub struct First<T>(pub Option<T>);

impl<T> Default for First<T> {
    fn default() -> Self {
        First(None)
    }
}

/// Elements that say which position they stand for.
pub trait Indexed {
    /// The element's `index` field, if it has one.
    fn index(&self) -> Option<u64>;
}

impl<'de, T: Deserialize<'de> + Indexed> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Indexed> Visitor<'de> for V<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array or null")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(First(None))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(First(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut found = None;
                while found.is_none() {
                    match seq.next_element::<T>()? {
                        Some(el) if el.index().unwrap_or(0) == 0 => found = Some(el),
                        Some(_) => {}
                        None => return Ok(First(None)),
                    }
                }
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(found))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// One step of a test parse: an event (`Some`) or the end of the body (`None`).
#[cfg(test)]
pub(crate) type ParseStep<'a> =
    dyn FnMut(Option<&crate::sse::SseEvent<'_>>, &mut Emit<'_>) -> Result<(), StreamFault> + 'a;

/// Test helper: every canonical event a parser emits for a whole upstream
/// stream, and how the stream ended. `step` reads one event (`Some`) or the
/// end of the body (`None`), like a spoke parser's `push` and `finish`.
#[cfg(test)]
pub(crate) fn parse_all(
    input: &[u8],
    step: &mut ParseStep<'_>,
) -> (Vec<StreamEvent>, Result<(), StreamFault>) {
    use crate::sse::{SseDecoder, SseItem};
    let mut events = Vec::new();
    let mut result = Ok(());
    let decoded = SseDecoder::new(1 << 20).push(input, |item| {
        if let (SseItem::Event(e), Ok(())) = (item, &result) {
            result = step(Some(&e), &mut |ev| events.push(ev.clone()));
        }
    });
    assert!(decoded.is_ok(), "test stream is not valid SSE");
    if result.is_ok() {
        result = step(None, &mut |ev| events.push(ev.clone()));
    }
    (events, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct El {
        index: Option<u64>,
        v: u32,
    }
    impl Indexed for El {
        fn index(&self) -> Option<u64> {
            self.index
        }
    }
    #[derive(serde::Deserialize, Debug)]
    struct Doc {
        #[serde(default)]
        items: First<El>,
    }

    #[test]
    fn first_picks_index_zero() {
        let d: Doc =
            serde_json::from_str(r#"{"items":[{"index":1,"v":1},{"index":0,"v":2},{"v":3}]}"#)
                .unwrap();
        assert_eq!(d.items.0.unwrap().v, 2);
        let d: Doc = serde_json::from_str(r#"{"items":null}"#).unwrap();
        assert!(d.items.0.is_none());
        let d: Doc = serde_json::from_str(r#"{}"#).unwrap();
        assert!(d.items.0.is_none());
        let d: Doc = serde_json::from_str(r#"{"items":[]}"#).unwrap();
        assert!(d.items.0.is_none());
    }

    #[test]
    fn delta_buf_reuses_its_string() {
        let mut buf = DeltaBuf::default();
        let mut seen = Vec::new();
        buf.emit(0, DeltaKind::Text, "hello", &mut |e| seen.push(e.clone()));
        let cap = buf.0.capacity();
        buf.emit(0, DeltaKind::ToolArguments, "hi", &mut |e| {
            seen.push(e.clone())
        });
        assert_eq!(buf.0.capacity(), cap);
        assert_eq!(
            seen[1],
            StreamEvent::BlockDelta {
                index: 0,
                delta: BlockDelta::ToolArguments("hi".into())
            }
        );
    }
}
