//! What the gateway reads from bodies without decoding them: request peeks
//! ([`Inspected`], filled by each spoke's `peek::request`) and response peeks
//! ([`Peeked`], from each spoke's `peek::response`), with the helpers the
//! spokes share. Everything here borrows raw values from the body; nothing is
//! copied.

use crate::error::{ErrorKind, GatewayError};
use crate::util::hash::Hasher;
use serde_json::value::RawValue;
use std::ops::Range;

/// What the gateway needs to know about a request body before choosing an upstream.
#[derive(Debug, Default, Clone)]
pub struct Inspected {
    /// The body's `model` (OpenAI chat, Anthropic Messages and Responses).
    pub model: Option<String>,
    /// Byte range of the `model` value (the JSON string, quotes included) in the body.
    pub model_span: Option<Range<usize>>,
    /// Whether the body asks for a stream (OpenAI chat and Anthropic Messages).
    pub stream: bool,
    /// Whether an OpenAI chat stream asks for usage (`stream_options.include_usage`).
    pub include_usage: bool,
    /// Whether an OpenAI chat body has `stream_options` at all.
    pub has_stream_options: bool,
    /// Requested output tokens.
    pub max_tokens: Option<u64>,
    /// Requested temperature.
    pub temperature: Option<f64>,
    /// Catalog parameter names the request uses.
    pub params: Vec<&'static str>,
    /// Each optional field the request uses: its catalog name and the client's field path.
    pub uses: Vec<Use>,
    /// The output-cap fields present, with their values (OpenAI chat may send two).
    pub caps: Vec<(&'static str, u64)>,
    /// Anthropic Messages `thinking.budget_tokens` (which must stay below `max_tokens`).
    pub thinking_budget: Option<u64>,
    /// Where the body's session affinity is read from (docs/resilience.md
    /// "Session affinity"): the client's cache key (`prompt_cache_key`,
    /// Anthropic `metadata.user_id`) when it sent one, else the request's
    /// stable prefix ([`affinity`]). Hashed only when a pick asks for it.
    pub affinity: AffinitySource,
}

/// One field of a request, named in the catalog's vocabulary of
/// `supported_parameters` and by the client's own (dotted) path, where `*`
/// stands for every element of an array (`messages.*.content.*.cache_control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Use {
    pub param: &'static str,
    pub field: &'static str,
}

impl Use {
    /// The name reported to the client: the path, or for a field found in
    /// every element of an array (cache hints in messages) its own key.
    pub fn name(&self) -> &'static str {
        if self.field.contains('*') {
            self.field.rsplit('.').next().unwrap_or(self.field)
        } else {
            self.field
        }
    }
}

/// The raw JSON text of an optional member's value, borrowed from the
/// body: absent or `null` is `None`. serde lends it (as a `&RawValue`) or a
/// skim of the body finds it (`RawText::skimmed`), with the same text.
pub type Raw<'a> = Option<RawText<'a>>;

/// A member's raw JSON text (see [`Raw`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawText<'a>(&'a str);

impl<'a> RawText<'a> {
    /// The value's JSON text.
    pub fn get(self) -> &'a str {
        self.0
    }

    /// A skimmed member's value in `body` (already checked as UTF-8),
    /// read as serde reads an optional member: `null` or absent is `None`.
    pub fn skimmed(body: &'a str, span: Option<Range<usize>>) -> Raw<'a> {
        super::skim::non_null(body.as_bytes(), span).map(|(_, r)| RawText(&body[r]))
    }
}

/// A skimmed member that serde reads as an `Option<T>`, read alone as serde
/// reads it in place: `Some(None)` when absent or null, None (the caller
/// leaves the body to serde, which words the error) when serde refuses it.
pub fn typed<'a, T: serde::Deserialize<'a>>(raw: Raw<'a>) -> Option<Option<T>> {
    match raw {
        None => Some(None),
        Some(t) => serde_json::from_str(t.get()).ok().map(Some),
    }
}

/// What the skimming request peeks' property tests hold: a body `skimmed`
/// reads is answered (by `inspected`) as it is when serde reads it,
/// errors included.
#[cfg(test)]
pub(crate) fn skim_agrees<'a, P: serde::Deserialize<'a>>(
    doc: &'a str,
    skimmed: impl Fn(&'a [u8]) -> Option<P>,
    inspected: impl Fn(P, &[u8]) -> Result<Inspected, GatewayError>,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let body = doc.as_bytes();
    if let Some(p) = skimmed(body) {
        let parsed = serde_json::from_slice::<P>(body).map_err(|e| body_error(&e));
        proptest::prop_assert_eq!(
            format!("{:?}", inspected(p, body)),
            format!("{:?}", parsed.and_then(|p| inspected(p, body))),
            "{}",
            doc
        );
    }
    Ok(())
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawText<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'de RawValue>::deserialize(d).map(|r| RawText(r.get()))
    }
}

