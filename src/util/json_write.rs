//! JSON text written by hand into a byte buffer, for the stream encoders'
//! frames and the access log's lines: a string literal escaped a word at a
//! time, a decimal integer or float without the formatting machinery.
//!
//! The output is byte for byte serde_json's (`serde_json::to_writer` of a
//! `str` or a `u64`): `"` and `\` escaped with a backslash, `\b \t \n \f \r`
//! in their short forms, the other control characters as `\u00xx` (lower
//! case hex), everything else (non-ASCII, DEL, `/`) as it is. serde_json
//! looks each byte up in a table; here the runs between bytes that need
//! escaping (most strings have none) are found sixteen bytes at a time
//! ([`words::find_json_special`]; eight without SSE2, by table in a string
//! shorter than a word) and copied whole. A `u64` goes through `itoa`, as serde_json's own
//! serializer does, instead of `write!`'s `fmt` path (docs/performance.md
//! "Issue 28, eleventh pass").

use super::words;

/// Appends `s` as a JSON string literal.
pub fn string(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    out.reserve(b.len() + 2);
    out.push(b'"');
    let mut run = 0;
    while let Some(at) = words::find_json_special(b, run) {
        out.extend_from_slice(&b[run..at]);
        escape(out, b[at]);
        run = at + 1;
    }
    out.extend_from_slice(&b[run..]);
    out.push(b'"');
}

/// Appends `n` in decimal.
pub fn u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `v` by `write`, or `null` when it is absent (serde_json's
/// `Option`).
pub fn or_null<T>(out: &mut Vec<u8>, v: Option<T>, write: impl FnOnce(&mut Vec<u8>, T)) {
    match v {
        Some(v) => write(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

/// Appends `v` as serde_json writes an `f64`: its shortest round-trip
/// decimal by `zmij` (serde_json's own formatter), `null` when it is not
/// finite.
pub fn f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Appends the escape for `c` (`"`, `\` or a control character).
fn escape(out: &mut Vec<u8>, c: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match c {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x09 => b't',
        0x0A => b'n',
        0x0C => b'f',
        0x0D => b'r',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 0xF)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn serde(s: &str) -> Vec<u8> {
        serde_json::to_vec(s).unwrap()
    }

    fn ours(s: &str) -> Vec<u8> {
        let mut out = b"x".to_vec();
        string(&mut out, s);
        assert_eq!(out[0], b'x', "appends, keeps what was there");
        out.split_off(1)
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let cases = [
            "",
            "a",
            "plain text longer than one word",
            "\"",
            "\\",
            "ends with a quote\"",
            "\"starts with one",
            "tab\there, newline\nthere, \r\u{8}\u{c}",
            "\u{0}\u{1}\u{1f}\u{7f} controls and DEL",
            "héllo wörld 日本語 🎉 non-ASCII",
            "/slash/ is not escaped",
            "12345678\"12345678\\1234567\n",
        ];
        for s in cases {
            assert_eq!(ours(s), serde(s), "{s:?}");
        }
        // Every byte value in every position of a word, and across a
        // word's end.
        for c in 0u8..=0x7F {
            for at in 0..17 {
                let mut s = "abcdefghijklmnopq".to_string();
                s.replace_range(at..=at, &char::from(c).to_string());
                assert_eq!(ours(&s), serde(&s), "{s:?}");
            }
        }
    }

    #[test]
    fn numbers_are_written_as_serde_json_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            u64(&mut out, n);
            assert_eq!(out, serde_json::to_vec(&n).unwrap(), "{n}");
        }
    }
}
