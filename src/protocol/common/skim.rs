//! A validating skim of a JSON object document: the byte spans of a few
//! top-level members' values, found in one pass without building anything,
//! for the stream peeks that read a frame's model, usage and end markers
//! (`peek::Peeked`; docs/performance.md "Peeking at stream frames").
//!
//! It accepts exactly what serde_json accepts when it skips a value
//! (RFC 8259's grammar: strings without raw control characters and with
//! valid escapes, numbers without leading zeros); it answers `None`
//! (the caller then parses the document with serde, which decides) for
//! anything it does not vouch for: invalid JSON, a document that is not an
//! object, a key written with escapes (it could spell a wanted name), a
//! wanted key twice (serde refuses a duplicate field), nesting deeper than
//! [`MAX_DEPTH`]. Invalid UTF-8 is not its business: the callers check the
//! whole document first (`framing::check_utf8`, `from_utf8`).

use crate::util::words;
use std::ops::Range;

/// Deeper nesting is left to serde (its own limit is 128).
const MAX_DEPTH: usize = 64;

struct Skim<'a> {
    b: &'a [u8],
    i: usize,
}

impl Skim<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string, at its opening quote; true when it holds an escape.
    fn string(&mut self) -> Option<bool> {
        self.eat(b'"')?;
        let mut escaped = false;
        loop {
            // Eight bytes at a time up to the next special byte (a short
            // string's end is found in one step, not one byte per step).
            while let Some(w) = words::word(self.b, self.i) {
                let at = words::first_json_special(w);
                self.i += at;
                if at < 8 {
                    break;
                }
            }
            let c = self.peek()?;
            self.i += 1;
            match c {
                b'"' => return Some(escaped),
                b'\\' => {
                    escaped = true;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        b'u' => {
                            let hex = self.b.get(self.i + 1..self.i + 5)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.i += 5;
                        }
                        _ => return None,
                    }
                }
                0..=0x1f => return None,
                _ => {}
            }
        }
    }

    fn digits(&mut self) -> Option<()> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        (self.i > start).then_some(())
    }

    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => {
                self.i += 1;
                if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    return None;
                }
            }
            b'1'..=b'9' => self.digits()?,
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.digits()?;
        }
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'[')?;
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            self.value(depth)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An object nested in the document (the top-level one is
    /// [`top_level`]'s, which reads its keys).
    fn object(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            self.value(depth)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

/// The spans of the values of the top-level members named in `wanted`
/// (None for one absent) of the object document `doc`, or None when the
/// skim cannot vouch for the document (see the module doc).
pub fn members<const N: usize>(
    doc: &[u8],
    wanted: [&[u8]; N],
) -> Option<[Option<Range<usize>>; N]> {
    top_level(doc, wanted, None, |_, _| {})
}

/// What a skim leaves for the next document of the same kind: the frames
/// of one stream share their start (an OpenAI chunk's `id`, `object`,
/// `created`, `model`), and what the skim found up to a top-level member
/// boundary depends on the bytes before it alone (a string, a number or a
/// literal ends at its own last byte). So a document that starts with the
/// bytes of the last one up to a boundary is skimmed from there, with the
/// members found before it, and only what differs is read.
pub struct Resume<const N: usize> {
    /// The last document up to its last boundary.
    prefix: Vec<u8>,
    /// Each boundary (just past a top-level comma) and what was found before it.
    marks: Vec<(usize, [Option<Range<usize>>; N])>,
}

impl<const N: usize> Default for Resume<N> {
    fn default() -> Self {
        Resume {
            prefix: Vec::new(),
            marks: Vec::new(),
        }
    }
}

/// Longer shared starts are not kept (a frame's envelope is a few hundred
/// bytes; a longer one is skimmed whole each time).
const MAX_RESUME: usize = 4096;

/// [`members`], resumed where `memo` (what the last document skimmed with
/// it left) allows; the answer is the same as [`members`]'.
pub fn members_resumed<const N: usize>(
    doc: &[u8],
    wanted: [&[u8]; N],
    memo: &mut Resume<N>,
) -> Option<[Option<Range<usize>>; N]> {
    let shared = words::common_prefix(&memo.prefix, doc);
    let keep = memo.marks.iter().rposition(|(at, _)| *at <= shared);
    memo.marks.truncate(keep.map_or(0, |k| k + 1));
    let marks_before = memo.marks.len();
    let from = memo.marks.last().cloned();
    let marks = &mut memo.marks;
    let found = top_level(doc, wanted, from, |at, found| {
        marks.push((at, found.clone()))
    });
    if memo.marks.len() != marks_before || keep.is_none() {
        let end = memo.marks.last().map_or(0, |(at, _)| *at);
        memo.prefix.clear();
        if end <= MAX_RESUME {
            memo.prefix.extend_from_slice(&doc[..end]);
        } else {
            memo.marks.clear();
        }
    }
    found
}

/// The spans of the wanted top-level members of the object `doc`, skimmed
/// from its start or `from` a boundary (an offset just past a top-level
/// comma, with what was found before it); `mark` is told each boundary
/// passed.
fn top_level<const N: usize>(
    doc: &[u8],
    wanted: [&[u8]; N],
    from: Option<(usize, [Option<Range<usize>>; N])>,
    mut mark: impl FnMut(usize, &[Option<Range<usize>>; N]),
) -> Option<[Option<Range<usize>>; N]> {
    let mut s = Skim { b: doc, i: 0 };
    let mut found = match from {
        Some((at, found)) => {
            s.i = at;
            found
        }
        None => {
            s.ws();
            s.eat(b'{')?;
            s.ws();
            if s.eat(b'}').is_some() {
                s.ws();
                return (s.i == doc.len()).then(|| std::array::from_fn(|_| None));
            }
            std::array::from_fn(|_| None)
        }
    };
    loop {
        s.ws();
        let key_at = s.i;
        // A key with escapes might spell a wanted name.
        if s.string()? {
            return None;
        }
        let key = &doc[key_at + 1..s.i - 1];
        s.ws();
        s.eat(b':')?;
        s.ws();
        let at = s.i;
        s.value(1)?;
        if let Some(k) = wanted.iter().position(|w| *w == key) {
            if found[k].replace(at..s.i).is_some() {
                return None;
            }
        }
        s.ws();
        match s.peek()? {
            b',' => {
                s.i += 1;
                mark(s.i, &found);
            }
            b'}' => {
                s.i += 1;
                break;
            }
            _ => return None,
        }
    }
    s.ws();
    (s.i == doc.len()).then_some(found)
}

/// Object documents of up to six `member`s (`"key":value` texts, in any
/// order, repeats allowed), some cut short: what the peeks' property tests
/// compare the skim and serde on.
#[cfg(test)]
pub(crate) fn objects(
    member: impl proptest::strategy::Strategy<Value = String>,
) -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    (
        prop::collection::vec(member, 0..7),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(members, cut, whole)| {
            let doc = format!("{{{}}}", members.join(","));
            if whole {
                doc
            } else {
                doc[..cut.index(doc.len() + 1)].to_string()
            }
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spans(doc: &str) -> Option<Vec<Option<String>>> {
        let found = members(doc.as_bytes(), [b"model", b"usage"])?;
        Some(
            found
                .iter()
                .map(|r| r.clone().map(|r| doc[r].to_string()))
                .collect(),
        )
    }

    #[test]
    fn finds_top_level_members_only() {
        let doc = r#" {"id":"x","model":"gpt","choices":[{"delta":{"model":"no","usage":1}}],"usage":null} "#;
        assert_eq!(
            spans(doc),
            Some(vec![Some("\"gpt\"".into()), Some("null".into())])
        );
        assert_eq!(spans(r#"{"a":{"model":"x"}}"#), Some(vec![None, None]));
        assert_eq!(spans("{}"), Some(vec![None, None]));
    }

    #[test]
    fn a_stream_s_frames_resume_past_their_shared_start() {
        let frame = |i: usize, model: &str| {
            format!(
                r#"{{"id":"c1","object":"chunk","model":"{model}","choices":[{{"delta":{{"content":"t{i}"}}}}],"usage":null}}"#
            )
        };
        let mut memo = Resume::default();
        for (i, model) in ["m", "m", "m", "other", "m"].iter().enumerate() {
            let doc = frame(i, model);
            let resumed = members_resumed(doc.as_bytes(), [b"model", b"usage"], &mut memo);
            assert_eq!(
                resumed,
                members(doc.as_bytes(), [b"model", b"usage"]),
                "{doc}"
            );
        }
        // The last document is kept up to its last boundary (before
        // `usage`); the next frame resumes at `choices`, where it differs.
        let last = frame(4, "m");
        let end = last.find(r#""usage""#).unwrap();
        assert_eq!(memo.prefix, &last.as_bytes()[..end]);
        let at = last.find(r#""choices""#).unwrap();
        // A frame that breaks inside the shared start is still refused.
        let broken = last.replace(r#""object":"chunk""#, r#""object":chunk""#);
        assert_eq!(
            members_resumed(broken.as_bytes(), [b"model", b"usage"], &mut memo),
            None
        );
        let dup = format!("{}\"model\":\"x\"}}", &last[..at]);
        assert_eq!(
            members_resumed(dup.as_bytes(), [b"model", b"usage"], &mut memo),
            None
        );
    }

    #[test]
    fn refuses_what_it_cannot_vouch_for() {
        for doc in [
            "{oops",
            "[1,2]",
            r#"{"model":"a","model":"b"}"#,
            r#"{"mod\u0065l":"a"}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":tru}"#,
            r#"{"a":1} x"#,
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            "",
        ] {
            assert_eq!(spans(doc), None, "{doc}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100), "]".repeat(100));
        assert_eq!(spans(&deep), None);
    }

    /// JSON text made of the pieces that matter: keys (wanted or not,
    /// escaped or not), strings with escapes and control characters,
    /// numbers valid and not, nesting, broken punctuation.
    fn doc() -> impl Strategy<Value = String> {
        let atom = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("fals".to_string()),
            "-?(0|[1-9][0-9]{0,3}|0[0-9])(\\.[0-9]{0,2})?([eE][+-]?[0-9]{0,2})?",
            "\"([a-z \"\\\\/]|\\\\[\"\\\\/bfnrtux]|\\\\u[0-9a-fA-Fg]{4}|\t|\u{e9}){0,6}\"",
        ];
        let value = atom.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(
                    (
                        prop_oneof![
                            Just("\"model\"".to_string()),
                            Just("\"usage\"".to_string()),
                            Just("\"us\\u0061ge\"".to_string()),
                            "\"[a-z]{1,3}\"",
                        ],
                        inner
                    ),
                    0..4
                )
                .prop_map(|m| format!(
                    "{{{}}}",
                    m.iter()
                        .map(|(k, v)| format!("{k}:{v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                )),
            ]
        });
        (
            value,
            prop_oneof![Just(""), Just(" "), Just(","), Just("}")],
        )
            .prop_map(|(v, tail)| format!("{v}{tail}"))
    }

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Two<'a> {
        #[serde(borrow)]
        model: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow)]
        usage: Option<&'a serde_json::value::RawValue>,
    }

    proptest! {
        /// A resumed skim answers as a whole one, whatever came before:
        /// documents that share a start with the last one (a stream's
        /// frames, some cut or changed mid-way) and ones that do not.
        #[test]
        fn resumed_agrees_with_whole(
            docs in prop::collection::vec((doc(), 0usize..64, doc()), 1..8),
        ) {
            let mut memo = Resume::default();
            let mut last = String::new();
            for (fresh, keep, tail) in docs {
                // Half the time the last document's start, then another end.
                let doc = if keep % 2 == 0 && !last.is_empty() {
                    let cut = (keep * 7) % (last.len() + 1);
                    let cut = (0..=cut).rev().find(|&c| last.is_char_boundary(c)).unwrap_or(0);
                    format!("{}{}", &last[..cut], tail)
                } else {
                    fresh
                };
                let whole = members(doc.as_bytes(), [b"model", b"usage"]);
                let resumed = members_resumed(doc.as_bytes(), [b"model", b"usage"], &mut memo);
                prop_assert_eq!(&resumed, &whole, "{}", doc);
                last = doc;
            }
        }

        /// Whatever the skim accepts, serde accepts, with the same members.
        #[test]
        fn agrees_with_serde(doc in doc()) {
            if let Some(found) = members(doc.as_bytes(), [b"model", b"usage"]) {
                let two: Two<'_> = serde_json::from_str(&doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
                let get = |r: &Option<Range<usize>>| r.clone().map(|r| &doc[r]).filter(|v| *v != "null");
                prop_assert_eq!(get(&found[0]), two.model.map(|m| m.get()));
                prop_assert_eq!(get(&found[1]), two.usage.map(|m| m.get()));
            }
            // And what serde accepts as an object, the skim accepts unless
            // a key has escapes.
            if doc.trim_start().starts_with('{')
                && !doc.contains("\\u0061")
                && serde_json::from_str::<Two<'_>>(&doc).is_ok()
                && serde_json::from_str::<serde::de::IgnoredAny>(&doc).is_ok()
            {
                prop_assert!(members(doc.as_bytes(), [b"model", b"usage"]).is_some(), "{}", doc);
            }
        }
    }
}
