//! Server-sent events (`text/event-stream`): an incremental decoder and an encoder.
//!
//! [`SseDecoder`] turns network chunks into [`SseItem`]s (events and comments)
//! without per-frame allocation; the `encode_*` functions append whole frames
//! to a `Vec<u8>` or `BytesMut`. Payloads are bytes: the caller parses JSON.
//!
//! ```
//! use switchboard::sse::{encode_event, SseDecoder, SseItem};
//!
//! let mut wire = Vec::new();
//! encode_event(&mut wire, Some("message_stop"), br#"{"type":"message_stop"}"#);
//!
//! let mut decoder = SseDecoder::new(1 << 20);
//! let mut names = Vec::new();
//! for chunk in wire.chunks(7) {
//!     decoder
//!         .push(chunk, |item| {
//!             if let SseItem::Event(event) = item {
//!                 names.push(event.event_str().map(str::to_owned));
//!             }
//!         })
//!         .ok();
//! }
//! assert!(decoder.finish().is_ok());
//! assert_eq!(names, [Some("message_stop".to_owned())]);
//! ```

mod decoder;
mod encoder;
#[cfg(test)]
mod tests;

pub use decoder::{SseDecoder, SseError, SseEvent, SseItem, DEFAULT_MAX_FRAME_BYTES};
pub use encoder::{
    encode_comment, encode_event, encode_frame, encode_named, encode_unbroken, SseSink,
};
