//! Eight bytes at a time (sixteen with SSE2 on x86-64): where the first
//! byte of a set is in a word read little-endian, for the stream peeks'
//! skim of a JSON string and its whitespace and the encoders' escaping of
//! one (`json_write`), whether text needs no escape
//! (the skim's and the stream parsers' repeated frames: `protocol::common::repeat`), and how many
//! bytes two slices share at their start or end, for a stream transcript's
//! frames (`translate::transcript`). The set tests were tried in
//! `jsonedit`'s skips too, without a measured gain: there the next quote or
//! brace is mostly a few bytes away. The "has a zero byte" and "has a
//! byte less than n" tests flag a byte wrongly only above one flagged
//! rightly (a borrow runs upwards, and only out of a flagged byte), so the
//! lowest flag is exact.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The 8 bytes at `at` as a word, if there are 8.
#[inline]
pub fn word(b: &[u8], at: usize) -> Option<u64> {
    let w: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(w))
}

/// Flags (the high bit) the bytes of `w` equal to `c`.
#[inline]
pub fn eq(w: u64, c: u8) -> u64 {
    let x = w ^ (ONES * u64::from(c));
    x.wrapping_sub(ONES) & !x & HIGH
}

/// Flags the bytes of `w` below `n` (`n` at most 0x80).
#[inline]
pub fn below(w: u64, n: u8) -> u64 {
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH
}

/// Where in the 8 bytes of `w` the first one a JSON string cannot hold
/// as it is (`"`, `\\`, or a control character below 0x20) is; 8: none.
/// Exact: each test's lowest flag is (see above), so their union's is.
#[inline]
pub fn first_json_special(w: u64) -> usize {
    first(eq(w, b'"') | eq(w, b'\\') | below(w, 0x20))
}

/// The index of the lowest flagged byte of `flags` (8: none).
#[inline]
pub fn first(flags: u64) -> usize {
    flags.trailing_zeros() as usize / 8
}

/// The bytes a JSON string cannot hold as they are, for strings shorter
/// than a word.
static SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The position of the first byte at or after `from` that must be
/// escaped (see [`plain_end`]), if any.
#[inline]
pub fn find_json_special(b: &[u8], from: usize) -> Option<usize> {
    let at = plain_end(b, from);
    (at < b.len()).then_some(at)
}

/// Where the run of bytes a JSON string holds as they are, from `from`,
/// ends: the first `"`, `\\` or control character at or after it, or
/// `b.len()`. Sixteen bytes at a time where the target has SSE2 (every
/// x86-64), else a word at a time; the last partial block is read as the
/// block that ends `b`, its flags of bytes already passed (or before
/// `from`) dropped; below a word, a table.
#[inline]
pub fn plain_end(b: &[u8], from: usize) -> usize {
    let n = b.len();
    let mut i = from;
    #[cfg(target_arch = "x86_64")]
    if n >= 16 {
        while i + 16 <= n {
            let m = special16(b, i);
            if m != 0 {
                return i + m.trailing_zeros() as usize;
            }
            i += 16;
        }
        if i < n {
            // Flags below `i` are of bytes before `from` or already passed.
            let m = special16(b, n - 16) >> (i - (n - 16));
            return if m != 0 {
                i + m.trailing_zeros() as usize
            } else {
                n
            };
        }
        return n;
    }
    if n.saturating_sub(from) >= 8 {
        while let Some(w) = word(b, i) {
            let at = first_json_special(w);
            if at < 8 {
                return i + at;
            }
            i += 8;
        }
        let at = word(b, n - 8).map_or(8, first_json_special);
        return if i < n && at < 8 { n - 8 + at } else { n };
    }
    (i..n).find(|&i| SPECIAL[usize::from(b[i])]).unwrap_or(n)
}

