//! The embeddings hub: what an embedding request asks and what the answer
//! holds, whichever protocol carried it (OpenAI `/v1/embeddings`, Gemini
//! `:embedContent` / `:batchEmbedContents`).

/// The inputs to embed, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbedInput {
    /// Texts (a single string is a batch of one).
    Text(Vec<String>),
    /// Token id arrays (OpenAI only; Gemini cannot carry them).
    Tokens(Vec<Vec<u64>>),
}

impl EmbedInput {
    /// How many vectors the answer must hold.
    pub fn len(&self) -> usize {
        match self {
            EmbedInput::Text(t) => t.len(),
            EmbedInput::Tokens(t) => t.len(),
        }
    }

    /// Whether there is nothing to embed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An embedding request.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedRequest {
    pub input: EmbedInput,
    /// OpenAI `dimensions`, Gemini `outputDimensionality`.
    pub dimensions: Option<u64>,
    /// Gemini `taskType` (OpenAI has none: not forwarded there).
    pub task_type: Option<String>,
    /// OpenAI `user` (Gemini has none).
    pub user: Option<String>,
    /// The client wants OpenAI's `encoding_format: "base64"` (little-endian f32).
    pub base64: bool,
}

/// An embedding answer: one vector per input, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EmbedResponse {
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens as the upstream reported them (Gemini reports none).
    pub prompt_tokens: Option<u64>,
}
