//! Gemini generateContent wire types (request and non-streaming response).
//!
//! Our own serde types. Field names are camelCase as Google's SDKs send them;
//! the snake_case spellings that Google's REST endpoint also accepts (and its
//! curl examples use) are read as aliases. Every object keeps its unknown
//! fields in a flattened `extra` map, and absent optionals are not serialized.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST models/{model}:generateContent` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentRequest {
    /// The conversation.
    #[serde(default)]
    pub contents: Vec<Content>,
    /// System instruction.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "system_instruction"
    )]
    pub system_instruction: Option<Content>,
    /// Tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// Tool configuration.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "tool_config"
    )]
    pub tool_config: Option<ToolConfig>,
    /// Generation parameters.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "generation_config"
    )]
    pub generation_config: Option<GenerationConfig>,
    /// Unknown fields (`safetySettings`, `cachedContent`, `labels`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A turn (`role` is `user` or `model`) or the system instruction.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    /// `user` or `model` (optional in requests: defaults to `user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The parts.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A part (flat: exactly one data field is set, plus optional `thought` marks).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The text is a thought (summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    /// Opaque signature of the model's reasoning, on any part.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "thought_signature"
    )]
    pub thought_signature: Option<String>,
    /// Inline bytes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "inline_data"
    )]
    pub inline_data: Option<Blob>,
    /// Bytes by URI.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "file_data")]
    pub file_data: Option<FileData>,
    /// A function call.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "function_call"
    )]
    pub function_call: Option<FunctionCall>,
    /// A function result.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "function_response"
    )]
    pub function_response: Option<FunctionResponse>,
    /// Unknown fields (`executableCode`, `codeExecutionResult`, `videoMetadata`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `inlineData`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Blob {
    /// Media type.
    #[serde(default, alias = "mime_type")]
    pub mime_type: String,
    /// Base64 bytes.
    #[serde(default)]
    pub data: String,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `fileData`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileData {
    /// Media type.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "mime_type")]
    pub mime_type: Option<String>,
    /// The URI.
    #[serde(default, alias = "file_uri")]
    pub file_uri: String,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `functionCall`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCall {
    /// Call id (newer models set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Function name.
    #[serde(default)]
    pub name: String,
    /// Arguments object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `functionResponse`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionResponse {
    /// The id of the call answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Function name (required by Gemini).
    #[serde(default)]
    pub name: String,
    /// The result object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// Unknown fields (`parts`, `willContinue`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `tools`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Function declarations.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "function_declarations"
    )]
    pub function_declarations: Option<Vec<FunctionDeclaration>>,
    /// Other tools (`googleSearch`, `codeExecution`, `urlContext`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `functionDeclarations[]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionDeclaration {
    /// Function name.
    #[serde(default)]
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Parameters in Gemini's OpenAPI-subset schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Unknown fields (`parametersJsonSchema` — the decoder renames
    /// google-genai's `parameters_json_schema` to it —, `response`,
    /// `responseJsonSchema`, `behavior`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `toolConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolConfig {
    /// Function calling mode.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "function_calling_config"
    )]
    pub function_calling_config: Option<FunctionCallingConfig>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `toolConfig.functionCallingConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionCallingConfig {
    /// `AUTO`, `ANY`, `NONE` or `VALIDATED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Functions the model may call (with `ANY` / `VALIDATED`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "allowed_function_names"
    )]
    pub allowed_function_names: Option<Vec<String>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `generationConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationConfig {
    /// Temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "top_p")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "top_k")]
    pub top_k: Option<u64>,
    /// Output limit.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "max_output_tokens"
    )]
    pub max_output_tokens: Option<u64>,
    /// Stop sequences.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "stop_sequences"
    )]
    pub stop_sequences: Option<Vec<String>>,
    /// Number of candidates.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "candidate_count"
    )]
    pub candidate_count: Option<u64>,
    /// Presence penalty.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "presence_penalty"
    )]
    pub presence_penalty: Option<f64>,
    /// Frequency penalty.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "frequency_penalty"
    )]
    pub frequency_penalty: Option<f64>,
    /// Seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Output media type (`application/json` for JSON output).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "response_mime_type"
    )]
    pub response_mime_type: Option<String>,
    /// Output schema (OpenAPI subset).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "response_schema"
    )]
    pub response_schema: Option<Value>,
    /// Thinking settings.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "thinking_config"
    )]
    pub thinking_config: Option<ThinkingConfig>,
    /// Unknown fields (`responseJsonSchema`, `responseModalities`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `generationConfig.thinkingConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingConfig {
    /// Return thought summaries.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "include_thoughts"
    )]
    pub include_thoughts: Option<bool>,
    /// Thinking token budget (0 = off, -1 = dynamic).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "thinking_budget"
    )]
    pub thinking_budget: Option<i64>,
    /// Unknown fields (`thinkingLevel`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Non-streaming `GenerateContentResponse` (also one chunk of a stream).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateContentResponse {
    /// Candidates (the gateway translates the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<Candidate>,
    /// Token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<UsageMetadata>,
    /// Model version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_version: Option<String>,
    /// Response id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Unknown fields (`promptFeedback`, `createTime`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One candidate.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// The content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// `STOP`, `MAX_TOKENS`, `SAFETY`, `RECITATION`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Unknown fields (`index`, `safetyRatings`, `citationMetadata`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `usageMetadata`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageMetadata {
    /// Prompt tokens (including cached content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_token_count: Option<u64>,
    /// Output tokens (excluding thoughts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates_token_count: Option<u64>,
    /// Total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_token_count: Option<u64>,
    /// Prompt tokens served from cached content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_content_token_count: Option<u64>,
    /// Thinking tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thoughts_token_count: Option<u64>,
    /// Unknown fields (`promptTokensDetails`, `toolUsePromptTokenCount`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
