//! The upstream bytes of a stream that may be continued after a cut, kept
//! for the replay that rebuilds what the client received
//! (`continuation::Partial::replay`), held compactly: an open stream keeps
//! its transcript for as long as it runs.
//!
//! Each SSE frame (up to and including its blank line) is stored as its
//! difference from the frame before it: how many bytes they share at the
//! start and at the end, and the bytes in between. Consecutive frames of one
//! answer differ in a token, a counter or an index, so an OpenAI chunk of
//! about 190 bytes costs about 10, where the raw copy kept all of them (and
//! a long answer's copy grew to the limit, 1 MiB). Nothing is parsed: a
//! frame is what ends at a blank line (`\n\n` or `\n\r\n`), and bytes that
//! are no frame are kept as they came, so the bytes rebuilt are always
//! exactly the bytes read.
//!
//! The comparing waits until the stream does: bytes are taken in as they
//! came ([`Transcript::push`]) and the relay settles them into differences
//! before it waits for its upstream's next read ([`Transcript::settle`]). A
//! trickling stream settles each read, as before; a burst that brings the
//! stream's end is never compared, since the transcript goes with the
//! stream.

use super::continuation::MAX_TRANSCRIPT;
use crate::util::words::{common_prefix, common_suffix};

/// The room the bytes after the last complete frame keep between reads:
/// more than a frame or two, from a burst, is given back when it settles.
const OPEN_KEPT: usize = 2 * 1024;

/// A stream's upstream bytes, frame by frame as differences.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    /// Per complete frame: the shared start's length, the shared end's
    /// length and the new bytes' length (LEB128), then the new bytes.
    log: Vec<u8>,
    /// The last complete frame, which the next one is compared with.
    last: Vec<u8>,
    /// Bytes taken in since the last [`Transcript::settle`], then those
    /// after the last complete frame (its end not read yet).
    open: Vec<u8>,
    /// How many of `open`'s first bytes were looked through for a frame's
    /// end already (none there): a frame that comes in many reads is
    /// looked through once, not once a read.
    scanned: usize,
    /// Upstream bytes taken in.
    len: usize,
}

impl Transcript {
    /// Room for `n` bytes about to be pushed (more than one read's), unless
    /// they would pass [`MAX_TRANSCRIPT`] (then `push` gives up anyway).
    pub fn expect(&mut self, n: usize) {
        if self.len + n <= MAX_TRANSCRIPT {
            self.open.reserve(n);
        }
    }

    /// Takes in the next upstream bytes, as they came: the frames they
    /// complete are compared with the ones before them when the stream
    /// waits ([`settle`](Self::settle)). False when the transcript would
    /// pass [`MAX_TRANSCRIPT`] bytes: the caller drops it (such a long
    /// answer is not continued).
    pub fn push(&mut self, chunk: &[u8]) -> bool {
        if self.len + chunk.len() > MAX_TRANSCRIPT {
            return false;
        }
        self.len += chunk.len();
        self.open.extend_from_slice(chunk);
        true
    }

    /// Keeps the frames taken in since the last call as their differences,
    /// each from the frame before it, and holds only the bytes after the
    /// last complete frame as they came. Called when the stream waits for
    /// its upstream: a burst that ends the stream is never compared (the
    /// transcript goes with the stream), and an open stream holds its
    /// frames compactly between reads.
    pub fn settle(&mut self) {
        let Self {
            log,
            last,
            open,
            scanned,
            ..
        } = self;
        let mut start = 0;
        let mut before: Option<(usize, usize)> = None;
        let from = *scanned;
        for nl in memchr::memchr_iter(b'\n', &open[from..]).map(|i| from + i) {
            if ends(&open[start..], nl - start) {
                let prev = before.map_or(&last[..], |(a, b)| &open[a..b]);
                add(log, prev, &open[start..=nl]);
                before = Some((start, nl + 1));
                start = nl + 1;
            }
        }
        if let Some((a, b)) = before {
            last.clear();
            last.extend_from_slice(&open[a..b]);
        }
        open.drain(..start);
        *scanned = open.len();
        // No room is kept while the stream waits, but for a frame begun
        // (an open stream's memory: docs/performance.md "Memory per open
        // stream"), and a burst's is given back.
        if open.is_empty() {
            *open = Vec::new();
        } else if open.capacity() > OPEN_KEPT && open.len() < OPEN_KEPT / 2 {
            open.shrink_to(OPEN_KEPT / 2);
        }
    }

    /// Upstream bytes taken in.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was taken in.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held (for the memory a stream keeps).
    pub fn held(&self) -> usize {
        self.log.capacity() + self.last.capacity() + self.open.capacity()
    }

    /// The bytes taken in, rebuilt.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        let mut last = 0..0;
        let mut at = 0;
        while at < self.log.len() {
            let shared_start = leb128(&self.log, &mut at);
            let shared_end = leb128(&self.log, &mut at);
            let new = leb128(&self.log, &mut at);
            let frame = out.len();
            out.extend_from_within(last.start..last.start + shared_start);
            out.extend_from_slice(&self.log[at..at + new]);
            out.extend_from_within(last.end - shared_end..last.end);
            at += new;
            last = frame..out.len();
        }
        out.extend_from_slice(&self.open);
        out
    }
}

/// Whether the line end at `at` in `frame` (a frame's bytes from its
/// start) ends it: a blank line.
fn ends(frame: &[u8], at: usize) -> bool {
    match at.checked_sub(1).map(|i| frame[i]) {
        Some(b'\n') => true,
        Some(b'\r') => at >= 2 && frame[at - 2] == b'\n',
        _ => false,
    }
}

