//! Responses: what the gateway reads from bodies without decoding
//! them. `request` fills [`Inspected`] and refuses what needs state the
//! gateway does not keep (`conversation`, `background`, `prompt`;
//! `previous_response_id` is served from stored responses, whose expansion
//! runs before this peek, in `proxy::stored`);
//! `response` reads the model span, usage, sequence number and terminal
//! events of a response object or stream event (the model and usage of a
//! stream event sit in its nested `response`).

use crate::error::GatewayError;
use crate::protocol::common::peek::{
    bad, contains, model_of, parse_request, positive_int, present, span_of, AffinitySource,
    Inspected, Peeked, Raw, Usage,
};
use crate::protocol::common::repeat::Repeat;
use crate::protocol::common::skim;
use crate::protocol::responses::envelope;
use crate::util::jsonedit;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::ops::Range;

#[derive(Deserialize)]
struct RequestPeek<'a> {
    #[serde(borrow)]
    model: Raw<'a>,
    #[serde(borrow)]
    input: Raw<'a>,
    #[serde(borrow)]
    instructions: Raw<'a>,
    stream: Option<bool>,
    #[serde(borrow)]
    temperature: Raw<'a>,
    #[serde(borrow)]
    top_p: Raw<'a>,
    #[serde(borrow)]
    max_output_tokens: Raw<'a>,
    #[serde(borrow)]
    tools: Raw<'a>,
    #[serde(borrow)]
    tool_choice: Raw<'a>,
    #[serde(borrow)]
    text: Option<TextPeek<'a>>,
    #[serde(borrow)]
    reasoning: Raw<'a>,
    #[serde(borrow)]
    metadata: Raw<'a>,
    #[serde(borrow)]
    user: Raw<'a>,
    #[serde(borrow)]
    safety_identifier: Raw<'a>,
    #[serde(borrow)]
    service_tier: Raw<'a>,
    #[serde(borrow)]
    parallel_tool_calls: Raw<'a>,
    #[serde(borrow)]
    prompt_cache_key: Raw<'a>,
    #[serde(borrow)]
    prompt_cache_retention: Raw<'a>,
    #[serde(borrow)]
    top_logprobs: Raw<'a>,
    #[serde(borrow)]
    conversation: Raw<'a>,
    #[serde(borrow)]
    background: Raw<'a>,
    #[serde(borrow)]
    prompt: Raw<'a>,
}

#[derive(Deserialize)]
struct TextPeek<'a> {
    #[serde(borrow)]
    format: Option<FormatPeek<'a>>,
}

#[derive(Deserialize)]
struct FormatPeek<'a> {
    #[serde(rename = "type")]
    kind: Option<&'a str>,
}

