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
//! Some frames also carry values that change from one to the next and that
//! the parser never reads: a Responses delta's `sequence_number` and
//! `obfuscation`, an OpenAI chunk's `obfuscation`. The parser names those
//! top-level members when it keeps a frame; each that holds a string
//! without escapes or a number of digits alone may then change too, to a
//! value of its kind (a string without quote, backslash or control
//! character, possibly empty; digits without a leading zero), and the
//! document is still the same JSON with values the parser ignores changed
//! (docs/performance.md "Issue 28, thirteenth pass").
//!
//! A reader with no text to take (the stream peeks, whose answer for a
//! delta is a counter or a place) keeps a frame with the values that may
//! change and those whose place it reads ([`Repeat::keep_values`],
//! [`Repeat::keep_members`]), and learns where they are in a next frame
//! that repeats it ([`Repeat::values`]).
//!
//! The kept frame must have been checked to be UTF-8
//! (`framing::check_utf8`); a next one that repeats it is checked where it
//! differs, and its text is handed out as a slice of it.

use crate::protocol::common::skim::{self, digits};
use crate::util::words;
use std::ops::Range;

/// What may change in a kept frame's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The text: a non-empty string without escapes.
    Text,
    /// An ignored string value: any string without escapes.
    Plain,
    /// An ignored number: digits without a leading zero.
    Digits,
    /// A value that must repeat as it is, whose place is told.
    Same,
}

/// The last frame a parser read in full whose one effect was a text, and
/// where that text and the values it ignores lie in it.
#[derive(Debug, Default)]
pub struct Repeat {
    /// The kept frame (its bytes: the first of the run that repeats it);
    /// empty when none is kept.
    last: Vec<u8>,
    /// The values in `last` that may change, in order: where each is
    /// (between a string's quotes), what it may change to, and which of
    /// the named members it is (none for the text).
    slots: Vec<(Range<usize>, Slot, Option<usize>)>,
    /// Which slot is the text (none: [`Repeat::keep_values`]).
    text_slot: Option<usize>,
}

/// Frames longer than this are not kept (a chunk is a few hundred bytes).
const MAX_KEPT: usize = 4096;

/// The most values a kept frame may have that change (a text and the
/// members its reader names: at most four).
const MAX_SLOTS: usize = 4;

/// Where each slot's value is in a frame that repeats the kept one.
type Places = [Range<usize>; MAX_SLOTS];

impl Repeat {
    /// Forgets the kept frame: the next frame is read in full.
    pub fn clear(&mut self) {
        self.last.clear();
    }

    /// Whether a frame is kept.
    pub fn is_kept(&self) -> bool {
        !self.last.is_empty()
    }

    /// Keeps `frame`, whose one effect was `text`, a string value of it
    /// that had no escapes (serde lent it from the frame: a `&str` or a
    /// borrowed `Cow`), and whose top-level members named in `ignored` are
    /// values the parser does not read. A text that does not lie in
    /// `frame` keeps nothing.
    pub fn keep<const N: usize>(&mut self, frame: &str, text: &str, ignored: [&[u8]; N]) {
        self.last.clear();
        self.slots.clear();
        let start = (text.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize);
        let Some(end) = start.checked_add(text.len()) else {
            return;
        };
        if end > frame.len() {
            return;
        }
        self.slots.push((start..end, Slot::Text, None));
        self.keep_slots(frame.as_bytes(), ignored);
    }

    /// Keeps `frame` with the values of its top-level members named in
    /// `members` as the ones that may change (each a string without
    /// escapes or a number of digits alone; any other must repeat as it
    /// is), and no text: for a reader whose answer depends on no other
    /// value of it, or on those it reads from [`Repeat::members`].
    pub fn keep_members<const N: usize>(&mut self, frame: &[u8], members: [&[u8]; N]) {
        self.last.clear();
        self.slots.clear();
        self.keep_slots(frame, members);
    }

    /// Adds the slots of the members named in `names` and keeps `frame`
    /// when they and those already noted do not overlap.
    fn keep_slots<const N: usize>(&mut self, frame: &[u8], names: [&[u8]; N]) {
        if N == 0 {
            return self.add_values(frame, std::array::from_fn::<_, N, _>(|_| None));
        }
        let Some(found) = skim::members(frame, names) else {
            return;
        };
        self.add_values(frame, found.map(|r| r.map(|r| (r, true))));
    }

    /// Keeps `frame` with the `values` the caller gives (their spans, each
    /// a whole JSON value): each that may change (`true`) is a string
    /// without escapes or a number of digits alone that may change to one
    /// of its kind (any other is left to repeat as it is); each that may
    /// not must repeat byte for byte, and [`Repeat::values`] tells where
    /// it is then. Values that overlap keep nothing.
    pub fn keep_values<const N: usize>(
        &mut self,
        frame: &[u8],
        values: [Option<(Range<usize>, bool)>; N],
    ) {
        self.last.clear();
        self.slots.clear();
        self.add_values(frame, values);
    }

