//! Anthropic Messages: what the gateway reads from bodies without decoding them.
//! `request` fills [`Inspected`] (parameters by catalog name and the client's
//! own field path, caps, stream flags); `response` reads the model span, usage
//! and terminal markers of a response body or stream frame for passthrough.

use crate::error::GatewayError;
use crate::protocol::common::peek::{
    bad, contains, model_of, nonempty_string_after, nonempty_string_member, number, parse_request,
    positive_int, present, span_of, typed, AffinitySource, Inspected, Peeked, Raw, RawText, Usage,
};
use crate::protocol::common::skim;
use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct RequestPeek<'a> {
    #[serde(borrow)]
    model: Raw<'a>,
    #[serde(borrow)]
    messages: Raw<'a>,
    #[serde(borrow)]
    system: Raw<'a>,
    stream: Option<bool>,
    #[serde(borrow)]
    temperature: Raw<'a>,
    #[serde(borrow)]
    top_p: Raw<'a>,
    #[serde(borrow)]
    top_k: Raw<'a>,
    #[serde(borrow)]
    max_tokens: Raw<'a>,
    #[serde(borrow)]
    stop_sequences: Raw<'a>,
    #[serde(borrow)]
    tools: Raw<'a>,
    #[serde(borrow)]
    tool_choice: Raw<'a>,
    #[serde(borrow)]
    thinking: Raw<'a>,
    #[serde(borrow)]
    output_config: Option<OutputConfigPeek<'a>>,
    #[serde(borrow)]
    output_format: Raw<'a>,
    #[serde(borrow)]
    metadata: Raw<'a>,
    #[serde(borrow)]
    service_tier: Raw<'a>,
    #[serde(borrow)]
    context_management: Raw<'a>,
    #[serde(borrow)]
    cache_control: Raw<'a>,
}

#[derive(Deserialize)]
struct OutputConfigPeek<'a> {
    #[serde(borrow)]
    effort: Raw<'a>,
    #[serde(borrow)]
    format: Raw<'a>,
}

#[derive(Deserialize)]
struct MetadataPeek<'a> {
    #[serde(borrow)]
    user_id: Raw<'a>,
}

#[derive(Deserialize)]
struct ThinkingPeek {
    budget_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ToolChoicePeek<'a> {
    #[serde(borrow)]
    disable_parallel_tool_use: Raw<'a>,
}

