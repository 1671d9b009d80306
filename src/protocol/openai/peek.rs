//! OpenAI chat (chat completions): what the gateway reads from bodies without decoding them.
//! `request` fills [`Inspected`] (parameters by catalog name and the client's
//! own field path, caps, stream flags); `response` reads the model span, usage
//! and terminal markers of a response body or stream frame for passthrough.

use crate::error::GatewayError;
use crate::protocol::common::peek::{
    bad, contains, is_true, model_of, more_than_one, nonempty_string_after, nonempty_string_member,
    number, parse_request, positive_int, present, span_of, typed, AffinitySource, Inspected,
    Peeked, Raw, RawText, Usage,
};
use crate::protocol::common::repeat::Repeat;
use crate::protocol::common::skim;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::ops::Range;

#[derive(Deserialize)]
struct RequestPeek<'a> {
    #[serde(borrow)]
    model: Raw<'a>,
    #[serde(borrow)]
    messages: Raw<'a>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    #[serde(borrow)]
    temperature: Raw<'a>,
    #[serde(borrow)]
    top_p: Raw<'a>,
    #[serde(borrow)]
    top_k: Raw<'a>,
    #[serde(borrow)]
    max_tokens: Raw<'a>,
    #[serde(borrow)]
    max_completion_tokens: Raw<'a>,
    #[serde(borrow)]
    stop: Raw<'a>,
    #[serde(borrow)]
    tools: Raw<'a>,
    #[serde(borrow)]
    tool_choice: Raw<'a>,
    #[serde(borrow)]
    response_format: Raw<'a>,
    #[serde(borrow)]
    seed: Raw<'a>,
    #[serde(borrow)]
    reasoning_effort: Raw<'a>,
    #[serde(borrow)]
    reasoning: Raw<'a>,
    #[serde(borrow)]
    functions: Raw<'a>,
    #[serde(borrow)]
    function_call: Raw<'a>,
    #[serde(borrow)]
    frequency_penalty: Raw<'a>,
    #[serde(borrow)]
    presence_penalty: Raw<'a>,
    #[serde(borrow)]
    logit_bias: Raw<'a>,
    #[serde(borrow)]
    logprobs: Raw<'a>,
    #[serde(borrow)]
    top_logprobs: Raw<'a>,
    #[serde(borrow)]
    n: Raw<'a>,
    #[serde(borrow)]
    user: Raw<'a>,
    #[serde(borrow)]
    metadata: Raw<'a>,
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
}

#[derive(Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

/// The members [`RequestPeek`] reads, in its order.
const REQUEST_MEMBERS: [&[u8]; 31] = [
    b"model",
    b"messages",
    b"stream",
    b"stream_options",
    b"temperature",
    b"top_p",
    b"top_k",
    b"max_tokens",
    b"max_completion_tokens",
    b"stop",
    b"tools",
    b"tool_choice",
    b"response_format",
    b"seed",
    b"reasoning_effort",
    b"reasoning",
    b"functions",
    b"function_call",
    b"frequency_penalty",
    b"presence_penalty",
    b"logit_bias",
    b"logprobs",
    b"top_logprobs",
    b"n",
    b"user",
    b"metadata",
    b"safety_identifier",
    b"service_tier",
    b"parallel_tool_calls",
    b"prompt_cache_key",
    b"prompt_cache_retention",
];