/// Scans a request body.
pub fn request(body: &[u8], _path_stream: bool) -> Result<Inspected, GatewayError> {
    let mut out = Inspected::default();
    let p: RequestPeek<'_> = parse_request(body)?;
    model_of(p.model, body, &mut out)?;
    if out.model.is_none() {
        return Err(bad("model", "model is required"));
    }
    if !present(p.input) {
        return Err(bad("input", "input is required"));
    }
    if present(p.conversation) {
        return Err(bad(
            "conversation",
            "conversation needs stored conversations, which this gateway does not keep: send the whole conversation in input instead",
        ));
    }
    if p.background.is_some_and(|r| r.get() == "true") {
        return Err(bad(
            "background",
            "background responses need stored responses, which this gateway does not keep yet",
        ));
    }
    if present(p.prompt) {
        return Err(bad(
            "prompt",
            "prompt templates are stored by OpenAI and cannot be served by this gateway: send instructions and input instead",
        ));
    }
    out.stream = p.stream.unwrap_or(false);
    out.temperature = crate::protocol::common::peek::number(p.temperature, "temperature")?;
    out.max_tokens = positive_int(p.max_output_tokens, "max_output_tokens")?;
    if let Some(n) = out.max_tokens {
        out.caps.push(("max_output_tokens", n));
    }
    out.uses(out.temperature.is_some(), "temperature", "temperature");
    out.uses(present(p.top_p), "top_p", "top_p");
    out.uses(out.max_tokens.is_some(), "max_tokens", "max_output_tokens");
    out.uses(out.stream, "stream", "stream");
    out.uses(present(p.tools), "tools", "tools");
    out.uses(present(p.tool_choice), "tool_choice", "tool_choice");
    let json_format = p
        .text
        .as_ref()
        .and_then(|t| t.format.as_ref())
        .and_then(|f| f.kind)
        .is_some_and(|k| k != "text");
    out.uses(json_format, "response_format", "text.format");
    out.uses(present(p.reasoning), "reasoning", "reasoning");
    out.uses(present(p.metadata), "metadata", "metadata");
    out.uses(present(p.user), "metadata", "user");
    out.uses(
        present(p.safety_identifier),
        "metadata",
        "safety_identifier",
    );
    out.uses(present(p.service_tier), "service_tier", "service_tier");
    out.uses(
        present(p.parallel_tool_calls),
        "parallel_tool_calls",
        "parallel_tool_calls",
    );
    out.uses(
        present(p.prompt_cache_key),
        "cache_control",
        "prompt_cache_key",
    );
    out.uses(
        present(p.prompt_cache_retention),
        "cache_control",
        "prompt_cache_retention",
    );
    out.uses(present(p.top_logprobs), "logprobs", "top_logprobs");
    out.affinity = AffinitySource::new(body, p.prompt_cache_key, p.instructions, p.input);
    Ok(out)
}

#[derive(Deserialize, Default)]
struct UsagePeek {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

impl UsagePeek {
    fn into_usage(self) -> Usage {
        let details = self.input_tokens_details.unwrap_or_default();
        Usage {
            input: self.input_tokens,
            output: self.output_tokens,
            cached: details.cached_tokens,
            cache_write: details.cache_write_tokens,
            cache_write_1h: None,
            reasoning: self.output_tokens_details.and_then(|d| d.reasoning_tokens),
        }
    }
}

/// [`UsagePeek::into_usage`] of a usage object by a skim of its members,
/// None where the skim does not vouch for it (serde then reads it).
fn usage_skimmed(u: &[u8]) -> Option<Usage> {
    let wanted = [
        &b"input_tokens"[..],
        b"output_tokens",
        b"input_tokens_details",
        b"output_tokens_details",
    ];
    let [input, output, input_details, output_details] = skim::members(u, wanted)?;
    let [cached, cache_write] = skim::counts(
        u,
        input_details,
        [&b"cached_tokens"[..], b"cache_write_tokens"],
    )?;
    let [reasoning] = skim::counts(u, output_details, [&b"reasoning_tokens"[..]])?;
    Some(Usage {
        input: skim::count(u, input)?,
        output: skim::count(u, output)?,
        cached,
        cache_write,
        cache_write_1h: None,
        reasoning,
    })
}

#[derive(Deserialize, Default)]
struct InputDetails {
    cached_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ObjectPeek<'a> {
    id: Option<&'a str>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    usage: Option<UsagePeek>,
}

#[derive(Deserialize)]
struct ResponsePeek<'a> {
    #[serde(rename = "type")]
    kind: Option<&'a str>,
    sequence_number: Option<u64>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    usage: Option<UsagePeek>,
    /// A stream event's response object (read as an [`ObjectPeek`]).
    #[serde(borrow)]
    response: Option<&'a RawValue>,
}

/// Reads the model span, usage, sequence number and end-of-stream markers of
/// a response object or stream event. An event without a `response` object
/// or usage (the deltas, most of a stream) is read by a skim of its members
/// ([`skim::members`]); the others, and whatever the skim does not vouch
/// for, are parsed, with the same answers (docs/performance.md "Peeking at
/// stream frames").
pub fn response(doc: &[u8]) -> Option<Peeked> {
    // What [`envelope_members`] answers is about this document or none.
    MEMBERS_FOUND.with(|m| {
        if let Ok(mut m) = m.try_borrow_mut() {
            *m = None;
        }
    });
    repeated(doc)
        .or_else(|| skimmed(doc))
        .or_else(|| parsed(doc))
}

