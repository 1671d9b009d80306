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
    /// Whether to note the scalars a [`Resume`] may see changed.
    note: bool,
    /// When `note`, in document order: the contents of the string values
    /// without escapes (quotes left out) and the numbers that are digits
    /// alone, each with whether it is a number.
    scalars: Vec<(Range<usize>, bool)>,
}

impl Skim<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        if matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i = words::space_end(self.b, self.i + 1);
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
            // A block at a time up to the next special byte (a short
            // string's end is found in one step, not one byte per step).
            self.i = words::plain_end(self.b, self.i);
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
            b'"' => {
                let at = self.i;
                let escaped = self.string()?;
                if self.note && !escaped {
                    self.scalars.push((at + 1..self.i - 1, false));
                }
                Some(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => {
                let at = self.i;
                self.number()?;
                if self.note && self.b[at..self.i].iter().all(u8::is_ascii_digit) {
                    self.scalars.push((at..self.i, true));
                }
                Some(())
            }
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
    whole(doc, (wanted, None))
}

/// [`members`], with the object value of the wanted member `caller_reads`
/// only stepped over (see [`members_resumed_leaving`]).
fn whole<const N: usize>(
    doc: &[u8],
    wanted: ([&[u8]; N], Option<usize>),
) -> Option<[Option<Range<usize>>; N]> {
    let mut s = Skim {
        b: doc,
        i: 0,
        note: false,
        scalars: Vec::new(),
    };
    top_level(&mut s, wanted, None, |_, _| {})
}

/// What a skim leaves for the next document of the same kind, two ways
/// of reading less of it:
///
/// - **The same document but for some scalars.** A stream's frames
///   mostly differ from the last one in a token, perhaps a counter and a
///   padding (a Responses delta's `sequence_number` and `obfuscation`):
///   the bytes between their shared start and shared end begin inside one
///   scalar of the last document and end inside the same or a later one,
///   each a string value the skim found without escapes or a number of
///   digits alone, and the bytes between the scalars from the first to the
///   last are the same in both. When the new text of each is of its kind
///   (no quote, backslash or control character; digits without a leading
///   zero), the new document is the last one with those values changed:
///   valid alike, with the same members, each span moved by the change in
///   length before it (and a span holding a changed value grown by it).
///   Nothing is read but the ends compared, the bytes between and the new
///   values.
/// - **A shared start.** What the skim found up to a top-level member
///   boundary depends on the bytes before it alone (a string, a number or
///   a literal ends at its own last byte). So a document that starts with
///   the bytes of the last one up to a boundary is skimmed from there, with
///   the members found before it, and only the rest is read.
pub struct Resume<const N: usize> {
    /// The last document (empty when longer than [`MAX_RESUME`]).
    last: Vec<u8>,
    /// What the skim of `last` answered.
    found: Option<[Option<Range<usize>>; N]>,
    /// Each boundary (just past a top-level comma) and what was found before it.
    marks: Vec<(usize, [Option<Range<usize>>; N])>,
    /// `last`'s scalars as [`Skim`] notes them (up to where its skim stopped).
    scalars: Vec<(Range<usize>, bool)>,
    /// Scratch for [`Resume::scalars_changed`]: each changed scalar's
    /// start, end and the change in length up to its end.
    moves: Vec<(usize, usize, usize)>,
}

impl<const N: usize> Default for Resume<N> {
    fn default() -> Self {
        Resume {
            last: Vec::new(),
            found: None,
            marks: Vec::new(),
            scalars: Vec::new(),
            moves: Vec::new(),
        }
    }
}

/// Longer documents are not kept (a frame is a few hundred bytes; a longer
/// one is skimmed whole each time).
const MAX_RESUME: usize = 4096;

/// [`members`], resumed where `memo` (what the last document skimmed with
/// it left) allows; the answer is the same as [`members`]'.
pub fn members_resumed<const N: usize>(
    doc: &[u8],
    wanted: [&[u8]; N],
    memo: &mut Resume<N>,
) -> Option<[Option<Range<usize>>; N]> {
    members_resumed_leaving(doc, (wanted, None), memo)
}

/// [`members_resumed`], but the value of the wanted member
/// `caller_reads`, when an object, is only stepped over (its end found,
/// nothing in it checked): the caller skims that object itself, and
/// refuses the document when its own skim does (a Responses event's
/// `response`, read again for its id, model and usage).
fn members_resumed_leaving<const N: usize>(
    doc: &[u8],
    (wanted, caller_reads): ([&[u8]; N], Option<usize>),
    memo: &mut Resume<N>,
) -> Option<[Option<Range<usize>>; N]> {
    let shared = words::common_prefix(&memo.last, doc);
    if let Some(found) = memo.scalars_changed(doc, shared) {
        return Some(found);
    }
    let keep = memo.marks.iter().rposition(|(at, _)| *at <= shared);
    memo.marks.truncate(keep.map_or(0, |k| k + 1));
    let from = memo.marks.last().cloned();
    // The scalars before the boundary resumed from are the last
    // document's, and this one's.
    let resumed_at = from.as_ref().map_or(0, |(at, _)| *at);
    let mut scalars = std::mem::take(&mut memo.scalars);
    scalars.truncate(scalars.partition_point(|(r, _)| r.end < resumed_at));
    let mut s = Skim {
        b: doc,
        i: 0,
        note: true,
        scalars,
    };
    let marks = &mut memo.marks;
    let found = top_level(&mut s, (wanted, caller_reads), from, |at, found| {
        marks.push((at, found.clone()))
    });
    memo.scalars = s.scalars;
    memo.found = found.clone();
    memo.last.clear();
    if doc.len() <= MAX_RESUME {
        memo.last.extend_from_slice(doc);
    } else {
        memo.marks.clear();
        memo.scalars.clear();
        memo.found = None;
    }
    found
}

/// [`members_resumed`] with a memo a caller keeps in a `RefCell` (a
/// thread's, for the stream peeks); a whole skim when the memo is in use.
pub fn members_kept<const N: usize>(
    memo: &std::cell::RefCell<Resume<N>>,
    doc: &[u8],
    wanted: [&[u8]; N],
) -> Option<[Option<Range<usize>>; N]> {
    members_kept_leaving(memo, doc, (wanted, None))
}

/// [`members_kept`], with the object value of the wanted member
/// `caller_reads` left for the caller to skim (see
/// [`members_resumed_leaving`]).
pub fn members_kept_leaving<const N: usize>(
    memo: &std::cell::RefCell<Resume<N>>,
    doc: &[u8],
    (wanted, caller_reads): ([&[u8]; N], Option<usize>),
) -> Option<[Option<Range<usize>>; N]> {
    match memo.try_borrow_mut() {
        Ok(mut memo) => members_resumed_leaving(doc, (wanted, caller_reads), &mut memo),
        Err(_) => whole(doc, (wanted, caller_reads)),
    }
}

/// A skimmed member's value and its span, unless it is absent or `null`
/// (what serde reads as `None` for an optional member).
pub fn non_null(doc: &[u8], span: Option<Range<usize>>) -> Option<(&[u8], Range<usize>)> {
    span.map(|r| (&doc[r.clone()], r))
        .filter(|(v, _)| *v != b"null")
}

/// The text of a skimmed string value as serde lends it (`&str`):
/// `Some(None)` for no value, None (serde would refuse) for one that is
/// no string or has an escape.
pub fn lent(value: Option<&[u8]>) -> Option<Option<&[u8]>> {
    let Some(v) = value else {
        return Some(None);
    };
    let text = v.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    (!text.contains(&b'\\')).then_some(Some(text))
}

/// Whether `b` is a number of digits alone, as JSON writes one (no
/// leading zero).
pub(crate) fn digits(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit) && (b[0] != b'0' || b.len() == 1)
}