/// The members [`RequestPeek`] reads, in its order.
const REQUEST_MEMBERS: [&[u8]; 18] = [
    b"model",
    b"messages",
    b"system",
    b"stream",
    b"temperature",
    b"top_p",
    b"top_k",
    b"max_tokens",
    b"stop_sequences",
    b"tools",
    b"tool_choice",
    b"thinking",
    b"output_config",
    b"output_format",
    b"metadata",
    b"service_tier",
    b"context_management",
    b"cache_control",
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
        let [model, messages, system, stream, temperature, top_p, top_k, max_tokens, stop_sequences, tools, tool_choice, thinking, output_config, output_format, metadata, service_tier, context_management, cache_control] =
            skim::members(body, REQUEST_MEMBERS)?;
        let raw = |span| RawText::skimmed(text, span);
        Some(RequestPeek {
            stream: typed(raw(stream))?,
            output_config: typed(raw(output_config))?,
            model: raw(model),
            messages: raw(messages),
            system: raw(system),
            temperature: raw(temperature),
            top_p: raw(top_p),
            top_k: raw(top_k),
            max_tokens: raw(max_tokens),
            stop_sequences: raw(stop_sequences),
            tools: raw(tools),
            tool_choice: raw(tool_choice),
            thinking: raw(thinking),
            output_format: raw(output_format),
            metadata: raw(metadata),
            service_tier: raw(service_tier),
            context_management: raw(context_management),
            cache_control: raw(cache_control),
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
        return Err(bad("messages", "messages: field required"));
    }
    out.stream = p.stream.unwrap_or(false);
    out.temperature = number(p.temperature, "temperature")?;
    out.max_tokens = positive_int(p.max_tokens, "max_tokens")?;
    if let Some(n) = out.max_tokens {
        out.caps.push(("max_tokens", n));
    }
    out.uses(out.temperature.is_some(), "temperature", "temperature");
    out.uses(present(p.top_p), "top_p", "top_p");
    out.uses(present(p.top_k), "top_k", "top_k");
    out.uses(out.stream, "stream", "stream");
    out.uses(present(p.stop_sequences), "stop", "stop_sequences");
    out.uses(present(p.tools), "tools", "tools");
    out.uses(present(p.tool_choice), "tool_choice", "tool_choice");
    let parallel = p
        .tool_choice
        .filter(|r| r.get().starts_with('{'))
        .and_then(|r| serde_json::from_str::<ToolChoicePeek<'_>>(r.get()).ok())
        .is_some_and(|t| present(t.disable_parallel_tool_use));
    out.uses(
        parallel,
        "parallel_tool_calls",
        "tool_choice.disable_parallel_tool_use",
    );
    out.uses(present(p.thinking), "reasoning", "thinking");
    out.thinking_budget = p
        .thinking
        .filter(|r| r.get().starts_with('{'))
        .and_then(|r| serde_json::from_str::<ThinkingPeek>(r.get()).ok())
        .and_then(|t| t.budget_tokens);
    if let Some(o) = &p.output_config {
        out.uses(present(o.effort), "reasoning", "output_config.effort");
        out.uses(present(o.format), "response_format", "output_config.format");
    }
    out.uses(present(p.output_format), "response_format", "output_format");
    out.uses(present(p.metadata), "metadata", "metadata");
    out.uses(present(p.service_tier), "service_tier", "service_tier");
    out.uses(
        present(p.context_management),
        "context_management",
        "context_management",
    );
    if present(p.cache_control) || contains(body, b"\"cache_control\"") {
        for path in CACHE_PATHS {
            out.uses(
                crate::util::jsonedit::has_path(body, path),
                "cache_control",
                path,
            );
        }
    }
    let user_id = p
        .metadata
        .filter(|r| r.get().starts_with('{'))
        .and_then(|r| serde_json::from_str::<MetadataPeek<'_>>(r.get()).ok())
        .and_then(|m| m.user_id);
    out.affinity = AffinitySource::new(body, user_id, p.system, p.messages);
    Ok(out)
}

/// Where Anthropic Messages requests carry cache hints below the top level.
pub const CACHE_PATHS: [&str; 4] = [
    "system.*.cache_control",
    "tools.*.cache_control",
    "messages.*.content.*.cache_control",
    "messages.*.content.*.content.*.cache_control",
];

#[derive(Deserialize, Default)]
struct AnthropicUsage {
    /// The uncached input tokens only.
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_creation: Option<CacheCreation>,
}

/// `usage.cache_creation`: the cache writes by lifetime.
#[derive(Deserialize, Default)]
struct CacheCreation {
    ephemeral_5m_input_tokens: Option<u64>,
    ephemeral_1h_input_tokens: Option<u64>,
}

impl AnthropicUsage {
    /// The accounting view (as `response::decode_usage` reads a translated
    /// answer): the input is every prompt token, uncached, read and written.
    fn accounted(self) -> Usage {
        let split = self.cache_creation.unwrap_or_default();
        let write = self.cache_creation_input_tokens.or(
            match (
                split.ephemeral_5m_input_tokens,
                split.ephemeral_1h_input_tokens,
            ) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            },
        );
        Usage {
            input: self.input_tokens.map(|i| {
                i.saturating_add(self.cache_read_input_tokens.unwrap_or(0))
                    .saturating_add(write.unwrap_or(0))
            }),
            output: self.output_tokens,
            cached: self.cache_read_input_tokens,
            cache_write: write,
            cache_write_1h: split.ephemeral_1h_input_tokens,
            reasoning: None,
        }
    }
}

#[derive(Deserialize)]
struct AnthropicMessagePeek<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    usage: Option<AnthropicUsage>,
}

#[derive(Deserialize)]
struct ResponsePeek<'a> {
    #[serde(rename = "type")]
    kind: Option<&'a str>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<AnthropicMessagePeek<'a>>,
    usage: Option<AnthropicUsage>,
    /// A `message_delta`'s delta (its `stop_reason`).
    #[serde(borrow)]
    delta: Option<&'a RawValue>,
}

