//! What a request codec is told besides the body: the decode context (what
//! the path says) and the encode options (how to shape the upstream request).

/// What the request body alone does not say (Gemini puts these in the path).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeContext<'a> {
    /// The model from the path (Gemini `models/{model}:generateContent`); body model otherwise.
    pub model: Option<&'a str>,
    /// Streaming chosen by the path (Gemini `:streamGenerateContent` / `alt=sse`).
    pub stream: bool,
}

/// How to shape the upstream request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions<'a> {
    /// The model name the upstream knows (catalog `upstream_model`). Written
    /// into the body for OpenAI and Anthropic; Gemini has it in the URL.
    pub upstream_model: &'a str,
    /// Used when the target requires a max token count and the client gave
    /// none (Anthropic `max_tokens`): the catalog model's `max_output_tokens`.
    pub default_max_tokens: u64,
    /// Ask the upstream for a stream (`"stream": true`; for OpenAI also
    /// `stream_options.include_usage` so usage can be metered). Gemini streams
    /// are chosen by the URL, so this does not change a Gemini body.
    pub stream: bool,
    /// The model enforces a JSON Schema on its output when asked in its
    /// protocol's own way (catalog `supported_parameters` lists
    /// `response_format`): a schema goes up as Anthropic's
    /// `output_config.format` and strict tools as `strict: true`, else as a
    /// prompt instruction (docs/protocol-mapping.md "Structured output").
    pub native_structured_output: bool,
}