impl<'a> RequestPeek<'a> {
    /// What serde reads from `body`, found by a skim of its top-level
    /// members ([`skim::members`]) instead: None where the skim cannot
    /// vouch for the body (then serde reads it, and words the error), or
    /// where serde would refuse a member it reads as a type (read alone:
    /// [`typed`]).
    fn skimmed(body: &'a [u8]) -> Option<Self> {
        // serde checks the UTF-8 of every value it lends; the skim does not.
        let text = std::str::from_utf8(body).ok()?;
        let [model, messages, stream, stream_options, temperature, top_p, top_k, max_tokens, max_completion_tokens, stop, tools, tool_choice, response_format, seed, reasoning_effort, reasoning, functions, function_call, frequency_penalty, presence_penalty, logit_bias, logprobs, top_logprobs, n, user, metadata, safety_identifier, service_tier, parallel_tool_calls, prompt_cache_key, prompt_cache_retention] =
            skim::members(body, REQUEST_MEMBERS)?;
        let raw = |span| RawText::skimmed(text, span);
        Some(RequestPeek {
            stream: typed(raw(stream))?,
            stream_options: typed(raw(stream_options))?,
            model: raw(model),
            messages: raw(messages),
            temperature: raw(temperature),
            top_p: raw(top_p),
            top_k: raw(top_k),
            max_tokens: raw(max_tokens),
            max_completion_tokens: raw(max_completion_tokens),
            stop: raw(stop),
            tools: raw(tools),
            tool_choice: raw(tool_choice),
            response_format: raw(response_format),
            seed: raw(seed),
            reasoning_effort: raw(reasoning_effort),
            reasoning: raw(reasoning),
            functions: raw(functions),
            function_call: raw(function_call),
            frequency_penalty: raw(frequency_penalty),
            presence_penalty: raw(presence_penalty),
            logit_bias: raw(logit_bias),
            logprobs: raw(logprobs),
            top_logprobs: raw(top_logprobs),
            n: raw(n),
            user: raw(user),
            metadata: raw(metadata),
            safety_identifier: raw(safety_identifier),
            service_tier: raw(service_tier),
            parallel_tool_calls: raw(parallel_tool_calls),
            prompt_cache_key: raw(prompt_cache_key),
            prompt_cache_retention: raw(prompt_cache_retention),
        })
    }
}

/// Scans a request body: by a skim of its members where it vouches for the
/// body, else by serde (docs/performance.md "Peeking at stream frames").
pub fn request(body: &[u8], _path_stream: bool) -> Result<Inspected, GatewayError> {
    let p = match RequestPeek::skimmed(body) {
        Some(p) => p,
        None => parse_request(body)?,
    };
    inspected(p, body)
}

/// What [`request`] answers for the members `p` of `body`.
fn inspected(p: RequestPeek<'_>, body: &[u8]) -> Result<Inspected, GatewayError> {
    let mut out = Inspected::default();
    model_of(p.model, body, &mut out)?;
    if out.model.is_none() {
        return Err(bad("model", "model is required"));
    }
    if !present(p.messages) {
        return Err(bad("messages", "messages is required"));
    }
    out.stream = p.stream.unwrap_or(false);
    out.has_stream_options = p.stream_options.is_some();
    out.include_usage = p
        .stream_options
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    out.temperature = number(p.temperature, "temperature")?;
    let mt = positive_int(p.max_tokens, "max_tokens")?;
    let mct = positive_int(p.max_completion_tokens, "max_completion_tokens")?;
    out.max_tokens = mct.or(mt);
    if let Some(n) = mt {
        out.caps.push(("max_tokens", n));
    }
    if let Some(n) = mct {
        out.caps.push(("max_completion_tokens", n));
    }
    out.uses(out.temperature.is_some(), "temperature", "temperature");
    out.uses(present(p.top_p), "top_p", "top_p");
    out.uses(present(p.top_k), "top_k", "top_k");
    out.uses(out.max_tokens.is_some(), "max_tokens", "max_tokens");
    out.uses(out.stream, "stream", "stream");
    out.uses(present(p.stop), "stop", "stop");
    out.uses(present(p.tools), "tools", "tools");
    out.uses(present(p.functions), "tools", "functions");
    out.uses(present(p.tool_choice), "tool_choice", "tool_choice");
    out.uses(present(p.function_call), "tool_choice", "function_call");
    out.uses(
        present(p.response_format),
        "response_format",
        "response_format",
    );
    out.uses(present(p.seed), "seed", "seed");
    out.uses(present(p.reasoning_effort), "reasoning", "reasoning_effort");
    out.uses(present(p.reasoning), "reasoning", "reasoning");
    out.uses(
        present(p.frequency_penalty),
        "frequency_penalty",
        "frequency_penalty",
    );
    out.uses(
        present(p.presence_penalty),
        "presence_penalty",
        "presence_penalty",
    );
    out.uses(present(p.logit_bias), "logit_bias", "logit_bias");
    out.uses(is_true(p.logprobs), "logprobs", "logprobs");
    out.uses(present(p.top_logprobs), "logprobs", "top_logprobs");
    out.uses(more_than_one(p.n), "n", "n");
    out.uses(present(p.user), "metadata", "user");
    out.uses(present(p.metadata), "metadata", "metadata");
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
    out.affinity = AffinitySource::new(body, p.prompt_cache_key, None, p.messages);
    Ok(out)
}

