//! Token counting for context-length checks and the count-tokens routes: a real
//! o200k BPE whose cost is linear in its input whatever the input (loaded
//! lazily, only when a request is too large for the byte bound), cancellable,
//! and the text extraction that decides what is counted.

use once_cell::sync::Lazy;
use rustc_hash::FxHashSet;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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

/// A flag that asks a running count to stop (its client went away). Checked
/// between pre-tokenised pieces, so a cancelled count ends within one piece.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The o200k tokenizer and the set of its tokens' bytes.
struct Vocabulary {
    tok: &'static bpe_openai::Tokenizer,
    tokens: FxHashSet<&'static [u8]>,
}

/// Longest token of o200k, in bytes (a longer piece is never one token).
const MAX_TOKEN_BYTES: usize = 256;

fn vocabulary() -> &'static Vocabulary {
    static V: Lazy<Vocabulary> = Lazy::new(|| {
        let tok = bpe_openai::o200k_base();
        let n = tok.bpe.num_tokens();
        let mut tokens = FxHashSet::with_capacity_and_hasher(n, Default::default());
        for id in 0..n {
            if let Ok(id) = u32::try_from(id) {
                let bytes = tok.bpe.token_bytes(id);
                if bytes.len() <= MAX_TOKEN_BYTES {
                    tokens.insert(bytes);
                }
            }
        }
        Vocabulary { tok, tokens }
    });
    &V
}

/// How many pieces are counted between two looks at the cancel flag.
const CANCEL_CHECK_EVERY: usize = 4096;

/// Counts o200k tokens of `text` exactly as tiktoken's `encode_ordinary`
/// would, in time linear in the text whatever it holds: pre-tokenisation is a
/// non-backtracking regex (regex-automata) and each piece is encoded with the
/// `bpe` crate's backtracking encoder, linear in the piece (tiktoken's merge is
/// quadratic in it, so one long run of a character took minutes). Stops early
/// once `limit` is passed (the exact figure above the limit does not matter)
/// or when `cancel` is set; `None` means cancelled.
pub fn count_text(text: &str, limit: u64, cancel: &Cancel) -> Option<u64> {
    let Vocabulary { tok, tokens } = vocabulary();
    let mut total = 0u64;
    for (i, piece) in tok.split(text).enumerate() {
        if i % CANCEL_CHECK_EVERY == 0 && cancel.is_cancelled() {
            return None;
        }
        // Most pieces of ordinary text are one token (as in tiktoken, which
        // takes the same shortcut): one hash lookup, no encoder set up.
        if piece.len() <= MAX_TOKEN_BYTES && tokens.contains(piece.as_bytes()) {
            total += 1;
            if total > limit {
                return Some(total);
            }
            continue;
        }
        let left = limit.saturating_sub(total);
        let n = match usize::try_from(left) {
            // A piece that may cross the limit is counted only until it does.
            Ok(left) if piece.len() > left => tok
                .bpe
                .count_till_limit(piece.as_bytes(), left)
                .map_or(limit.saturating_add(1), |n| n as u64),
            _ => tok.bpe.count(piece.as_bytes()) as u64,
        };
        total = total.saturating_add(n);
        if total > limit {
            return Some(total);
        }
    }
    Some(total)
}

/// Counts the tokens of a countable request (`None`: cancelled).
pub fn count(c: &Countable, limit: u64, cancel: &Cancel) -> Option<u64> {
    let media = c.media_parts.saturating_mul(IMAGE_TOKENS);
    count_text(&c.text, limit.saturating_sub(media), cancel).map(|n| n.saturating_add(media))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_all(text: &str) -> u64 {
        count_text(text, u64::MAX, &Cancel::default()).unwrap()
    }

    #[test]
    fn counts_real_tokens() {
        // "Hello", ",", " world", "!", " This", " is", " a", " test", "."
        assert_eq!(count_all("Hello, world! This is a test."), 9);
        assert_eq!(count_all(""), 0);
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
        let n = count_text(&text, 10, &Cancel::default()).unwrap();
        assert!(n > 10 && n < 100_000, "{n}");
        // one long piece stops early too
        let run = "b".repeat(1_000_000);
        let n = count_text(&run, 10, &Cancel::default()).unwrap();
        assert!(n > 10 && n < 1000, "{n}");
    }

    #[test]
    fn a_cancelled_count_says_so() {
        let cancel = Cancel::default();
        cancel.cancel();
        assert_eq!(count_text(&"word ".repeat(10_000), u64::MAX, &cancel), None);
    }

    #[test]
    fn media_parts_count_against_the_limit() {
        let c = Countable {
            text: "hello".into(),
            media_parts: 2,
        };
        assert_eq!(
            count(&c, u64::MAX, &Cancel::default()),
            Some(2 * IMAGE_TOKENS + 1)
        );
    }
}