pub fn bad(param: &str, msg: impl Into<String>) -> GatewayError {
    GatewayError::invalid_param(param, msg)
}

/// A request body parsed by serde for a peek, its nesting checked first:
/// a document nested deeper than the parser allows gets one clear 400 in
/// every family. (A skimming peek needs no check: its skim refuses nesting
/// deeper than `skim`'s limit, and the body then comes here.)
pub fn parse_request<'a, P: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<P, GatewayError> {
    check_nesting(body)?;
    serde_json::from_slice(body).map_err(|e| body_error(&e))
}

/// Refuses a body that nests arrays and objects deeper than the parser
/// allows (`util::json_depth::MAX_DEPTH`).
pub fn check_nesting(body: &[u8]) -> Result<(), GatewayError> {
    use crate::util::json_depth;
    if json_depth::within(body, json_depth::MAX_DEPTH) {
        return Ok(());
    }
    Err(GatewayError::new(
        ErrorKind::InvalidRequest,
        format!(
            "the request body is not valid JSON for this route: it nests arrays and objects deeper than {} levels (recursion limit exceeded)",
            json_depth::MAX_DEPTH
        ),
    ))
}

pub fn body_error(e: &serde_json::Error) -> GatewayError {
    GatewayError::new(
        ErrorKind::InvalidRequest,
        format!("request body is not valid JSON for this route: {e}"),
    )
}

pub fn number(raw: Raw<'_>, param: &str) -> Result<Option<f64>, GatewayError> {
    match raw.map(RawText::get) {
        None | Some("null") => Ok(None),
        Some(t) => t
            .parse::<f64>()
            .map(Some)
            .map_err(|_| bad(param, format!("{param} must be a number"))),
    }
}

pub fn positive_int(raw: Raw<'_>, param: &str) -> Result<Option<u64>, GatewayError> {
    match raw.map(RawText::get) {
        None | Some("null") => Ok(None),
        Some(t) => match t.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(bad(
                param,
                format!("{param} must be a positive integer, got {t}"),
            )),
        },
    }
}

pub fn present(raw: Raw<'_>) -> bool {
    raw.is_some_and(|r| r.get() != "null")
}

pub fn model_of(raw: Raw<'_>, body: &[u8], out: &mut Inspected) -> Result<(), GatewayError> {
    let Some(r) = raw else { return Ok(()) };
    let s: String =
        serde_json::from_str(r.get()).map_err(|_| bad("model", "model must be a string"))?;
    let start = (r.get().as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
    if start <= body.len() && start + r.get().len() <= body.len() {
        out.model_span = Some(start..start + r.get().len());
    }
    out.model = Some(s);
    Ok(())
}

pub fn is_true(raw: Raw<'_>) -> bool {
    raw.is_some_and(|r| r.get() == "true")
}

/// A count above one (`n`, `candidateCount`); anything else is left to the upstream.
pub fn more_than_one(raw: Raw<'_>) -> bool {
    raw.and_then(|r| r.get().parse::<u64>().ok())
        .is_some_and(|n| n > 1)
}

impl Inspected {
    /// Records that the request uses `field`, called `param` in the catalog.
    pub fn uses(&mut self, cond: bool, param: &'static str, field: &'static str) {
        if cond {
            if !self.params.contains(&param) {
                self.params.push(param);
            }
            self.uses.push(Use { param, field });
        }
    }
}

/// `Spoke::peek_repeated` of a family whose peek keeps no frame: none repeats.
pub fn no_repeat(_frame: &[u8]) -> Option<Peeked> {
    None
}

/// Whether `needle` occurs in `hay`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// Whether a JSON string member `name` (given with its quotes and colon,
/// e.g. `"content":`) occurs in `hay` with a non-empty string value.
pub fn nonempty_string_member(hay: &[u8], name: &[u8]) -> bool {
    nonempty_string_after(hay, &memchr::memmem::Finder::new(name))
}

/// [`nonempty_string_member`] with a finder built once (a per-frame test
/// keeps it in a static: building one costs more than searching a frame).
pub fn nonempty_string_after(hay: &[u8], name: &memchr::memmem::Finder<'_>) -> bool {
    let len = name.needle().len();
    name.find_iter(hay).any(|at| {
        let rest = &hay[at + len..];
        let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
        rest.len() >= 2 && rest[0] == b'"' && rest[1] != b'"'
    })
}

/// At most this many leading turns make a request's stable prefix.
pub const PREFIX_TURNS: usize = 8;

/// Where in a request body its session affinity comes from: the byte
/// ranges of the client's cache key, the system prompt and the conversation
/// array, found by the peek (no copy, no hashing). A request whose session
/// is named by a header, or whose providers pick without affinity, never
/// hashes its prefix; the others call [`AffinitySource::hash`] once.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AffinitySource {
    key: Option<Range<usize>>,
    system: Option<Range<usize>>,
    turns: Option<Range<usize>>,
}

