//! Incremental, push-based decoding of a `text/event-stream` byte stream into events and comments.
//!
//! The decoder follows the WHATWG "event stream interpretation" rules, working on
//! raw bytes as they arrive from the network: chunks may split the stream at any
//! byte, including inside a UTF-8 character or between the `\r` and `\n` of a
//! CRLF line ending. Decoded items are handed to a callback and borrow either the
//! input chunk (the common case: the whole frame lies inside one chunk) or the
//! decoder's reusable buffers (a frame that spans chunks, or multi-line `data`),
//! so the steady state allocates nothing.
//!
//! Deliberate differences from a browser `EventSource`:
//! - values are bytes, not text: invalid UTF-8 is passed through unchanged
//!   rather than replaced with U+FFFD (the caller parses JSON from bytes);
//! - [`SseEvent::id`] is the `id` field of this frame only (the spec's sticky
//!   "last event ID" is left to the caller), and [`SseEvent::retry`] is the
//!   frame's `retry` field rather than a stream-wide setting;
//! - comment lines are reported as [`SseItem::Comment`] so a proxy can forward
//!   keep-alives.

use memchr::{memchr, memchr2};

/// A frame size limit suited to LLM streams: large enough for a frame carrying
/// a base64-encoded generated image, small enough to bound a misbehaving upstream.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The UTF-8 byte order mark, skipped once at the very start of a stream.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Why decoding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// The frame being read outgrew the decoder's `max_frame_bytes`. The
    /// decoder refuses further input until [`SseDecoder::reset`] or
    /// [`SseDecoder::finish`].
    #[error("server-sent-events frame exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// The limit that was exceeded (the decoder's `max_frame_bytes`).
        limit: usize,
    },
    /// The stream ended inside a frame: an unterminated line, or field lines
    /// not yet followed by the blank line that dispatches them.
    #[error("server-sent-events stream ended inside an unfinished frame")]
    Truncated,
}

/// One dispatched event: the fields of a frame that had at least one `data` line.
///
/// Slices borrow the pushed chunk or the decoder's buffers and live only for the
/// duration of the callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event` field (the last one wins); `None` when absent or empty,
    /// which a browser would report as type `message`.
    pub event: Option<&'a [u8]>,
    /// The `data` lines joined with `\n` (a single `data:` line with nothing
    /// after it yields an empty slice).
    pub data: &'a [u8],
    /// The `id` field of this frame, if any (`Some(b"")` for a bare `id:`, which
    /// resets the last event id). Values containing NUL are ignored, per spec.
    pub id: Option<&'a [u8]>,
    /// The `retry` field of this frame, if it was a valid base-ten integer
    /// (ASCII digits only, fitting in a `u64`).
    pub retry: Option<u64>,
    /// Whether `data` came from one `data:` line, so holds no line break
    /// (nor does `event`, a line's value): an encoder may write both
    /// without looking for one (`sse::encoder::encode_unbroken`).
    pub one_line: bool,
}

impl<'a> SseEvent<'a> {
    /// The event name as text, or `None` when absent or not valid UTF-8.
    #[must_use]
    pub fn event_str(&self) -> Option<&'a str> {
        self.event.and_then(|e| std::str::from_utf8(e).ok())
    }
}

/// One item decoded from the stream, in stream order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseItem<'a> {
    /// A dispatched event (a frame ended by a blank line with at least one `data` line).
    Event(SseEvent<'a>),
    /// A comment line (`:` first), without the colon and without one following
    /// space if present: `": ping"` gives `b"ping"`. Typically a keep-alive.
    Comment(&'a [u8]),
}

/// Where a field value of the current frame lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Slot {
    /// No such field in the frame so far.
    #[default]
    Absent,
    /// A range of the chunk being pushed (only valid during that push).
    Chunk(usize, usize),
    /// The field's buffer in the decoder holds the value.
    Owned,
}

/// The fields gathered for the frame being read.
#[derive(Debug, Default)]
struct Frame {
    data: Slot,
    event: Slot,
    id: Slot,
    retry: Option<u64>,
    /// Bytes of the frame's field lines so far, each counted with one byte for
    /// its line ending (comment lines are not counted).
    size: usize,
    /// A second `data:` line was joined to the first (with `\n`).
    joined: bool,
}

/// Progress through the optional byte order mark at the start of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bom {
    /// This many leading bytes of the stream matched the BOM so far (0..=2).
    Matching(u8),
    /// Past the start of the stream.
    Done,
}

