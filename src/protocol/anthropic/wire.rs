//! Anthropic Messages wire types (request and non-streaming response).
//!
//! Our own serde types: every object keeps its unknown fields in a flattened
//! `extra` map so they survive an Anthropic → IR → Anthropic trip, and absent
//! optionals are not serialized.

use crate::protocol::common::json::StringOr;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /v1/messages` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MessagesRequest {
    /// Model id.
    #[serde(default)]
    pub model: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// System prompt: a string or text blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<StringOr<ContentBlock>>,
    /// Output limit (required by Anthropic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Stream with SSE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Temperature (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u64>,
    /// Tool definitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolDef>>,
    /// Tool choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Extended thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// Request metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Message {
    /// `user` or `assistant`.
    pub role: String,
    /// A string or content blocks.
    pub content: StringOr<ContentBlock>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A content block (flat: `type` says which fields apply).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ContentBlock {
    /// `text`, `image`, `tool_use`, `tool_result`, `thinking`, `redacted_thinking`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Text of a `text` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Source of an `image` (or `document`) block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// Id of a `tool_use` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name of a `tool_use` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Input of a `tool_use` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The call a `tool_result` answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Content of a `tool_result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<StringOr<ContentBlock>>,
    /// Error flag of a `tool_result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Text of a `thinking` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Signature of a `thinking` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Payload of a `redacted_thinking` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Prompt-cache mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<Value>,
    /// Unknown fields (`citations`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An image/document source.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Source {
    /// `base64`, `url`, `file`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Media type of a `base64` source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Data of a `base64` source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// URL of a `url` source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool definition (custom tool, or a server tool kept verbatim).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolDef {
    /// Absent or `custom` for client tools; a versioned type for server tools.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Tool name.
    #[serde(default)]
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// Prompt-cache mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `tool_choice`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolChoice {
    /// `auto`, `any`, `tool` or `none`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Tool name for `tool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// At most one tool call per turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_parallel_tool_use: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `thinking`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Thinking {
    /// `enabled`, `disabled` (or a newer mode, kept verbatim).
    #[serde(rename = "type")]
    pub kind: String,
    /// Token budget for `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<i64>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `metadata`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Metadata {
    /// End-user id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Non-streaming `message` response.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MessagesResponse {
    /// Message id.
    #[serde(default)]
    pub id: String,
    /// `message`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// `assistant`.
    #[serde(default)]
    pub role: String,
    /// Model.
    #[serde(default)]
    pub model: String,
    /// Content blocks.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// `end_turn`, `max_tokens`, `stop_sequence`, `tool_use`, `pause_turn`, `refusal`, …
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The stop sequence that matched.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `usage`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens (including thinking).
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens written to the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// Unknown fields (`cache_creation` breakdown, `server_tool_use`, `service_tier`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
