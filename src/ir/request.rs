//! The canonical chat request.

use super::content::{Block, Opaque, TextBlock};
use super::extra::Extra;
use crate::family::Family;
use serde_json::Value;
use std::collections::HashMap;

/// A chat request, independent of the protocol it arrived in.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The model as the client named it (body `model`, or the Gemini path).
    pub model: String,
    /// System instructions, in order (OpenAI `system`/`developer` messages,
    /// Anthropic `system`, Gemini `systemInstruction`).
    pub system: Vec<SystemPrompt>,
    /// The conversation. Roles need not alternate (encoders merge where the target requires it).
    pub messages: Vec<Message>,
    /// Tool definitions.
    pub tools: Vec<Tool>,
    /// How the model may use tools.
    pub tool_choice: Option<ToolChoice>,
    /// OpenAI `parallel_tool_calls` / Anthropic `!tool_choice.disable_parallel_tool_use`.
    pub parallel_tool_calls: Option<bool>,
    /// Output format constraint.
    pub response_format: Option<ResponseFormat>,
    /// Sampling and length parameters.
    pub sampling: Sampling,
    /// Reasoning / thinking settings.
    pub reasoning: Option<Reasoning>,
    /// The client asked for a stream.
    pub stream: bool,
    /// OpenAI `stream_options.include_usage` (what the OpenAI client wants to see).
    pub stream_include_usage: Option<bool>,
    /// End-user id (OpenAI `user`, Anthropic `metadata.user_id`).
    pub user: Option<String>,
    /// Unknown top-level fields (for Gemini also unknown `generationConfig` /
    /// `toolConfig` fields, nested under those keys).
    pub extra: Extra,
    /// The protocol the request was decoded from (`None` for a request built
    /// in code). Encoders use it to name dropped fields the way the client
    /// spelled them, and to keep a client's own spelling on a same-family trip.
    pub source: Option<Family>,
}

/// One system instruction.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SystemPrompt {
    /// `system` or OpenAI `developer`.
    pub role: SystemRole,
    /// The text blocks (Anthropic system blocks may carry `cache_control`).
    pub content: Vec<TextBlock>,
    /// Index in [`ChatRequest::messages`] before which it appeared (0 for
    /// Anthropic and Gemini, which only have a top-level system prompt).
    pub position: usize,
    /// Unknown fields of the wire object (OpenAI message `name`, Gemini `role`, …).
    pub extra: Extra,
}

/// The flavour of a system instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SystemRole {
    /// `system`.
    #[default]
    System,
    /// OpenAI `developer` (a system message for reasoning models).
    Developer,
}

/// A conversation turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// Ordered content blocks.
    pub content: Vec<Block>,
    /// Unknown fields of the wire message (OpenAI `name`, …).
    pub extra: Extra,
}

impl Message {
    /// A message with blocks and no extra fields.
    pub fn new(role: Role, content: Vec<Block>) -> Self {
        Message {
            role,
            content,
            extra: Extra::default(),
        }
    }
}

/// The two conversational roles (Gemini `model` is [`Role::Assistant`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user (also carries tool results).
    User,
    /// The model.
    Assistant,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub enum Tool {
    /// A client-side function.
    Function(FunctionTool),
    /// A provider tool (Anthropic server tools, Gemini `googleSearch`, …): same family only.
    Opaque(Opaque),
}

/// A function tool.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FunctionTool {
    /// The function name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// JSON Schema of the arguments (Gemini `parameters` are normalised to JSON Schema).
    pub parameters: Option<Value>,
    /// OpenAI `function.strict`.
    pub strict: Option<bool>,
    /// Anthropic `cache_control`.
    pub cache_control: Option<Value>,
    /// Unknown fields of the wire object.
    pub extra: Extra,
}

/// How the model may use tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call (OpenAI `required`, Anthropic `any`, Gemini `ANY`).
    Required,
    /// This function must be called.
    Tool(String),
    /// Only these functions may be called (OpenAI `allowed_tools`, Gemini
    /// `allowedFunctionNames`); `required` means a call is mandatory.
    Allowed {
        /// A call is mandatory (`required` / `ANY`) rather than optional (`auto` / `AUTO`).
        required: bool,
        /// The allowed function names.
        names: Vec<String>,
    },
}

