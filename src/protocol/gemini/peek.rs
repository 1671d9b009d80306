//! Gemini (generateContent): what the gateway reads from bodies without decoding them.
//! `request` fills [`Inspected`] (parameters by catalog name and the client's
//! own field path, caps, stream flags); `response` reads the model span, usage
//! and terminal markers of a response body or stream frame for passthrough.

use crate::error::GatewayError;
use crate::protocol::common::peek::{
    bad, contains, is_true, more_than_one, number, parse_request, positive_int, present, span_of,
    AffinitySource, Inspected, Peeked, Raw, Usage,
};
use crate::protocol::common::skim;
use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiConfigPeek<'a> {
    #[serde(borrow)]
    temperature: Raw<'a>,
    #[serde(borrow)]
    top_p: Raw<'a>,
    #[serde(borrow)]
    top_k: Raw<'a>,
    #[serde(borrow)]
    max_output_tokens: Raw<'a>,
    #[serde(borrow)]
    stop_sequences: Raw<'a>,
    #[serde(borrow)]
    response_mime_type: Raw<'a>,
    #[serde(borrow)]
    response_schema: Raw<'a>,
    #[serde(borrow)]
    response_json_schema: Raw<'a>,
    #[serde(borrow)]
    thinking_config: Raw<'a>,
    #[serde(borrow)]
    seed: Raw<'a>,
    #[serde(borrow)]
    frequency_penalty: Raw<'a>,
    #[serde(borrow)]
    presence_penalty: Raw<'a>,
    #[serde(borrow)]
    response_logprobs: Raw<'a>,
    #[serde(borrow)]
    logprobs: Raw<'a>,
    #[serde(borrow)]
    candidate_count: Raw<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestPeek<'a> {
    #[serde(borrow)]
    contents: Raw<'a>,
    /// `systemInstruction`, or its snake-case spelling (both accepted).
    #[serde(borrow)]
    system_instruction: Raw<'a>,
    #[serde(borrow, rename = "system_instruction")]
    system_instruction_snake: Raw<'a>,
    #[serde(borrow)]
    generation_config: Option<GeminiConfigPeek<'a>>,
    #[serde(borrow)]
    tools: Raw<'a>,
    #[serde(borrow)]
    tool_config: Raw<'a>,
    #[serde(borrow)]
    cached_content: Raw<'a>,
}

