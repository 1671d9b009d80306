//! OpenAI Responses API wire types (request and non-streaming response).
//!
//! Our own serde types, written from the API reference: every object keeps
//! its unknown fields in a flattened `extra` map so they survive a
//! Responses → IR → Responses trip. Items and content parts are flat structs
//! (`type` says which fields apply), like the chat-completions parts.

use crate::protocol::common::json::StringOr;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /v1/responses` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResponsesRequest {
    /// Model (`provider/model_id` or a bare id).
    #[serde(default)]
    pub model: String,
    /// A string (one user message) or a list of items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<StringOr<Item>>,
    /// A system (developer) message placed before the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Tool definitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolDef>>,
    /// `"auto"`, `"none"`, `"required"` or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Allow several tool calls in one turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Text output configuration (`format`, `verbosity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextConfig>,
    /// Reasoning configuration (`effort`, `summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningConfig>,
    /// Output limit (reasoning included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Stream with SSE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// End-user id (deprecated by OpenAI in favour of `safety_identifier`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Continue a stored response (expanded by the proxy before decoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<Value>,
    /// Unknown fields (`store`, `include`, `metadata`, `truncation`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `text`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TextConfig {
    /// The output format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// Unknown fields (`verbosity`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `text.format` (flat: `json_schema` keeps its fields beside `type`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Format {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Schema name (`json_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description (`json_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema (`json_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Strict adherence (`json_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `reasoning`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReasoningConfig {
    /// `none`, `minimal`, `low`, `medium`, `high`, `xhigh`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// `auto`, `concise` or `detailed`: return a summary of the reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Unknown fields (`generate_summary`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool definition (flat: `function` and `custom` fields beside `type`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolDef {
    /// `function`, `custom`, or a built-in tool type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Tool name (`function`, `custom`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments (`function`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Strict schema adherence (`function`; the API's default is `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Input format of a `custom` tool (`{"type":"text"}` or a grammar).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Value>,
    /// Unknown fields (and the payload of built-in tools).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One input or output item (flat: `type` says which fields apply; a message
/// may come without `type`, the "easy input message").
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Item {
    /// `message`, `function_call`, `function_call_output`, `reasoning`,
    /// `custom_tool_call`, `custom_tool_call_output`, … (absent: a message).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Item id (`msg_…`, `fc_…`, `rs_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Message role: `user`, `assistant`, `system`, `developer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Message content (a string or parts); reasoning text parts of a `reasoning` item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<StringOr<Part>>,
    /// The call id of a tool call or its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Tool name of a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// JSON arguments text of a `function_call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// Free-form input of a `custom_tool_call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Output of a tool call (a string or parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<StringOr<Part>>,
    /// Reasoning summary parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Vec<Part>>,
    /// Opaque reasoning state to send back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
    /// Unknown fields (`status`, `phase`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A content part (flat: `type` says which fields apply).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Part {
    /// `input_text`, `input_image`, `input_file`, `output_text`, `refusal`,
    /// `summary_text`, `reasoning_text`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Text of a text part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Text of a `refusal` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// An `http(s)` or `data:` URL (`input_image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    /// `auto`, `low`, `high` (`input_image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// An uploaded file (`input_image`, `input_file`): the gateway cannot resolve these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// Unknown fields (`annotations`, `logprobs`, `file_data`, `filename`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A non-streaming `response` object.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResponseObject {
    /// `resp_…`.
    #[serde(default)]
    pub id: String,
    /// Unix seconds (a number; the SDK types say float).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<f64>,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// `completed`, `incomplete`, `failed`, `in_progress`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The output items, in order.
    #[serde(default)]
    pub output: Vec<Item>,
    /// Why the response is incomplete (`{"reason": …}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_details: Option<Value>,
    /// The error of a failed response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// Usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Unknown fields (the echoed request settings, `object`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `usage`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens (cached ones included).
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens (reasoning included).
    #[serde(default)]
    pub output_tokens: u64,
    /// Total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Input details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens_details: Option<InputDetails>,
    /// Output details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_details: Option<OutputDetails>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `usage.input_tokens_details`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InputDetails {
    /// Input tokens read from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Input tokens written to the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `usage.output_tokens_details`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OutputDetails {
    /// Reasoning tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