/// A skimmed member's value as serde reads an `Option<u64>`: `Some(None)`
/// for no value or `null`, `Some(Some(n))` for digits alone that fit a
/// u64; None for anything else, which the caller leaves to serde (it
/// refuses a sign, a fraction, an exponent, a string, an overflow).
pub fn count(doc: &[u8], span: Option<Range<usize>>) -> Option<Option<u64>> {
    match non_null(doc, span) {
        None => Some(None),
        Some((v, _)) if digits(v) => v
            .iter()
            .try_fold(0u64, |n, d| {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
            .map(Some),
        Some(_) => None,
    }
}

/// The counts named in `wanted` of the object member of `doc` at `span`,
/// as serde reads an `Option` of a struct of `Option<u64>` fields (usage
/// objects and their details): all None for no value or `null`, each
/// [`count`]; None when the skim does not vouch for the object or a count
/// is no plain one (serde then decides).
pub fn counts<const N: usize>(
    doc: &[u8],
    span: Option<Range<usize>>,
    wanted: [&[u8]; N],
) -> Option<[Option<u64>; N]> {
    counts_found(doc, span, |obj| members(obj, wanted))
}

/// [`counts`], the object's members found with `memo` ([`members_kept`]:
/// a usage object's details, most often the last one's with other
/// numbers, are not skimmed again).
pub fn counts_kept<const N: usize>(
    memo: &std::cell::RefCell<Resume<N>>,
    doc: &[u8],
    span: Option<Range<usize>>,
    wanted: [&[u8]; N],
) -> Option<[Option<u64>; N]> {
    counts_found(doc, span, |obj| members_kept(memo, obj, wanted))
}

/// [`counts`] with the object's members found by `find`.
fn counts_found<const N: usize>(
    doc: &[u8],
    span: Option<Range<usize>>,
    find: impl FnOnce(&[u8]) -> Option<[Option<Range<usize>>; N]>,
) -> Option<[Option<u64>; N]> {
    let Some((obj, _)) = non_null(doc, span) else {
        return Some([None; N]);
    };
    let found = find(obj)?;
    let mut out = [None; N];
    for (n, r) in out.iter_mut().zip(found) {
        *n = count(obj, r)?;
    }
    Some(out)
}

impl<const N: usize> Resume<N> {
    /// The answer for `doc` when it is the last document with some of its
    /// scalars changed (see the type's doc); `shared`: the bytes the two
    /// share at their start. The memo then holds `doc`.
    fn scalars_changed(&mut self, doc: &[u8], shared: usize) -> Option<[Option<Range<usize>>; N]> {
        let found = self.found.as_ref()?;
        let last = &self.last;
        if shared == doc.len() && shared == last.len() {
            // The same document again (no scalar changed): the same answer.
            return Some(found.clone());
        }
        let end = words::common_suffix(&last[shared..], &doc[shared..]);
        let old = shared..last.len() - end;
        let holding = |p: usize| {
            let k = self.scalars.partition_point(|(r, _)| r.end < p);
            self.scalars.get(k).filter(|(r, _)| r.start <= p).map(|_| k)
        };
        let (first, last_one) = (holding(old.start)?, holding(old.end)?);
        // From the first scalar the change touches to the last: each one's
        // new text (of its kind), and the bytes up to the next one the same.
        let mut moves = std::mem::take(&mut self.moves);
        moves.clear();
        let mut at = self.scalars[first].0.start;
        for k in first..=last_one {
            let (r, number) = self.scalars[k].clone();
            let rest = &doc[at..];
            // A scalar inside the change whose text and the byte that ends
            // it are the same is unchanged, compared, not read.
            let was = &last[r.start..=r.end];
            let new_end = if k == last_one {
                doc.len() - (last.len() - r.end)
            } else if k != first && rest.starts_with(was) {
                at + was.len() - 1
            } else if number {
                at + rest.iter().position(|c| !c.is_ascii_digit())?
            } else {
                at + memchr::memchr(b'"', rest)?
            };
            let text = doc.get(at..new_end)?;
            let fits = new_end - at == r.len() && text == &last[r.clone()]
                || if number {
                    digits(text)
                } else {
                    words::json_plain(text)
                };
            if !fits {
                self.moves = moves;
                return None;
            }
            moves.push((r.start, r.end, new_end.wrapping_sub(r.end)));
            if k < last_one {
                let between = &last[r.end..self.scalars[k + 1].0.start];
                at = new_end + between.len();
                if doc.get(new_end..at) != Some(between) {
                    self.moves = moves;
                    return None;
                }
            }
        }
        // Where a position of the last document is in this one: moved by
        // the change in length of the scalars before it (a start after a
        // scalar's start, an end at or after its end).
        let start = |p: usize| match moves.partition_point(|m| m.0 < p) {
            0 => p,
            k => p.wrapping_add(moves[k - 1].2),
        };
        let end_at = |p: usize| match moves.partition_point(|m| m.1 <= p) {
            0 => p,
            k => p.wrapping_add(moves[k - 1].2),
        };
        let moved = |r: &Option<Range<usize>>| r.as_ref().map(|r| start(r.start)..end_at(r.end));
        let found = std::array::from_fn(|k| moved(&found[k]));
        // The boundaries after the first change are left out (a skim
        // resumes before it); the scalars are moved.
        let first_start = self.scalars[first].0.start;
        self.marks
            .truncate(self.marks.partition_point(|(at, _)| *at <= first_start));
        let grown = doc.len().wrapping_sub(last.len());
        let mut before = 0usize;
        for (k, (r, _)) in self.scalars.iter_mut().enumerate().skip(first) {
            let after = moves.get(k - first).map_or(grown, |m| m.2);
            *r = r.start.wrapping_add(before)..r.end.wrapping_add(after);
            before = after;
        }
        self.moves = moves;
        self.found = Some(found.clone());
        self.last.truncate(shared);
        self.last.extend_from_slice(&doc[shared..]);
        Some(found)
    }
}

/// The spans of the wanted top-level members of the object `doc`, skimmed
/// from its start or `from` a boundary (an offset just past a top-level
/// comma, with what was found before it); `mark` is told each boundary
/// passed.
fn top_level<const N: usize>(
    s: &mut Skim<'_>,
    (wanted, caller_reads): ([&[u8]; N], Option<usize>),
    from: Option<(usize, [Option<Range<usize>>; N])>,
    mut mark: impl FnMut(usize, &[Option<Range<usize>>; N]),
) -> Option<[Option<Range<usize>>; N]> {
    let doc = s.b;
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
        let k = wanted.iter().position(|w| *w == key);
        if k.is_some() && k == caller_reads && s.peek() == Some(b'{') {
            // The caller skims this object itself: stepped over here.
            s.i = crate::util::json_depth::container_end(doc, at)?;
        } else {
            s.value(1)?;
        }
        if let Some(k) = k {
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

/// What the peeks' property tests hold their skims to: on `doc`, the skim
/// answers as serde does, or leaves the document to it.
#[cfg(test)]
pub(crate) fn agrees<T: PartialEq + std::fmt::Debug>(
    skimmed: impl Fn(&[u8]) -> Option<T>,
    parsed: impl Fn(&[u8]) -> Option<T>,
    doc: &str,
) -> Result<(), proptest::test_runner::TestCaseError> {
    if let Some(p) = skimmed(doc.as_bytes()) {
        proptest::prop_assert_eq!(Some(p), parsed(doc.as_bytes()), "{}", doc);
    }
    Ok(())
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
    fn counts_read_as_serde_reads_optional_u64s() {
        let doc = br#"{"a":18446744073709551615,"b":null,"d":{"x":0,"y":7,"z":"s"},"e":[1]}"#;
        let at = members(doc, [&b"a"[..], b"b", b"c", b"d", b"e"]).unwrap();
        assert_eq!(count(doc, at[0].clone()), Some(Some(u64::MAX)));
        assert_eq!(count(doc, at[1].clone()), Some(None));
        assert_eq!(count(doc, at[2].clone()), Some(None));
        assert_eq!(
            counts(doc, at[3].clone(), [&b"y"[..], b"x", b"w"]),
            Some([Some(7), Some(0), None])
        );
        assert_eq!(counts(doc, at[1].clone(), [&b"y"[..]]), Some([None]));
        // Left to serde: a string count, no object, an overflow, a sign,
        // a fraction, a leading zero.
        assert_eq!(counts(doc, at[3].clone(), [&b"z"[..]]), None);
        assert_eq!(counts(doc, at[4].clone(), [&b"y"[..]]), None);
        for v in ["18446744073709551616", "-1", "1.0", "1e2", "07"] {
            let d = format!("{{\"n\":{v}}}");
            // (A leading zero is no JSON: the skim refuses the object.)
            let read = members(d.as_bytes(), [&b"n"[..]])
                .and_then(|at| count(d.as_bytes(), at[0].clone()));
            assert_eq!(read, None, "{v}");
        }
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
        // The last document is kept whole. The next frame differs in its
        // content's text alone: answered from the last one's spans, moved.
        let last = frame(4, "m");
        assert_eq!(memo.last, last.as_bytes());
        let next = frame(12345, "m");
        let shared = words::common_prefix(&memo.last, next.as_bytes());
        let quick = memo.scalars_changed(next.as_bytes(), shared);
        assert!(quick.is_some());
        assert_eq!(quick, members(next.as_bytes(), [b"model", b"usage"]));
        assert_eq!(memo.last, next.as_bytes());
        // The same document again: its answer, no skim.
        let again = memo.scalars_changed(next.as_bytes(), next.len());
        assert_eq!(again, quick);
        assert_eq!(memo.last, next.as_bytes());
        // New text with a quote, a backslash or a control character, a
        // change that is not inside one string, a key changed: skimmed.
        for other in [
            next.replace("t12345", r#"t1\"2"#),
            next.replace("t12345", r"t1\n"),
            next.replace("t12345", "t1\n"),
            next.replace(r#""usage":null"#, r#""usage":{}"#),
            next.replace(r#""model":"m""#, r#""model":7"#),
            next.replace("usage", "usagi"),
        ] {
            members_resumed(next.as_bytes(), [b"model", b"usage"], &mut memo);
            let shared = words::common_prefix(&memo.last, other.as_bytes());
            assert_eq!(
                memo.scalars_changed(other.as_bytes(), shared),
                None,
                "{other}"
            );
            assert_eq!(
                members_resumed(other.as_bytes(), [b"model", b"usage"], &mut memo),
                members(other.as_bytes(), [b"model", b"usage"]),
                "{other}"
            );
        }
        let last = next;
        let at = last.find(r#""choices""#).unwrap();
        members_resumed(last.as_bytes(), [b"model", b"usage"], &mut memo);
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
                // Pretty-printed: runs of whitespace (of every kind, and
                // long runs of spaces) around each member and value.
                prop::collection::vec((inner.clone(), "( {1,19}|[ \t\r\n]{0,3})"), 0..4).prop_map(
                    |v| format!(
                        "[{}]",
                        v.iter()
                            .map(|(v, ws)| format!("{ws}{v}{ws}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                ),
                prop::collection::vec(
                    (
                        prop_oneof![Just("\"model\"".to_string()), "\"[a-z]{1,3}\""],
                        inner.clone(),
                        "\n {0,17}",
                    ),
                    0..4
                )
                .prop_map(|m| format!(
                    "{{{}\n}}",
                    m.iter()
                        .map(|(k, v, ws)| format!("{ws}{k}: {v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                )),
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

        /// A stream's frames, differing in the text of a string or two (some
        /// text with quotes, escapes or control characters, which break
        /// the frame or make it not plain) and in other members: each
        /// answered as a whole skim does.
        #[test]
        fn frames_differing_in_a_string_agree_with_whole(
            frames in prop::collection::vec(
                (
                    prop_oneof![
                        3 => "[a-z\u{e9} ]{0,6}",
                        1 => "([a-z \"\\\\]|\\\\n|\u{e9}|\t){0,6}",
                    ],
                    prop_oneof![8 => Just("c1".to_string()), 1 => "([a-z \"\\\\]|\\\\n|\u{e9}){0,3}"],
                    prop_oneof![8 => Just("\"m\""), 1 => Just("\"mm\""), 1 => Just("7")],
                    prop_oneof![8 => Just("null"), 1 => Just("\"stop\""), 1 => Just("\"\"")],
                    prop_oneof![8 => Just("null"), 1 => Just("{\"a\":1}")],
                    prop_oneof![4 => "[a-zA-Z0-9]{0,8}", 1 => "([a-z\"]|\\\\n){0,3}"],
                ),
                1..10,
            ),
        ) {
            let mut memo = Resume::default();
            for (k, (content, id, model, finish, usage, pad)) in frames.into_iter().enumerate() {
                // A counter that grows (and once in a while is not a plain one).
                let seq = match k % 7 {
                    5 => "-1".to_string(),
                    6 => format!("0{k}"),
                    _ => (k * 37).to_string(),
                };
                let doc = format!(
                    r#"{{"id":"{id}","seq":{seq},"model":{model},"choices":[{{"delta":{{"content":"{content}"}},"finish_reason":{finish}}}],"usage":{usage},"pad":"{pad}"}}"#
                );
                let wanted = [&b"model"[..], b"usage", b"choices"];
                let whole = members(doc.as_bytes(), wanted);
                let resumed = members_resumed(doc.as_bytes(), wanted, &mut memo);
                prop_assert_eq!(&resumed, &whole, "{}", doc);
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
