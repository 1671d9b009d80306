//! The neutral canonical model: the hub every protocol translates into and out of.
//!
//! Switchboard speaks four wire protocols (OpenAI chat-completions, Anthropic
//! Messages, Gemini generateContent, OpenAI Responses). Cross-family routes never convert one
//! protocol into another directly: each protocol has a decoder into this model
//! and an encoder out of it (hub and spoke), so a new protocol is one new spoke.
//!
//! The model is deliberately *not* the OpenAI chat shape. It is the union of
//! what the three protocols can say:
//!
//! - A [`ChatRequest`] has system prompts ([`SystemPrompt`], kept with their
//!   position so OpenAI `system`/`developer` messages in mid-conversation
//!   survive an OpenAI round trip), messages with only two roles
//!   ([`Role::User`], [`Role::Assistant`]), tools, tool choice, response format,
//!   sampling, reasoning settings and the stream flag.
//! - Message content is an ordered list of typed [`Block`]s: text (with
//!   Anthropic `cache_control` and a Gemini `thoughtSignature`), image (base64
//!   or URL), tool call (id, name, JSON arguments, Gemini signature), tool
//!   result (call id, function name when known, content blocks, error flag),
//!   thinking (text + signature), redacted thinking, and an opaque block for a
//!   protocol-specific part no other protocol has (forwarded to the same
//!   family only, refused elsewhere).
//! - A tool result is a block in a *user* message, as in Anthropic and Gemini;
//!   the OpenAI codec maps it to and from `role: "tool"` messages.
//! - A [`ChatResponse`] has the content blocks, a canonical [`StopReason`] and
//!   [`Usage`] with one meaning across protocols (input tokens include cached
//!   tokens; output tokens include reasoning tokens).
//! - Every object that mirrors a wire object carries an [`Extra`]: the wire
//!   object's unknown fields, tagged with the family they came from. They are
//!   re-emitted only when encoding to that same family, so nothing is lost on
//!   an A→IR→A round trip and nothing foreign leaks into another protocol.
//! - [`stream`] defines the canonical stream events (the grammar that stream
//!   parsers emit and stream encoders consume) with a grammar checker and an
//!   accumulator that folds events back into a [`ChatResponse`].
//!
//! Conventions: empty `Vec`s mean "absent"; `Option` fields are `None` when the
//! client did not say; numbers keep the client's values (range checks belong
//! to request validation, not here).

mod content;
pub mod embed;
mod extra;
pub mod ids;
pub mod media;
mod request;
mod response;
pub mod signature;
pub mod stream;

pub use content::{
    Block, ImageBlock, ImageSource, Opaque, RedactedThinkingBlock, TextBlock, ThinkingBlock,
    ToolCall, ToolResult,
};
pub use extra::{deep_merge, Extra};
pub use request::{
    anthropic_effort, budget_to_effort, effort_to_budget, gemini_level, openai_effort, ChatRequest,
    FunctionTool, JsonSchemaFormat, Message, Reasoning, ResponseFormat, Role, Sampling,
    SystemPrompt, SystemRole, Tool, ToolChoice, EFFORT_LEVELS,
};
pub use response::{ChatResponse, StopReason, Usage};
