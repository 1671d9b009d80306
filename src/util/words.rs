//! Eight bytes at a time: where the first byte of a set is in a word read
//! little-endian, for the stream peeks' skim of a JSON string and the
//! encoders' escaping of one (`json_write`), whether text needs no escape
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
/// escaped: a table lookup per byte below a word's length, else a word at
/// a time, the last (partial) word read as the 8 bytes that end the string
/// (those it shares with the word before are known to need nothing, and
/// the lowest flag is exact).
#[inline]
pub fn find_json_special(b: &[u8], from: usize) -> Option<usize> {
    let n = b.len();
    if n - from < 8 {
        return (from..n).find(|&i| SPECIAL[usize::from(b[i])]);
    }
    let mut i = from;
    while let Some(w) = word(b, i) {
        let at = first_json_special(w);
        if at < 8 {
            return Some(i + at);
        }
        i += 8;
    }
    let at = word(b, n - 8).map_or(8, first_json_special);
    (i < n && at < 8).then_some(n - 8 + at)
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
