//! Token counting for context-length checks and the count-tokens routes: a real
//! o200k BPE (loaded lazily, only when a request is too large for the byte bound),
//! and the text extraction that decides what is counted.

use serde_json::Value;
use tiktoken_rs::CoreBPE;

/// Tokens charged per image part (a flat estimate; images are not tokenised as text).
pub const IMAGE_TOKENS: u64 = 1000;

/// Keys whose string values are binary payloads, signatures or URLs, not text.
const NON_TEXT_KEYS: &[&str] = &[
    "data",
    "url",
    "fileUri",
    "signature",
    "thoughtSignature",
    "thought_signature",
    "mimeType",
    "media_type",
    "type",
    "role",
    "id",
    "tool_call_id",
    "tool_use_id",
    "cache_control",
];

/// Keys that mark an image (or other media) part.
const MEDIA_KEYS: &[&str] = &["image_url", "inlineData", "fileData", "input_audio"];

/// The text of a request worth counting, and how many media parts it has.
#[derive(Debug, Default)]
pub struct Countable {
    pub text: String,
    pub media_parts: u64,
}

impl Countable {
    /// Collects every text string below `v` (skipping payload-like keys).
    pub fn add(&mut self, v: &Value) {
        match v {
            Value::String(s) => {
                self.text.push_str(s);
                self.text.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|i| self.add(i)),
            Value::Object(map) => {
                if map.get("type").and_then(Value::as_str) == Some("image") {
                    self.media_parts += 1;
                }
                for (k, v) in map {
                    if MEDIA_KEYS.contains(&k.as_str()) {
                        self.media_parts += 1;
                    } else if !NON_TEXT_KEYS.contains(&k.as_str()) {
                        self.add(v);
                    }
                }
            }
            Value::Number(n) => {
                self.text.push_str(&n.to_string());
                self.text.push(' ');
            }
            Value::Bool(_) | Value::Null => {}
        }
    }
}

fn bpe() -> Option<&'static CoreBPE> {
    static BPE: once_cell::sync::OnceCell<Option<CoreBPE>> = once_cell::sync::OnceCell::new();
    BPE.get_or_init(|| match tiktoken_rs::o200k_base() {
        Ok(b) => Some(b),
        Err(e) => {
            log::error!("cannot load the o200k tokenizer: {e}");
            None
        }
    })
    .as_ref()
}

/// Counts o200k tokens of `text`, stopping early once `limit` is passed (the
/// exact figure above the limit does not matter). Long texts are cut into
/// pieces at line breaks so the early stop can happen. Without a tokenizer,
/// falls back to a bound of one token per 2 bytes.
pub fn count_text(text: &str, limit: u64) -> u64 {
    let Some(bpe) = bpe() else {
        return (text.len() as u64).div_ceil(2);
    };
    const PIECE: usize = 64 * 1024;
    let mut total = 0u64;
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(PIECE);
        if end < rest.len() {
            // cut after a newline (or at a char boundary) inside the piece
            end = rest[..end].rfind('\n').map_or_else(
                || {
                    (0..=end)
                        .rev()
                        .find(|&i| rest.is_char_boundary(i))
                        .unwrap_or(0)
                },
                |i| i + 1,
            );
            if end == 0 {
                end = rest.len();
            }
        }
        total += bpe.encode_ordinary(&rest[..end]).len() as u64;
        if total > limit {
            return total;
        }
        rest = &rest[end..];
    }
    total
}

/// Counts the tokens of a countable request.
pub fn count(c: &Countable, limit: u64) -> u64 {
    count_text(&c.text, limit) + c.media_parts * IMAGE_TOKENS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_real_tokens() {
        let n = count_text("Hello, world! This is a test.", u64::MAX);
        assert!((6..=10).contains(&n), "{n}");
        assert_eq!(count_text("", u64::MAX), 0);
    }

    #[test]
    fn extracts_text_not_payloads() {
        let v: Value = serde_json::json!({"messages":[{"role":"user","content":[
            {"type":"text","text":"hi there"},
            {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]});
        let mut c = Countable::default();
        c.add(&v);
        assert_eq!(c.text, "hi there\n");
        assert_eq!(c.media_parts, 1);
    }

    #[test]
    fn stops_early_above_limit() {
        let text = "word ".repeat(100_000);
        let n = count_text(&text, 10);
        assert!(n > 10 && n < 100_000, "{n}");
    }
}
