//! OpenAI chat-completions wire types (request and non-streaming response).
//!
//! Our own serde types: every object keeps its unknown fields in a flattened
//! `extra` map so they survive an OpenAI → IR → OpenAI trip, and absent
//! optionals are not serialized.

use crate::protocol::common::json::{nullable, StringOr};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /v1/chat/completions` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    /// Model (`provider/model_id` or a bare id).
    #[serde(default)]
    pub model: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Legacy output limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Output limit (newer name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Stream with SSE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Stream options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Stop sequence(s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StringOr<String>>,
    /// Tool definitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolDef>>,
    /// `"auto"`, `"none"`, `"required"` or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Allow several tool calls in one turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Output format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// Number of choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Presence penalty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// Frequency penalty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// End-user id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Reasoning effort (`minimal`/`low`/`medium`/`high`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a final chunk with usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Message content: a string or a list of parts.
pub type Content = StringOr<ContentPart>;

/// One message (all roles share this flat shape; `role` says which fields apply).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Content; `Some(None)` is an explicit `null` (assistant with tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub content: Option<Option<Content>>,
    /// Reasoning text (DeepSeek-style OpenAI-compatible APIs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Assistant tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Unknown fields (`name`, `refusal`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A content part (flat: `type` says which field is set).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ContentPart {
    /// `text`, `image_url`, `refusal`, `input_audio`, `file`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Image of an `image_url` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<ImageUrl>,
    /// Text of a `refusal` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Unknown fields (and the payload of unknown part types).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `image_url` object.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ImageUrl {
    /// An `http(s)` URL or a `data:` URL.
    pub url: String,
    /// `auto`, `low` or `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An assistant tool call.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id.
    #[serde(default)]
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function called.
    pub function: FunctionCall,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn function_type() -> String {
    "function".to_string()
}

/// `tool_calls[].function`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Function name.
    #[serde(default)]
    pub name: String,
    /// Arguments as a JSON text.
    #[serde(default)]
    pub arguments: String,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool definition (`type: function` or another tool type kept verbatim).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolDef {
    /// `function` (others are forwarded to OpenAI upstreams only).
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionDef>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `tools[].function`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FunctionDef {
    /// Function name.
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Strict schema adherence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `response_format`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResponseFormat {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The schema of a `json_schema` format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_schema: Option<JsonSchema>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `response_format.json_schema`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JsonSchema {
    /// Schema name.
    #[serde(default)]
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Strict adherence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Non-streaming `chat.completion` response.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// Completion id.
    #[serde(default)]
    pub id: String,
    /// `chat.completion`.
    #[serde(default = "completion_object")]
    pub object: String,
    /// Unix seconds.
    #[serde(default)]
    pub created: u64,
    /// Model.
    #[serde(default)]
    pub model: String,
    /// Choices (the gateway translates the first).
    #[serde(default)]
    pub choices: Vec<Choice>,
    /// Usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Unknown fields (`system_fingerprint`, `service_tier`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn completion_object() -> String {
    "chat.completion".to_string()
}

/// One choice.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Choice {
    /// Choice index.
    #[serde(default)]
    pub index: u64,
    /// The assistant message.
    #[serde(default)]
    pub message: ResponseMessage,
    /// `stop`, `length`, `tool_calls`, `content_filter`, …
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Unknown fields (`logprobs`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `choices[].message`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResponseMessage {
    /// `assistant`.
    #[serde(default = "assistant_role")]
    pub role: String,
    /// Text (`null` when the message only has tool calls or a refusal).
    #[serde(default, with = "nullable")]
    pub content: Option<Option<Content>>,
    /// Reasoning text (DeepSeek-style APIs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Unknown fields (`refusal`, `annotations`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn assistant_role() -> String {
    "assistant".to_string()
}

/// `usage`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (including cached ones).
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens (including reasoning).
    #[serde(default)]
    pub completion_tokens: u64,
    /// Total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Prompt details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Completion details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens read from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Prompt tokens written to the cache (not OpenAI's own field: the
    /// gateways that relay Anthropic models, OpenRouter's among them, report
    /// cache writes here; so does Switchboard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    /// Reasoning tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
