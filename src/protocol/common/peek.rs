//! What the gateway reads from bodies without decoding them: request peeks
//! ([`Inspected`], filled by each spoke's `peek::request`) and response peeks
//! ([`Peeked`], from each spoke's `peek::response`), with the helpers the
//! spokes share. Everything here borrows raw values from the body; nothing is
//! copied.

use crate::error::{ErrorKind, GatewayError};
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

/// A borrowed raw JSON value of an optional field.
pub type Raw<'a> = Option<&'a RawValue>;

pub fn bad(param: &str, msg: impl Into<String>) -> GatewayError {
    GatewayError::invalid_param(param, msg)
}

pub fn body_error(e: &serde_json::Error) -> GatewayError {
    GatewayError::new(
        ErrorKind::InvalidRequest,
        format!("request body is not valid JSON for this route: {e}"),
    )
}

pub fn number(raw: Raw<'_>, param: &str) -> Result<Option<f64>, GatewayError> {
    match raw.map(RawValue::get) {
        None | Some("null") => Ok(None),
        Some(t) => t
            .parse::<f64>()
            .map(Some)
            .map_err(|_| bad(param, format!("{param} must be a number"))),
    }
}

pub fn positive_int(raw: Raw<'_>, param: &str) -> Result<Option<u64>, GatewayError> {
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
#[derive(Debug, Default)]
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
}

/// The byte range of a borrowed raw value inside `doc`.
pub fn span_of(raw: &RawValue, doc: &[u8]) -> Option<Range<usize>> {
    let start = (raw.get().as_ptr() as usize).wrapping_sub(doc.as_ptr() as usize);
    let end = start.checked_add(raw.get().len())?;
    (end <= doc.len()).then_some(start..end)
}