/// Reads the model span, usage and end-of-stream markers of a response body or stream frame.
/// A frame without a model, a message, usage or an error (a stream's
/// content blocks and deltas, its end) is read by a skim of its members
/// ([`skim::members`]); the others, and whatever the skim does not vouch
/// for, are parsed, with the same answers (docs/performance.md "Peeking at
/// stream frames").
pub fn response(doc: &[u8]) -> Option<Peeked> {
    skimmed(doc).or_else(|| parsed(doc))
}

thread_local! {
    /// The last frame this thread skimmed: the next delta of the same
    /// stream is skimmed from where the two differ (`skim::Resume`); other
    /// streams' frames in between only make the next skim a whole one.
    static SKIMMED: std::cell::RefCell<skim::Resume<5>> = std::cell::RefCell::default();
}

static STOP_REASON: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"stop_reason\":"));

/// [`response`] of a document whose `model`, `message` and `usage` are
/// absent or null and whose `type` is a plain string (serde borrows it:
/// an escape fails) other than `error`, from its members' spans; None for
/// any other (or one the skim does not vouch for).
fn skimmed(doc: &[u8]) -> Option<Peeked> {
    let wanted = [&b"type"[..], b"model", b"message", b"usage", b"delta"];
    let [kind, model, message, usage, delta] =
        SKIMMED.with(|memo| skim::members_kept(memo, doc, wanted))?;
    let value = |r| skim::non_null(doc, r).map(|(v, _)| v);
    if value(model).is_some() || value(message).is_some() || value(usage).is_some() {
        return None;
    }
    let kind = skim::lent(value(kind))?;
    if kind == Some(b"error") {
        return None;
    }
    Some(Peeked {
        terminal: kind == Some(b"message_stop"),
        finished: kind == Some(b"message_delta")
            && value(delta).is_some_and(|d| nonempty_string_after(d, &STOP_REASON)),
        ..Peeked::default()
    })
}

/// [`response`] by serde.
fn parsed(doc: &[u8]) -> Option<Peeked> {
    let mut out = Peeked::default();
    let p: ResponsePeek<'_> = serde_json::from_slice(doc).ok()?;
    let (model, usage) = match p.message {
        Some(m) => (m.model, m.usage),
        None => (p.model, p.usage),
    };
    out.span = model.and_then(|m| span_of(m.get(), doc));
    if let Some(u) = usage {
        out.usage = u.accounted();
    }
    out.terminal = p.kind == Some("message_stop");
    out.finished = p.kind == Some("message_delta")
        && p.delta
            .is_some_and(|d| nonempty_string_member(d.get().as_bytes(), b"\"stop_reason\":"));
    out.error = p.kind == Some("error");
    Some(out)
}