    /// [`Repeat::keep_values`] after the slots already noted (a text's).
    fn add_values<const N: usize>(
        &mut self,
        frame: &[u8],
        values: [Option<(Range<usize>, bool)>; N],
    ) {
        if frame.len() > MAX_KEPT {
            return;
        }
        for (k, v) in values.into_iter().enumerate() {
            let Some((r, changing)) = v else { continue };
            let Some(v) = frame.get(r.clone()) else {
                return;
            };
            if !changing {
                self.slots.push((r, Slot::Same, Some(k)));
            } else if digits(v) {
                self.slots.push((r, Slot::Digits, Some(k)));
            } else if v.len() >= 2 && v[0] == b'"' && words::json_plain(&v[1..v.len() - 1]) {
                self.slots
                    .push((r.start + 1..r.end - 1, Slot::Plain, Some(k)));
            }
        }
        self.slots.sort_unstable_by_key(|(r, _, _)| r.start);
        if self.slots.len() > MAX_SLOTS || self.slots.windows(2).any(|w| w[1].0.start < w[0].0.end)
        {
            return;
        }
        self.text_slot = self.slots.iter().position(|(_, s, _)| *s == Slot::Text);
        self.last.extend_from_slice(frame);
    }

    /// Where the values named when `frame`'s predecessor was kept
    /// ([`Repeat::keep_members`], [`Repeat::keep_values`]) are in `frame`
    /// (a string's between its quotes), when it repeats that one but in
    /// those values (each of its kind); the next frame is compared with
    /// the kept one again, whose bytes outside those values are `frame`'s.
    /// None (the kept frame forgotten) when it does not.
    pub fn values<const N: usize>(&mut self, frame: &[u8]) -> Option<[Option<Range<usize>>; N]> {
        let places = match self.text_slot {
            None => self.advance(frame),
            Some(_) => None,
        };
        let Some(places) = places else {
            self.last.clear();
            return None;
        };
        let mut found = std::array::from_fn(|_| None);
        for ((_, _, k), place) in self.slots.iter().zip(places) {
            if let Some(at) = k.and_then(|k| found.get_mut(k)) {
                *at = Some(place);
            }
        }
        Some(found)
    }

