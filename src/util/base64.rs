//! Base64 (RFC 4648): encoding in the standard alphabet, decoding either
//! alphabet padded or not, and rewriting encoded text from one alphabet to
//! the other (the standard form some providers require, the URL-safe form
//! an identifier can carry).

use std::borrow::Cow;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends `data` to `out` in the standard alphabet, padded.
pub fn encode(data: &[u8], out: &mut String) {
    out.reserve(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
}

/// `data` in the URL-safe alphabet, unpadded (JWTs, RFC 7515's base64url).
pub fn encode_url_safe(data: &[u8]) -> String {
    let mut s = String::new();
    encode(data, &mut s);
    standard_to_url_safe(&s)
}

/// Decodes base64 in either alphabet, padded or not; `None` when invalid.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single leftover character cannot be valid base64.
    (bits < 6).then_some(out)
}

/// URL-safe base64 (`-` and `_`, as the google-genai SDK sends `inlineData`)
/// rewritten as standard base64, padded, which OpenAI and Anthropic require;
/// anything else is returned untouched, without copying.
pub fn to_standard(data: &str) -> Cow<'_, str> {
    if !data.bytes().any(|b| b == b'-' || b == b'_') {
        return Cow::Borrowed(data);
    }
    Cow::Owned(url_safe_to_standard(data))
}

/// Base64 text in the URL-safe alphabet, padded or not, rewritten in the
/// standard alphabet, padded.
pub fn url_safe_to_standard(data: &str) -> String {
    let mut out: String = data
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}

/// Base64 text in the standard alphabet rewritten in the URL-safe one,
/// without padding (safe in identifiers and URLs).
pub fn standard_to_url_safe(data: &str) -> String {
    data.trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_safe_becomes_standard() {
        assert_eq!(to_standard("ab-_cd"), "ab+/cd==");
        assert_eq!(to_standard("abcd"), "abcd");
        assert_eq!(to_standard("a+/="), "a+/=");
        assert_eq!(to_standard("abc"), "abc");
    }

    #[test]
    fn encodes_and_decodes_both_alphabets() {
        let mut s = String::new();
        encode(b"Man", &mut s);
        encode(b"Ma", &mut s);
        encode(b"M", &mut s);
        assert_eq!(s, "TWFuTWE=TQ==");
        assert_eq!(decode("-_8").unwrap(), decode("+/8").unwrap());
        assert_eq!(decode("TWE").unwrap(), b"Ma");
        assert_eq!(decode("T"), None);
        assert_eq!(decode("T*"), None);
    }
}