/// Scans a request body (`path_stream`: the stream flag Gemini takes from its path).
pub fn request(body: &[u8], path_stream: bool) -> Result<Inspected, GatewayError> {
    let mut out = Inspected::default();
    let p: RequestPeek<'_> = parse_request(body)?;
    if !present(p.contents) {
        return Err(bad("contents", "contents is required"));
    }
    out.stream = path_stream;
    out.uses(out.stream, "stream", "stream");
    out.uses(present(p.tools), "tools", "tools");
    out.uses(present(p.tool_config), "tool_choice", "toolConfig");
    out.uses(present(p.cached_content), "cache_control", "cachedContent");
    let system = p.system_instruction.or(p.system_instruction_snake);
    out.affinity = AffinitySource::new(body, None, system, p.contents);
    if let Some(g) = p.generation_config {
        out.temperature = number(g.temperature, "generationConfig.temperature")?;
        out.max_tokens = positive_int(g.max_output_tokens, "generationConfig.maxOutputTokens")?;
        if let Some(n) = out.max_tokens {
            out.caps.push(("generationConfig.maxOutputTokens", n));
        }
        out.uses(
            out.temperature.is_some(),
            "temperature",
            "generationConfig.temperature",
        );
        out.uses(present(g.top_p), "top_p", "generationConfig.topP");
        out.uses(present(g.top_k), "top_k", "generationConfig.topK");
        out.uses(
            out.max_tokens.is_some(),
            "max_tokens",
            "generationConfig.maxOutputTokens",
        );
        out.uses(
            present(g.stop_sequences),
            "stop",
            "generationConfig.stopSequences",
        );
        out.uses(
            g.response_mime_type
                .is_some_and(|r| r.get() == "\"application/json\""),
            "response_format",
            "generationConfig.responseMimeType",
        );
        out.uses(
            present(g.response_schema),
            "response_format",
            "generationConfig.responseSchema",
        );
        out.uses(
            present(g.response_json_schema),
            "response_format",
            "generationConfig.responseJsonSchema",
        );
        out.uses(
            present(g.thinking_config),
            "reasoning",
            "generationConfig.thinkingConfig",
        );
        out.uses(present(g.seed), "seed", "generationConfig.seed");
        out.uses(
            present(g.frequency_penalty),
            "frequency_penalty",
            "generationConfig.frequencyPenalty",
        );
        out.uses(
            present(g.presence_penalty),
            "presence_penalty",
            "generationConfig.presencePenalty",
        );
        out.uses(
            is_true(g.response_logprobs),
            "logprobs",
            "generationConfig.responseLogprobs",
        );
        out.uses(present(g.logprobs), "logprobs", "generationConfig.logprobs");
        out.uses(
            more_than_one(g.candidate_count),
            "n",
            "generationConfig.candidateCount",
        );
    }
    Ok(out)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GeminiUsage {
    prompt_token_count: Option<u64>,
    candidates_token_count: Option<u64>,
    thoughts_token_count: Option<u64>,
    cached_content_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiCandidatePeek<'a> {
    finish_reason: Option<&'a str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponsePeek<'a> {
    #[serde(borrow)]
    model_version: Option<&'a RawValue>,
    usage_metadata: Option<GeminiUsage>,
    /// Read as candidates ([`terminal`]) only when it names a finish reason.
    #[serde(borrow)]
    candidates: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// Reads the model span, usage and end-of-stream markers of a response body or stream frame.
/// A frame without an error is read by a skim of its members
/// ([`skim::members`]); the others, and whatever the skim does not vouch
/// for, are parsed, with the same answers (docs/performance.md "Peeking at
/// stream frames").
pub fn response(doc: &[u8]) -> Option<Peeked> {
    skimmed(doc).or_else(|| parsed(doc))
}

thread_local! {
    /// The last frame this thread skimmed: the next chunk of the same
    /// stream is skimmed from where the two differ (`skim::Resume`); other
    /// streams' frames in between only make the next skim a whole one.
    static SKIMMED: std::cell::RefCell<skim::Resume<4>> = std::cell::RefCell::default();
}

/// A candidate's finish reason, found by its key: in JSON a quote, a name,
/// a quote and a colon, unescaped, are a key (inside a string the quotes
/// are escaped).
static FINISH_REASON: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"finishReason\":"));

/// [`response`] of a document without an error, from its members' spans:
/// the usage object alone goes to serde, and the candidates only when
/// they name a finish reason (a stream's last chunk); None for any other
/// document (or one the skim does not vouch for).
fn skimmed(doc: &[u8]) -> Option<Peeked> {
    let wanted = [
        &b"modelVersion"[..],
        b"usageMetadata",
        b"candidates",
        b"error",
    ];
    let [model, usage, candidates, error] =
        SKIMMED.with(|memo| skim::members_kept(memo, doc, wanted))?;
    let value = |r| skim::non_null(doc, r).map(|(_, r)| r);
    if value(error).is_some() {
        return None;
    }
    Some(Peeked {
        span: value(model),
        // serde reads a member's value alone as it reads it in place.
        usage: match usage {
            Some(u) => {
                let u = &doc[u];
                skim::counts(u, Some(0..u.len()), USAGE_COUNTS)
                    .map(counted)
                    .or_else(|| serde_json::from_slice(u).ok().map(usage_of))?
            }
            None => Usage::default(),
        },
        terminal: terminal(candidates.map(|c| &doc[c]))?,
        ..Peeked::default()
    })
}

/// [`response`] by serde.
fn parsed(doc: &[u8]) -> Option<Peeked> {
    let p: ResponsePeek<'_> = serde_json::from_slice(doc).ok()?;
    Some(Peeked {
        span: p.model_version.and_then(|m| span_of(m.get(), doc)),
        usage: usage_of(p.usage_metadata),
        terminal: terminal(p.candidates.map(|c| c.get().as_bytes()))?,
        error: p.error.is_some(),
        ..Peeked::default()
    })
}

/// Whether any candidate has a finish reason: the candidates are read
/// (None when serde refuses them) only when their text names one.
fn terminal(candidates: Option<&[u8]>) -> Option<bool> {
    match candidates {
        Some(c) if FINISH_REASON.find(c).is_some() => {
            let c: Option<Vec<GeminiCandidatePeek<'_>>> = serde_json::from_slice(c).ok()?;
            Some(c.is_some_and(|c| c.iter().any(|c| c.finish_reason.is_some())))
        }
        _ => Some(false),
    }
}

/// The gateway's usage from a Gemini `usageMetadata` object.
fn usage_of(u: Option<GeminiUsage>) -> Usage {
    let Some(u) = u else {
        return Usage::default();
    };
    counted([
        u.prompt_token_count,
        u.candidates_token_count,
        u.thoughts_token_count,
        u.cached_content_token_count,
    ])
}

/// The members of a `usageMetadata` object the gateway reads, in
/// [`counted`]'s order (a skim's, `skim::counts`).
const USAGE_COUNTS: [&[u8]; 4] = [
    b"promptTokenCount",
    b"candidatesTokenCount",
    b"thoughtsTokenCount",
    b"cachedContentTokenCount",
];

/// The gateway's usage from the counts of a `usageMetadata` object
/// ([`USAGE_COUNTS`]).
fn counted([input, candidates, thoughts, cached]: [Option<u64>; 4]) -> Usage {
    Usage {
        input,
        output: match (candidates, thoughts) {
            (None, None) => None,
            (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
        },
        cached,
        cache_write: None,
        cache_write_1h: None,
        reasoning: thoughts,
    }
}

/// Whether the first bytes of a generateContent stream carry the answer's
/// first token: Gemini sends no preamble, so any chunk does.
pub fn stream_started(bytes: &[u8]) -> bool {
    contains(bytes, b"{")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Chunks as upstreams send them, and broken ones: members in any
    /// order, present or not, null or not, some of them twice, cut short.
    fn frame() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            prop_oneof![
                Just(r#""modelVersion":"gemini-2.5-flash""#),
                Just(r#""modelVersion":null"#),
                Just(r#""modelVersion":7"#),
                Just(r#""model\u0056ersion":"m""#),
            ]
            .prop_map(str::to_string),
            prop_oneof![
                Just(r#""usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2}"#),
                Just(r#""usageMetadata":{"thoughtsTokenCount":4,"cachedContentTokenCount":1}"#),
                Just(r#""usageMetadata":{"promptTokenCount":"9"}"#),
                Just(r#""usageMetadata":null"#),
                Just(r#""usageMetadata":[]"#),
                Just(r#""usageMetadata":[9,2]"#),
                Just(r#""usageMetadata":{"promptTokenCount":18446744073709551615,"candidatesTokenCount":0}"#),
                Just(r#""usageMetadata":{"candidatesTokenCount":18446744073709551615,"thoughtsTokenCount":1}"#),
                Just(r#""usageMetadata":{"promptTokenCount":18446744073709551616}"#),
                Just(r#""usageMetadata":{"promptTokenCount":1,"promptTokenCount":2}"#),
                Just(r#""usageMetadata":{"candidatesTokenCount":-1}"#),
                Just(r#""usageMetadata":{"candidatesTokenCount":2.0}"#),
                Just(r#""usageMetadata":{"candidatesTokenCount":01}"#),
                Just(r#""usageMetadata":{"thoughtsTokenCount":null,"totalTokenCount":"x","promptTokensDetails":[{"modality":"TEXT","tokenCount":9}]}"#),
                Just(r#""usageMetadata":{"prompt\u0054okenCount":9}"#),
            ]
            .prop_map(str::to_string),
            prop_oneof![
                Just(r#""candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"index":0}]"#),
                Just(r#""candidates":[{"content":{"parts":[{"text":"say \"finishReason\":\"x\""}]}}]"#),
                Just(r#""candidates":[{"finishReason":"STOP","index":0}]"#),
                Just(r#""candidates":[{"finishReason":null}]"#),
                Just(r#""candidates":[{"finishReason":"ST\u004fP"}]"#),
                Just(r#""candidates":[{"finishReason":""},1]"#),
                Just(r#""candidates":[{"content":{"parts":[{"functionCall":{"args":{"finishReason":"x"}}}]}}]"#),
                Just(r#""candidates":[]"#),
                Just(r#""candidates":null"#),
                Just(r#""candidates":[1]"#),
            ]
            .prop_map(str::to_string),
            prop_oneof![
                Just(r#""error":{"code":429,"message":"m"}"#),
                Just(r#""error":null"#),
                Just(r#""responseId":"r1""#),
            ]
            .prop_map(str::to_string),
        ];
        skim::objects(member)
    }

    proptest! {
        /// The skim answers as serde does, or leaves the frame to it.
        #[test]
        fn skimmed_frames_read_as_parsed_ones(doc in frame()) {
            skim::agrees(skimmed, parsed, &doc)?;
        }
    }

    #[test]
    fn a_usual_chunk_is_skimmed_and_its_last_one_ends_the_answer() {
        let chunk = br#"{"candidates": [{"content": {"parts": [{"text": "hi"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 12,"candidatesTokenCount": 3,"thoughtsTokenCount": 2},"modelVersion": "gemini-2.5-flash","responseId": "r1"}"#;
        let p = skimmed(chunk).expect("skimmed");
        assert_eq!(&chunk[p.span.clone().unwrap()], br#""gemini-2.5-flash""#);
        assert_eq!(p.usage.input, Some(12));
        assert_eq!(p.usage.output, Some(5));
        assert_eq!(p.usage.reasoning, Some(2));
        assert!(!p.terminal && !p.error);
        let last = br#"{"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP"}],"modelVersion":"g"}"#;
        assert!(skimmed(last).is_some_and(|p| p.terminal));
        // A finish reason's words inside a text are no key.
        let quoted =
            br#"{"candidates":[{"content":{"parts":[{"text":"\"finishReason\":\"STOP\""}]}}]}"#;
        assert!(skimmed(quoted).is_some_and(|p| !p.terminal));
        // An error is parsed.
        let error = br#"{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED"}}"#;
        assert!(skimmed(error).is_none());
        assert!(response(error).is_some_and(|p| p.error));
    }
}
