//! Writing event-stream messages for Bedrock clients: an event
//! (`:message-type: event`, `:event-type`, `:content-type: application/json`,
//! a JSON payload) or an exception (`:message-type: exception`,
//! `:exception-type`, a `{"message": …}` payload), appended to a buffer.

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::Bytes;

/// The media type of an event-stream body.
pub const CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";

fn header(name: &'static str, value: &str) -> Header {
    Header::new(name, HeaderValue::String(value.to_string().into()))
}

fn write(message: &Message, out: &mut Vec<u8>) {
    // Only lengths over the format's limits (16 MiB payloads, 128 KiB of
    // headers) fail; a frame that cannot be written is logged and left out
    // rather than sent half-written.
    let mark = out.len();
    if let Err(e) = aws_smithy_eventstream::frame::write_message_to(message, out) {
        out.truncate(mark);
        log::error!("could not write an event-stream message: {e}");
    }
}

/// Appends an event message of type `event_type` with a JSON `payload`.
pub fn event(out: &mut Vec<u8>, event_type: &str, payload: &[u8]) {
    let m = Message::new_from_parts(
        vec![
            header(":event-type", event_type),
            header(":content-type", "application/json"),
            header(":message-type", "event"),
        ],
        Bytes::copy_from_slice(payload),
    );
    write(&m, out);
}

/// Appends an exception message of type `exception_type` (the stream
/// union's member name, `throttlingException`, …) with a JSON `payload`.
pub fn exception(out: &mut Vec<u8>, exception_type: &str, payload: &[u8]) {
    let m = Message::new_from_parts(
        vec![
            header(":exception-type", exception_type),
            header(":content-type", "application/json"),
            header(":message-type", "exception"),
        ],
        Bytes::copy_from_slice(payload),
    );
    write(&m, out);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Message {
        aws_smithy_eventstream::frame::read_message_from(bytes).unwrap()
    }

    fn header_of<'m>(m: &'m Message, name: &str) -> &'m str {
        m.headers()
            .iter()
            .find(|h| h.name().as_str() == name)
            .and_then(|h| h.value().as_string().ok())
            .map(|s| s.as_str())
            .unwrap()
    }

    #[test]
    fn an_event_round_trips_with_its_checksums() {
        let mut out = Vec::new();
        event(&mut out, "messageStart", br#"{"role":"assistant"}"#);
        // Prelude: total length, header length, prelude CRC; then a message CRC.
        let total = u32::from_be_bytes(out[0..4].try_into().unwrap()) as usize;
        assert_eq!(total, out.len());
        let prelude_crc = u32::from_be_bytes(out[8..12].try_into().unwrap());
        assert_eq!(prelude_crc, crc32fast::hash(&out[0..8]));
        let message_crc = u32::from_be_bytes(out[total - 4..].try_into().unwrap());
        assert_eq!(message_crc, crc32fast::hash(&out[..total - 4]));
        let m = read(&out);
        assert_eq!(header_of(&m, ":event-type"), "messageStart");
        assert_eq!(header_of(&m, ":message-type"), "event");
        assert_eq!(header_of(&m, ":content-type"), "application/json");
        assert_eq!(&m.payload()[..], br#"{"role":"assistant"}"#);
        // A flipped payload byte fails the message CRC.
        let mut bad = out.clone();
        bad[total - 6] ^= 1;
        assert!(aws_smithy_eventstream::frame::read_message_from(&bad[..]).is_err());
    }

    #[test]
    fn an_exception_names_its_type() {
        let mut out = Vec::new();
        exception(&mut out, "throttlingException", br#"{"message":"slow"}"#);
        let m = read(&out);
        assert_eq!(header_of(&m, ":message-type"), "exception");
        assert_eq!(header_of(&m, ":exception-type"), "throttlingException");
    }
}