impl AffinitySource {
    /// The spans of `key`, `system` and `turns`, raw values borrowed from `body`.
    pub fn new(body: &[u8], key: Raw<'_>, system: Raw<'_>, turns: Raw<'_>) -> Self {
        let span = |r: Raw<'_>| r.and_then(|r| span_of(r.get(), body));
        AffinitySource {
            key: span(key),
            system: span(system),
            turns: span(turns),
        }
    }

    /// The session key's hash ([`affinity`]) over the same `body` the
    /// spans were taken from.
    pub fn hash(&self, body: &[u8]) -> u64 {
        let part = |r: &Option<Range<usize>>| r.clone().and_then(|r| body.get(r));
        affinity(part(&self.key), part(&self.system), part(&self.turns))
    }
}

/// A request body's session affinity (see [`Inspected::affinity`]), given
/// the raw JSON of its parts: the hash of `key`'s text when it is a
/// non-empty JSON string, else of the stable prefix: `system` (the system
/// prompt or instructions, as sent) and the leading turns of `turns` up to
/// and including the first whose `role` is `user` (at most
/// [`PREFIX_TURNS`]; a `turns` that is no array, such as a Responses `input`
/// string, whole). The bytes are hashed as they are, with `cache_control`
/// marks left out: a client moves its cache mark to the newest turn, so the
/// first user turn carries one in the first request only. Nothing is
/// copied; the turns after the prefix are not read.
pub fn affinity(key: Option<&[u8]>, system: Option<&[u8]>, turns: Option<&[u8]>) -> u64 {
    if let Some(k) = key {
        if k.len() > 2 && k[0] == b'"' {
            return crate::util::hash::key(&k[1..k.len() - 1]);
        }
    }
    let mut h = Hasher::new();
    unmarked(&mut h, system.unwrap_or_default());
    h.end_piece();
    match turns {
        Some(t) if t.first() == Some(&b'[') => {
            // The peek parsed these bytes already, so they are UTF-8: one
            // fast check lets the turns be read as text, which skips the
            // per-string validation of reading bytes.
            let Ok(t) = std::str::from_utf8(t) else {
                return h.finish();
            };
            let mut de = serde_json::Deserializer::from_str(t);
            // The visitor stops after the prefix: the deserializer then
            // finds the array unfinished and errs, which is the stop.
            let _ = serde::Deserializer::deserialize_seq(&mut de, LeadingTurns(&mut h));
        }
        Some(t) => {
            unmarked(&mut h, t);
            h.end_piece();
        }
        None => {}
    }
    h.finish()
}

/// Feeds `bytes` to `h` without the `"cache_control": {...}` members in it
/// (and the comma that joined each to its neighbour).
fn unmarked(h: &mut Hasher, bytes: &[u8]) {
    static MARK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"cache_control\""));
    let mut from = 0;
    while let Some(at) = MARK.find(&bytes[from..]).map(|i| from + i) {
        let Some(end) = memchr::memchr(b'}', &bytes[at..]).map(|i| at + i + 1) else {
            break;
        };
        let rest = bytes[end..].trim_ascii_start();
        if let Some(next) = rest.strip_prefix(b",") {
            // `"cache_control":{...},` then the next member.
            h.write(&bytes[from..at]);
            from = bytes.len() - next.trim_ascii_start().len();
        } else {
            // The last member: the comma before it goes too.
            let before = bytes[from..at].trim_ascii_end();
            h.write(before.strip_suffix(b",").unwrap_or(before));
            from = end;
        }
    }
    h.write(&bytes[from..]);
}

