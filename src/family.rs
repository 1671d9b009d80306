//! The protocol families (client protocols and upstream wire protocols share these names).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A wire protocol family: A = OpenAI chat-completions, B = Anthropic Messages, C = Gemini
/// generateContent, D = OpenAI Responses, E = Bedrock Converse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// OpenAI chat-completions (`/v1`).
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages (`/anthropic/v1`).
    Anthropic,
    /// Gemini generateContent (`/google/v1beta`).
    Gemini,
    /// The OpenAI Responses API (`/v1/responses`, beside chat-completions).
    Responses,
    /// Amazon Bedrock Converse / ConverseStream (`/bedrock`; upstream
    /// protocol `bedrock`). No model listings of its own.
    Bedrock,
}

impl Family {
    /// All families, in the order of the README's protocol table.
    pub const ALL: [Family; 5] = [
        Family::OpenAi,
        Family::Anthropic,
        Family::Gemini,
        Family::Responses,
        Family::Bedrock,
    ];

    /// The families with their own model listings (the Responses API shares OpenAI's `/v1/models`).
    pub const LISTED: [Family; 3] = [Family::OpenAi, Family::Anthropic, Family::Gemini];

    /// The name used in config files and model objects.
    pub fn name(self) -> &'static str {
        match self {
            Family::OpenAi => "openai",
            Family::Anthropic => "anthropic",
            Family::Gemini => "gemini",
            Family::Responses => "responses",
            Family::Bedrock => "bedrock",
        }
    }

    /// Parses a config name (`openai`, `anthropic`, `gemini`, `responses`, `bedrock`).
    pub fn from_name(s: &str) -> Option<Family> {
        match s {
            "openai" => Some(Family::OpenAi),
            "anthropic" => Some(Family::Anthropic),
            "gemini" => Some(Family::Gemini),
            "responses" => Some(Family::Responses),
            "bedrock" => Some(Family::Bedrock),
            _ => None,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
