//! Appending server-sent-event frames (events and comments) to an output buffer.
//!
//! Each function writes one complete frame, ending with the blank line that
//! dispatches it, so frames can be concatenated in any order. Nothing is
//! allocated besides growing the output buffer. Line breaks inside values
//! (`\n`, `\r` or `\r\n`, which would end the line early) split a `data` value
//! into several `data` lines and a comment into several comment lines; they are
//! removed from event names and ids, which cannot span lines.

use bytes::BytesMut;
use memchr::memchr2;

use super::decoder::SseEvent;

/// An output buffer frames can be appended to: `Vec<u8>` and `BytesMut`.
pub trait SseSink {
    /// Makes room for at least `additional` more bytes (a hint).
    fn reserve_bytes(&mut self, additional: usize);
    /// Appends `bytes`.
    fn put_bytes(&mut self, bytes: &[u8]);
}

impl SseSink for Vec<u8> {
    fn reserve_bytes(&mut self, additional: usize) {
        self.reserve(additional);
    }

    fn put_bytes(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl SseSink for BytesMut {
    fn reserve_bytes(&mut self, additional: usize) {
        self.reserve(additional);
    }

    fn put_bytes(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Appends an event frame: `event: NAME` (when `event` is given and not
/// empty), one `data: ` line per line of `data`, and the blank line.
///
/// `encode_event(out, Some("ping"), b"{}")` writes `event: ping\ndata: {}\n\n`.
/// Empty `data` still writes one (empty) `data` line, so the event is dispatched.
pub fn encode_event<S: SseSink + ?Sized>(out: &mut S, event: Option<&str>, data: &[u8]) {
    encode_named(out, event.map(str::as_bytes), data)
}

/// [`encode_event`] with the name as bytes: a decoded event's, passed on
/// as it came (its caller checked it as UTF-8 already).
pub fn encode_named<S: SseSink + ?Sized>(out: &mut S, event: Option<&[u8]>, data: &[u8]) {
    out.reserve_bytes(frame_size_hint(event, data));
    put_event(out, event);
    put_data(out, data);
    out.put_bytes(b"\n");
}

/// [`encode_named`] for a name and data the caller knows hold no line
/// break (a decoded frame's, [`SseEvent::one_line`], with its data edited
/// only by JSON that has none): written as they are, not looked through
/// for one. The data comes in pieces, written one after another without
/// joining them first (a frame with a value spliced into it).
pub fn encode_unbroken<S: SseSink + ?Sized>(out: &mut S, event: Option<&[u8]>, data: &[&[u8]]) {
    debug_assert!(data.iter().all(|d| memchr2(b'\n', b'\r', d).is_none()));
    debug_assert!(event.is_none_or(|e| memchr2(b'\n', b'\r', e).is_none()));
    let len = data.iter().map(|d| d.len()).sum::<usize>();
    out.reserve_bytes(frame_size_hint(event, &[]) + len);
    if let Some(name) = event.filter(|e| !e.is_empty()) {
        out.put_bytes(b"event: ");
        out.put_bytes(name);
        out.put_bytes(b"\n");
    }
    out.put_bytes(b"data: ");
    for d in data {
        out.put_bytes(d);
    }
    out.put_bytes(b"\n\n");
}

/// Appends a decoded event with all its fields (`event`, `id`, `retry`, `data`),
/// for forwarding a frame from one stream to another unchanged.
pub fn encode_frame<S: SseSink + ?Sized>(out: &mut S, event: &SseEvent<'_>) {
    out.reserve_bytes(
        frame_size_hint(event.event, event.data) + event.id.map_or(0, |id| id.len() + 5),
    );
    put_event(out, event.event);
    if let Some(id) = event.id {
        put_single_line(out, b"id: ", id);
    }
    if let Some(retry) = event.retry {
        out.put_bytes(b"retry: ");
        put_decimal(out, retry);
        out.put_bytes(b"\n");
    }
    put_data(out, event.data);
    out.put_bytes(b"\n");
}

/// Appends a comment frame: one `: TEXT` line per line of `text` (a bare `:`
/// for an empty line), and a blank line so the comment stands alone between
/// events. `encode_comment(out, b"ping")` writes `: ping\n\n`, which the decoder
/// reports as `SseItem::Comment(b"ping")`.
pub fn encode_comment<S: SseSink + ?Sized>(out: &mut S, text: &[u8]) {
    out.reserve_bytes(text.len() + 4);
    for_each_line(text, |line| {
        if line.is_empty() {
            out.put_bytes(b":\n");
        } else {
            out.put_bytes(b": ");
            out.put_bytes(line);
            out.put_bytes(b"\n");
        }
    });
    out.put_bytes(b"\n");
}

/// A capacity estimate for a frame (exact when `data` has a single line).
fn frame_size_hint(event: Option<&[u8]>, data: &[u8]) -> usize {
    event.map_or(0, |e| e.len() + 8) + data.len() + 8
}

/// Writes the `event` line unless the name is absent or empty.
fn put_event<S: SseSink + ?Sized>(out: &mut S, event: Option<&[u8]>) {
    if let Some(name) = event.filter(|e| !e.is_empty()) {
        put_single_line(out, b"event: ", name);
    }
}

/// Writes `prefix`, `value` with any line-break bytes removed, and `\n`.
fn put_single_line<S: SseSink + ?Sized>(out: &mut S, prefix: &[u8], value: &[u8]) {
    out.put_bytes(prefix);
    let mut rest = value;
    while let Some(i) = memchr2(b'\n', b'\r', rest) {
        out.put_bytes(rest.get(..i).unwrap_or_default());
        rest = rest.get(i + 1..).unwrap_or_default();
    }
    out.put_bytes(rest);
    out.put_bytes(b"\n");
}

/// Writes one `data: ` line per line of `data`.
fn put_data<S: SseSink + ?Sized>(out: &mut S, data: &[u8]) {
    for_each_line(data, |line| {
        out.put_bytes(b"data: ");
        out.put_bytes(line);
        out.put_bytes(b"\n");
    });
}

/// Calls `f` with each line of `text`, split at `\n`, `\r` or `\r\n` (a
/// trailing line break yields a final empty line; empty text yields one empty line).
fn for_each_line(text: &[u8], mut f: impl FnMut(&[u8])) {
    let mut rest = text;
    while let Some(i) = memchr2(b'\n', b'\r', rest) {
        f(rest.get(..i).unwrap_or_default());
        let skip = if rest.get(i..i + 2) == Some(b"\r\n") {
            2
        } else {
            1
        };
        rest = rest.get(i + skip..).unwrap_or_default();
    }
    f(rest);
}

/// Writes `n` in base ten without allocating.
fn put_decimal<S: SseSink + ?Sized>(out: &mut S, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        if let Some(d) = digits.get_mut(at) {
            // n % 10 < 10, so the cast cannot truncate.
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put_bytes(digits.get(at..).unwrap_or_default());
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn event(name: Option<&str>, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_event(&mut out, name, data);
        out
    }

    #[test]
    fn data_only_event() {
        assert_eq!(event(None, b"{\"a\":1}"), b"data: {\"a\":1}\n\n");
        assert_eq!(event(None, b"[DONE]"), b"data: [DONE]\n\n");
    }

    #[test]
    fn named_event() {
        assert_eq!(
            event(Some("message_stop"), b"{\"type\":\"message_stop\"}"),
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
        assert_eq!(event(Some(""), b"x"), b"data: x\n\n");
    }

    #[test]
    fn multi_line_data_becomes_several_lines() {
        assert_eq!(event(None, b"a\nb"), b"data: a\ndata: b\n\n");
        assert_eq!(
            event(None, b"a\r\nb\rc\n"),
            b"data: a\ndata: b\ndata: c\ndata: \n\n"
        );
        assert_eq!(event(None, b""), b"data: \n\n");
    }

    #[test]
    fn an_unbroken_frame_is_written_as_encode_named_writes_it() {
        for (name, data) in [
            (Some(&b"response.output_text.delta"[..]), &b"{\"a\":1}"[..]),
            (None, b"x"),
            (Some(b""), b""),
        ] {
            let (mut named, mut unbroken) = (Vec::new(), Vec::new());
            encode_named(&mut named, name, data);
            encode_unbroken(&mut unbroken, name, &[data]);
            assert_eq!(unbroken, named, "{name:?} {data:?}");
            // In pieces, as a spliced frame is written.
            let (head, tail) = data.split_at(data.len() / 2);
            let mut pieces = Vec::new();
            encode_unbroken(&mut pieces, name, &[head, &[], tail]);
            assert_eq!(pieces, named, "{name:?} {data:?}");
        }
    }

    #[test]
    fn line_breaks_are_removed_from_names_and_ids() {
        assert_eq!(event(Some("a\r\nb"), b"x"), b"event: ab\ndata: x\n\n");
        let mut out = Vec::new();
        encode_frame(
            &mut out,
            &SseEvent {
                event: None,
                data: b"x",
                id: Some(b"1\n2"),
                retry: None,
                one_line: true,
            },
        );
        assert_eq!(out, b"id: 12\ndata: x\n\n");
    }

    #[test]
    fn full_frame() {
        let mut out = bytes::BytesMut::new();
        encode_frame(
            &mut out,
            &SseEvent {
                event: Some(b"delta"),
                data: b"1\n2",
                id: Some(b"7"),
                retry: Some(0),
                one_line: false,
            },
        );
        assert_eq!(
            &out[..],
            b"event: delta\nid: 7\nretry: 0\ndata: 1\ndata: 2\n\n"
        );
        out.clear();
        encode_frame(
            &mut out,
            &SseEvent {
                event: None,
                data: b"",
                id: None,
                retry: Some(u64::MAX),
                one_line: true,
            },
        );
        assert_eq!(&out[..], b"retry: 18446744073709551615\ndata: \n\n");
    }

    #[test]
    fn comments() {
        let mut out = Vec::new();
        encode_comment(&mut out, b"ping");
        encode_comment(&mut out, b"");
        encode_comment(&mut out, b"a\nb");
        assert_eq!(out, b": ping\n\n:\n\n: a\n: b\n\n");
    }

    #[test]
    fn appends_to_existing_content_in_both_sinks() {
        let mut v = b"x".to_vec();
        let mut bm = bytes::BytesMut::from(&b"x"[..]);
        encode_event(&mut v, Some("e"), b"d");
        encode_event(&mut bm, Some("e"), b"d");
        encode_comment(&mut v, b"c");
        encode_comment(&mut bm, b"c");
        assert_eq!(v, b"xevent: e\ndata: d\n\n: c\n\n");
        assert_eq!(&bm[..], &v[..]);
    }

    #[test]
    fn single_line_frame_needs_one_allocation() {
        let mut out = Vec::new();
        encode_event(&mut out, Some("content_block_delta"), &[b'x'; 300]);
        let cap = out.capacity();
        assert!(cap >= out.len());
        assert_eq!(
            cap,
            frame_size_hint(Some(b"content_block_delta"), &[b'x'; 300])
        );
    }
}