/// Hashes the leading turns of a conversation array (see [`affinity`]).
struct LeadingTurns<'h>(&'h mut Hasher);

/// Whether a turn's `role` is `user`, read up to the `role` member only:
/// the rest of the turn (a long prompt) is not walked again.
fn is_user_turn(turn: &str) -> bool {
    let mut user = false;
    let mut de = serde_json::Deserializer::from_str(turn);
    // Stopping at `role` leaves the object unfinished, so the deserializer
    // errs after the visitor has answered; the answer is in `user`.
    let _ = serde::Deserializer::deserialize_map(&mut de, RoleOf(&mut user));
    user
}

/// See [`is_user_turn`].
struct RoleOf<'u>(&'u mut bool);

impl<'de> serde::de::Visitor<'de> for RoleOf<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a turn")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<&'de str>()? {
            if key == "role" {
                *self.0 = map.next_value::<&'de str>()? == "user";
                return Ok(());
            }
            map.next_value::<serde::de::IgnoredAny>()?;
        }
        Ok(())
    }
}

impl<'de> serde::de::Visitor<'de> for LeadingTurns<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of turns")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for _ in 0..PREFIX_TURNS {
            let Some(turn) = seq.next_element::<&'de RawValue>()? else {
                break;
            };
            unmarked(self.0, turn.get().as_bytes());
            self.0.end_piece();
            if is_user_turn(turn.get()) {
                break;
            }
        }
        Ok(())
    }
}

/// Token usage read from a response, in the one accounting view of every
/// route (pass-through or translated, docs/pricing.md "Usage"): `input`
/// counts every prompt token; `cached` (read from a cache) and `cache_write`
/// (written to one) are disjoint parts of it, `cache_write_1h` a part of
/// `cache_write`; `output` includes `reasoning`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input: Option<u64>,
    pub output: Option<u64>,
    /// Prompt tokens read from a cache, as the upstream reported them.
    pub cached: Option<u64>,
    /// Prompt tokens written to a cache, as the upstream reported them.
    pub cache_write: Option<u64>,
    /// Of those, the ones written to the one-hour cache.
    pub cache_write_1h: Option<u64>,
    /// Output tokens spent on reasoning, as the upstream reported them.
    pub reasoning: Option<u64>,
}

impl Usage {
    /// The accounting view of a canonical (translated) usage: input includes
    /// cached prompt tokens, output includes reasoning tokens.
    pub fn from_canonical(u: &crate::ir::Usage) -> Usage {
        Usage {
            input: Some(u.input_tokens),
            output: Some(u.output_tokens),
            cached: u.cache_read_tokens,
            cache_write: u.cache_creation_tokens,
            cache_write_1h: u.cache_write_1h_tokens,
            reasoning: u.reasoning_tokens,
        }
    }

    /// Takes a later report of the same answer's usage, field by field.
    /// Counts are cumulative, so the input never shrinks: an Anthropic
    /// `message_delta` that repeats `input_tokens` without the cache counts
    /// of `message_start` does not undo them.
    pub fn merge(&mut self, other: Usage) {
        self.input = match (self.input, other.input) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => b.or(a),
        };
        self.output = other.output.or(self.output);
        self.cached = other.cached.or(self.cached);
        self.cache_write = other.cache_write.or(self.cache_write);
        self.cache_write_1h = other.cache_write_1h.or(self.cache_write_1h);
        self.reasoning = other.reasoning.or(self.reasoning);
    }

    /// What the cost formula reads (unknown counts as none); None when the
    /// input is unknown (the upstream reported no usage).
    pub fn tokens(&self) -> Option<crate::config::Tokens> {
        Some(crate::config::Tokens {
            input: self.input?,
            cache_read: self.cached.unwrap_or(0),
            cache_write: self.cache_write.unwrap_or(0),
            cache_write_1h: self.cache_write_1h.unwrap_or(0),
            output: self.output.unwrap_or(0),
        })
    }
}