/// Appends `frame` to `log` as its difference from `last`.
fn add(log: &mut Vec<u8>, last: &[u8], frame: &[u8]) {
    let start = common_prefix(last, frame);
    // The shared end is looked for after the shared start, in both.
    let end = common_suffix(&last[start..], &frame[start..]);
    let new = &frame[start..frame.len() - end];
    for n in [start, end, new.len()] {
        put_leb128(log, n);
    }
    log.extend_from_slice(new);
}

fn put_leb128(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn leb128(b: &[u8], at: &mut usize) -> usize {
    let mut n = 0;
    let mut shift = 0;
    loop {
        let byte = b[*at];
        *at += 1;
        n |= usize::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return n;
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_expected_is_kept_for_the_pushes() {
        let (a, b) = (chunk(1).repeat(300), chunk(2).repeat(60));
        let mut t = Transcript::default();
        t.expect(a.len() + b.len());
        let at = t.open.as_ptr();
        assert!(t.push(a.as_bytes()) && t.push(b.as_bytes()));
        assert_eq!(t.open.as_ptr(), at, "grown between the pushes");
        assert_eq!(t.bytes(), [a, b].concat().into_bytes());
        // Past the cap nothing is reserved (the push will give up).
        let mut t = Transcript::default();
        t.expect(MAX_TRANSCRIPT + 1);
        assert_eq!(t.open.capacity(), 0);
    }

    fn chunk(i: usize) -> String {
        format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"
        )
    }

    /// Takes `raw` in pieces of `step` bytes, settling after every
    /// `settle_every` pieces (0: never), and rebuilds it at each step.
    fn round_trip(raw: &[u8], step: usize, settle_every: usize) -> Transcript {
        let mut t = Transcript::default();
        let mut taken = 0;
        for (i, piece) in raw.chunks(step.max(1)).enumerate() {
            assert!(t.push(piece));
            taken += piece.len();
            if settle_every > 0 && i % settle_every == 0 {
                t.settle();
            }
            assert_eq!(t.bytes(), &raw[..taken], "step {step}, piece {i}");
        }
        t.settle();
        assert_eq!(t.bytes(), raw, "step {step}");
        assert_eq!(t.len(), raw.len());
        t
    }

    #[test]
    fn a_stream_is_rebuilt_exactly_however_it_was_read() {
        let mut anthropic = String::new();
        for i in 0..40 {
            anthropic.push_str(&format!("event: content_block_delta\r\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"w{i}\"}}}}\r\n\r\n"));
        }
        let openai: String = (0..60).map(chunk).collect::<String>() + "data: [DONE]\n\n";
        let odd = "\n\n\n: comment\n\ndata: x\r\rdata: y\n\r\n\n\ndata: partial";
        for raw in [
            openai.as_str(),
            anthropic.as_str(),
            odd,
            "",
            "\n",
            "data: z",
        ] {
            for step in [1, 2, 3, 7, 64, 190, 191, 1000, raw.len()] {
                for settle_every in [0, 1, 3] {
                    round_trip(raw.as_bytes(), step, settle_every);
                }
            }
        }
    }

    #[test]
    fn a_token_stream_keeps_a_few_bytes_per_frame() {
        let raw: String = (0..500).map(chunk).collect();
        let t = round_trip(raw.as_bytes(), 190, 1);
        // 500 frames of about 150 bytes; each differs from the last in a
        // token of a few bytes.
        assert!(raw.len() > 70_000);
        assert!(
            t.held() < 8_000,
            "{} bytes held for {}",
            t.held(),
            raw.len()
        );
    }

    #[test]
    fn a_burst_is_kept_as_it_came_until_it_settles_into_a_few_bytes_a_frame() {
        let raw: String = (0..100).map(chunk).collect::<String>() + "data: {\"partial";
        let mut t = Transcript::default();
        assert!(t.push(raw.as_bytes()));
        // Before the stream waits: as it came.
        assert!(t.held() >= raw.len(), "{}", t.held());
        assert_eq!(t.bytes(), raw.as_bytes());
        t.settle();
        assert_eq!(t.bytes(), raw.as_bytes());
        // The burst's room is given back; the frames cost a few bytes each.
        assert!(t.held() < 3_000, "{} bytes held", t.held());
        // Whole frames leave no room behind them.
        let mut whole = Transcript::default();
        assert!(whole.push(chunk(1).as_bytes()));
        whole.settle();
        assert_eq!(whole.open.capacity(), 0);
        // The open frame goes on in the next read.
        assert!(t.push(b"\":1}\n\n"));
        t.settle();
        assert_eq!(t.bytes(), (raw + "\":1}\n\n").as_bytes());
    }

    #[test]
    fn a_frame_in_many_reads_is_looked_through_once() {
        let big = format!("data: {}\n\n", "x".repeat(10_000));
        let raw = chunk(0) + &big + &chunk(1);
        // Read a byte at a time, settling after each: the bytes after the
        // last frame end are not looked through again.
        let t = round_trip(raw.as_bytes(), 1, 1);
        assert!(t.open.is_empty() && t.scanned == 0);
        let mut t = Transcript::default();
        assert!(t.push(&big.as_bytes()[..5_000]));
        t.settle();
        assert_eq!(t.scanned, 5_000);
        assert!(t.push(&big.as_bytes()[5_000..]));
        t.settle();
        assert_eq!((t.scanned, t.open.len()), (0, 0));
        assert_eq!(t.bytes(), big.as_bytes());
    }

    #[test]
    fn the_limit_stops_the_transcript() {
        let mut t = Transcript::default();
        let big = vec![b'x'; MAX_TRANSCRIPT / 2];
        assert!(t.push(&big));
        assert!(t.push(&big));
        assert!(!t.push(b"y"));
        assert_eq!(t.len(), MAX_TRANSCRIPT);
    }
}