#[derive(Deserialize, Default)]
struct OpenAiUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<OpenAiPromptDetails>,
    completion_tokens_details: Option<OpenAiCompletionDetails>,
    /// DeepSeek: the prompt tokens read from its cache (`prompt_tokens` is
    /// the hits plus `prompt_cache_miss_tokens`).
    prompt_cache_hit_tokens: Option<u64>,
    /// A top-level count some compatible servers send.
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct OpenAiPromptDetails {
    cached_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct OpenAiCompletionDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ResponsePeek<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    usage: Option<OpenAiUsage>,
    #[serde(borrow)]
    choices: Option<&'a RawValue>,
    /// An in-stream error (`data: {"error":{...}}`), which ends the stream.
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

static FINISH_REASON: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"finish_reason\":"));

/// Reads the model span, usage and end-of-stream markers of a response body
/// or stream frame. A frame without usage or an error (a stream's usual
/// chunk, `"usage":null` included) is read by a skim of its members
/// ([`skim::members`]); the others, and whatever the skim does not vouch
/// for, are parsed, with the same answers (docs/performance.md "Peeking at
/// stream frames").
pub fn response(doc: &[u8]) -> Option<Peeked> {
    repeated(doc)
        .or_else(|| skimmed(doc))
        .or_else(|| parsed(doc))
}

/// [`response`] by serde.
fn parsed(doc: &[u8]) -> Option<Peeked> {
    let mut out = Peeked::default();
    let p: ResponsePeek<'_> = serde_json::from_slice(doc).ok()?;
    out.span = p.model.and_then(|m| span_of(m.get(), doc));
    out.usage_only = p.usage.is_some() && p.choices.is_some_and(|c| c.get() == "[]");
    if let Some(u) = p.usage {
        out.usage = usage_of(u);
    }
    out.error = p.error.is_some_and(|e| e.get() != "null");
    out.finished = p
        .choices
        .is_some_and(|c| nonempty_string_after(c.get().as_bytes(), &FINISH_REASON));
    Some(out)
}

/// The gateway's usage from an OpenAI `usage` object.
fn usage_of(u: OpenAiUsage) -> Usage {
    let details = u.prompt_tokens_details.unwrap_or_default();
    Usage {
        input: u.prompt_tokens,
        output: u.completion_tokens,
        // As the translated path reads them (`response::decode_usage`).
        cached: details
            .cached_tokens
            .or(u.prompt_cache_hit_tokens)
            .or(u.cached_tokens),
        cache_write: details.cache_write_tokens,
        cache_write_1h: None,
        reasoning: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
    }
}

thread_local! {
    /// The last usage object this thread skimmed, and its details: the
    /// next answer's is most often the same but for its numbers, which a
    /// skim resumed from it reads alone (`skim::Resume`; the answer never
    /// depends on it).
    static USAGE_SKIMMED: std::cell::RefCell<skim::Resume<6>> = std::cell::RefCell::default();
    static PROMPT_DETAILS_SKIMMED: std::cell::RefCell<skim::Resume<2>> =
        std::cell::RefCell::default();
    static COMPLETION_DETAILS_SKIMMED: std::cell::RefCell<skim::Resume<1>> =
        std::cell::RefCell::default();
}

/// [`usage_of`] of a usage object by a skim of its members, None where the
/// skim does not vouch for it (serde then reads it).
fn usage_skimmed(u: &[u8]) -> Option<Usage> {
    let wanted = [
        &b"prompt_tokens"[..],
        b"completion_tokens",
        b"prompt_tokens_details",
        b"completion_tokens_details",
        b"prompt_cache_hit_tokens",
        b"cached_tokens",
    ];
    let [input, output, prompt_details, completion_details, hit, cached] =
        USAGE_SKIMMED.with(|memo| skim::members_kept(memo, u, wanted))?;
    let [details_cached, cache_write] = PROMPT_DETAILS_SKIMMED.with(|memo| {
        skim::counts_kept(
            memo,
            u,
            prompt_details,
            [&b"cached_tokens"[..], b"cache_write_tokens"],
        )
    })?;
    let [reasoning] = COMPLETION_DETAILS_SKIMMED
        .with(|memo| skim::counts_kept(memo, u, completion_details, [&b"reasoning_tokens"[..]]))?;
    let (hit, cached) = (skim::count(u, hit)?, skim::count(u, cached)?);
    Some(Usage {
        input: skim::count(u, input)?,
        output: skim::count(u, output)?,
        cached: details_cached.or(hit).or(cached),
        cache_write,
        cache_write_1h: None,
        reasoning,
    })
}

