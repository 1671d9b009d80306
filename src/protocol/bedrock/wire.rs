//! Bedrock Converse wire types (request, whole response, stream event
//! payloads), our own serde types with the member names of the AWS service
//! model (`bedrock-runtime`, docs/api.md "Bedrock"). Member names are
//! lowerCamelCase; every object keeps its unknown members in a flattened
//! `extra` map, and absent optionals are not serialized.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /model/{modelId}/converse` (and `/converse-stream`) body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseRequest {
    /// The conversation.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// System prompt blocks (`text`, `cachePoint`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Vec<SystemBlock>>,
    /// `maxTokens`, `temperature`, `topP`, `stopSequences`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_config: Option<InferenceConfig>,
    /// Tools and the tool choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig>,
    /// Model-specific request fields passed through to the model (`top_k`,
    /// `thinking`, `reasoning_config`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_model_request_fields: Option<Map<String, Value>>,
    /// Unknown members (`guardrailConfig`, `promptVariables`,
    /// `requestMetadata`, `performanceConfig`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `inferenceConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `toolConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig {
    #[serde(default)]
    pub tools: Vec<ToolEntry>,
    /// `{"auto":{}}`, `{"any":{}}` or `{"tool":{"name":…}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Unknown members.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `toolConfig.tools`: a `toolSpec` or a `cachePoint`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_spec: Option<ToolSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_point: Option<Value>,
    /// Unknown members (`systemTool`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `toolSpec`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `{"json": <JSON Schema>}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<InputSchema>,
    /// Unknown members (`strict`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `inputSchema`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InputSchema {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `toolChoice` (a union: one member set).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolChoice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<NamedTool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `toolChoice.tool`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NamedTool {
    pub name: String,
}

/// A turn: `role` is `user` or `assistant`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A system block (a union: `text`, `cachePoint`, `guardContent`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemBlock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_point: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A content block (a union: exactly one member set).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentBlock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use: Option<ToolUse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<ToolResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<ReasoningContent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_point: Option<Value>,
    /// Other members (`document`, `video`, `guardContent`,
    /// `citationsContent`, …): kept whole.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `image`: `format` (`png`, `jpeg`, `gif`, `webp`) and `source`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Image {
    pub format: String,
    pub source: ImageSource,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `image.source`: `bytes` (base64 in JSON) or `s3Location`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_location: Option<S3Location>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `s3Location`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct S3Location {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_owner: Option<String>,
}

/// `toolUse`: a call the model made.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUse {
    pub tool_use_id: String,
    pub name: String,
    #[serde(default)]
    pub input: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `toolResult`: `content` blocks (`text`, `json`, `image`, `document`) and
/// `status` (`success` or `error`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub tool_use_id: String,
    #[serde(default)]
    pub content: Vec<ToolResultContent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `toolResult.content` block.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolResultContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `reasoningContent`: `reasoningText {text, signature}` or `redactedContent` (base64).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_text: Option<ReasoningText>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted_content: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `reasoningText`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReasoningText {
    #[serde(default)]
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// The Converse answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConverseResponse {
    pub output: Output,
    #[serde(default)]
    pub stop_reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_model_response_fields: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `output` (a union whose one member is `message`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Output {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
}

/// `usage`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
}

/// `metrics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    #[serde(default)]
    pub latency_ms: u64,
}

/// The stream's event types (the `:event-type` header of each message).
pub mod event {
    pub const MESSAGE_START: &str = "messageStart";
    pub const BLOCK_START: &str = "contentBlockStart";
    pub const BLOCK_DELTA: &str = "contentBlockDelta";
    pub const BLOCK_STOP: &str = "contentBlockStop";
    pub const MESSAGE_STOP: &str = "messageStop";
    pub const METADATA: &str = "metadata";
}

/// `contentBlockStart` payload.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStartEvent {
    #[serde(default)]
    pub content_block_index: usize,
    #[serde(default)]
    pub start: BlockStartPayload,
}

/// `contentBlockStart.start`: `toolUse {toolUseId, name}` (text and
/// reasoning blocks start with their first delta).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStartPayload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use: Option<ToolUseStart>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `start.toolUse`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseStart {
    pub tool_use_id: String,
    pub name: String,
}

/// `contentBlockDelta` payload.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeltaEvent {
    #[serde(default)]
    pub content_block_index: usize,
    #[serde(default)]
    pub delta: Delta,
}

/// `contentBlockDelta.delta` (a union).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `{"input": "<fragment of the JSON arguments>"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use: Option<ToolUseDelta>,
    /// `{"text"}`, `{"signature"}` or `{"redactedContent"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<ReasoningDelta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `delta.toolUse`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolUseDelta {
    #[serde(default)]
    pub input: String,
}

/// `delta.reasoningContent`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted_content: Option<String>,
}

/// `contentBlockStop` payload.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStopEvent {
    #[serde(default)]
    pub content_block_index: usize,
}

/// `messageStop` payload.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStopEvent {
    #[serde(default)]
    pub stop_reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_model_response_fields: Option<Value>,
}

/// `metadata` payload: the usage and metrics.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MetadataEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
}
