//! Request inspection and validation against model metadata (CONTRACT 5), done
//! before any upstream call. A body is scanned once with borrowed raw values
//! (nothing is copied); the context-length check tokenises only when the byte
//! bound cannot prove the request fits.

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
    temperature: Option<f64>,
    /// Catalog parameter names the request uses.
    pub params: Vec<&'static str>,
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

/// Scans a request body of `family`. `path_stream` is the stream flag family C takes from its path.
pub fn inspect(family: Family, body: &[u8], path_stream: bool) -> Result<Inspected, GatewayError> {
    let mut out = Inspected::default();
    let mark = |cond: bool, name: &'static str, out: &mut Inspected| {
        if cond {
            out.params.push(name);
        }
    };
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
            mark(out.temperature.is_some(), "temperature", &mut out);
            mark(present(p.top_p), "top_p", &mut out);
            mark(present(p.top_k), "top_k", &mut out);
            mark(out.max_tokens.is_some(), "max_tokens", &mut out);
            mark(out.stream, "stream", &mut out);
            mark(present(p.stop), "stop", &mut out);
            mark(present(p.tools), "tools", &mut out);
            mark(present(p.tool_choice), "tool_choice", &mut out);
            mark(present(p.response_format), "response_format", &mut out);
            mark(present(p.seed), "seed", &mut out);
            mark(present(p.reasoning_effort), "reasoning", &mut out);
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
            mark(out.temperature.is_some(), "temperature", &mut out);
            mark(present(p.top_p), "top_p", &mut out);
            mark(present(p.top_k), "top_k", &mut out);
            mark(out.stream, "stream", &mut out);
            mark(present(p.stop_sequences), "stop", &mut out);
            mark(present(p.tools), "tools", &mut out);
            mark(present(p.tool_choice), "tool_choice", &mut out);
            mark(present(p.thinking), "reasoning", &mut out);
        }
        Family::Gemini => {
            let p: GeminiPeek<'_> = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
            if !present(p.contents) {
                return Err(bad("contents", "contents is required"));
            }
            out.stream = path_stream;
            mark(out.stream, "stream", &mut out);
            mark(present(p.tools), "tools", &mut out);
            mark(present(p.tool_config), "tool_choice", &mut out);
            if let Some(g) = p.generation_config {
                out.temperature = number(g.temperature, "generationConfig.temperature")?;
                out.max_tokens =
                    positive_int(g.max_output_tokens, "generationConfig.maxOutputTokens")?;
                mark(out.temperature.is_some(), "temperature", &mut out);
                mark(present(g.top_p), "top_p", &mut out);
                mark(present(g.top_k), "top_k", &mut out);
                mark(out.max_tokens.is_some(), "max_tokens", &mut out);
                mark(present(g.stop_sequences), "stop", &mut out);
                let json_out = g
                    .response_mime_type
                    .is_some_and(|r| r.get() == "\"application/json\"")
                    || present(g.response_schema)
                    || present(g.response_json_schema);
                mark(json_out, "response_format", &mut out);
                mark(present(g.thinking_config), "reasoning", &mut out);
                mark(present(g.seed), "seed", &mut out);
            }
        }
    }
    Ok(out)
}

fn param_name(family: Family, canonical: &str) -> String {
    match (family, canonical) {
        (Family::Gemini, "temperature") => "generationConfig.temperature".into(),
        (Family::Gemini, "max_tokens") => "generationConfig.maxOutputTokens".into(),
        (Family::Gemini, "top_p") => "generationConfig.topP".into(),
        (Family::Gemini, "top_k") => "generationConfig.topK".into(),
        (Family::Gemini, "stop") => "generationConfig.stopSequences".into(),
        (Family::Gemini, "response_format") => "generationConfig.responseMimeType".into(),
        (Family::Gemini, "reasoning") => "generationConfig.thinkingConfig".into(),
        (Family::Gemini, "tool_choice") => "toolConfig".into(),
        (Family::Anthropic, "stop") => "stop_sequences".into(),
        (Family::Anthropic, "reasoning") => "thinking".into(),
        (Family::OpenAi, "reasoning") => "reasoning_effort".into(),
        (_, p) => p.to_string(),
    }
}

/// Checks ranges and supported parameters against `model`. Cheap; no tokenising.
pub fn check(family: Family, req: &Inspected, model: &Model) -> Result<(), GatewayError> {
    // Required on messages, not on count_tokens (which never calls `check`).
    if family == Family::Anthropic && req.max_tokens.is_none() {
        return Err(bad("max_tokens", "max_tokens: field required"));
    }
    if let Some(t) = req.temperature {
        let max = if family == Family::Anthropic {
            1.0
        } else {
            2.0
        };
        if !(0.0..=max).contains(&t) {
            return Err(bad(
                &param_name(family, "temperature"),
                format!(
                    "temperature {t} is out of range: the {family} protocol accepts 0 to {max}"
                ),
            ));
        }
    }
    if let Some(n) = req.max_tokens {
        if n > model.max_output_tokens {
            let p = match family {
                Family::Gemini => "generationConfig.maxOutputTokens",
                _ => "max_tokens",
            };
            return Err(bad(
                p,
                format!(
                    "{p} {n} is above the maximum of {} output tokens for model {}",
                    model.max_output_tokens, model.id
                ),
            ));
        }
    }
    for p in &req.params {
        if !model.supports(p) {
            let name = param_name(family, p);
            return Err(bad(
                &name,
                format!("model {} does not support the parameter {name}", model.id),
            ));
        }
    }
    Ok(())
}

/// The input-token budget: what is left of the context after the requested output.
pub fn input_budget(req: &Inspected, model: &Model) -> u64 {
    model
        .context_length
        .saturating_sub(req.max_tokens.unwrap_or(0))
}

/// Whether the byte bound alone proves the request fits (a token is at least one byte).
pub fn surely_fits(body_len: usize, req: &Inspected, model: &Model) -> bool {
    (body_len as u64) <= input_budget(req, model)
}

/// The countable text of a request body of `family`.
pub fn countable(family: Family, body: &[u8]) -> Result<Countable, GatewayError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
    let keys: &[&str] = match family {
        Family::OpenAi => &["messages", "tools"],
        Family::Anthropic => &["system", "messages", "tools"],
        Family::Gemini => &["systemInstruction", "contents", "tools"],
    };
    let mut c = Countable::default();
    for k in keys {
        if let Some(x) = v.get(*k) {
            c.add(x);
        }
    }
    Ok(c)
}

/// The slow path of the context check: counts tokens (blocking; run off the reactor).
pub fn check_context(
    family: Family,
    body: &[u8],
    req: &Inspected,
    model: &Model,
    cancel: &Cancel,
) -> Result<Option<u64>, GatewayError> {
    let budget = input_budget(req, model);
    let Some(n) = tokens::count(&countable(family, body)?, budget, cancel) else {
        return Ok(None);
    };
    if n > budget {
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
                req.max_tokens
                    .map(|m| format!(" plus {m} requested output tokens"))
                    .unwrap_or_default()
            ),
        );
        e.param = Some(param.into());
        return Err(e.with_code("context_length_exceeded"));
    }
    Ok(Some(n))
}
