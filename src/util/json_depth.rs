//! Linear scans of JSON's nesting, a word at a time between strings:
//!
//! - [`within`], the depth check run on every inference body before it is
//!   parsed: a document nested deeper than the parser's limit gets one
//!   clear 400 in every family, whether the body would be parsed whole
//!   (translation, counting) or only peeked and passed through;
//! - [`container_end`] and [`string_end`], where an array, an object or a
//!   string ends, for the edits and skims that step over a value without
//!   reading it (`util::jsonedit`, `protocol::common::skim`).

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
    for (_, c) in brackets(body, 0) {
        if c == b'[' || c == b'{' {
            depth += 1;
            if depth > max {
                return false;
            }
        } else {
            depth = depth.saturating_sub(1);
        }
    }
    true
}

/// The index just past the bracket or brace that closes the array or
/// object opening at `open` (which must be `[` or `{`), strings stepped
/// over; None when `b` ends first. It validates nothing else: `{]` is
/// closed as `{}` is, and what lies between is not looked at but for
/// strings, brackets and braces (the caller checks the value, or leaves it
/// to a parser that will).
pub fn container_end(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in brackets(b, open) {
        if c == b'[' || c == b'{' {
            depth += 1;
        } else {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(at + 1);
            }
        }
    }
    None
}

/// The brackets and braces of `b` from `from` on, with their offsets, the
/// strings between them stepped over; it ends with `b`, or inside a string
/// that `b` ends before closing.
#[inline]
fn brackets(b: &[u8], from: usize) -> Brackets<'_> {
    Brackets { b, i: from }
}

/// [`brackets`]: the next one is looked for from `i`.
struct Brackets<'a> {
    b: &'a [u8],
    i: usize,
}

impl Iterator for Brackets<'_> {
    type Item = (usize, u8);

    // Inlined into each scan: a call per bracket cost `within` 10% more.
    #[inline(always)]
    fn next(&mut self) -> Option<(usize, u8)> {
        loop {
            let at = next(self.b, self.i, structural)?;
            self.i = at + 1;
            if self.b[at] != b'"' {
                return Some((at, self.b[at]));
            }
            self.i = string_end(self.b, self.i)? + 1;
        }
    }
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
pub fn string_end(b: &[u8], from: usize) -> Option<usize> {
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

    /// The byte-at-a-time skip `container_end` replaced (`util::jsonedit`).
    fn container_reference(b: &[u8], i: usize) -> Option<usize> {
        let mut depth = 0usize;
        let mut j = i;
        while j < b.len() {
            match b[j] {
                b'"' => {
                    let mut k = j + 1;
                    loop {
                        let at = k + memchr2(b'"', b'\\', b.get(k..)?)?;
                        if b[at] == b'"' {
                            j = at + 1;
                            break;
                        }
                        k = at + 2;
                    }
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return Some(j + 1);
                    }
                }
                _ => {}
            }
            j += 1;
        }
        None
    }

    #[test]
    fn finds_where_a_container_ends() {
        let doc = br#"{"a":[1,{"b":"}]\"{"},[]],"c":"x"} tail"#;
        assert_eq!(container_end(doc, 0), Some(doc.len() - 5));
        assert_eq!(container_end(doc, 5), Some(doc.len() - 14));
        assert_eq!(container_end(b"[[]", 0), None);
        assert_eq!(container_end(b"[\"]\\\"]\"]", 0), Some(8));
        assert_eq!(container_end(b"[\"unterminated]", 0), None);
        assert_eq!(container_end(b"[\"ends in escape\\", 0), None);
        assert_eq!(container_end(b"{]", 0), Some(2));
    }

    proptest::proptest! {
        /// JSON-like texts opening with a bracket or brace: where the byte
        /// scan says the container ends, or that it does not.
        #[test]
        fn container_end_agrees_with_the_byte_scan(
            open in "[\\[{]",
            text in "[\\[\\]{}\"\\\\ aZ,:]{0,120}",
        ) {
            let body = format!("{open}{text}");
            let body = body.as_bytes();
            proptest::prop_assert_eq!(container_end(body, 0), container_reference(body, 0), "{:?}", body);
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
