//! A custom tool call's free-form input inside the canonical JSON arguments
//! `{"custom_tool_input": "…"}`, fragment by fragment: the parser escapes
//! input deltas into the JSON string ([`push_json_escaped`]); the encoder
//! tells from the first argument bytes whether a call has that shape
//! ([`custom_prefix`]) and unescapes the string's content as it streams
//! ([`Unescape`]).

use crate::protocol::responses::request::CUSTOM_INPUT_KEY;

/// Appends `text` escaped as the content of a JSON string (no quotes).
pub(super) fn push_json_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

/// Where a tool call's argument text stands on the way to telling whether
/// it is a custom tool's input (`{"custom_tool_input": "…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Prefix {
    /// The text so far could still go either way.
    More,
    /// It is not a custom input.
    No,
    /// It is; the string's content starts at this byte.
    Yes(usize),
}

/// Matches `{ "custom_tool_input" : "` (JSON whitespace allowed) at the start of `s`.
pub(super) fn custom_prefix(s: &str) -> Prefix {
    let key = format!("\"{CUSTOM_INPUT_KEY}\"");
    let bytes = s.as_bytes();
    let mut pos = 0;
    let ws = |pos: &mut usize| {
        while *pos < bytes.len() && matches!(bytes[*pos], b' ' | b'\t' | b'\n' | b'\r') {
            *pos += 1;
        }
    };
    for token in ["{", key.as_str(), ":", "\""] {
        ws(&mut pos);
        let rest = &s[pos..];
        if rest.len() < token.len() {
            return if token.starts_with(rest) {
                Prefix::More
            } else {
                Prefix::No
            };
        }
        if !rest.starts_with(token) {
            return Prefix::No;
        }
        pos += token.len();
    }
    Prefix::Yes(pos)
}

/// Unescapes a JSON string's content fragment by fragment (escapes may be
/// split between fragments); stops at the closing quote.
#[derive(Debug, Default)]
pub(super) struct Unescape {
    /// After a backslash.
    escape: bool,
    /// Hex digits of a `\u` escape read so far (`Some` while reading).
    hex: Option<(u32, u8)>,
    /// A high surrogate waiting for its low half.
    high: Option<u32>,
    closed: bool,
}

impl Unescape {
    fn lone_high(&mut self, out: &mut String) {
        if self.high.take().is_some() {
            out.push('\u{fffd}');
        }
    }

    pub(super) fn feed(&mut self, s: &str, out: &mut String) {
        for c in s.chars() {
            if self.closed {
                return;
            }
            if let Some((acc, n)) = self.hex {
                let acc = acc * 16 + c.to_digit(16).unwrap_or(0);
                if n < 3 {
                    self.hex = Some((acc, n + 1));
                    continue;
                }
                self.hex = None;
                match acc {
                    0xD800..=0xDBFF => {
                        self.lone_high(out);
                        self.high = Some(acc);
                    }
                    0xDC00..=0xDFFF => match self.high.take() {
                        Some(h) => out.push(
                            char::from_u32(0x10000 + ((h - 0xD800) << 10) + (acc - 0xDC00))
                                .unwrap_or('\u{fffd}'),
                        ),
                        None => out.push('\u{fffd}'),
                    },
                    _ => {
                        self.lone_high(out);
                        out.push(char::from_u32(acc).unwrap_or('\u{fffd}'));
                    }
                }
                continue;
            }
            if self.escape {
                self.escape = false;
                if c == 'u' {
                    self.hex = Some((0, 0));
                    continue;
                }
                self.lone_high(out);
                out.push(match c {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    other => other,
                });
                continue;
            }
            match c {
                '\\' => self.escape = true,
                '"' => {
                    self.lone_high(out);
                    self.closed = true;
                }
                c => {
                    self.lone_high(out);
                    out.push(c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_custom_prefix_is_told_from_the_first_bytes() {
        assert_eq!(custom_prefix(""), Prefix::More);
        assert_eq!(custom_prefix("{ \"custom_to"), Prefix::More);
        assert_eq!(
            custom_prefix("{\"custom_tool_input\": \"a"),
            Prefix::Yes(23)
        );
        assert_eq!(custom_prefix("{\"input\": \"a\"}"), Prefix::No);
        assert_eq!(custom_prefix("[]"), Prefix::No);
        assert_eq!(custom_prefix("{\"custom_tool_input\":1"), Prefix::No);
    }

    #[test]
    fn unescaping_survives_any_split() {
        let original = "line \"one\"\n\ttab \\ é 😀 end";
        let json = serde_json::to_string(original).unwrap_or_default();
        // Also with the emoji as a surrogate-pair escape.
        let escaped_pair = json.replace('😀', "\\ud83d\\ude00");
        for text in [json, escaped_pair] {
            let body = &text[1..];
            for cut in 0..body.len() {
                if !body.is_char_boundary(cut) {
                    continue;
                }
                let mut u = Unescape::default();
                let mut out = String::new();
                u.feed(&body[..cut], &mut out);
                u.feed(&body[cut..], &mut out);
                assert_eq!(out, original, "cut at {cut}");
                assert!(u.closed);
            }
        }
    }
}