/// [`response`] by serde.
fn parsed(doc: &[u8]) -> Option<Peeked> {
    let mut out = Peeked::default();
    let p: ResponsePeek<'_> = serde_json::from_slice(doc).ok()?;
    out.response = p.response.and_then(|r| span_of(r.get(), doc));
    if let Some(at) = &out.response {
        if let Some(found) = jsonedit::member_spans(&doc[at.clone()], envelope::MEMBERS) {
            let moved = found.map(|r| r.map(|r| r.start + at.start..r.end + at.start));
            found_members(doc, moved);
        }
    }
    let object = match p.response {
        Some(r) => Some(serde_json::from_str::<ObjectPeek<'_>>(r.get()).ok()?),
        None => None,
    };
    let (model, usage) = match object {
        Some(r) => {
            // Only the stream's first event carries a new id; read it there.
            if p.kind == Some("response.created") {
                out.response_id = r.id.map(str::to_string);
            }
            (r.model, r.usage)
        }
        None => (p.model, p.usage),
    };
    out.span = model.and_then(|m| span_of(m.get(), doc));
    out.usage = usage.map(UsagePeek::into_usage).unwrap_or_default();
    out.sequence = p.sequence_number;
    out.terminal = matches!(
        p.kind,
        Some("response.completed" | "response.incomplete" | "response.failed")
    );
    out.error = p.kind == Some("error");
    Some(out)
}

thread_local! {
    /// Where the members an envelope sets (`envelope::MEMBERS`) are in the
    /// response object of the document the last [`response`] call on this
    /// thread read (that document's address and length, and the spans), if
    /// it had one and they were found: [`envelope_members`] hands them to
    /// the stream relay, which sets the envelope there without walking the
    /// object again. Kept aside rather than in [`Peeked`]: every frame's
    /// answer is moved a few times, and 96 more bytes in it cost an OpenAI
    /// stream 110 instructions a frame. Every `response` call clears it.
    static MEMBERS_FOUND: std::cell::RefCell<Option<(usize, usize, envelope::MemberSpans)>> =
        const { std::cell::RefCell::new(None) };
}

/// Keeps where `doc`'s response object has the envelope's members.
fn found_members(doc: &[u8], spans: envelope::MemberSpans) {
    MEMBERS_FOUND.with(|m| {
        if let Ok(mut m) = m.try_borrow_mut() {
            *m = Some((doc.as_ptr() as usize, doc.len(), spans));
        }
    });
}

/// Where the members an envelope sets (`envelope::MEMBERS`, in that order;
/// None for one absent) are in `doc`, a stream event the last [`response`]
/// call on this thread was given and found a response object in; None when
/// that call was about another document or did not find them (the envelope
/// then walks the object: `Envelope::apply_event`).
pub fn envelope_members(doc: &[u8]) -> Option<envelope::MemberSpans> {
    MEMBERS_FOUND.with(|m| {
        let mut m = m.try_borrow_mut().ok()?;
        match m.take() {
            Some((at, len, spans)) if at == doc.as_ptr() as usize && len == doc.len() => {
                Some(spans)
            }
            _ => None,
        }
    })
}

thread_local! {
    /// The last event this thread skimmed: the next one of the same stream
    /// (most often the next in the same read: a delta that differs in its
    /// text and its sequence number) is answered from it (`skim::Resume`).
    /// Events of other streams in between only make the next skim a whole
    /// one; the answer never depends on it.
    static SKIMMED: std::cell::RefCell<skim::Resume<5>> = std::cell::RefCell::default();
}

thread_local! {
    /// The last event this thread skimmed whose answer was its sequence
    /// number alone (a delta): the next one that repeats it but in its
    /// counter, its text and its padding ([`CHANGING`]) has that answer
    /// with its own counter, read without a skim (`common::repeat`). As
    /// for [`SKIMMED`], other streams' events in between only make the next
    /// one a skim.
    static REPEATED: std::cell::RefCell<Repeat> = std::cell::RefCell::default();
}

/// The top-level members of a delta event that change from one event to
/// the next; the peek reads the first.
const CHANGING: [&[u8]; 3] = [b"sequence_number", b"delta", b"obfuscation"];

/// [`response`] of a document that repeats the last one kept in
/// [`REPEATED`] but in the values of [`CHANGING`]: its sequence number
/// alone (its type, and the members the peek reads, are that one's, whose
/// answer had nothing else). None for any other.
pub fn repeated(doc: &[u8]) -> Option<Peeked> {
    let [sequence, _, _] = REPEATED.with(|r| r.try_borrow_mut().ok()?.values(doc))?;
    let sequence = match sequence {
        Some(r) => Some(counter(&doc[r])?),
        None => None,
    };
    Some(Peeked {
        sequence,
        ..Peeked::default()
    })
}

/// A `sequence_number` of digits as serde reads it: None past u64.
fn counter(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return std::str::from_utf8(digits).ok()?.parse().ok();
    }
    digits.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// [`response`] of a document whose `usage` is absent or null, from its
/// members' spans (and, for a `response` object, that object's `id`,
/// `model` and `usage`, its usage read by serde); None for any other, and
/// for one serde would refuse that the skim lets through: a `type` or a
/// response's `id` that is no plain string (serde borrows them, so an
/// escape fails), a `sequence_number` that is no u64, a `response` that is
/// no object.
fn skimmed(doc: &[u8]) -> Option<Peeked> {
    let wanted = [
        &b"type"[..],
        b"sequence_number",
        b"model",
        b"usage",
        b"response",
    ];
    // The response object is skimmed below, on its own (its id, model
    // and usage): the event's skim only steps over it.
    let [kind, sequence, model, usage, response] =
        SKIMMED.with(|memo| skim::members_kept_leaving(memo, doc, (wanted, Some(4))))?;
    let value = |r| skim::non_null(doc, r);
    if value(usage).is_some() {
        return None;
    }
    let kind = skim::lent(value(kind).map(|(k, _)| k))?;
    let sequence = match value(sequence) {
        None => None,
        Some((n, _)) if n.iter().all(u8::is_ascii_digit) => Some(counter(n)?),
        Some(_) => return None,
    };
    // A response object's own members stand for the event's (as `parsed`).
    let response_at = value(response.clone()).map(|(_, r)| r);
    let (model, usage, id) = match value(response) {
        None => (value(model).map(|(_, r)| r), Usage::default(), None),
        Some((obj, at)) => {
            if obj.first() != Some(&b'{') {
                return None;
            }
            let wanted = [
                &b"id"[..],
                b"model",
                b"usage",
                b"previous_response_id",
                b"store",
                b"instructions",
            ];
            let [id, model, usage, previous, store, instructions] = skim::members(obj, wanted)?;
            let moved = |r: Option<Range<usize>>| r.map(|r| r.start + at.start..r.end + at.start);
            // The envelope's members (envelope::MEMBERS), null ones included.
            found_members(
                doc,
                [
                    moved(id.clone()),
                    moved(previous),
                    moved(store),
                    moved(instructions),
                ],
            );
            let inner = |r: Option<Range<usize>>| skim::non_null(doc, moved(r));
            let id = skim::lent(inner(id).map(|(v, _)| v))?;
            let usage = match inner(usage) {
                None => Usage::default(),
                Some((v, _)) => usage_skimmed(v).or_else(|| {
                    serde_json::from_slice::<UsagePeek>(v)
                        .ok()
                        .map(UsagePeek::into_usage)
                })?,
            };
            (inner(model).map(|(_, r)| r), usage, Some(id))
        }
    };
    let found = Peeked {
        span: model,
        usage,
        response: response_at,
        // Only the stream's first event carries a new id; read it there.
        response_id: match id.flatten() {
            Some(t) if kind == Some(b"response.created") => {
                Some(std::str::from_utf8(t).ok()?.to_string())
            }
            _ => None,
        },
        sequence,
        terminal: matches!(
            kind,
            Some(b"response.completed" | b"response.incomplete" | b"response.failed")
        ),
        error: kind == Some(b"error"),
        ..Peeked::default()
    };
    // An answer of the sequence number alone is what the next event that
    // repeats this one in its changing values will have (`repeated`).
    if found
        == (Peeked {
            sequence,
            ..Peeked::default()
        })
    {
        REPEATED.with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                r.keep_members(doc, CHANGING);
            }
        });
    }
    Some(found)
}

