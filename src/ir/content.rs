//! Typed content blocks: the ordered parts of a message or a response.

use super::extra::Extra;
use crate::family::Family;
use serde_json::Value;

/// One piece of content, in order. Block order is meaningful and preserved.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Plain text.
    Text(TextBlock),
    /// An image, inline or by URL.
    Image(ImageBlock),
    /// A tool (function) call made by the assistant.
    ToolCall(ToolCall),
    /// The result of a tool call, sent back by the user side.
    ToolResult(ToolResult),
    /// Model reasoning (Anthropic `thinking`, Gemini `thought: true`, OpenAI-compatible `reasoning_content`).
    Thinking(ThinkingBlock),
    /// Encrypted reasoning (Anthropic `redacted_thinking`).
    RedactedThinking(RedactedThinkingBlock),
    /// A part only one protocol knows (audio, documents, server-tool results,
    /// executable code, …): forwarded verbatim to that family, refused elsewhere.
    Opaque(Opaque),
}

impl Block {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(TextBlock::new(text))
    }

    /// The block kind, as used in error messages.
    pub fn kind(&self) -> &str {
        match self {
            Block::Text(_) => "text",
            Block::Image(_) => "image",
            Block::ToolCall(_) => "tool call",
            Block::ToolResult(_) => "tool result",
            Block::Thinking(_) => "thinking",
            Block::RedactedThinking(_) => "redacted thinking",
            Block::Opaque(o) => &o.kind,
        }
    }
}

/// Text, with the marks some protocols attach to it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Anthropic `cache_control` (verbatim, e.g. `{"type":"ephemeral"}`).
    pub cache_control: Option<Value>,
    /// Gemini `thoughtSignature` attached to this text part.
    pub signature: Option<String>,
    /// Unknown fields of the wire part.
    pub extra: Extra,
}

impl TextBlock {
    /// Text without marks.
    pub fn new(text: impl Into<String>) -> Self {
        TextBlock {
            text: text.into(),
            ..TextBlock::default()
        }
    }

    /// True when the block is text and nothing else (can be written as a bare string).
    pub fn is_plain(&self) -> bool {
        self.cache_control.is_none() && self.signature.is_none() && self.extra.is_empty()
    }
}

/// An image.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageBlock {
    /// Where the bytes are.
    pub source: ImageSource,
    /// OpenAI `image_url.detail` (`auto`/`low`/`high`); other protocols ignore it.
    pub detail: Option<String>,
    /// Anthropic `cache_control`.
    pub cache_control: Option<Value>,
    /// Unknown fields of the wire part.
    pub extra: Extra,
}

/// The bytes of an image.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageSource {
    /// Inline base64 data (OpenAI `data:` URL, Anthropic `base64` source, Gemini `inlineData`).
    Base64 {
        /// Media type, e.g. `image/png`.
        media_type: String,
        /// Standard base64, no `data:` prefix.
        data: String,
    },
    /// A URL the provider fetches (OpenAI `image_url`, Anthropic `url` source, Gemini `fileData`).
    Url {
        /// The URL.
        url: String,
        /// Media type when the client said it (Gemini `fileData.mimeType`).
        media_type: Option<String>,
    },
}

/// A tool call made by the assistant.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id. Gemini has none: its decoder generates stable ids (see [`crate::ir::ids`]).
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments as JSON (normally an object). An OpenAI argument string
    /// that is not valid JSON is kept as a JSON string holding the raw text.
    pub arguments: Value,
    /// Gemini `thoughtSignature` of the `functionCall` part.
    pub signature: Option<String>,
    /// Anthropic `cache_control`.
    pub cache_control: Option<Value>,
    /// Unknown fields of the wire object.
    pub extra: Extra,
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The function name, when the wire says it (Gemini does; others may be
    /// resolved from the earlier call, see [`crate::ir::ChatRequest::resolve_tool_result_names`]).
    pub name: Option<String>,
    /// The result content (text, possibly images).
    pub content: Vec<Block>,
    /// Anthropic `is_error`.
    pub is_error: Option<bool>,
    /// Anthropic `cache_control`.
    pub cache_control: Option<Value>,
    /// Unknown fields of the wire object.
    pub extra: Extra,
}

/// Visible model reasoning.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThinkingBlock {
    /// The reasoning text (or summary).
    pub text: String,
    /// Anthropic `signature` or Gemini `thoughtSignature`, opaque, verified by
    /// the issuing provider; or an OpenAI Responses reasoning item (id and
    /// `encrypted_content`) packed as described in [`crate::ir::signature`].
    pub signature: Option<String>,
    /// Unknown fields of the wire part.
    pub extra: Extra,
}

/// Encrypted model reasoning (Anthropic `redacted_thinking`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RedactedThinkingBlock {
    /// The encrypted payload.
    pub data: String,
    /// Unknown fields of the wire block.
    pub extra: Extra,
}

/// A wire object only one protocol understands, kept verbatim.
#[derive(Debug, Clone, PartialEq)]
pub struct Opaque {
    /// The family whose wire this is.
    pub origin: Family,
    /// Its kind (the wire `type`, or the Gemini part field name), for error messages.
    pub kind: String,
    /// The wire object, verbatim.
    pub value: Value,
}
