//! The canonical (non-streaming) chat response.

use super::content::Block;
use super::extra::Extra;

/// A complete model answer, independent of the protocol it came in.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatResponse {
    /// The upstream's response id (may be empty: encoders then derive one).
    pub id: String,
    /// The model the upstream reported.
    pub model: String,
    /// Creation time, unix seconds (OpenAI `created`).
    pub created: Option<u64>,
    /// Ordered content blocks (text, thinking, tool calls, …).
    pub content: Vec<Block>,
    /// Why generation stopped.
    pub stop_reason: Option<StopReason>,
    /// Token usage.
    pub usage: Option<Usage>,
    /// Unknown top-level fields.
    pub extra: Extra,
    /// Unknown fields of the single choice / candidate (the nested message or
    /// content object's unknown fields under `"message"` / `"content"`).
    pub choice_extra: Extra,
}

/// Why the model stopped, in canonical terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Natural end of the turn.
    EndTurn,
    /// The output token limit was reached.
    MaxTokens,
    /// A stop sequence matched (Anthropic says which).
    StopSequence(Option<String>),
    /// The model called tools and waits for their results.
    ToolUse,
    /// Output withheld by a safety filter; the native reason when it was more
    /// specific (Gemini `RECITATION`, `PROHIBITED_CONTENT`, …).
    ContentFilter(Option<String>),
    /// The model refused (Anthropic `refusal`; OpenAI `message.refusal`).
    Refusal,
    /// Anthropic `pause_turn` (a long server-tool turn paused; send it back to continue).
    PauseTurn,
    /// Anything else, verbatim.
    Other(String),
}

/// Token usage with one meaning across protocols.
///
/// `input_tokens` counts every prompt token, cached or not (OpenAI
/// `prompt_tokens`, Gemini `promptTokenCount`, Anthropic `input_tokens +
/// cache_read_input_tokens + cache_creation_input_tokens`). `output_tokens`
/// counts every generated token including reasoning (OpenAI
/// `completion_tokens`, Anthropic `output_tokens`, Gemini
/// `candidatesTokenCount + thoughtsTokenCount`). The detail counts are subsets:
/// `cache_read_tokens` and `cache_creation_tokens` of the input (disjoint),
/// `cache_write_1h_tokens` of `cache_creation_tokens`, `reasoning_tokens` of
/// the output.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Usage {
    /// All prompt tokens.
    pub input_tokens: u64,
    /// All generated tokens.
    pub output_tokens: u64,
    /// The total the upstream reported, if it did.
    pub total_tokens: Option<u64>,
    /// Prompt tokens read from a cache.
    pub cache_read_tokens: Option<u64>,
    /// Prompt tokens written to a cache (Anthropic
    /// `cache_creation_input_tokens`; Responses `cache_write_tokens`).
    pub cache_creation_tokens: Option<u64>,
    /// Of those, the ones written to the one-hour cache (Anthropic
    /// `cache_creation.ephemeral_1h_input_tokens`), when the upstream split them.
    pub cache_write_1h_tokens: Option<u64>,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: Option<u64>,
    /// Unknown fields of the wire usage object.
    pub extra: Extra,
}

impl Usage {
    /// The reported total, or input + output.
    pub fn total(&self) -> u64 {
        self.total_tokens
            .unwrap_or(self.input_tokens.saturating_add(self.output_tokens))
    }
}