/// Whether the first bytes of a Messages stream carry the answer's first
/// token (a content block delta: text, thinking or tool input) or its end;
/// `message_start`, the empty block start and pings do not.
pub fn stream_started(bytes: &[u8]) -> bool {
    contains(bytes, b"content_block_delta")
        || contains(bytes, b"message_delta")
        || contains(bytes, b"message_stop")
        || contains(bytes, b"\"type\":\"error\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Frames as upstreams send them, and broken ones: members in any
    /// order, present or not, null or not, some of them twice, cut short.
    fn frame() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            prop_oneof![
                Just(r#""type":"content_block_delta""#),
                Just(r#""type":"message_stop""#),
                Just(r#""type":"message_delta""#),
                Just(r#""type":"message_start""#),
                Just(r#""type":"ping""#),
                Just(r#""type":"error""#),
                Just(r#""type":"message_st\u006fp""#),
                Just(r#""type":null"#),
                Just(r#""type":5"#),
            ]
            .prop_map(str::to_string),
            Just(r#""index":0"#.to_string()),
            prop_oneof![
                Just(r#""delta":{"type":"text_delta","text":"hi"}"#),
                Just(r#""delta":{"stop_reason":"end_turn","stop_sequence":null}"#),
                Just(r#""delta":{"stop_reason":""}"#),
                Just(r#""delta":{"stop_reason":null}"#),
                Just(r#""delta":null"#),
                Just(r#""delta":"stop_reason""#),
            ]
            .prop_map(str::to_string),
            prop_oneof![
                Just(r#""model":"claude""#),
                Just(r#""model":null"#),
                Just(r#""message":{"model":"claude","usage":{"input_tokens":3}}"#),
                Just(r#""message":null"#),
                Just(r#""message":7"#),
                Just(r#""usage":{"output_tokens":2}"#),
                Just(r#""usage":null"#),
                Just(r#""usage":"x""#),
                Just(r#""us\u0061ge":{"output_tokens":1}"#),
                Just(r#""error":{"type":"overloaded_error","message":"m"}"#),
            ]
            .prop_map(str::to_string),
        ];
        skim::objects(member)
    }

    /// Request bodies as clients send them, and broken ones (see the
    /// OpenAI peek's test): the members the peek reads, each in several
    /// shapes, unknown members, some cut short.
    fn request_body() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            prop_oneof![
                Just(r#""model":"claude-x""#),
                Just(r#""model":null"#),
                Just(r#""model":["m"]"#),
                Just(r#""m\u006fdel":"claude-x""#),
            ],
            prop_oneof![
                Just(r#""messages":[{"role":"user","content":"hi"}]"#),
                Just(r#""messages":null"#),
                Just(
                    r#""system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]"#
                ),
                Just(r#""system":"be brief""#),
            ],
            prop_oneof![
                Just(r#""stream":true"#),
                Just(r#""stream":null"#),
                Just(r#""stream":0"#),
                Just(r#""max_tokens":1024"#),
                Just(r#""max_tokens":0"#),
                Just(r#""temperature":"1""#),
                Just(r#""temperature":1"#),
            ],
            prop_oneof![
                Just(r#""output_config":{"effort":"low","format":{"type":"json_schema"}}"#),
                Just(r#""output_config":{"effort":null}"#),
                Just(r#""output_config":"x""#),
                Just(r#""output_config":["low"]"#),
                Just(r#""output_config":{"effort":1,"effort":2}"#),
                Just(r#""output_config":null"#),
            ],
            prop_oneof![
                Just(r#""thinking":{"type":"enabled","budget_tokens":2048}"#),
                Just(r#""thinking":{"budget_tokens":-1}"#),
                Just(r#""tool_choice":{"type":"auto","disable_parallel_tool_use":true}"#),
                Just(r#""tool_choice":"auto""#),
                Just(r#""metadata":{"user_id":"u-1"}"#),
                Just(r#""metadata":{"user_id":null}"#),
                Just(r#""cache_control":{"type":"ephemeral"}"#),
            ],
            prop_oneof![
                Just(r#""x_extra":{"a":[1,2,{"b":"\u00e9"}]}"#),
                Just(r#""x_extra":1,"x_extra":2"#),
                Just(r#""x_bad":-"#),
                Just(r#""x_bad":"a\x""#),
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
    fn a_usual_request_is_skimmed() {
        let body = br#"{"model":"claude-x","max_tokens":64,"stream":true,"output_config":{"effort":"low"},"messages":[{"role":"user","content":"hi"}]}"#;
        let p = RequestPeek::skimmed(body).unwrap();
        assert_eq!(p.stream, Some(true));
        assert!(present(p.output_config.unwrap().effort));
        let found = request(body, false).unwrap();
        assert_eq!(found.model.as_deref(), Some("claude-x"));
        assert_eq!(found.max_tokens, Some(64));
        assert!(RequestPeek::skimmed(br#"{"model":"m","output_config":7}"#).is_none());
    }

    proptest! {
        /// The skim answers as serde does, or leaves the frame to it.
        #[test]
        fn skimmed_frames_read_as_parsed_ones(doc in frame()) {
            skim::agrees(skimmed, parsed, &doc)?;
        }
    }

    #[test]
    fn a_usual_delta_is_skimmed() {
        let delta = br#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#;
        assert_eq!(skimmed(delta), Some(Peeked::default()));
        let end = br#"{"type":"message_stop"}"#;
        assert!(skimmed(end).is_some_and(|p| p.terminal));
        let finish = br#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#;
        assert!(skimmed(finish).is_some_and(|p| p.finished));
        // The frames with a model, usage or an error are parsed.
        let start =
            br#"{"type":"message_start","message":{"model":"m","usage":{"input_tokens":5}}}"#;
        assert!(skimmed(start).is_none());
        assert!(response(start).is_some_and(|p| p.usage.input == Some(5) && p.span.is_some()));
        let error = br#"{"type":"error","error":{"type":"overloaded_error"}}"#;
        assert!(skimmed(error).is_none());
        assert!(response(error).is_some_and(|p| p.error));
    }
}
