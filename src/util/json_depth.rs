//! A linear scan for JSON nesting depth, run on every inference body before it
//! is parsed: a document nested deeper than the parser's limit gets one clear
//! 400 in every family, whether the body would be parsed whole (translation,
//! counting) or only peeked and passed through.

use super::words::{eq, first, word};
use memchr::memchr2;

/// The deepest nesting accepted: what serde_json's recursion limit (128) lets through.
pub const MAX_DEPTH: usize = 127;

/// Whether `body`'s arrays and objects nest at most `max` deep. Between
/// strings the next quote, bracket or brace is found a word at a time
/// (a pretty-printed body is mostly spaces there); strings are skipped
/// with `memchr` past their first word (base64 payloads cost almost
/// nothing). The rest of the document is not validated here (the parser
/// does that).
pub fn within(body: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(at) = next(body, i, structural) {
        i = at + 1;
        match body[at] {
            b'"' => match string_end(body, i) {
                Some(end) => i = end + 1,
                None => return true,
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return false;
                }
            }
            _ => depth = depth.saturating_sub(1),
        }
    }
    true
}

/// Flags a word's quotes, brackets and braces: `[` and `{`, `]` and `}`
/// differ in the 0x20 bit alone, and no other byte has either value with
/// that bit set.
#[inline]
fn structural(w: u64) -> u64 {
    let folded = w | 0x2020_2020_2020_2020;
    eq(w, b'"') | eq(folded, b'{') | eq(folded, b'}')
}

/// Flags a word's quotes and backslashes.
#[inline]
fn quote_or_escape(w: u64) -> u64 {
    eq(w, b'"') | eq(w, b'\\')
}

/// The first byte at or after `from` that `flags` flags, a word at a time
/// (the lowest flag is exact: `words`); the last bytes are read as a word
/// padded with zeros, which neither set holds.
#[inline]
fn next(b: &[u8], from: usize, flags: fn(u64) -> u64) -> Option<usize> {
    let mut i = from;
    while let Some(w) = word(b, i) {
        let f = flags(w);
        if f != 0 {
            return Some(i + first(f));
        }
        i += 8;
    }
    let rest = b.get(i..)?;
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    let f = flags(u64::from_le_bytes(tail));
    (f != 0).then(|| i + first(f))
}

/// The closing quote of the string whose contents start at `from`,
/// stepping over escapes; None when the body ends first. A short string's
/// end is found in its first word; a longer one's by `memchr`.
fn string_end(b: &[u8], from: usize) -> Option<usize> {
    let mut j = from;
    loop {
        let at = match word(b, j).map(quote_or_escape) {
            Some(f) if f != 0 => j + first(f),
            _ => j + memchr2(b'"', b'\\', b.get(j..)?)?,
        };
        if b[at] == b'"' {
            return Some(at);
        }
        j = at + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn counts_arrays_and_objects_not_strings() {
        assert!(within(nested(127).as_bytes(), MAX_DEPTH));
        assert!(!within(nested(128).as_bytes(), MAX_DEPTH));
        assert!(!within(b"{\"a\":{\"b\":[[1]]}}", 3));
        assert!(within(b"{\"a\":{\"b\":[[1]]}}", 4));
        // brackets inside strings, with escaped quotes and backslashes
        let s = format!(
            "{{\"t\":\"{}\\\"{}\\\\\"}}",
            "[".repeat(500),
            "{".repeat(500)
        );
        assert!(within(s.as_bytes(), 1));
        assert!(within(b"", 1));
        assert!(within(b"\"unterminated [[[[", 1));
        assert!(within(b"\"ends in escape\\", 1));
    }

    /// The byte-at-a-time scan `within` replaced.
    fn reference(body: &[u8], max: usize) -> bool {
        let mut depth = 0usize;
        let mut i = 0;
        while i < body.len() {
            match body[i] {
                b'"' => {
                    let mut j = i + 1;
                    loop {
                        match memchr2(b'"', b'\\', &body[j..]) {
                            None => return true,
                            Some(k) if body[j + k] == b'\\' => j += k + 2,
                            Some(k) => {
                                j += k;
                                break;
                            }
                        }
                        if j >= body.len() {
                            return true;
                        }
                    }
                    i = j;
                }
                b'[' | b'{' => {
                    depth += 1;
                    if depth > max {
                        return false;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            i += 1;
        }
        true
    }

    proptest::proptest! {
        /// Any bytes, and JSON-like texts of brackets, braces, quotes,
        /// escapes, spaces and letters: the same answer as the byte scan.
        #[test]
        fn agrees_with_the_byte_scan(
            text in "[\\[\\]{}\"\\\\ aZ]{0,80}",
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            max in 0usize..6,
        ) {
            for body in [text.as_bytes(), &bytes[..]] {
                proptest::prop_assert_eq!(within(body, max), reference(body, max), "{:?}", body);
            }
        }
    }

    #[test]
    fn agrees_with_the_parser() {
        for depth in [1, 126, 127, 128, 129, 200] {
            let doc = nested(depth);
            let parsed = serde_json::from_str::<serde_json::Value>(&doc).is_ok();
            assert_eq!(within(doc.as_bytes(), MAX_DEPTH), parsed, "{depth}");
        }
    }
}
