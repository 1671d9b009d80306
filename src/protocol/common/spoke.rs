//! The `Spoke` table type: what the rest of the gateway may know about a
//! protocol family, one table per spoke (built in each family's `mod.rs`,
//! found through `protocol::registry::spoke`). Routing, authentication,
//! validation, policy, dispatch and the relay ask this table instead of
//! matching on the family, so a new family is a new folder plus one arm in the
//! registry (and its arms in `registry/stream_codec.rs`).

use super::http::{SetHeader, UpstreamTarget};
use super::peek::{Inspected, Peeked};
use crate::error::GatewayError;
use crate::family::Family;
use http::HeaderMap;

/// How clients of a family see the model name in responses (docs/api.md "Inference behaviour").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelName {
    /// `provider/model_id` (OpenAI chat and Responses).
    Qualified,
    /// The bare `model_id` (Anthropic Messages `model`, Gemini `modelVersion`).
    Bare,
}

/// Writes the end of a failed passthrough stream: (error body, next sequence
/// number, the response id the stream announced, out).
pub type StreamErrorWriter = fn(&[u8], u64, Option<&str>, &mut Vec<u8>);

/// One family's protocol facts and functions.
pub struct Spoke {
    pub family: Family,
    /// Where the conversation lives in a request body (named by context-length
    /// and image errors).
    pub input_field: &'static str,
    /// Top-level request fields whose text counts as input tokens.
    pub counted_fields: &'static [&'static str],
    /// The highest temperature the family accepts (the lowest is 0).
    pub max_temperature: f64,
    /// The temperature's path in a request body.
    pub temperature_field: &'static str,
    /// The output cap is required on inference requests (Anthropic Messages `max_tokens`).
    pub requires_max_tokens: bool,
    /// A request header the family requires (Anthropic Messages `anthropic-version`).
    pub required_header: Option<&'static str>,
    /// The model is named in the body (spliced on passthrough), not the path.
    pub model_in_body: bool,
    /// The model name responses carry.
    pub model_name: ModelName,
    /// A stream's end sentinel frame (OpenAI chat `data: [DONE]`).
    pub stream_done: Option<&'static [u8]>,
    /// The event that ends a stream (its SSE event name and data), written
    /// to the client when the upstream's stream reached its finish reason and
    /// then ended without it (docs/resilience.md "Streams"). `None`: the
    /// finish reason itself ends the stream (Gemini) or the terminal event
    /// carries the answer (Responses).
    pub stream_end: Option<(Option<&'static str>, &'static [u8])>,
    /// The SSE event name of an in-stream error (`None`: a bare `data:` frame).
    pub error_event: Option<&'static str>,
    /// Writes the end of a passed-through stream that failed, given the
    /// family's error body, the next sequence number and the response id the
    /// stream announced (Responses: an `error` event then `response.failed`). `None`: one frame with the error body,
    /// under `error_event`.
    pub stream_error: Option<StreamErrorWriter>,
    /// Streams carry usage only when asked (OpenAI chat `stream_options.include_usage`).
    pub stream_usage_opt_in: bool,
    /// Peeks at a request body (`path_stream`: the stream flag from the path).
    pub inspect: fn(&[u8], bool) -> Result<Inspected, GatewayError>,
    /// Peeks at a response body or stream frame.
    pub peek_response: fn(&[u8]) -> Option<Peeked>,
    /// [`Spoke::peek_response`]'s answer for a stream frame that repeats
    /// the last one this thread's peek kept but in values it may skip (a
    /// delta's text, counter, padding: `common::repeat`), read without the
    /// rest; None for any other frame, which the caller then checks and
    /// peeks at in full. A frame it answers is valid UTF-8 (the kept one
    /// was checked, and where they differ is checked here): it needs no
    /// check of its own.
    pub peek_repeated: fn(&[u8]) -> Option<Peeked>,
    /// Whether the first bytes of an upstream stream in this protocol carry
    /// the answer's first token (not only a preamble such as a role chunk or
    /// `message_start`): what a provider's `first_token` deadline waits for.
    pub stream_started: fn(&[u8]) -> bool,
    /// Renders the whole error body in the family's shape.
    pub error_body: fn(&GatewayError) -> Vec<u8>,
    /// A response header that names the error's type beside the body
    /// (Bedrock's `x-amzn-errortype`), and the type of an error.
    pub error_type_header: Option<ErrorTypeHeader>,
    /// Reads the message out of an upstream error body of this protocol.
    pub upstream_message: fn(&serde_json::Value) -> Option<String>,
    /// The machine-readable code of an upstream error body, kept for the
    /// client (OpenAI's `code`); a context overflow is
    /// [`CONTEXT_OVERFLOW`] whatever the protocol calls it.
    pub upstream_code: fn(&serde_json::Value) -> Option<String>,
    /// Where clients of the family put their key.
    pub client_key: for<'a> fn(&'a HeaderMap, Option<&'a str>) -> Option<&'a str>,
    /// Where the key goes, for the 401 that finds none.
    pub client_key_hint: &'static str,
    /// The upstream path (and query) for a call in this protocol.
    pub upstream_path: fn(&UpstreamTarget<'_>) -> String,
    /// Sets the headers that carry the provider key (and protocol version).
    pub upstream_auth: fn(&str, &UpstreamTarget<'_>, &mut SetHeader<'_>),
    /// The body of a local token-count answer, when the family has such a route.
    pub count_tokens_body: Option<fn(u64) -> String>,
    /// Under `adapt`, before translation: the body without what only this
    /// family's own upstreams can serve (the Responses hosted tools), and the
    /// reported names of what was cut; `None` when nothing is. Asked only of
    /// a body whose peek saw `tools` (the one member it cuts from).
    pub drop_untranslatable: Option<UntranslatableCut>,
    /// A client body asking for a cut answer's continuation: the
    /// assistant prefill added as the last turn, reasoning settings dropped
    /// with it (`protocol::common::prefill`).
    pub continue_body: super::prefill::ContinueBody,
    /// OpenAI chat upstreams: sets the member an OpenAI-compatible upstream
    /// wants on the prefilled last message (`prefix`, `partial`).
    pub mark_prefill: Option<super::prefill::MarkPrefill>,
}

/// The code of an upstream error that says the request is longer than the
/// model's context (OpenAI's own code; Anthropic's "prompt is too long" and
/// Gemini's token-count `INVALID_ARGUMENT` are read as it).
pub const CONTEXT_OVERFLOW: &str = "context_length_exceeded";

/// See [`Spoke::error_type_header`]: the header's name, and the type of an error.
pub type ErrorTypeHeader = (&'static str, fn(&GatewayError) -> &'static str);

/// See [`Spoke::drop_untranslatable`].
pub type UntranslatableCut = fn(&[u8]) -> Option<(Vec<u8>, Vec<String>)>;

impl Spoke {
    /// The name a client of this family sees for a model.
    pub fn client_model<'m>(&self, qualified: &'m str, bare: &'m str) -> &'m str {
        match self.model_name {
            ModelName::Qualified => qualified,
            ModelName::Bare => bare,
        }
    }
}

impl std::fmt::Debug for Spoke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Spoke({})", self.family)
    }
}