/// A push-based incremental SSE decoder holding at most one partial frame.
///
/// Feed network chunks with [`push`](Self::push); call [`finish`](Self::finish)
/// at end of stream to learn whether it was cut inside a frame.
///
/// Memory is bounded: the decoder never holds more than `max_frame_bytes` of
/// frame content. The limit applies to the frame's field lines (each counted
/// with one byte for its line ending) plus the line being read; a comment line
/// must fit while it is being read but is not kept. Exceeding it is an error,
/// deterministically: the same stream fails at the same point however it is
/// chunked.
#[derive(Debug)]
pub struct SseDecoder {
    max_frame_bytes: usize,
    frame: Frame,
    /// The unterminated line at the end of the previous chunk.
    line: Vec<u8>,
    /// Joined `data` values when they could not be borrowed from a chunk.
    data: Vec<u8>,
    /// The `event` value when it could not be borrowed from a chunk.
    event: Vec<u8>,
    /// The `id` value when it could not be borrowed from a chunk.
    id: Vec<u8>,
    /// The previous chunk ended with a `\r` line ending: a `\n` starting the
    /// next chunk belongs to it.
    skip_lf: bool,
    bom: Bom,
    /// A [`SseError::FrameTooLarge`] was returned; input is refused until reset.
    failed: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

impl SseDecoder {
    /// A decoder for a new stream accepting frames of up to `max_frame_bytes`
    /// (see the type docs for how frames are measured). Allocates nothing until
    /// a frame spans chunks.
    #[must_use]
    pub fn new(max_frame_bytes: usize) -> Self {
        Self {
            max_frame_bytes,
            frame: Frame::default(),
            line: Vec::new(),
            data: Vec::new(),
            event: Vec::new(),
            id: Vec::new(),
            skip_lf: false,
            bom: Bom::Matching(0),
            failed: false,
        }
    }