/// The requested output format.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// Free text (the default, said explicitly).
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema.
    JsonSchema(JsonSchemaFormat),
}

/// A JSON Schema output constraint.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonSchemaFormat {
    /// OpenAI `json_schema.name` (Gemini has none).
    pub name: Option<String>,
    /// OpenAI `json_schema.description`.
    pub description: Option<String>,
    /// The JSON Schema.
    pub schema: Value,
    /// OpenAI `json_schema.strict`.
    pub strict: Option<bool>,
}

/// Sampling and length parameters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sampling {
    /// Temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Top-k sampling (Anthropic, Gemini).
    pub top_k: Option<u64>,
    /// Maximum output tokens.
    pub max_tokens: Option<u64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Random seed (OpenAI, Gemini).
    pub seed: Option<i64>,
    /// Presence penalty (OpenAI, Gemini).
    pub presence_penalty: Option<f64>,
    /// Frequency penalty (OpenAI, Gemini).
    pub frequency_penalty: Option<f64>,
    /// Number of candidates (OpenAI `n`, Gemini `candidateCount`).
    pub candidate_count: Option<u64>,
}

/// Reasoning / thinking settings: one notion for the three protocols.
///
/// - `enabled`: `Some(false)` is "no reasoning" (Anthropic `thinking.type:
///   disabled`, Gemini `thinkingBudget: 0`, OpenAI `reasoning_effort: none`);
///   `Some(true)` is "reason" (Anthropic `enabled` / `adaptive`, a Gemini
///   budget other than 0 or a `thinkingLevel`, any other OpenAI effort);
///   `None` when the client only set an effort for the whole answer
///   (Anthropic `output_config.effort` without `thinking`).
/// - `budget_tokens`: a fixed token budget (Anthropic `budget_tokens`, a
///   positive Gemini `thinkingBudget`). `None` with `enabled: Some(true)`
///   means the model decides how much (Anthropic `adaptive`, Gemini `-1`).
/// - `effort`: a level, lowercase, in the union of the three vocabularies
///   (see [`EFFORT_LEVELS`]): OpenAI `reasoning_effort`, Anthropic
///   `output_config.effort`, Gemini `thinkingLevel`.
///
/// Encoders translate between budgets and levels with [`effort_to_budget`]
/// and [`budget_to_effort`] when the target only takes one of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reasoning {
    /// Reasoning explicitly on or off.
    pub enabled: Option<bool>,
    /// Token budget (Anthropic `budget_tokens`, Gemini `thinkingBudget` > 0).
    pub budget_tokens: Option<i64>,
    /// Effort level, lowercase (`none`, `minimal`, `low`, `medium`, `high`, `xhigh`, `max`).
    pub effort: Option<String>,
    /// Return the reasoning text (Gemini `includeThoughts`; implied by Anthropic thinking).
    pub include_thoughts: Option<bool>,
    /// Unknown fields of the wire object.
    pub extra: Extra,
}

/// Every effort level the three protocols name, weakest first.
pub const EFFORT_LEVELS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// The thinking budget a named effort level stands for when a target only
/// takes budgets (Anthropic `enabled`, Gemini 2.5 `thinkingBudget`).
/// `none` is 0 (off); unknown levels have no budget.
pub fn effort_to_budget(effort: &str) -> Option<i64> {
    match effort {
        "none" => Some(0),
        "minimal" => Some(1024),
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" => Some(16384),
        "xhigh" => Some(24576),
        "max" => Some(32768),
        _ => None,
    }
}