/// Where the run of JSON whitespace (space, tab, line feed, carriage
/// return) from `from` ends: sixteen bytes at a time where the target has
/// SSE2 (a pretty-printed document's indentation in one step), else, and
/// for the last bytes, one at a time.
#[inline]
pub fn space_end(b: &[u8], from: usize) -> usize {
    let mut i = from;
    #[cfg(target_arch = "x86_64")]
    while i + 16 <= b.len() {
        let m = !space16(b, i) & 0xffff;
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 16;
    }
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// Flags the JSON whitespace bytes of `b[at..at + 16]` (as [`special16`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn space16(b: &[u8], at: usize) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let block = &b[at..at + 16];
    // SAFETY: as `special16`'s.
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        let space = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
        let lf = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8));
        let tab = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\t' as i8));
        let cr = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\r' as i8));
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(space, lf), _mm_or_si128(tab, cr))) as u32
    }
}

/// Flags (bit k for byte `at + k`) the bytes of `b[at..at + 16]` a JSON
/// string cannot hold as they are; `at + 16` must be at most `b.len()`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn special16(b: &[u8], at: usize) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let block = &b[at..at + 16];
    // SAFETY: SSE2 is part of every x86-64 target (the intrinsics need no
    // detection); `block` is 16 readable bytes, and an unaligned load
    // reads exactly them.
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // A byte is at most 0x1f when the larger of it and 0x1f (unsigned) is 0x1f.
        let low = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
}

/// Whether `b` holds no byte a JSON string cannot hold as it is.
pub fn json_plain(b: &[u8]) -> bool {
    find_json_special(b, 0).is_none()
}

/// Bytes compared at once before the words: two slices' equality at a
/// length known when compiling is a few vector loads and one compare,
/// inline (no call to `memcmp`).
const BLOCK: usize = 32;

/// Whether `b` is UTF-8: ASCII found a word at a time first (std's
/// `from_utf8` costs about a hundred instructions on a string of ten
/// bytes: a delta's text, an event's name).
#[inline]
pub fn is_utf8(b: &[u8]) -> bool {
    b.is_ascii() || std::str::from_utf8(b).is_ok()
}

/// How many bytes `a` and `b` share at their start: compared a block at a
/// time, then a word at a time (the lowest differing byte of the first
/// unequal word ends it).
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut i = a
        .chunks_exact(BLOCK)
        .zip(b.chunks_exact(BLOCK))
        .take_while(|(x, y)| block(x) == block(y))
        .count()
        * BLOCK;
    while let (Some(x), Some(y)) = (word(a, i), word(b, i)) {
        if x != y {
            return i + first(x ^ y);
        }
        i += 8;
    }
    i + a[i..]
        .iter()
        .zip(&b[i..])
        .take_while(|(x, y)| x == y)
        .count()
}

/// How many bytes `a` and `b` share at their end, compared a block, then a
/// word at a time from the back (in a word read little-endian the last
/// byte is the highest, so the equal bytes at the end are its leading zero
/// bytes).
pub fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = a
        .rchunks_exact(BLOCK)
        .zip(b.rchunks_exact(BLOCK))
        .take_while(|(x, y)| block(x) == block(y))
        .count()
        * BLOCK;
    while i + 8 <= n {
        let x = word(a, n - i - 8).unwrap_or_default();
        let y = word(b, n - i - 8).unwrap_or_default();
        if x != y {
            return i + (x ^ y).leading_zeros() as usize / 8;
        }
        i += 8;
    }
    let (a, b) = (&a[..n - i], &b[..n - i]);
    i + a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// A chunk of [`BLOCK`] bytes as an array (a chunk of another length,