    /// The frame size limit given to [`new`](Self::new).
    #[must_use]
    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// Decodes the next chunk of the stream, calling `f` for every item
    /// completed by it, in order. Bytes of an unfinished frame are kept for the
    /// next call.
    ///
    /// # Errors
    ///
    /// [`SseError::FrameTooLarge`] when the frame being read exceeds
    /// `max_frame_bytes`; items before the offending line have been delivered.
    /// The decoder then refuses input (returning the same error) until
    /// [`reset`](Self::reset).
    pub fn push<F>(&mut self, chunk: &[u8], mut f: F) -> Result<(), SseError>
    where
        F: FnMut(SseItem<'_>),
    {
        if self.failed {
            return Err(self.too_large());
        }
        let mut rest = chunk;
        if let Bom::Matching(matched) = self.bom {
            let mut n = usize::from(matched);
            let mut taken = 0;
            let mut mismatch = false;
            while let Some(&expected) = BOM.get(n) {
                match rest.get(taken) {
                    None => break,
                    Some(&b) if b == expected => {
                        n += 1;
                        taken += 1;
                    }
                    Some(_) => {
                        mismatch = true;
                        break;
                    }
                }
            }
            rest = rest.get(taken..).unwrap_or_default();
            if n == BOM.len() {
                self.bom = Bom::Done;
            } else if mismatch {
                // Not a BOM after all: the bytes matched so far are content.
                self.bom = Bom::Done;
                self.feed(BOM.get(..n).unwrap_or_default(), &mut f)?;
            } else {
                // The chunk ended inside a possible BOM (n < 3 fits in a u8).
                self.bom = Bom::Matching(u8::try_from(n).unwrap_or_default());
                return Ok(());
            }
        }
        self.feed(rest, &mut f)
    }

    /// Ends the stream: reports whether it stopped inside a frame, then resets
    /// the decoder for a new stream (keeping its buffers' capacity). Per spec,
    /// an unfinished frame is discarded, never dispatched.
    ///
    /// # Errors
    ///
    /// [`SseError::Truncated`] when an unterminated line or undispatched field
    /// lines were left (see [`has_partial`](Self::has_partial)), or
    /// [`SseError::FrameTooLarge`] when an earlier push failed with it.
    pub fn finish(&mut self) -> Result<(), SseError> {
        if let Bom::Matching(n) = self.bom {
            // The stream ended inside a possible BOM: those bytes were content.
            self.bom = Bom::Done;
            let start = BOM.get(..usize::from(n)).unwrap_or_default();
            // Without a line ending no item can complete; an error is kept in `failed`.
            let _ = self.feed(start, &mut |_: SseItem<'_>| {});
        }
        let result = if self.failed {
            Err(self.too_large())
        } else if self.has_partial() {
            Err(SseError::Truncated)
        } else {
            Ok(())
        };
        self.reset();
        result
    }

    /// Whether the decoder holds part of a frame: an unterminated line, field
    /// lines not yet ended by a blank line, or the first bytes of a possible BOM.
    /// Comment lines alone do not make a partial frame.
    #[must_use]
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty()
            || self.frame.size > 0
            || matches!(self.bom, Bom::Matching(n) if n > 0)
    }

    /// Bytes of frame content the decoder currently holds between pushes
    /// (never more than `max_frame_bytes`).
    #[must_use]
    pub fn buffered_bytes(&self) -> usize {
        self.line.len() + self.data.len() + self.event.len() + self.id.len()
    }

    /// Forgets all stream state (partial frame, BOM progress, a past error) so
    /// the decoder can read a new stream; buffer capacity is kept for reuse.
    pub fn reset(&mut self) {
        self.frame = Frame::default();
        self.line.clear();
        self.data.clear();
        self.event.clear();
        self.id.clear();
        self.skip_lf = false;
        self.bom = Bom::Matching(0);
        self.failed = false;
    }

    fn too_large(&self) -> SseError {
        SseError::FrameTooLarge {
            limit: self.max_frame_bytes,
        }
    }

    /// Whether a line of `len` bytes (plus its ending) still fits in the frame.
    fn check_line(&self, len: usize) -> Result<(), SseError> {
        if self.frame.size.saturating_add(len).saturating_add(1) > self.max_frame_bytes {
            Err(self.too_large())
        } else {
            Ok(())
        }
    }

    /// [`feed_lines`](Self::feed_lines), marking the decoder failed on error.
    fn feed<F>(&mut self, chunk: &[u8], f: &mut F) -> Result<(), SseError>
    where
        F: FnMut(SseItem<'_>),
    {
        let result = self.feed_lines(chunk, f);
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    /// Splits `chunk` (BOM already handled) into lines and processes each.
    fn feed_lines<F>(&mut self, chunk: &[u8], f: &mut F) -> Result<(), SseError>
    where
        F: FnMut(SseItem<'_>),
    {
        let mut pos = 0;
        if self.skip_lf {
            match chunk.first() {
                None => return Ok(()),
                Some(&b) => {
                    self.skip_lf = false;
                    if b == b'\n' {
                        pos = 1;
                    }
                }
            }
        }

        // Complete the line left unterminated by the previous chunk.
        if !self.line.is_empty() {
            let tail = chunk.get(pos..).unwrap_or_default();
            match memchr2(b'\n', b'\r', tail) {
                None => {
                    // Still no line ending: the line must fit before it grows.
                    if self
                        .frame
                        .size
                        .saturating_add(self.line.len())
                        .saturating_add(tail.len())
                        > self.max_frame_bytes
                    {
                        return Err(self.too_large());
                    }
                    extend_bounded(&mut self.line, tail, self.max_frame_bytes);
                    return Ok(());
                }
                Some(k) => {
                    self.check_line(self.line.len() + k)?;
                    extend_bounded(
                        &mut self.line,
                        tail.get(..k).unwrap_or_default(),
                        self.max_frame_bytes,
                    );
                    pos = self.after_line_end(chunk, pos + k);
                    let line = std::mem::take(&mut self.line);
                    let result = self.process_line(chunk, &line, None, f);
                    self.line = line;
                    self.line.clear();
                    result?;
                }
            }
        }

        while let Some(tail) = chunk.get(pos..).filter(|t| !t.is_empty()) {
            match memchr2(b'\n', b'\r', tail) {
                None => {
                    // An unterminated line: keep it (and the frame) for the next chunk.
                    if self.frame.size.saturating_add(tail.len()) > self.max_frame_bytes {
                        return Err(self.too_large());
                    }
                    self.materialize(chunk);
                    extend_bounded(&mut self.line, tail, self.max_frame_bytes);
                    return Ok(());
                }
                Some(k) => {
                    let start = pos;
                    let end = pos + k;
                    pos = self.after_line_end(chunk, end);
                    let line = chunk.get(start..end).unwrap_or_default();
                    self.process_line(chunk, line, Some(start), f)?;
                }
            }
        }
        self.materialize(chunk);
        Ok(())
    }

    /// The position after the line ending at `end` (a `\r` or `\n`), treating
    /// CRLF as one ending; a `\r` ending the chunk may still be followed by `\n`.
    fn after_line_end(&mut self, chunk: &[u8], end: usize) -> usize {
        if chunk.get(end) == Some(&b'\r') {
            match chunk.get(end + 1) {
                Some(b'\n') => end + 2,
                Some(_) => end + 1,
                None => {
                    self.skip_lf = true;
                    end + 1
                }
            }
        } else {
            end + 1
        }
    }

    /// Processes one complete line (without its ending). `start` is the line's
    /// offset in `chunk` when it lies there, `None` when it was reassembled in
    /// the line buffer.
    fn process_line<F>(
        &mut self,
        chunk: &[u8],
        line: &[u8],
        start: Option<usize>,
        f: &mut F,
    ) -> Result<(), SseError>
    where
        F: FnMut(SseItem<'_>),
    {
        let Some((&first, after_first)) = line.split_first() else {
            self.dispatch(chunk, f);
            return Ok(());
        };
        self.check_line(line.len())?;
        if first == b':' {
            f(SseItem::Comment(strip_space(after_first)));
            return Ok(());
        }
        self.frame.size += line.len() + 1;

        // The two fields a stream is made of are named without a search
        // for the colon (what the search finds for them).
        let colon = if line.starts_with(b"data:") {
            Some(4)
        } else if line.starts_with(b"event:") {
            Some(5)
        } else {
            memchr(b':', line)
        };
        let (name, value_at) = match colon {
            Some(colon) => {
                let value_at = if line.get(colon + 1) == Some(&b' ') {
                    colon + 2
                } else {
                    colon + 1
                };
                (line.get(..colon).unwrap_or_default(), value_at)
            }
            None => (line, line.len()),
        };
        let value = line.get(value_at..).unwrap_or_default();
        let range = start.map(|s| (s + value_at, s + line.len()));

        match name {
            b"data" => self.add_data(chunk, value, range),
            b"event" if value.is_empty() => self.frame.event = Slot::Absent,
            b"event" => store(
                &mut self.frame.event,
                &mut self.event,
                value,
                range,
                self.max_frame_bytes,
            ),
            // Per spec, an id containing NUL is ignored.
            b"id" if memchr(0, value).is_none() => store(
                &mut self.frame.id,
                &mut self.id,
                value,
                range,
                self.max_frame_bytes,
            ),
            b"retry" => {
                if let Some(ms) = parse_retry(value) {
                    self.frame.retry = Some(ms);
                }
            }
            // Unknown fields (and ids with NUL) are ignored.
            _ => {}
        }
        Ok(())
    }

    /// Appends a `data` line's value to the frame.
    fn add_data(&mut self, chunk: &[u8], value: &[u8], range: Option<(usize, usize)>) {
        let limit = self.max_frame_bytes;
        self.frame.joined |= self.frame.data != Slot::Absent;
        match self.frame.data {
            Slot::Absent => store(&mut self.frame.data, &mut self.data, value, range, limit),
            Slot::Chunk(a, b) => {
                self.data.clear();
                extend_bounded(&mut self.data, chunk.get(a..b).unwrap_or_default(), limit);
                extend_bounded(&mut self.data, b"\n", limit);
                extend_bounded(&mut self.data, value, limit);
                self.frame.data = Slot::Owned;
            }
            Slot::Owned => {
                extend_bounded(&mut self.data, b"\n", limit);
                extend_bounded(&mut self.data, value, limit);
            }
        }
    }

    /// Copies values still borrowed from `chunk` into the decoder's buffers,
    /// before the chunk goes away.
    fn materialize(&mut self, chunk: &[u8]) {
        let limit = self.max_frame_bytes;
        for (slot, buf) in [
            (&mut self.frame.data, &mut self.data),
            (&mut self.frame.event, &mut self.event),
            (&mut self.frame.id, &mut self.id),
        ] {
            if let Slot::Chunk(a, b) = *slot {
                buf.clear();
                extend_bounded(buf, chunk.get(a..b).unwrap_or_default(), limit);
                *slot = Slot::Owned;
            }
        }
    }

    /// A blank line: dispatches the frame if it had data, then starts a new one.
    fn dispatch<F>(&mut self, chunk: &[u8], f: &mut F)
    where
        F: FnMut(SseItem<'_>),
    {
        let frame = std::mem::take(&mut self.frame);
        let data = resolve(frame.data, chunk, &self.data);
        if let Some(data) = data {
            f(SseItem::Event(SseEvent {
                event: resolve(frame.event, chunk, &self.event),
                data,
                id: resolve(frame.id, chunk, &self.id),
                retry: frame.retry,
                one_line: !frame.joined,
            }));
        }
        self.data.clear();
        self.event.clear();
        self.id.clear();
    }
}

/// Records a single-valued field: borrowed from the chunk when `range` is
/// given, otherwise copied into `buf`.
fn store(
    slot: &mut Slot,
    buf: &mut Vec<u8>,
    value: &[u8],
    range: Option<(usize, usize)>,
    limit: usize,
) {
    if let Some((a, b)) = range {
        *slot = Slot::Chunk(a, b);
    } else {
        buf.clear();
        extend_bounded(buf, value, limit);
        *slot = Slot::Owned;
    }
}

/// The bytes a slot refers to.
fn resolve<'a>(slot: Slot, chunk: &'a [u8], buf: &'a [u8]) -> Option<&'a [u8]> {
    match slot {
        Slot::Absent => None,
        Slot::Chunk(a, b) => Some(chunk.get(a..b).unwrap_or_default()),
        Slot::Owned => Some(buf),
    }
}

/// Drops one leading space, as the spec does for field values.
fn strip_space(value: &[u8]) -> &[u8] {
    value.strip_prefix(b" ").unwrap_or(value)
}

/// A `retry` value: ASCII digits only, base ten, fitting in a `u64`.
fn parse_retry(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Appends to a buffer whose length is known to stay within `limit`, growing
/// its capacity geometrically but never past `limit`.
fn extend_bounded(buf: &mut Vec<u8>, bytes: &[u8], limit: usize) {
    let needed = buf.len().saturating_add(bytes.len());
    if needed > buf.capacity() {
        let target = buf
            .capacity()
            .saturating_mul(2)
            .max(needed)
            .min(limit.max(needed));
        buf.reserve_exact(target - buf.len());
    }
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::sse::tests::{decode_chunks, decode_whole, Item};

    const BIG: usize = 1 << 20;

    /// Decodes `input` whole, asserting a clean end, and checks that every
    /// single split gives the same items.
    fn items(input: &[u8]) -> Vec<Item> {
        let (items, end) = decode_whole(BIG, input);
        assert_eq!(end, Ok(()), "stream {input:?}");
        for at in 0..=input.len() {
            let split = decode_chunks(BIG, [&input[..at], &input[at..]]);
            assert_eq!(split, (items.clone(), Ok(())), "split at {at} of {input:?}");
        }
        items
    }

    fn event(event: Option<&str>, data: &str, id: Option<&str>, retry: Option<u64>) -> Item {
        Item::Event {
            event: event.map(|e| e.as_bytes().to_vec()),
            data: data.as_bytes().to_vec(),
            id: id.map(|i| i.as_bytes().to_vec()),
            retry,
        }
    }

    #[test]
    fn a_frame_of_one_data_line_says_so_however_it_is_split() {
        let input = b"event: e\ndata: {\"a\":1}\n\ndata: x\r\ndata: y\r\n\r\n: c\ndata:\n\n";
        for at in 0..=input.len() {
            let mut d = SseDecoder::new(BIG);
            let mut seen = Vec::new();
            for part in [&input[..at], &input[at..]] {
                d.push(part, |item| {
                    if let SseItem::Event(e) = item {
                        seen.push((e.data.to_vec(), e.one_line));
                    }
                })
                .unwrap();
            }
            assert_eq!(
                seen,
                [
                    (b"{\"a\":1}".to_vec(), true),
                    (b"x\ny".to_vec(), false),
                    (Vec::new(), true)
                ],
                "split at {at}"
            );
        }
    }

    #[test]
    fn lf_line_endings() {
        assert_eq!(
            items(b"data: a\n\ndata: b\n\n"),
            [Item::data("a"), Item::data("b")]
        );
    }

    #[test]
    fn crlf_line_endings() {
        assert_eq!(
            items(b"data: a\r\n\r\ndata: b\r\n\r\n"),
            [Item::data("a"), Item::data("b")]
        );
    }

    #[test]
    fn cr_line_endings() {
        assert_eq!(
            items(b"data: a\r\rdata: b\r\r"),
            [Item::data("a"), Item::data("b")]
        );
    }

    #[test]
    fn mixed_line_endings() {
        assert_eq!(
            items(b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\n\r"),
            [Item::data("a\nb\nc"), Item::data("d")]
        );
    }

    #[test]
    fn cr_ending_a_chunk_pairs_with_a_following_lf() {
        // "\r" then "\n" in the next chunk is one line ending, not two.
        let (items, end) = decode_chunks(
            BIG,
            [&b"data: a\r"[..], b"\n", b"data: b\r", b"\n\r", b"\n"],
        );
        assert_eq!((items, end), (vec![Item::data("a\nb")], Ok(())));
        // Only one LF is absorbed: the next one is a blank line.
        let (items, _) = decode_chunks(BIG, [&b"data: a\r"[..], b"\n", b"\n"]);
        assert_eq!(items, [Item::data("a")]);
        // A CR ending a chunk followed by a CR is a blank line.
        let (items, _) = decode_chunks(BIG, [&b"data: a\r"[..], b"\r"]);
        assert_eq!(items, [Item::data("a")]);
        // Empty chunks between the CR and the LF change nothing.
        let (items, end) = decode_chunks(BIG, [&b"data: a\r"[..], b"", b"", b"\ndata: b\n\n"]);
        assert_eq!((items, end), (vec![Item::data("a\nb")], Ok(())));
    }

    #[test]
    fn comments_are_reported_with_one_space_stripped() {
        assert_eq!(
            items(b": ping\n:\n:  two\n:x\n"),
            [
                Item::comment("ping"),
                Item::comment(""),
                Item::comment(" two"),
                Item::comment("x")
            ]
        );
    }

    #[test]
    fn comment_inside_a_frame_comes_first_and_does_not_break_it() {
        assert_eq!(
            items(b"data: a\n: keep-alive\ndata: b\n\n"),
            [Item::comment("keep-alive"), Item::data("a\nb")]
        );
    }

    #[test]
    fn leading_bom_is_skipped_once() {
        assert_eq!(items(b"\xEF\xBB\xBFdata: x\n\n"), [Item::data("x")]);
        // A second BOM is part of the first field name, so the line is ignored.
        assert_eq!(
            items(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n"),
            [Item::data("y")]
        );
        // A BOM later in the stream is content.
        assert_eq!(
            items(b"data: x\n\n\xEF\xBB\xBFdata: y\n\ndata: z\n\n"),
            [Item::data("x"), Item::data("z")]
        );
        let (items, end) = decode_chunks(BIG, [&b"\xEF"[..], b"\xBB", b"\xBF", b"data: x\n\n"]);
        assert_eq!((items, end), (vec![Item::data("x")], Ok(())));
    }

    #[test]
    fn bytes_that_only_start_like_a_bom_are_content() {
        // "\xEF\xBB" + ":" is not a comment: the line has a field name.
        assert_eq!(items(b"\xEF\xBB: c\n\n"), []);
        let (_, end) = decode_chunks(BIG, [&b"\xEF"[..], b"\xBB"]);
        assert_eq!(end, Err(SseError::Truncated));
        let (_, end) = decode_chunks(BIG, [&b"\xEF"[..], b"\xBB: c\n"]);
        assert_eq!(end, Err(SseError::Truncated));
        assert_eq!(items(b"\xEF: c\n\ndata: x\n\n"), [Item::data("x")]);
        let mut d = SseDecoder::new(BIG);
        d.push(b"\xEF", |_| {}).unwrap();
        assert!(d.has_partial());
    }

    #[test]
    fn multi_line_data_is_joined_with_lf() {
        assert_eq!(
            items(b"data: a\ndata: b\ndata:\ndata: c\n\n"),
            [Item::data("a\nb\n\nc")]
        );
        assert_eq!(items(b"data: a\ndata: \n\n"), [Item::data("a\n")]);
    }

    #[test]
    fn only_one_space_after_the_colon_is_dropped() {
        assert_eq!(
            items(b"data:x\n\ndata:  x\n\ndata: \n\ndata:\n\ndata:\tx\n\n"),
            [
                Item::data("x"),
                Item::data(" x"),
                Item::data(""),
                Item::data(""),
                Item::data("\tx")
            ]
        );
    }

    #[test]
    fn event_id_and_retry() {
        assert_eq!(
            items(b"event: delta\nid: 42\nretry: 1500\ndata: {\"a\":1}\n\n"),
            [event(Some("delta"), "{\"a\":1}", Some("42"), Some(1500))]
        );
        // Values may contain colons; field order does not matter.
        assert_eq!(
            items(b"data: x\nid: a:b\nevent: e:f\n\n"),
            [event(Some("e:f"), "x", Some("a:b"), None)]
        );
    }

    #[test]
    fn fields_do_not_leak_into_the_next_event() {
        assert_eq!(
            items(b"event: a\nid: 1\nretry: 5\ndata: x\n\ndata: y\n\n"),
            [event(Some("a"), "x", Some("1"), Some(5)), Item::data("y")]
        );
    }

    #[test]
    fn last_event_name_wins_and_empty_resets_it() {
        assert_eq!(
            items(b"event: a\nevent: b\ndata: x\n\n"),
            [Item::named(Some("b"), "x")]
        );
        assert_eq!(items(b"event: a\nevent:\ndata: x\n\n"), [Item::data("x")]);
    }

    #[test]
    fn id_with_nul_is_ignored_and_bare_id_is_empty() {
        assert_eq!(
            items(b"id: 1\nid: 2\0\ndata: x\n\n"),
            [event(None, "x", Some("1"), None)]
        );
        assert_eq!(
            items(b"id\ndata: x\n\n"),
            [event(None, "x", Some(""), None)]
        );
    }

    #[test]
    fn invalid_retry_is_ignored() {
        for input in [
            &b"retry: 10a\ndata: x\n\n"[..],
            b"retry:\ndata: x\n\n",
            b"retry: -1\ndata: x\n\n",
            b"retry:  10\ndata: x\n\n",
            b"retry: 99999999999999999999999\ndata: x\n\n",
        ] {
            assert_eq!(items(input), [Item::data("x")], "{input:?}");
        }
        assert_eq!(
            items(b"retry: 7\nretry: x\ndata: x\n\n"),
            [event(None, "x", None, Some(7))]
        );
    }

    #[test]
    fn field_without_colon_has_an_empty_value() {
        assert_eq!(items(b"event\ndata\n\n"), [Item::data("")]);
        assert_eq!(items(b"data\ndata\n\n"), [Item::data("\n")]);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        assert_eq!(
            items(b"foo: bar\nData: no\ndata: x\nbaz\n\n"),
            [Item::data("x")]
        );
    }

    #[test]
    fn frames_without_data_are_not_dispatched() {
        assert_eq!(items(b"event: ping\n\nid: 1\n\nretry: 5\n\n\n\n"), []);
        // ... but an empty data line is data.
        assert_eq!(items(b"data:\n\n"), [Item::data("")]);
        assert_eq!(
            items(b"event: ping\ndata\n\n"),
            [Item::named(Some("ping"), "")]
        );
    }

    #[test]
    fn utf8_split_inside_a_character_is_reassembled() {
        let input = "event: \u{1F30D}\ndata: h\u{e9}llo \u{1F30D} \u{65E5}\u{672C}\n\n";
        let got = items(input.as_bytes());
        assert_eq!(
            got,
            [Item::named(
                Some("\u{1F30D}"),
                "h\u{e9}llo \u{1F30D} \u{65E5}\u{672C}"
            )]
        );
        assert_eq!(
            decode_chunks(BIG, input.as_bytes().chunks(1)),
            (got, Ok(()))
        );
    }

    #[test]
    fn invalid_utf8_passes_through() {
        let (items, end) = decode_whole(BIG, b"event: \xFF\ndata: \xC3\n\n");
        assert_eq!(end, Ok(()));
        assert_eq!(
            items,
            [Item::Event {
                event: Some(vec![0xFF]),
                data: vec![0xC3],
                id: None,
                retry: None
            }]
        );
    }

    #[test]
    fn finish_reports_truncated_frames_and_resets() {
        for (input, truncated) in [
            (&b""[..], false),
            (b"data: x\n\n", false),
            (b": ping\n", false),
            (b"data: x\n\n: ping\n", false),
            (b"data: x", true),
            (b"data: x\n", true),
            (b"data: x\r", true),
            (b"event: a\n", true),
            (b"foo\n", true),
            (b": unterminated", true),
            (b"\xEF\xBB\xBF", false),
            (b"\xEF\xBB", true),
        ] {
            let want = if truncated {
                Err(SseError::Truncated)
            } else {
                Ok(())
            };
            assert_eq!(decode_whole(BIG, input).1, want, "{input:?}");
        }
        // The decoder is reusable after finish, including BOM detection.
        let mut d = SseDecoder::new(BIG);
        d.push(b"data: x", |_| {}).unwrap();
        assert!(d.has_partial());
        assert_eq!(d.finish(), Err(SseError::Truncated));
        assert!(!d.has_partial());
        let mut got = Vec::new();
        d.push(b"\xEF\xBB\xBFdata: y\n\n", |i| got.push(Item::from(i)))
            .unwrap();
        assert_eq!(got, [Item::data("y")]);
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn truncated_frame_is_never_dispatched() {
        let (items, end) = decode_whole(BIG, b"data: a\n\ndata: b\n");
        assert_eq!(
            (items, end),
            (vec![Item::data("a")], Err(SseError::Truncated))
        );
    }

    #[test]
    fn frame_over_the_limit_is_an_error() {
        let too_large = Err(SseError::FrameTooLarge { limit: 16 });
        // "data: 012345678" is 15 bytes, 16 with its line ending: fits exactly.
        assert_eq!(
            decode_whole(16, b"data: 012345678\n\n"),
            (vec![Item::data("012345678")], Ok(()))
        );
        assert_eq!(
            decode_whole(16, b"data: 0123456789\n\n"),
            (vec![], too_large.clone())
        );
        // Lines add up within a frame; the blank line starts over.
        assert_eq!(
            decode_whole(16, b"data: 0\ndata: 1\n\n"),
            (vec![Item::data("0\n1")], Ok(()))
        );
        assert_eq!(
            decode_whole(16, b"data: 00\ndata: 1\n\n"),
            (vec![], too_large.clone())
        );
        assert_eq!(
            decode_whole(16, b"data: 0\n\ndata: 1\n\n: c\ndata: 2\n\n"),
            (
                vec![
                    Item::data("0"),
                    Item::data("1"),
                    Item::comment("c"),
                    Item::data("2")
                ],
                Ok(())
            )
        );
        // Items before the offending line are delivered.
        assert_eq!(
            decode_whole(16, b"data: 0\n\n: ok\ndata: 0123456789abcdef\n\n"),
            (
                vec![Item::data("0"), Item::comment("ok")],
                too_large.clone()
            )
        );
        // Every chunking fails the same way.
        for chunk in 1..20 {
            assert_eq!(
                decode_chunks(16, b"data: 0\n\ndata: 0123456789abcdef\n\n".chunks(chunk)),
                (vec![Item::data("0")], too_large.clone()),
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn comments_must_fit_but_do_not_accumulate() {
        assert_eq!(decode_whole(4, b":ab\n".repeat(100).as_slice()).1, Ok(()));
        assert_eq!(
            decode_whole(4, b":abcd\n"),
            (vec![], Err(SseError::FrameTooLarge { limit: 4 }))
        );
    }

    #[test]
    fn oversized_partial_line_is_rejected_before_buffering() {
        let mut d = SseDecoder::new(8);
        assert_eq!(d.push(b"data: 01", |_| {}), Ok(()));
        assert_eq!(d.buffered_bytes(), 8);
        assert_eq!(
            d.push(b"2", |_| {}),
            Err(SseError::FrameTooLarge { limit: 8 })
        );
        assert!(d.buffered_bytes() <= 8);
        let big = vec![b'x'; 1 << 16];
        let mut d = SseDecoder::new(8);
        assert_eq!(
            d.push(&big, |_| {}),
            Err(SseError::FrameTooLarge { limit: 8 })
        );
        assert_eq!(d.buffered_bytes(), 0);
    }

    #[test]
    fn error_is_sticky_until_reset() {
        let mut d = SseDecoder::new(8);
        assert!(d.push(b"data: 0123456789\n\n", |_| {}).is_err());
        let mut called = false;
        assert!(d.push(b"data: 1\n\n", |_| called = true).is_err());
        assert!(!called);
        assert_eq!(d.finish(), Err(SseError::FrameTooLarge { limit: 8 }));
        // finish resets: the decoder reads a new stream.
        let mut got = Vec::new();
        d.push(b"data: 1\n\n", |i| got.push(Item::from(i))).unwrap();
        assert_eq!(got, [Item::data("1")]);
        d.reset();
        assert!(!d.has_partial());
    }

    #[test]
    fn whole_frames_are_borrowed_from_the_chunk() {
        let chunk = b"event: e\ndata: x\n\ndata: y\n\n";
        let range = chunk.as_ptr_range();
        let mut d = SseDecoder::new(BIG);
        let mut seen = 0;
        d.push(chunk, |item| {
            let SseItem::Event(e) = item else {
                panic!("{item:?}")
            };
            assert!(range.contains(&e.data.as_ptr()));
            if let Some(name) = e.event {
                assert!(range.contains(&name.as_ptr()));
            }
            seen += 1;
        })
        .unwrap();
        assert_eq!(seen, 2);
        assert_eq!(d.buffered_bytes(), 0);
        assert_eq!(
            d.line.capacity() + d.data.capacity() + d.event.capacity(),
            0
        );
    }

    #[test]
    fn frames_spanning_chunks_reuse_the_buffers() {
        let mut d = SseDecoder::new(BIG);
        let mut got = Vec::new();
        d.push(b"event: e\ndata: first half", |i| got.push(Item::from(i)))
            .unwrap();
        assert!(d.has_partial());
        assert_eq!(d.buffered_bytes(), "e".len() + "data: first half".len());
        d.push(b" and more\n\n", |i| got.push(Item::from(i)))
            .unwrap();
        assert_eq!(got, [Item::named(Some("e"), "first half and more")]);
        assert_eq!(d.buffered_bytes(), 0);
        let capacity = (d.line.capacity(), d.data.capacity(), d.event.capacity());
        for _ in 0..100 {
            d.push(b"event: e\ndata: first half", |_| {}).unwrap();
            d.push(b" and more\n\n", |_| {}).unwrap();
        }
        assert_eq!(
            (d.line.capacity(), d.data.capacity(), d.event.capacity()),
            capacity
        );
    }

    #[test]
    fn buffer_capacity_stays_within_the_limit() {
        let limit = 1000;
        let mut d = SseDecoder::new(limit);
        for b in b"data: ".iter().chain(&[b'x'; 990]) {
            d.push(std::slice::from_ref(b), |_| {}).unwrap();
        }
        assert!(d.line.capacity() <= limit, "{}", d.line.capacity());
        d.push(b"\n\n", |_| {}).unwrap();
    }

    #[test]
    fn event_str_is_utf8_or_none() {
        let e = SseEvent {
            event: Some(b"ping"),
            data: b"",
            id: None,
            retry: None,
            one_line: true,
        };
        assert_eq!(e.event_str(), Some("ping"));
        let e = SseEvent {
            event: Some(b"\xFF"),
            ..e
        };
        assert_eq!(e.event_str(), None);
    }
}
