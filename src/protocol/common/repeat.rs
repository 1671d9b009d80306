//! A stream frame that repeats the last one but for its delta's text.
//!
//! Consecutive chunks of an answer are mostly the same document with
//! another token in one string: an OpenAI chunk's `delta.content`, where
//! the id, the model, the creation time and every other member repeat.
//! A parser that read the last frame in full and found that its one effect
//! was that text (nothing else in it does anything in the state the parser
//! is in after it) keeps the frame and where the text was ([`Repeat::keep`]).
//! A next frame equal to it outside that text, whose new text holds no
//! quote, backslash or control character and is not empty
//! ([`Repeat::text`]), is then the same JSON document with only that
//! string's value changed: it parses alike, member for member, and has the
//! same effect with the new text, so the parser applies that effect without
//! parsing the frame (docs/performance.md "Issue 28, twelfth pass").
//!
//! The frame must have been checked to be UTF-8 (`framing::check_utf8`):
//! the text is handed out as a slice of it.

use crate::util::words;
use std::ops::Range;

/// The last frame a parser read in full whose one effect was a text, and
/// where that text lies in it.
#[derive(Debug, Default)]
pub struct Repeat {
    /// The last frame (its bytes); empty when none is kept.
    last: Vec<u8>,
    /// Where the text is in `last` (between the string's quotes).
    at: Range<usize>,
}

/// Frames longer than this are not kept (a chunk is a few hundred bytes).
const MAX_KEPT: usize = 4096;

impl Repeat {
    /// Forgets the kept frame: the next frame is read in full.
    pub fn clear(&mut self) {
        self.last.clear();
    }

    /// Keeps `frame`, whose one effect was `text`, a string value of it
    /// that had no escapes (serde lent it from the frame: a `&str` or a
    /// borrowed `Cow`). A text that does not lie in `frame` keeps nothing.
    pub fn keep(&mut self, frame: &str, text: &str) {
        self.last.clear();
        let start = (text.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize);
        let Some(end) = start.checked_add(text.len()) else {
            return;
        };
        if end > frame.len() || frame.len() > MAX_KEPT {
            return;
        }
        self.last.extend_from_slice(frame.as_bytes());
        self.at = start..end;
    }

    /// The new text of `frame` when it repeats the kept frame but for its
    /// text (see the module's doc); the kept frame is then `frame`. None
    /// (the kept frame forgotten) when it does not.
    pub fn text<'f>(&mut self, frame: &'f str) -> Option<&'f str> {
        if self.last.is_empty() {
            return None;
        }
        let bytes = frame.as_bytes();
        let (before, after) = (&self.last[..self.at.start], &self.last[self.at.end..]);
        let end = bytes.len().saturating_sub(after.len());
        let text = frame
            .get(before.len()..end)
            .filter(|t| !t.is_empty() && bytes.starts_with(before) && bytes.ends_with(after))
            .filter(|t| words::json_plain(t.as_bytes()));
        match text {
            Some(text) => {
                self.last.truncate(self.at.start);
                self.last.extend_from_slice(&bytes[self.at.start..]);
                self.at = self.at.start..end;
                Some(text)
            }
            None => {
                self.last.clear();
                None
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const FRAME: &str =
        r#"{"id":"c","choices":[{"delta":{"content":"Hello"},"finish_reason":null}]}"#;

    fn kept() -> Repeat {
        let mut r = Repeat::default();
        let at = FRAME.find("Hello").unwrap();
        r.keep(FRAME, &FRAME[at..at + 5]);
        r
    }

    #[test]
    fn a_frame_that_differs_in_the_text_alone_gives_its_text() {
        let mut r = kept();
        let next = FRAME.replace("Hello", " wörld, again");
        assert_eq!(r.text(&next), Some(" wörld, again"));
        // And the next one is compared with that one.
        let third = FRAME.replace("Hello", "!");
        assert_eq!(r.text(&third), Some("!"));
        assert_eq!(r.last, third.as_bytes());
    }

    #[test]
    fn any_other_difference_is_read_in_full() {
        for other in [
            FRAME.replace("Hello", ""),
            FRAME.replace("Hello", r#"a\"b"#),
            FRAME.replace("Hello", r"a\nb"),
            FRAME.replace("Hello", "a\nb"),
            FRAME.replace("Hello", r#"a","x":"b"#),
            FRAME.replace(r#""id":"c""#, r#""id":"d""#),
            FRAME.replace("null", r#""stop""#),
            FRAME.replace("Hello\"", "Hello\" "),
            "[DONE]".to_string(),
        ] {
            let mut r = kept();
            assert_eq!(r.text(&other), None, "{other}");
            // Forgotten: not even the kept frame itself repeats now.
            assert_eq!(r.text(FRAME), None);
        }
    }

    #[test]
    fn a_text_outside_the_frame_keeps_nothing() {
        let mut r = Repeat::default();
        r.keep(FRAME, "elsewhere");
        assert_eq!(r.text(FRAME), None);
        assert!(r.last.is_empty());
    }
}
