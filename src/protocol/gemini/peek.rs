//! Gemini (generateContent): what the gateway reads from bodies without decoding them.
//! `request` fills [`Inspected`] (parameters by catalog name and the client's
//! own field path, caps, stream flags); `response` reads the model span, usage
//! and terminal markers of a response body or stream frame for passthrough.

use crate::error::GatewayError;
use crate::protocol::common::peek::{
    bad, body_error, contains, is_true, more_than_one, number, positive_int, present, span_of,
    AffinitySource, Inspected, Peeked, Raw, Usage,
};
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
    let p: RequestPeek<'_> = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
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
    #[serde(borrow, default)]
    candidates: Vec<GeminiCandidatePeek<'a>>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// Reads the model span, usage and end-of-stream markers of a response body or stream frame.
pub fn response(doc: &[u8]) -> Option<Peeked> {
    let mut out = Peeked::default();
    let p: ResponsePeek<'_> = serde_json::from_slice(doc).ok()?;
    out.span = p.model_version.and_then(|m| span_of(m, doc));
    if let Some(u) = p.usage_metadata {
        out.usage = Usage {
            input: u.prompt_token_count,
            output: match (u.candidates_token_count, u.thoughts_token_count) {
                (None, None) => None,
                (c, t) => Some(c.unwrap_or(0) + t.unwrap_or(0)),
            },
            cached: u.cached_content_token_count,
            cache_write: None,
            cache_write_1h: None,
            reasoning: u.thoughts_token_count,
        };
    }
    out.terminal = p.candidates.iter().any(|c| c.finish_reason.is_some());
    out.error = p.error.is_some();
    Some(out)
}

/// Whether the first bytes of a generateContent stream carry the answer's
/// first token: Gemini sends no preamble, so any chunk does.
pub fn stream_started(bytes: &[u8]) -> bool {
    contains(bytes, b"{")
}