/// What one JSON document says, for rewriting and accounting.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Peeked {
    /// Byte range of the model value to replace.
    pub span: Option<Range<usize>>,
    pub usage: Usage,
    /// This document ends the stream (Anthropic `message_stop`, Gemini finish reason).
    pub terminal: bool,
    /// The answer reached its finish reason here (an OpenAI chunk's
    /// `finish_reason`, an Anthropic `message_delta`'s `stop_reason`): a
    /// stream that ends after it without its terminator is complete.
    pub finished: bool,
    /// The upstream reported an error in-band.
    pub error: bool,
    /// An OpenAI usage-only chunk (`choices: []` with usage).
    pub usage_only: bool,
    /// The event's `sequence_number` (Responses).
    pub sequence: Option<u64>,
    /// The response id a stream event announces (Responses `response.id`).
    pub response_id: Option<String>,
    /// Where the document's non-null `response` member is (the Responses
    /// stream events that wrap the response object): the only events a
    /// stored or continued stream's envelope edits.
    pub response: Option<Range<usize>>,
}

/// The byte range of a borrowed raw value inside `doc`.
pub fn span_of(raw: &str, doc: &[u8]) -> Option<Range<usize>> {
    let start = (raw.as_ptr() as usize).wrapping_sub(doc.as_ptr() as usize);
    let end = start.checked_add(raw.len())?;
    (end <= doc.len()).then_some(start..end)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn of(key: Option<&str>, system: Option<&str>, turns: Option<&str>) -> u64 {
        affinity(
            key.map(str::as_bytes),
            system.map(str::as_bytes),
            turns.map(str::as_bytes),
        )
    }

    #[test]
    fn a_key_wins_and_is_hashed_as_its_text() {
        let a = of(Some(r#""sess-1""#), Some(r#""sys""#), Some("[]"));
        assert_eq!(a, crate::util::hash::key(b"sess-1"));
        assert_eq!(
            a,
            of(Some(r#""sess-1""#), None, Some(r#"[{"role":"user"}]"#))
        );
        // An empty or non-string key is no key.
        assert_eq!(
            of(Some(r#""""#), None, Some("[1]")),
            of(None, None, Some("[1]"))
        );
        assert_eq!(
            of(Some("7"), None, Some("[1]")),
            of(None, None, Some("[1]"))
        );
    }

    #[test]
    fn the_prefix_is_the_system_and_the_turns_up_to_the_first_user_turn() {
        let first = r#"[{"role":"system","content":"s"},{"role":"user","content":"hi"}"#;
        let one = format!("{first}]");
        let grown = format!(
            r#"{first},{{"role":"assistant","content":"a"}},{{"role":"user","content":"more"}}]"#
        );
        assert_eq!(of(None, None, Some(&one)), of(None, None, Some(&grown)));
        // Another first turn, another system prompt: another prefix.
        let other = r#"[{"role":"system","content":"s"},{"role":"user","content":"yo"}]"#;
        assert_ne!(of(None, None, Some(&one)), of(None, None, Some(other)));
        assert_ne!(
            of(None, Some(r#""a""#), Some("[]")),
            of(None, Some(r#""b""#), Some("[]"))
        );
        // A turns value that is no array (a Responses input string) counts whole.
        assert_ne!(
            of(None, None, Some(r#""x""#)),
            of(None, None, Some(r#""y""#))
        );
    }

    #[test]
    fn the_role_is_found_wherever_it_sits_in_a_turn() {
        assert!(is_user_turn(r#"{"role":"user","content":"hi"}"#));
        assert!(is_user_turn(
            r#"{"content":[{"role":"x"}],"n":1,"role":"user"}"#
        ));
        assert!(!is_user_turn(r#"{"role":"assistant","content":"user"}"#));
        assert!(!is_user_turn(r#"{"content":"no role"}"#));
        assert!(!is_user_turn(r#"{"role":7}"#));
        assert!(!is_user_turn("[1]"));
    }

    #[test]
    fn cache_marks_are_left_out_of_the_prefix() {
        let marked = [
            r#"[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]"#,
            r#"[{"role":"user","content":[{"cache_control":{"type":"ephemeral","ttl":"1h"}, "type":"text","text":"hi"}]}]"#,
            r#"[{"role":"user","content":[{"type":"text","text":"hi" , "cache_control" : {"type":"ephemeral"} }]}]"#,
        ];
        let plain = r#"[{"role":"user","content":[{"type":"text","text":"hi"}]}]"#;
        let spaced = r#"[{"role":"user","content":[{"type":"text","text":"hi"  }]}]"#;
        for m in marked {
            let got = of(None, None, Some(m));
            assert!(
                got == of(None, None, Some(plain)) || got == of(None, None, Some(spaced)),
                "{m}"
            );
        }
        assert_eq!(of(None, None, Some(marked[0])), of(None, None, Some(plain)));
        assert_eq!(of(None, None, Some(marked[1])), of(None, None, Some(plain)));
    }
}
