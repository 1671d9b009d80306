//! Request inspection and validation against model metadata (CONTRACT 5), done
//! before any upstream call. A body is scanned once with borrowed raw values
//! (nothing is copied); the context-length check tokenises only when the byte
//! bound cannot prove the request fits. Each optional field is recorded by
//! its catalog vocabulary word and the client's own path ([`Use`]), so that
//! `policy` can refuse it, or drop it from the raw body, by name.

use crate::config::Model;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::tokens::{self, Cancel, Countable};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::ops::Range;

/// What the gateway needs to know about a request body before choosing an upstream.
#[derive(Debug, Default, Clone)]
pub struct Inspected {
    /// The body's `model` (families A and B).
    pub model: Option<String>,
    /// Byte range of the `model` value (the JSON string, quotes included) in the body.
    pub model_span: Option<Range<usize>>,
    /// Whether the body asks for a stream (families A and B).
    pub stream: bool,
    /// Whether a family A stream asks for usage (`stream_options.include_usage`).
    pub include_usage: bool,
    /// Whether a family A body has `stream_options` at all.
    pub has_stream_options: bool,
    /// Requested output tokens.
    pub max_tokens: Option<u64>,
    /// Requested temperature.
    pub temperature: Option<f64>,
    /// Catalog parameter names the request uses.
    pub params: Vec<&'static str>,
    /// Each optional field the request uses: its catalog name and the client's field path.
    pub uses: Vec<Use>,
    /// The output-cap fields present, with their values (family A may send two).
    pub caps: Vec<(&'static str, u64)>,
    /// A family B body mentions `"cache_control"` (perhaps on blocks below the
    /// top level: [`nested_cache_hints`] finds where, only when it matters).
    pub cache_hint_mention: bool,
    /// Family B `thinking.budget_tokens` (which must stay below `max_tokens`).
    pub thinking_budget: Option<u64>,
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

type Raw<'a> = Option<&'a RawValue>;

#[derive(Deserialize)]
struct OpenAiPeek<'a> {
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

// D: the family D fields the policy looks at (the integrator moves peeks into the spokes).
#[derive(Deserialize)]
struct ResponsesPeek<'a> {
    #[serde(borrow)]
    model: Raw<'a>,
    #[serde(borrow)]
    input: Raw<'a>,
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
    text: Option<ResponsesTextPeek<'a>>,
    #[serde(borrow)]
    reasoning: Raw<'a>,
    #[serde(borrow)]
    top_logprobs: Raw<'a>,
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
struct ResponsesTextPeek<'a> {
    #[serde(borrow)]
    format: Raw<'a>,
}

#[derive(Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

#[derive(Deserialize)]
struct AnthropicPeek<'a> {
    #[serde(borrow)]
    model: Raw<'a>,
    #[serde(borrow)]
    messages: Raw<'a>,
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
struct ThinkingPeek {
    budget_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ToolChoicePeek<'a> {
    #[serde(borrow)]
    disable_parallel_tool_use: Raw<'a>,
}

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
struct GeminiPeek<'a> {
    #[serde(borrow)]
    contents: Raw<'a>,
    #[serde(borrow)]
    generation_config: Option<GeminiConfigPeek<'a>>,
    #[serde(borrow)]
    tools: Raw<'a>,
    #[serde(borrow)]
    tool_config: Raw<'a>,
    #[serde(borrow)]
    cached_content: Raw<'a>,
}

fn bad(param: &str, msg: impl Into<String>) -> GatewayError {
    GatewayError::invalid_param(param, msg)
}

fn body_error(e: &serde_json::Error) -> GatewayError {
    GatewayError::new(
        ErrorKind::InvalidRequest,
        format!("request body is not valid JSON for this route: {e}"),
    )
}

fn number(raw: Raw<'_>, param: &str) -> Result<Option<f64>, GatewayError> {
    match raw.map(RawValue::get) {
        None | Some("null") => Ok(None),
        Some(t) => t
            .parse::<f64>()
            .map(Some)
            .map_err(|_| bad(param, format!("{param} must be a number"))),
    }
}