thread_local! {
    /// The last frame this thread skimmed: the next one of the same stream
    /// (most often the next in the same read) is skimmed from where the two
    /// differ (`skim::Resume`). Frames of other streams in between only
    /// make the next skim a whole one; the answer never depends on it.
    static SKIMMED: std::cell::RefCell<skim::Resume<4>> = std::cell::RefCell::default();
}

/// [`response`] of a document whose `error` is absent or null, from its
/// members' spans, the `usage` object (a whole answer's, a stream's last
/// chunk's) read alone; None for any other (or one the skim does not vouch
/// for).
fn skimmed(doc: &[u8]) -> Option<Peeked> {
    let wanted = [&b"model"[..], b"usage", b"choices", b"error"];
    let [model, usage, choices, error] =
        SKIMMED.with(|memo| skim::members_kept(memo, doc, wanted))?;
    let value = |r| skim::non_null(doc, r);
    if value(error).is_some() {
        return None;
    }
    let choices_value = value(choices.clone()).map(|(c, _)| c);
    let mut found = Peeked {
        span: value(model).map(|(_, r)| r),
        finished: choices_value.is_some_and(|c| nonempty_string_after(c, &FINISH_REASON)),
        ..Peeked::default()
    };
    if let Some((usage, _)) = value(usage) {
        // serde reads a member's value alone as it reads it in place.
        found.usage =
            usage_skimmed(usage).or_else(|| serde_json::from_slice(usage).ok().map(usage_of))?;
        found.usage_only = choices_value == Some(b"[]");
    } else if !found.finished {
        keep(doc, found.span.clone(), choices);
    }
    Some(found)
}

thread_local! {
    /// The last chunk this thread skimmed whose answer was its model's
    /// place alone (a chunk of text): the next one that repeats it but in
    /// its text and padding has that answer, the model's place moved, read
    /// without a skim (`common::repeat`). As for [`SKIMMED`], other
    /// streams' chunks in between only make the next one a skim.
    static REPEATED: std::cell::RefCell<Repeat> = std::cell::RefCell::default();
}

/// A chunk's text (`choices[…].delta.content`) and padding, found by their
/// keys: in JSON a quote, then a name, a quote and a colon not escaped, is
/// a key, so the first string after it is that key's value.
static CONTENT: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"content\":\""));
static OBFUSCATION: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"obfuscation\":\""));

/// Keeps `doc`, whose answer was the model's place (`model`) alone, for
/// [`repeated`]: the model must repeat, the first text in `choices` and the
/// padding may change. What else a chunk's answer reads (`usage`, `error`
/// absent or null; the finish reason's value) is bytes that must repeat:
/// a string without quotes cannot hold `"finish_reason":`, nor be that
/// member's value, which follows its own key.
fn keep(doc: &[u8], model: Option<Range<usize>>, choices: Option<Range<usize>>) {
    // The string value that starts after a key's `"name":"`, up to the next
    // quote (a value with an escape is not plain: the repeat leaves it be).
    let after = |finder: &memchr::memmem::Finder<'_>, within: Range<usize>| {
        let at = within.start + finder.find(&doc[within.clone()])? + finder.needle().len() - 1;
        let end = at + 1 + memchr::memchr(b'"', &doc[at + 1..within.end])?;
        Some((at..end + 1, true))
    };
    let content = choices.and_then(|c| after(&CONTENT, c));
    let padding = after(&OBFUSCATION, 0..doc.len());
    REPEATED.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            r.keep_values(doc, [model.map(|m| (m, false)), content, padding]);
        }
    });
}

/// [`response`] of a document that repeats the last one kept in
/// [`REPEATED`] but in its text and padding: the model's place alone.
pub fn repeated(doc: &[u8]) -> Option<Peeked> {
    let [model, _, _] = REPEATED.with(|r| r.try_borrow_mut().ok()?.values(doc))?;
    Some(Peeked {
        span: model,
        ..Peeked::default()
    })
}