/// The effort level a token budget stands for when a target only takes
/// levels (OpenAI `reasoning_effort`). The bounds sit between the budgets of
/// [`effort_to_budget`], so `low`, `medium` and `high` survive a trip through
/// a budget; larger budgets stay `high` (`xhigh` is refused by older models).
/// A negative budget (Gemini's "dynamic") is `medium`, the usual default.
pub fn budget_to_effort(budget: i64) -> &'static str {
    match budget {
        i64::MIN..=-1 => "medium",
        0 => "none",
        1..=4096 => "low",
        4097..=12288 => "medium",
        _ => "high",
    }
}

/// An effort level in the part of OpenAI's `reasoning_effort` vocabulary
/// that every OpenAI reasoning model takes (`low`, `medium`, `high`), plus
/// `none`: `minimal` is `low` (gpt-5.1 refuses `minimal`), `xhigh` and
/// Anthropic `max` are `high` (only the newest models take `xhigh`).
pub fn openai_effort(effort: &str) -> Option<&'static str> {
    match effort {
        "none" => Some("none"),
        "minimal" | "low" => Some("low"),
        "medium" => Some("medium"),
        "high" | "xhigh" | "max" => Some("high"),
        _ => None,
    }
}

/// An effort level in Anthropic's `output_config.effort` vocabulary
/// (`low`, `medium`, `high`, `xhigh`, `max`): `minimal` is `low`; `none` has
/// no level (it turns thinking off instead).
pub fn anthropic_effort(effort: &str) -> Option<&'static str> {
    match effort {
        "minimal" | "low" => Some("low"),
        "medium" => Some("medium"),
        "high" => Some("high"),
        "xhigh" => Some("xhigh"),
        "max" => Some("max"),
        _ => None,
    }
}

/// An effort level as a Gemini `thinkingLevel` (`MINIMAL`, `LOW`, `MEDIUM`,
/// `HIGH`): `xhigh` and `max` are `HIGH`; `none` has no level.
pub fn gemini_level(effort: &str) -> Option<&'static str> {
    match effort {
        "minimal" => Some("MINIMAL"),
        "low" => Some("LOW"),
        "medium" => Some("MEDIUM"),
        "high" | "xhigh" | "max" => Some("HIGH"),
        _ => None,
    }
}

impl Reasoning {
    /// True when reasoning is explicitly turned off.
    pub fn is_off(&self) -> bool {
        self.enabled == Some(false)
            || self.budget_tokens == Some(0)
            || self.effort.as_deref() == Some("none")
    }

    /// True when reasoning is explicitly turned on (by a switch, a budget or a level).
    pub fn is_on(&self) -> bool {
        !self.is_off() && (self.enabled == Some(true) || self.budget_tokens.is_some_and(|b| b != 0))
    }

    /// The fixed budget the client gave (positive), if any.
    pub fn fixed_budget(&self) -> Option<i64> {
        self.budget_tokens.filter(|b| *b > 0)
    }
}

impl ChatRequest {
    /// Maps each tool call id in the conversation to its function name.
    pub fn tool_call_names(&self) -> HashMap<String, String> {
        let mut names = HashMap::new();
        for message in &self.messages {
            for block in &message.content {
                if let Block::ToolCall(call) = block {
                    names.insert(call.id.clone(), call.name.clone());
                }
            }
        }
        names
    }

    /// Fills [`crate::ir::ToolResult::name`] from the earlier tool call with the same id,
    /// where the wire did not say it. Returns the ids of results whose call was not found.
    pub fn resolve_tool_result_names(&mut self) -> Vec<String> {
        let names = self.tool_call_names();
        let mut missing = Vec::new();
        for message in &mut self.messages {
            for block in &mut message.content {
                if let Block::ToolResult(result) = block {
                    if result.name.is_none() {
                        match names.get(&result.call_id) {
                            Some(name) => result.name = Some(name.clone()),
                            None => missing.push(result.call_id.clone()),
                        }
                    }
                }
            }
        }
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ToolCall, ToolResult};
    use serde_json::json;

