//! A linear scan for JSON nesting depth, run on every inference body before it
//! is parsed: a document nested deeper than the parser's limit gets one clear
//! 400 in every family, whether the body would be parsed whole (translation,
//! counting) or only peeked and passed through.

use memchr::memchr2;

/// The deepest nesting accepted: what serde_json's recursion limit (128) lets through.
pub const MAX_DEPTH: usize = 127;

/// Whether `body`'s arrays and objects nest at most `max` deep. Strings are
/// skipped with `memchr` (base64 payloads cost almost nothing); the rest of the
/// document is not validated here (the parser does that).
pub fn within(body: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'"' => {
                // to the closing quote, stepping over escapes
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

    #[test]
    fn agrees_with_the_parser() {
        for depth in [1, 126, 127, 128, 129, 200] {
            let doc = nested(depth);
            let parsed = serde_json::from_str::<serde_json::Value>(&doc).is_ok();
            assert_eq!(within(doc.as_bytes(), MAX_DEPTH), parsed, "{depth}");
        }
    }
}