    /// The new text of `frame` when it repeats the kept frame but for its
    /// text and ignored values (see the module's doc), as for
    /// [`Repeat::values`]. None (the kept frame forgotten) when it does not.
    ///
    /// `frame` is a stream event's data, not yet checked as UTF-8: the
    /// kept frame was, and where they differ (the values, each between
    /// ASCII bytes of the same) is checked here, so a frame that repeats
    /// is valid UTF-8 and needs no check of its own (one that does not is
    /// checked whole by the parser, which reads it in full).
    pub fn text<'f>(&mut self, frame: &'f [u8]) -> Option<&'f str> {
        let at = self.text_slot;
        let place = at.and_then(|at| Some(self.advance(frame)?[at].clone()));
        let text = place.and_then(|p| std::str::from_utf8(&frame[p]).ok());
        if text.is_none() {
            self.last.clear();
        }
        text
    }

    /// Where the slots' values are in `new` when it repeats the kept frame
    /// ([`Repeat::matched`]); else none is kept. The kept frame stays as it
    /// is: a frame that repeats it has the same bytes outside the slots,
    /// which is all a next one is compared with.
    fn advance(&mut self, new: &[u8]) -> Option<Places> {
        let places = match self.last.is_empty() {
            true => None,
            false => self.matched(new),
        };
        if places.is_none() {
            self.last.clear();
        }
        places
    }

    /// Where the slots' values are in `new` when it matches the kept
    /// frame (see the module's doc).
    fn matched(&self, new: &[u8]) -> Option<Places> {
        let mut places = Places::default();
        let (mut old_at, mut at) = (0, 0);
        for ((r, slot, _), place) in self.slots.iter().zip(&mut places) {
            let fixed = &self.last[old_at..r.start];
            if !new.get(at..)?.starts_with(fixed) {
                return None;
            }
            at += fixed.len();
            let rest = &new[at..];
            let len = match slot {
                Slot::Digits => rest.iter().position(|c| !c.is_ascii_digit()),
                Slot::Text | Slot::Plain => memchr::memchr(b'"', rest),
                Slot::Same => {
                    let was = &self.last[r.clone()];
                    rest.starts_with(was).then_some(was.len())
                }
            }?;
            let v = &rest[..len];
            let fits = match slot {
                Slot::Digits => digits(v),
                Slot::Text => !v.is_empty() && words::json_plain(v),
                Slot::Plain => words::json_plain(v) && words::is_utf8(v),
                Slot::Same => true,
            };
            if !fits {
                return None;
            }
            old_at = r.end;
            *place = at..at + len;
            at += len;
        }
        (new.get(at..) == Some(&self.last[old_at..])).then_some(places)
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
        r.keep(FRAME, &FRAME[at..at + 5], []);
        r
    }

    #[test]
    fn a_frame_that_differs_in_the_text_alone_gives_its_text() {
        let mut r = kept();
        let next = FRAME.replace("Hello", " wörld, again");
        assert_eq!(r.text(next.as_bytes()), Some(" wörld, again"));
        // And the next one too: the kept frame is not copied again (the
        // bytes a next one is compared with are the same in both).
        let third = FRAME.replace("Hello", "!");
        assert_eq!(r.text(third.as_bytes()), Some("!"));
        assert_eq!(r.last, FRAME.as_bytes());
        // The same text again, and the kept frame itself, still repeat.
        assert_eq!(r.text(third.as_bytes()), Some("!"));
        assert_eq!(r.text(FRAME.as_bytes()), Some("Hello"));
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
            assert_eq!(r.text(other.as_bytes()), None, "{other}");
            // Forgotten: not even the kept frame itself repeats now.
            assert_eq!(r.text(FRAME.as_bytes()), None);
        }
    }

    #[test]
    fn a_text_outside_the_frame_keeps_nothing() {
        let mut r = Repeat::default();
        r.keep(FRAME, "elsewhere", []);
        assert_eq!(r.text(FRAME.as_bytes()), None);
        assert!(r.last.is_empty());
    }

    const DELTA: &str = r#"{"type":"response.output_text.delta","sequence_number":9,"item_id":"msg_1","delta":"Hi","logprobs":[],"obfuscation":"mK3x"}"#;

    fn kept_delta() -> Repeat {
        let mut r = Repeat::default();
        let at = DELTA.find("Hi").unwrap();
        r.keep(
            DELTA,
            &DELTA[at..at + 2],
            [b"sequence_number", b"obfuscation"],
        );
        r
    }

    fn delta(seq: &str, text: &str, obfuscation: &str) -> String {
        DELTA
            .replace(":9,", &format!(":{seq},"))
            .replace("\"Hi\"", &format!("\"{text}\""))
            .replace("mK3x", obfuscation)
    }

    #[test]
    fn ignored_values_may_change_with_the_text() {
        let mut r = kept_delta();
        assert_eq!(
            r.text(delta("10", " there", "pQ").as_bytes()),
            Some(" there")
        );
        assert_eq!(r.text(delta("11", "!", "").as_bytes()), Some("!"));
        assert_eq!(
            r.text(delta("12", "ok", "longer padding").as_bytes()),
            Some("ok")
        );
        // Unchanged ignored values too.
        assert_eq!(
            r.text(delta("12", "again", "longer padding").as_bytes()),
            Some("again")
        );
    }

    #[test]
    fn a_changed_value_that_is_not_utf8_is_read_in_full() {
        for (at, what) in [("Hi", &b"H\xffi"[..]), ("mK3x", b"m\xc3")] {
            let mut r = kept_delta();
            let i = DELTA.find(at).unwrap();
            let mut frame = DELTA.as_bytes()[..i].to_vec();
            frame.extend_from_slice(what);
            frame.extend_from_slice(&DELTA.as_bytes()[i + at.len()..]);
            assert_eq!(r.text(&frame), None);
        }
    }

    #[test]
    fn an_ignored_value_of_another_kind_is_read_in_full() {
        for other in [
            delta("010", "x", "a"),
            delta("1.5", "x", "a"),
            delta("-1", "x", "a"),
            delta("1e3", "x", "a"),
            delta("\"9\"", "x", "a"),
            delta("10", "x", r"a\u0041"),
            delta("10", "x", "a\"b"),
            delta("10", "", "a"),
            DELTA.replace("msg_1", "msg_2"),
            DELTA.replace("[]", "[1]"),
        ] {
            let mut r = kept_delta();
            assert_eq!(r.text(other.as_bytes()), None, "{other}");
        }
    }

    #[test]
    fn an_ignored_member_that_is_not_a_plain_scalar_must_repeat() {
        let frame = DELTA.replace(":9,", ":9.5,").replace("mK3x", r"m\n");
        let mut r = Repeat::default();
        let at = frame.find("Hi").unwrap();
        r.keep(
            &frame,
            &frame[at..at + 2],
            [b"sequence_number", b"obfuscation"],
        );
        let same_but_text = frame.replace("\"Hi\"", "\"Yo\"");
        assert_eq!(r.text(same_but_text.as_bytes()), Some("Yo"));
        assert_eq!(r.text(same_but_text.replace("9.5", "9.6").as_bytes()), None);
    }
}