fn positive_int(raw: Raw<'_>, param: &str) -> Result<Option<u64>, GatewayError> {
    match raw.map(RawValue::get) {
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

fn present(raw: Raw<'_>) -> bool {
    raw.is_some_and(|r| r.get() != "null")
}

fn model_of(raw: Raw<'_>, body: &[u8], out: &mut Inspected) -> Result<(), GatewayError> {
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

fn is_true(raw: Raw<'_>) -> bool {
    raw.is_some_and(|r| r.get() == "true")
}

/// A count above one (`n`, `candidateCount`); anything else is left to the upstream.
fn more_than_one(raw: Raw<'_>) -> bool {
    raw.and_then(|r| r.get().parse::<u64>().ok())
        .is_some_and(|n| n > 1)
}

impl Inspected {
    /// Records that the request uses `field`, called `param` in the catalog.
    fn uses(&mut self, cond: bool, param: &'static str, field: &'static str) {
        if cond {
            if !self.params.contains(&param) {
                self.params.push(param);
            }
            self.uses.push(Use { param, field });
        }
    }
}

/// Where family B requests carry cache hints below the top level.
const ANTHROPIC_CACHE_PATHS: [&str; 4] = [
    "system.*.cache_control",
    "tools.*.cache_control",
    "messages.*.content.*.cache_control",
    "messages.*.content.*.content.*.cache_control",
];

/// The cache hints a family B body carries below the top level (system
/// blocks, tools, message blocks, tool-result blocks). Walks the body once per
/// place, so it is asked only when the model does not take cache hints.
pub fn nested_cache_hints(req: &Inspected, body: &[u8]) -> Vec<Use> {
    if !req.cache_hint_mention {
        return Vec::new();
    }
    ANTHROPIC_CACHE_PATHS
        .iter()
        .filter(|path| crate::jsonedit::has_path(body, path))
        .map(|&field| Use {
            param: "cache_control",
            field,
        })
        .collect()
}

/// Scans a request body of `family`. `path_stream` is the stream flag family C takes from its path.
pub fn inspect(family: Family, body: &[u8], path_stream: bool) -> Result<Inspected, GatewayError> {
    let mut out = Inspected::default();
    match family {
        Family::OpenAi => {
            let p: OpenAiPeek<'_> = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
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
        }
        Family::Anthropic => {
            let p: AnthropicPeek<'_> = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
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
                for path in ANTHROPIC_CACHE_PATHS {
                    out.uses(crate::jsonedit::has_path(body, path), "cache_control", path);
                }
            }
        }
        Family::Gemini => {
            let p: GeminiPeek<'_> = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
            if !present(p.contents) {
                return Err(bad("contents", "contents is required"));
            }
            out.stream = path_stream;
            out.uses(out.stream, "stream", "stream");
            out.uses(present(p.tools), "tools", "tools");
            out.uses(present(p.tool_config), "tool_choice", "toolConfig");
            out.uses(present(p.cached_content), "cache_control", "cachedContent");
            if let Some(g) = p.generation_config {
                out.temperature = number(g.temperature, "generationConfig.temperature")?;
                out.max_tokens =
                    positive_int(g.max_output_tokens, "generationConfig.maxOutputTokens")?;
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
        }
        // D: as family A, with the Responses field names.
        Family::Responses => {
            let p: ResponsesPeek<'_> = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
            model_of(p.model, body, &mut out)?;
            if out.model.is_none() {
                return Err(bad("model", "model is required"));
            }
            if !present(p.input) {
                return Err(bad("input", "input is required"));
            }
            out.stream = p.stream.unwrap_or(false);
            out.temperature = number(p.temperature, "temperature")?;
            out.max_tokens = positive_int(p.max_output_tokens, "max_output_tokens")?;
            if let Some(n) = out.max_tokens {
                out.caps.push(("max_output_tokens", n));
            }
            let format = p
                .text
                .and_then(|t| t.format)
                .filter(|f| !f.get().contains("\"text\"") || f.get().contains("json"));
            out.uses(out.temperature.is_some(), "temperature", "temperature");
            out.uses(present(p.top_p), "top_p", "top_p");
            out.uses(out.max_tokens.is_some(), "max_tokens", "max_output_tokens");
            out.uses(out.stream, "stream", "stream");
            out.uses(present(p.tools), "tools", "tools");
            out.uses(present(p.tool_choice), "tool_choice", "tool_choice");
            out.uses(present(format), "response_format", "text.format");
            out.uses(present(p.reasoning), "reasoning", "reasoning");
            out.uses(present(p.top_logprobs), "logprobs", "top_logprobs");
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
        }
    }
    Ok(out)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// The input-token budget: what is left of the context after `cap` output tokens.
pub fn input_budget(cap: Option<u64>, model: &Model) -> u64 {
    model.context_length.saturating_sub(cap.unwrap_or(0))
}

/// Whether the byte bound alone proves the request fits (a token is at least one byte).
pub fn surely_fits(body_len: usize, cap: Option<u64>, model: &Model) -> bool {
    (body_len as u64) <= input_budget(cap, model)
}

/// The countable text of a request body of `family`.
pub fn countable(family: Family, body: &[u8]) -> Result<Countable, GatewayError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
    let keys: &[&str] = match family {
        Family::OpenAi => &["messages", "tools"],
        Family::Anthropic => &["system", "messages", "tools"],
        Family::Gemini => &["systemInstruction", "contents", "tools"],
        // D: instructions, the input items and the tools.
        Family::Responses => &["instructions", "input", "tools"],
    };
    let mut c = Countable::default();
    for k in keys {
        if let Some(x) = v.get(*k) {
            c.add(x);
        }
    }
    Ok(c)
}

/// Counts the input tokens of a request body (blocking; run off the reactor),
/// stopping early once the count passes `limit`; `None` when cancelled.
pub fn count_input(
    family: Family,
    body: &[u8],
    limit: u64,
    cancel: &Cancel,
) -> Result<Option<u64>, GatewayError> {
    Ok(tokens::count(&countable(family, body)?, limit, cancel))
}

/// The 400 for input that does not fit the context (with `max_tokens` of output, if any).
pub fn context_error(
    family: Family,
    model: &Model,
    n: u64,
    max_tokens: Option<u64>,
) -> GatewayError {
    let param = if family == Family::Gemini {
        "contents"
    } else {
        "messages"
    };
    let mut e = GatewayError::new(
        ErrorKind::ContextLengthExceeded,
        format!(
            "this model's maximum context length is {} tokens; the request has about {n} input tokens{}",
            model.context_length,
            max_tokens
                .map(|m| format!(" plus {m} requested output tokens"))
                .unwrap_or_default()
        ),
    );
    e.param = Some(param.into());
    e.with_code("context_length_exceeded")
}
