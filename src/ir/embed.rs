//! The embeddings and rerank hub: what an embedding request asks and what
//! the answer holds, whichever protocol carried it (OpenAI `/v1/embeddings`,
//! Gemini `:embedContent` / `:batchEmbedContents`, Vertex `:predict`), and a
//! rerank request and its answer (`/v1/rerank`, Cohere v2 `/rerank`).

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

/// A request of the `embed` or `rerank` action: what an upstream call
/// encodes for its protocol (never a spliced client body).
#[derive(Debug, Clone, PartialEq)]
pub enum Retrieval {
    Embed(EmbedRequest),
    Rerank(RerankRequest),
}

/// A rerank request: the documents to order by their relevance to `query`.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankRequest {
    pub query: String,
    /// The documents' texts, in the client's order.
    pub documents: Vec<String>,
    /// How many results the answer keeps (None: all).
    pub top_n: Option<u64>,
    /// The client wants each result's document echoed (the gateway adds it).
    pub return_documents: bool,
    /// Cohere's `max_tokens_per_doc`: a longer document is truncated upstream.
    pub max_tokens_per_doc: Option<u64>,
}

/// One ranked document: its index in the request and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranked {
    pub index: usize,
    pub relevance_score: f64,
}

/// A rerank answer: the results, most relevant first, and what the
/// upstream reported billing (tokens: vLLM, Jina, Voyage; search units: Cohere).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RerankResponse {
    /// The upstream's answer id, when it sent one.
    pub id: Option<String>,
    pub results: Vec<Ranked>,
    pub tokens: Option<u64>,
    pub search_units: Option<u64>,
}