/// Whether the first bytes of a chat-completions stream carry the answer's
/// first token: content, a tool call or reasoning text, or its end (a finish
/// reason, `[DONE]`, an error); the role-only first chunk does not.
pub fn stream_started(bytes: &[u8]) -> bool {
    nonempty_string_member(bytes, b"\"content\":")
        || nonempty_string_member(bytes, b"\"reasoning_content\":")
        || nonempty_string_member(bytes, b"\"reasoning\":")
        || nonempty_string_member(bytes, b"\"finish_reason\":")
        || contains(bytes, b"\"tool_calls\":[")
        || contains(bytes, b"[DONE]")
        || contains(bytes, b"\"error\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Chunks as upstreams send them, and broken ones: members in any
    /// order, present or not, null or not, some of them twice, cut short.
    fn frame() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            Just(r#""id":"chatcmpl-1""#.to_string()),
            Just(r#""object":"chat.completion.chunk""#.to_string()),
            prop_oneof![
                Just(r#""model":"gpt-4o""#),
                Just(r#""model":null"#),
                Just(r#""model":"g\"pt""#),
                Just(r#""model":7"#)
            ]
            .prop_map(str::to_string),
            prop_oneof![
                Just(r#""usage":null"#),
                Just(r#""usage":{"prompt_tokens":3,"completion_tokens":2}"#),
                Just(r#""usage":"x""#),
                Just(r#""usage":{"prompt_tokens":"3"}"#),
                Just(
                    r#""usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":null,"cached_tokens":2}"#
                ),
                Just(r#""usage":{"prompt_tokens":1,"prompt_tokens":2}"#),
                Just(r#""usage":{"prompt_tokens":1.0,"completion_tokens":2}"#),
                Just(r#""usage":{"prompt_tokens":-1}"#),
                Just(r#""usage":{"prompt_tokens":18446744073709551616}"#),
                Just(r#""usage":{"prompt_tokens":18446744073709551615,"total_tokens":"x"}"#),
                Just(r#""usage":{"prompt_tokens":07}"#),
                Just(r#""usage":{"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":5,"audio_tokens":0}}"#),
                Just(r#""usage":{"prompt_tokens_details":{"cached_tokens":null,"cache_write_tokens":3}}"#),
                Just(r#""usage":{"prompt_tokens_details":[1],"prompt_cache_hit_tokens":4}"#),
                Just(r#""usage":{"completion_tokens_details":{"reasoning_tokens":1,"reasoning_tokens":2}}"#),
                Just(r#""usage":{"completion_tokens_details":7}"#),
                Just(r#""usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":"1"}}"#),
                Just(r#""us\u0061ge":{"prompt_tokens":1}"#)
            ]
            .prop_map(str::to_string),
            (
                prop_oneof![Just("null"), Just("\"stop\""), Just("\"\"")],
                "[a-z \\\\\"]{0,4}"
            )
                .prop_map(|(f, c)| format!(
                    r#""choices":[{{"index":0,"delta":{{"content":"{c}"}},"finish_reason":{f}}}]"#
                )),
            Just(r#""choices":[]"#.to_string()),
            prop_oneof![Just(r#""error":null"#), Just(r#""error":{"message":"m"}"#)]
                .prop_map(str::to_string),
        ];
        skim::objects(member)
    }

    /// Request bodies as clients send them, and broken ones: each member
    /// the peek reads present or not, null or of another type, some twice
    /// or with an escaped key, unknown members beside them, cut short.
    fn request_body() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            prop_oneof![
                Just(r#""model":"gpt-4o""#),
                Just(r#""model":null"#),
                Just(r#""model":7"#),
                Just(r#""model":"g\"pt""#),
                Just(r#""mod\u0065l":"gpt-4o""#),
            ],
            prop_oneof![
                Just(r#""messages":[{"role":"user","content":"hi"}]"#),
                Just(r#""messages":null"#),
                Just(r#""messages":"x""#),
                Just(r#""messages" : [ ]"#),
            ],
            prop_oneof![
                Just(r#""stream":true"#),
                Just(r#""stream":false"#),
                Just(r#""stream":null"#),
                Just(r#""stream":"yes""#),
                Just(r#""stream":1"#),
            ],
            prop_oneof![
                Just(r#""stream_options":{"include_usage":true}"#),
                Just(r#""stream_options":null"#),
                Just(r#""stream_options":{"include_usage":"x"}"#),
                Just(r#""stream_options":[true]"#),
                Just(r#""stream_options":{}"#),
                Just(r#""stream_options":{"include_usage":true,"include_usage":false}"#),
                Just(r#""stream_options":{"other":[1,{"a":null}],"include_usage":false}"#),
            ],
            prop_oneof![
                Just(r#""temperature":0.7"#),
                Just(r#""temperature":"hot""#),
                Just(r#""temperature":-0"#),
                Just(r#""temperature":1e400"#),
            ],
            prop_oneof![
                Just(r#""max_tokens":1024"#),
                Just(r#""max_tokens":0"#),
                Just(r#""max_tokens":-1"#),
                Just(r#""max_tokens":1.5"#),
                Just(r#""max_completion_tokens":10"#),
                Just(r#""max_completion_tokens":null"#),
            ],
            prop_oneof![
                Just(r#""n":2"#),
                Just(r#""n":"2""#),
                Just(r#""logprobs":true"#),
                Just(r#""logprobs":false"#),
                Just(r#""top_logprobs":3"#),
            ],
            prop_oneof![
                Just(r#""prompt_cache_key":"k-1""#),
                Just(r#""tools":[{"type":"function","function":{"name":"f"}}]"#),
                Just(r#""tool_choice":"auto""#),
                Just(r#""metadata":{"a":"b"}"#),
                Just(r#""reasoning_effort":"low""#),
                Just(r#""seed":null"#),
                Just(r#""user":"u\n1""#),
            ],
            prop_oneof![
                Just(r#""x_extra":{"a":[1,2,{"b":"\u00e9"}]}"#),
                Just(r#""x_extra":1,"x_extra":2"#),
                Just(r#""x_bad":01"#),
                Just(r#""x_bad":"a\qb""#),
            ],
        ]
        .prop_map(str::to_string);
        skim::objects(member)
    }

    proptest! {
        /// A request the skim reads is answered as serde answers it: the
        /// same fields, the same errors.
        #[test]
        fn skimmed_requests_read_as_parsed_ones(doc in request_body()) {
            crate::protocol::common::peek::skim_agrees(&doc, RequestPeek::skimmed, inspected)?;
        }
    }

    #[test]
    fn a_usual_request_is_skimmed_and_others_left_to_serde() {
        let body = br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":64}"#;
        let p = RequestPeek::skimmed(body).unwrap();
        assert_eq!(p.model.unwrap().get(), r#""gpt-4o""#);
        assert_eq!(p.stream, Some(true));
        assert_eq!(p.stream_options.unwrap().include_usage, Some(true));
        let found = request(body, false).unwrap();
        assert_eq!(found.model.as_deref(), Some("gpt-4o"));
        assert!(found.stream && found.include_usage);
        assert_eq!(found.max_tokens, Some(64));
        // serde lends no value of invalid UTF-8, nor reads "yes" as a bool.
        let mut bad = br#"{"model":"gpt-4o","messages":[],"x":"#.to_vec();
        bad.extend_from_slice(b"\"\xff\"}");
        assert!(RequestPeek::skimmed(&bad).is_none());
        assert!(RequestPeek::skimmed(br#"{"model":"m","messages":[],"stream":"yes"}"#).is_none());
        let err = request(br#"{"model":"m","messages":[],"stream":"yes"}"#, false).unwrap_err();
        assert!(err.message.contains("not valid JSON"), "{}", err.message);
    }

    proptest! {
        /// Answers whose usage repeats the last one's but for its numbers
        /// (what the usage memos resume from), details null or absent in
        /// some: each is skimmed, and read as serde reads it.
        #[test]
        fn usage_with_changed_numbers_reads_as_parsed(
            answers in proptest::collection::vec(
                (0u64..200_000, 0u64..5_000, proptest::option::of(0u64..100), 0u64..30, 0u8..3),
                1..10,
            )
        ) {
            for (prompt, completion, cached, reasoning, shape) in answers {
                let cached = cached.map_or("null".to_string(), |n| n.to_string());
                let completion_details = match shape {
                    0 => format!(r#","completion_tokens_details":{{"reasoning_tokens":{reasoning},"audio_tokens":0}}"#),
                    1 => r#","completion_tokens_details":null"#.to_string(),
                    _ => String::new(),
                };
                let doc = format!(
                    r#"{{"id":"chatcmpl-1","model":"gpt-4o","choices":[],"usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":{cached},"audio_tokens":0}}{completion_details}}}}}"#,
                    prompt + completion
                );
                proptest::prop_assert!(skimmed(doc.as_bytes()).is_some(), "{}", doc);
                skim::agrees(skimmed, parsed, &doc)?;
            }
        }
    }

    proptest! {
        /// The skim answers as serde does, or leaves the frame to it.
        #[test]
        fn skimmed_frames_read_as_parsed_ones(doc in frame()) {
            skim::agrees(skimmed, parsed, &doc)?;
        }
    }

    proptest! {
        /// Chunks that repeat the last in their text and padding (some
        /// texts with escapes or quotes, or the finish reason's words; some
        /// finish reasons empty or not), among other frames: each is
        /// answered as serde answers it, by a repeat, a skim or a parse.
        #[test]
        fn repeated_chunks_read_as_parsed_ones(
            other in frame(),
            chunks in proptest::collection::vec(
                (
                    proptest::prop_oneof![
                        4 => "[a-z :,{}]{0,5}",
                        1 => Just(r#"finish_reason":"stop"#.to_string()),
                        1 => "([a-z]|\\\\n|\\\\\"|\"){0,3}",
                    ],
                    "[a-zA-Z0-9]{0,6}",
                    proptest::prop_oneof![Just("null"), Just("\"\""), Just("\"stop\"")],
                    0usize..8,
                ),
                1..16,
            ),
        ) {
            for (text, pad, finish, shape) in chunks {
                let doc = match shape {
                    0 => other.clone(),
                    1 => format!(r#"{{"model":"m","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":{finish}}}],"usage":null}}"#),
                    2 => format!(r#"{{"choices":[{{"delta":{{"content":"{text}"}}}}],"model":"m","obfuscation":"{pad}"}}"#),
                    _ => format!(r#"{{"id":"c","model":"gpt-4o","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}],"usage":null,"obfuscation":"{pad}"}}"#),
                };
                prop_assert_eq!(response(doc.as_bytes()), parsed(doc.as_bytes()), "{}", doc);
            }
        }
    }

    #[test]
    fn a_chunk_that_repeats_the_last_is_answered_without_a_skim() {
        let c = |text: &str, pad: &str| {
            format!(
                r#"{{"id":"c","model":"gpt-4o","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}],"obfuscation":"{pad}"}}"#
            )
        };
        let first = c("a", "xy");
        assert!(response(first.as_bytes()).is_some_and(|p| !p.finished));
        let next = c("longer text", "");
        let p = repeated(next.as_bytes()).unwrap_or_default();
        assert_eq!(
            p.span.map(|r| &next.as_bytes()[r]),
            Some(&b"\"gpt-4o\""[..])
        );
        // A finish reason is not a text: read in full.
        let last = next.replace("null", "\"stop\"");
        assert!(repeated(last.as_bytes()).is_none());
        assert!(response(last.as_bytes()).is_some_and(|p| p.finished));
    }

    #[test]
    fn a_usual_chunk_is_skimmed() {
        let doc = br#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}],"usage":null}"#;
        let p = skimmed(doc).unwrap_or_default();
        assert_eq!(p.span.clone().map(|r| &doc[r]), Some(&b"\"gpt-4o\""[..]));
        assert_eq!(Some(p), parsed(doc));
        let last = br#"{"model":"m","choices":[{"delta":{},"finish_reason":"stop"}]}"#;
        assert!(skimmed(last).is_some_and(|p| p.finished));
        // Usage is read from its own span; an error is left to serde.
        let usage = br#"{"model":"m","choices":[],"usage":{"prompt_tokens":1}}"#;
        assert!(skimmed(usage).is_some_and(|p| p.usage_only && p.usage.input == Some(1)));
        assert_eq!(skimmed(usage), parsed(usage));
        let error = br#"{"error":{"message":"m"}}"#;
        assert!(skimmed(error).is_none());
        assert!(response(error).is_some_and(|p| p.error));
    }
}