    #[test]
    fn resolves_tool_result_names_from_calls() {
        let mut req = ChatRequest {
            messages: vec![
                Message::new(
                    Role::Assistant,
                    vec![Block::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "weather".into(),
                        arguments: json!({}),
                        signature: None,
                        cache_control: None,
                        extra: Extra::default(),
                    })],
                ),
                Message::new(
                    Role::User,
                    vec![
                        Block::ToolResult(ToolResult {
                            call_id: "c1".into(),
                            name: None,
                            content: vec![],
                            is_error: None,
                            cache_control: None,
                            extra: Extra::default(),
                        }),
                        Block::ToolResult(ToolResult {
                            call_id: "zz".into(),
                            name: None,
                            content: vec![],
                            is_error: None,
                            cache_control: None,
                            extra: Extra::default(),
                        }),
                    ],
                ),
            ],
            ..ChatRequest::default()
        };
        assert_eq!(req.resolve_tool_result_names(), vec!["zz".to_string()]);
        assert!(matches!(
            &req.messages[1].content[0],
            Block::ToolResult(r) if r.name.as_deref() == Some("weather")
        ));
    }

    #[test]
    fn effort_budget_buckets() {
        assert_eq!(budget_to_effort(0), "none");
        assert_eq!(budget_to_effort(1024), "low");
        assert_eq!(budget_to_effort(4096), "low");
        assert_eq!(budget_to_effort(4097), "medium");
        assert_eq!(budget_to_effort(8192), "medium");
        assert_eq!(budget_to_effort(12289), "high");
        assert_eq!(budget_to_effort(-1), "medium");
        assert_eq!(budget_to_effort(31999), "high");
        assert_eq!(effort_to_budget("low"), Some(2048));
        assert_eq!(effort_to_budget("none"), Some(0));
        assert_eq!(effort_to_budget("bogus"), None);
    }

    #[test]
    fn levels_survive_a_trip_through_a_budget() {
        for level in ["low", "medium", "high"] {
            let budget = effort_to_budget(level).unwrap_or_default();
            assert_eq!(budget_to_effort(budget), level);
        }
        // Every named level has a budget, ordered like the levels.
        let budgets: Vec<i64> = EFFORT_LEVELS
            .iter()
            .map(|l| effort_to_budget(l).unwrap_or(-1))
            .collect();
        assert!(budgets.windows(2).all(|w| w[0] < w[1]), "{budgets:?}");
        // The strongest levels stay within what every model takes.
        assert_eq!(
            budget_to_effort(effort_to_budget("max").unwrap_or(0)),
            "high"
        );
    }

    #[test]
    fn levels_in_each_vocabulary() {
        assert_eq!(openai_effort("max"), Some("high"));
        assert_eq!(openai_effort("xhigh"), Some("high"));
        assert_eq!(openai_effort("minimal"), Some("low"));
        assert_eq!(anthropic_effort("minimal"), Some("low"));
        assert_eq!(anthropic_effort("none"), None);
        assert_eq!(anthropic_effort("xhigh"), Some("xhigh"));
        assert_eq!(gemini_level("max"), Some("HIGH"));
        assert_eq!(gemini_level("none"), None);
        for level in EFFORT_LEVELS.iter().skip(1) {
            assert!(openai_effort(level).is_some(), "{level}");
            assert!(anthropic_effort(level).is_some(), "{level}");
            assert!(gemini_level(level).is_some(), "{level}");
        }
    }

    #[test]
    fn reasoning_switches() {
        let r = |enabled, budget, effort: Option<&str>| Reasoning {
            enabled,
            budget_tokens: budget,
            effort: effort.map(str::to_string),
            ..Reasoning::default()
        };
        assert!(r(Some(false), None, None).is_off());
        assert!(r(None, Some(0), None).is_off());
        assert!(r(Some(true), None, Some("none")).is_off());
        assert!(r(Some(true), None, None).is_on());
        assert!(r(None, Some(-1), None).is_on());
        assert!(!r(None, None, Some("high")).is_on());
        assert!(!r(None, None, Some("high")).is_off());
        assert_eq!(r(None, Some(-1), None).fixed_budget(), None);
        assert_eq!(r(None, Some(5000), None).fixed_budget(), Some(5000));
    }
}