/// Whether the first bytes of a Responses stream carry the answer's first
/// token (any `*.delta` event: text, arguments, reasoning) or its end;
/// `response.created`, `response.in_progress` and item announcements do not.
pub fn stream_started(bytes: &[u8]) -> bool {
    contains(bytes, b".delta\"")
        || contains(bytes, b"response.completed")
        || contains(bytes, b"response.incomplete")
        || contains(bytes, b"response.failed")
        || contains(bytes, b"\"type\":\"error\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A counter reads as `str::parse` reads it, digits or not.
    #[test]
    fn counters_read_as_parsed() {
        for c in [
            "0",
            "7",
            "007",
            "18446744073709551615",
            "18446744073709551616",
            "",
            "+5",
            "-1",
            "1.5",
            "9\u{e9}",
        ] {
            assert_eq!(counter(c.as_bytes()), c.parse::<u64>().ok(), "{c}");
        }
    }

    /// Events as upstreams send them, and broken ones: members in any
    /// order, present or not, null or not, some of them twice, cut short.
    fn event() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            prop_oneof![
                Just(r#""type":"response.output_text.delta""#),
                Just(r#""type":"response.completed""#),
                Just(r#""type":"response.created""#),
                Just(r#""type":"error""#),
                Just(r#""type":"resp\u006fnse.failed""#),
                Just(r#""type":5"#),
                Just(r#""type":null"#)
            ]
            .prop_map(str::to_string),
            prop_oneof![
                Just(r#""sequence_number":4"#),
                Just(r#""sequence_number":-1"#),
                Just(r#""sequence_number":4.5"#),
                Just(r#""sequence_number":99999999999999999999999"#),
                Just(r#""sequence_number":null"#)
            ]
            .prop_map(str::to_string),
            prop_oneof![Just(r#""model":"gpt""#), Just(r#""model":null"#)].prop_map(str::to_string),
            prop_oneof![
                Just(r#""usage":null"#),
                Just(r#""usage":{"input_tokens":3}"#)
            ]
            .prop_map(str::to_string),
            prop_oneof![
                Just(r#""response":null"#),
                Just(r#""response":{"id":"r","model":"m"}"#),
                Just(r#""response":{"id":"r","model":null,"usage":null,"output":[{"a":[1,2]}]}"#),
                Just(r#""response":{"model":"m","usage":{"input_tokens":3,"output_tokens":4,"input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":2}}}"#),
                Just(r#""response":{"id":null,"usage":{"input_tokens":-3}}"#),
                Just(r#""response":{"id":"r","usage":{"input_tokens":1,"input_tokens":2}}"#),
                Just(r#""response":{"id":"r","usage":{"output_tokens":18446744073709551616}}"#),
                Just(r#""response":{"id":"r","usage":{"input_tokens":07,"output_tokens":1e2}}"#),
                Just(r#""response":{"id":"r","usage":{"input_tokens_details":null,"output_tokens_details":{"reasoning_tokens":null},"total_tokens":9}}"#),
                Just(r#""response":{"id":"r","usage":{"input_tokens_details":{"cached_tokens":"1"}}}"#),
                Just(r#""response":{"id":"r","usage":{"input_tokens_details":[1,2]}}"#),
                Just(r#""response":{"id":"r","usage":[1,2]}"#),
                Just(r#""response":{"id":"r","usage":{"output_tokens_details":{"reasoning_tokens":2,"reasoning_tokens":3}}}"#),
                Just(r#""response":{"id":"r\u0031","model":"m"}"#),
                Just(r#""response":{"id":5}"#),
                Just(r#""response":{"id":"a","id":"b"}"#),
                Just(r#""response":{"\u0069d":"r"}"#),
                // Invalid inside: the event's skim steps over the object,
                // its own skim must refuse it.
                Just(r#""response":{"id":"r","output":[01]}"#),
                Just(r#""response":{"id":"r","x":"\q"}"#),
                Just(r#""response":{"id":"r","x":[}]"#),
                Just(r#""response":{"id":"r","x":{"y":1]}"#),
                Just(r#""response":{"id":"r","x":"]}"}"#),
                Just(r#""response":"r""#),
                Just(r#""response":[]"#)
            ]
            .prop_map(str::to_string),
            "[a-z \\\\\"]{0,4}".prop_map(|d| format!(r#""delta":"{d}""#)),
        ];
        skim::objects(member)
    }

    proptest! {
        /// The skim answers as serde does, or leaves the event to it.
        #[test]
        fn skimmed_events_read_as_parsed_ones(doc in event()) {
            skim::agrees(skimmed, parsed, &doc)?;
        }
    }

    proptest! {
        /// A stream of events, some repeating the last in their counter,
        /// text and padding (some of those of another kind): each is
        /// answered as serde answers it, by a repeat, a skim or a parse.
        #[test]
        fn repeated_events_read_as_parsed_ones(
            first in event(),
            next in proptest::collection::vec(
                (
                    proptest::prop_oneof![
                        Just("7".to_string()),
                        Just("12".to_string()),
                        Just("007".to_string()),
                        Just("99999999999999999999999".to_string()),
                        Just("\"8\"".to_string())
                    ],
                    "[a-z \\\\\"]{0,4}",
                    "[a-zA-Z]{0,5}",
                    proptest::bool::ANY,
                ),
                1..12,
            ),
        ) {
            let delta = |seq: &str, d: &str, pad: &str| format!(
                r#"{{"type":"response.output_text.delta","sequence_number":{seq},"item_id":"m","delta":"{d}","logprobs":[],"obfuscation":"{pad}"}}"#
            );
            let mut docs = vec![first, delta("5", "hi", "ab")];
            for (seq, d, pad, other) in next {
                docs.push(if other { docs[0].clone() } else { delta(&seq, &d, &pad) });
            }
            for doc in &docs {
                prop_assert_eq!(response(doc.as_bytes()), parsed(doc.as_bytes()), "{}", doc);
            }
        }
    }

    #[test]
    fn a_delta_that_repeats_the_last_is_answered_without_a_skim() {
        let d = |seq: u32, text: &str| {
            format!(
                r#"{{"type":"response.output_text.delta","sequence_number":{seq},"delta":"{text}","obfuscation":"x{text}"}}"#
            )
        };
        assert_eq!(
            response(d(3, "a").as_bytes()).and_then(|p| p.sequence),
            Some(3)
        );
        assert_eq!(
            repeated(d(14, "bc").as_bytes()).and_then(|p| p.sequence),
            Some(14)
        );
        // Its type is not one of the changing members.
        let done = d(15, "x").replace("delta\",", "done\",");
        assert!(repeated(done.as_bytes()).is_none());
    }

    #[test]
    fn a_delta_is_skimmed() {
        let doc = br#"{"type":"response.output_text.delta","sequence_number":5,"item_id":"m","output_index":0,"content_index":0,"delta":"hi","logprobs":[]}"#;
        let p = skimmed(doc).unwrap_or_default();
        assert_eq!(p.sequence, Some(5));
        assert_eq!(Some(p), parsed(doc));
        let created = br#"{"type":"response.created","sequence_number":0,"response":{"id":"r"}}"#;
        // A response object's members are skimmed too.
        assert!(skimmed(created)
            .is_some_and(|p| p.response.is_some() && p.response_id.as_deref() == Some("r")));
        assert_eq!(skimmed(created), parsed(created));
        assert!(response(created).is_some_and(|p| p.response_id.as_deref() == Some("r")));
    }
}