/// which `chunks_exact` never gives, as zeros).
#[inline]
fn block(c: &[u8]) -> [u8; BLOCK] {
    c.try_into().unwrap_or([0; BLOCK])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length pair up to 80 (past two blocks) and every place of a
    /// difference (or none), against a byte-by-byte count.
    #[test]
    fn shared_starts_and_ends_are_counted_exactly() {
        for la in 0..80usize {
            for lb in 0..80usize {
                for diff in 0..=la.max(lb) {
                    let a: Vec<u8> = (0..la).map(|i| i as u8).collect();
                    let mut b: Vec<u8> = (0..lb).map(|i| i as u8).collect();
                    if diff < lb {
                        b[diff] ^= 0x40;
                    }
                    let naive = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
                    assert_eq!(common_prefix(&a, &b), naive, "{a:?} {b:?}");
                    // The same from the end: compare reversed copies.
                    let (ra, rb): (Vec<u8>, Vec<u8>) = (
                        a.iter().rev().copied().collect(),
                        b.iter().rev().copied().collect(),
                    );
                    let naive = a
                        .iter()
                        .rev()
                        .zip(b.iter().rev())
                        .take_while(|(x, y)| x == y);
                    assert_eq!(
                        common_suffix(&ra, &rb),
                        common_prefix(&a, &b),
                        "{a:?} {b:?}"
                    );
                    assert_eq!(common_suffix(&a, &b), naive.count(), "{a:?} {b:?}");
                }
            }
        }
    }

    /// Every special byte (and a plain one) at every place of every length
    /// up to 70 (past four blocks), from every start, with specials and
    /// plain bytes above it, against a byte-by-byte scan.
    #[test]
    fn plain_runs_end_at_the_first_special_byte() {
        for n in 0..70usize {
            for at in 0..=n {
                for special in [b'"', b'\\', 0x00, 0x1f, b'a', 0x20, 0x7f, 0x80, 0xff] {
                    for above in [b'a', b'"', 0x01, 0xc3] {
                        let mut b = vec![b'x'; n];
                        if at < n {
                            b[at] = special;
                            for x in &mut b[at + 1..] {
                                *x = above;
                            }
                        }
                        for from in 0..=n {
                            let want = (from..n)
                                .find(|&i| matches!(b[i], b'"' | b'\\' | 0..=0x1f))
                                .unwrap_or(n);
                            assert_eq!(plain_end(&b, from), want, "{b:?} from {from}");
                            assert_eq!(find_json_special(&b, from), (want < n).then_some(want));
                        }
                    }
                }
            }
        }
    }

    /// Whitespace runs of every length up to 40 ended by every kind of byte
    /// (or by the end), from every start, against a byte-by-byte scan.
    #[test]
    fn space_runs_end_at_the_first_other_byte() {
        for n in 0..40usize {
            for end in [b'a', b'{', 0x00, 0x0b, 0x0c, 0xa0, 0x21, 0x1f] {
                let mut b: Vec<u8> = (0..n).map(|i| b" \n\t\r"[i % 4]).collect();
                b.push(end);
                b.extend_from_slice(b"   more text after it  ");
                for from in 0..=n {
                    assert_eq!(space_end(&b, from), n, "{b:?} from {from}");
                }
            }
            let b: Vec<u8> = (0..n).map(|i| b" \n\t\r"[i % 4]).collect();
            assert_eq!(space_end(&b, 0), n);
        }
    }

    /// Every byte value at every place, with every kind of byte above it,
    /// against a byte-by-byte scan.
    #[test]
    fn the_lowest_flag_is_the_first_matching_byte() {
        type Case = (&'static str, fn(u64) -> u64, fn(u8) -> bool);
        let tests: [Case; 3] = [
            ("eq '\"'", |w| eq(w, b'"'), |c| c == b'"'),
            ("eq 0", |w| eq(w, 0), |c| c == 0),
            ("below 0x20", |w| below(w, 0x20), |c| c < 0x20),
        ];
        for (name, flags, wanted) in tests {
            for at in 0..8 {
                for b in 0..=255u8 {
                    for above in [b'a', 0x00, 0x1f, 0x20, b'"', 0x7f, 0x80, 0xff] {
                        let mut w = [b'a'; 8];
                        w[at] = b;
                        for x in &mut w[at + 1..] {
                            *x = above;
                        }
                        let want = w.iter().position(|&c| wanted(c)).unwrap_or(8);
                        let got = first(flags(u64::from_le_bytes(w)));
                        assert_eq!(got, want, "{name} {w:?}");
                    }
                }
            }
        }
    }
}
