//! Mock upstream for tests: a hand-rolled HTTP/1.1 server that answers like the
//! OpenAI chat-completions, OpenAI Responses, Anthropic Messages and Gemini
//! generateContent APIs, byte for byte, with behaviour switched by
//! `[[markers]]` in the request body.
//!
//! Used in process by the integration tests (`MockUpstream::start`) and as a
//! process by the SDK suite (`cargo run --example mock_upstream -- --port 0`).
//!
//! Routes (any path prefix before them, so `/openai/v1`, `/anthropic/v1`,
//! `/gemini/v1beta`, `/responses-api/v1` or none at all all work):
//! - `POST …/chat/completions` (OpenAI; streams when `"stream": true`)
//! - `POST …/responses` (OpenAI Responses; streams its typed events when
//!   `"stream": true`), `POST …/responses/input_tokens`
//! - `POST …/messages`, `POST …/messages/count_tokens` (Anthropic)
//! - `POST …/models/{model}:generateContent`, `:streamGenerateContent[?alt=sse]`,
//!   `:countTokens` (Gemini)
//! - Amazon Bedrock's `…/model/{id}/invoke`, `/invoke-with-response-stream`,
//!   `/converse`, `/converse-stream` (SigV4 or a Bedrock API key), STS and
//!   IMDSv2: see `bedrock`
//! - Azure OpenAI under `/azure/…`, Vertex AI under `/v1/projects/…`
//!   (`publishers/google/models/{m}:generateContent`, `publishers/anthropic/models/{m}:rawPredict`
//!   and their streams), the Entra ID, Google OAuth2 and metadata-server
//!   token endpoints: see `cloud`, which checks their credentials
//! - `GET /__mock/requests`, `POST /__mock/reset` (recorded requests, for
//!   out-of-process users)
//!
//! Faults of one upstream: a path segment `~MARKER,MARKER,...` in the base
//! URL (e.g. `http://127.0.0.1:PORT/~status:429,retry-after:7/openai/v1`) applies
//! those markers (written without brackets) to every request on that path, so
//! one mock serves a healthy and a failing upstream side by side. `every:N`
//! among them applies the others to every Nth request on the path only
//! (`~every:2,status:503`: half of them fail); `once` applies them to the
//! path's first request only (`~once,cut`). `prompt-cache` among them makes
//! the upstream cache prompts as a provider does: a request whose turns (its
//! system prompt, then each message or item) begin as an earlier request's on
//! that path did reads them from the cache (`[[cached:N]]`, N their JSON
//! bytes / 4, for the longest such run).
//! - anything else: 404 in the error shape of the protocol the path looks like.
//!
//! Reply text: `"Hello from {protocol} mock: " + last user text + " ✓ héllo 🌍"`
//! (see [`expected_reply`]); streamed as one delta per word. Usage: prompt
//! tokens = request body bytes / 4, completion tokens = number of deltas.
//!
//! Markers (anywhere in the request body text):
//! - `[[status:N]]`: answer status N with the provider's error body
//!   (429 adds `retry-after: 1`).
//! - `[[retry-after:V]]`: with `[[status:N]]`, the `retry-after` header's value
//!   (any status; replaces 429's default of 1).
//! - `[[slow:MS]]`: wait MS milliseconds before sending the response head.
//! - `[[hold:MS]]`: send the head, then wait MS milliseconds before the first
//!   frame (non-stream: before the body): a stall before the first token.
//! - `[[stall:MS]]`: send the head and the first frame (non-stream: the head),
//!   then wait MS milliseconds before the rest. A stream whose reader closes the
//!   connection during the wait ends there and is counted
//!   ([`MockUpstream::aborted_streams`]).
//! - `[[stall-mid:MS]]`: stream: wait MS milliseconds after half of the
//!   frames (a stall mid-answer).
//! - `[[cut]]`: stream: close the connection after half of the frames, without
//!   the final chunk; non-stream: close after half of the body.
//! - `[[cut-end]]`: stream: close the connection before the last frame (OpenAI
//!   `[DONE]`, Anthropic `message_stop`), without the final chunk.
//! - `[[malformed]]`: stream: a frame whose data is not JSON, mid-stream;
//!   non-stream: a truncated JSON body with status 200.
//! - `[[no-terminator]]`: stream: the last frame is left out (OpenAI `[DONE]`,
//!   Anthropic `message_stop`, Responses `response.completed`, Gemini the
//!   chunk with the finish reason), then a clean end of the HTTP body.
//! - `[[context-overflow]]`: a 400 saying the prompt is longer than the
//!   model's context, in the provider's own words (OpenAI and Responses
//!   `code: context_length_exceeded`, Anthropic "prompt is too long", Gemini
//!   "The input token count ... exceeds the maximum number of tokens").
//! - `[[no-prefill]]`: a request that ends with an assistant prefill gets a
//!   400 (a model that cannot continue one).
//! - A request that ends with an assistant turn (a prefill: OpenAI and
//!   Anthropic `assistant`, Gemini `model`, Responses an assistant message)
//!   is a continuation: the reply is the rest of the answer after that text
//!   (or a reply saying it is not its start), and the body's `[[cut]]`,
//!   `[[stream-error]]`, `[[stall:…]]`, `[[stall-mid:…]]` and `[[hold:…]]`
//!   do not apply to it (a path's do).
//! - `[[bad-crc]]`: Bedrock's event stream: the middle frame's CRC is wrong.
//! - `[[stream-error]]`: stream: the provider's in-stream error event after half
//!   of the frames, then a clean end of the HTTP body (Responses: an `error`
//!   event, then `response.failed`).
//! - `[[tool]]`: a call to the first declared tool (fallback `get_weather`) with
//!   arguments [`TOOL_ARGS`]; `[[text+tool]]`: text, then the call.
//! - `[[agent-tool:NAME:JSON]]`: drives an agent's tool loop. When the
//!   conversation's last turn (system messages aside) carries tool results,
//!   the reply is text quoting them ([`agent_tool_reply`]); otherwise it is a
//!   call to the tool NAME with the arguments JSON (an object, written plainly
//!   in the prompt; it must not contain `]]`). A request that declares no
//!   tools (an agent's side request: a title, a summary) gets the plain reply.
//! - `[[thinking]]`: Anthropic thinking block with signature, Gemini
//!   `thought: true` part, Responses `reasoning` item with a summary and
//!   [`REASONING_ENCRYPTED_CONTENT`], before the text (OpenAI chat: ignored).
//! - `[[max-tokens]]`: the answer stops for its token limit: OpenAI
//!   `finish_reason: "length"`, Anthropic `stop_reason: "max_tokens"`, Gemini
//!   `finishReason: "MAX_TOKENS"`, Responses `status: "incomplete"` with
//!   `incomplete_details.reason: "max_output_tokens"` (`response.incomplete`).
//! - `[[cached:N]]`: N of the prompt tokens were read from the cache (OpenAI
//!   `prompt_tokens_details`, Anthropic `cache_read_input_tokens`, Gemini
//!   `cachedContentTokenCount`, Responses `input_tokens_details`).
//! - `[[cache-write:N]]`: N of the prompt tokens were written to the cache,
//!   `[[cache-write-1h:M]]` M of them for an hour (Anthropic
//!   `cache_creation_input_tokens` and `cache_creation`'s
//!   `ephemeral_5m/1h_input_tokens`, with `input_tokens` the rest; OpenAI
//!   `prompt_tokens_details.cache_write_tokens` and Responses
//!   `input_tokens_details.cache_write_tokens`, as OpenRouter reports them;
//!   Gemini reports no writes).
//! - `[[prompt-tokens:N]]`: the usage reports N prompt tokens (count routes
//!   too) instead of the body's bytes / 4.
//! - `[[deepseek-cache]]`: OpenAI chat usage in DeepSeek's shape
//!   (`prompt_cache_hit_tokens` / `prompt_cache_miss_tokens` for the
//!   `[[cached:N]]` split, no `prompt_tokens_details`).
//! - `[[echo-request]]`: the reply text is the whole request body.
//! - `[[json-answer]]`: the reply text is a JSON value conforming to the schema
//!   the request enforces in its protocol's form (OpenAI
//!   `response_format.json_schema`, Responses `text.format`, Anthropic
//!   `output_config.format`, Gemini `responseJsonSchema` / `responseSchema`);
//!   without one, a reply saying so. With `[[tool]]`, the call's arguments
//!   conform to the called tool's schema instead. Anthropic requests are checked as
//!   Anthropic does: `output_config.format` and `strict: true` tools whose
//!   schema leaves an object open (`additionalProperties` not `false`) or
//!   uses a keyword its structured outputs refuse (`minimum`, `pattern`,
//!   `oneOf`, ...) get a 400 naming it.
//! - `[[chunk:N]]`: stream TCP writes of 1..=N bytes (default 24; 0 = one
//!   write per frame). `[[crlf]]`: CRLF line endings in OpenAI/Anthropic
//!   streams. `[[sse-comments]]`: an SSE comment line before every frame.
//!
//! Files: `server` (connections and routing), `answer` (markers and the
//! answer), `json`, `reply` (writing), `wire` (HTTP/1.1 framing, shared with
//! the test client), one per protocol: `openai`, `responses`,
//! `anthropic`, `gemini`; `structured` (enforced schemas: Anthropic's check,
//! conforming values); `cloud` (Azure, Vertex, their token endpoints);
//! `bedrock` (Bedrock, SigV4, STS, IMDS, AWS's event stream). This file holds the public API (`MockUpstream`,
//! `Protocol`, `RecordedRequest`, `expected_reply`, the constants); the files
//! import `super::*`, the protocol files never each other. Imports serde,
//! serde_json and tokio; nothing of the gateway.

// The shared server, what a request asks for, ordered JSON and the reply
// writer, then one file per upstream protocol. `json` first: its `obj!`
// macro is used by the files after it.
#[macro_use]
mod json;
mod answer;
mod anthropic;
mod bedrock;
mod cloud;
mod embed;
mod gemini;
mod openai;
mod reply;
mod rerank;
mod responses;
mod server;
mod structured;
pub mod wire;

pub use answer::split_deltas;
use answer::*;
use anthropic::*;
use bedrock::{
    as_chunk_stream, bedrock_call, bedrock_embed, bedrock_error, converse_reply, exception_for,
    is_embedding_model, AwsState,
};
// For the tests of the Converse wire (`bedrock` upstreams).
#[allow(unused_imports)]
pub use bedrock::{
    converse_reply_text, event_frame, exception_frame, AWS_STS_PATH, BEDROCK_ANTHROPIC_VERSION,
    CONTAINER_CREDENTIALS_PATH, IMDS_ROLE,
};
use cloud::{cloud_reply, CloudState};
pub use cloud::{
    impersonation_path, GOOGLE_TOKEN_PATH, METADATA_TOKEN_PATH, STS_TOKEN_PATH, SUBJECT_TOKEN_PATH,
    VERTEX_ANTHROPIC_VERSION,
};
use embed::{gemini_embed, openai_embeddings, vertex_predict};
pub use embed::{mock_embed_tokens, mock_vector, DEFAULT_DIMENSIONS};
use gemini::*;
use json::*;
use openai::*;
use reply::*;
pub use rerank::mock_rerank_score;
use rerank::rerank_reply;
use responses::*;
use server::*;
use structured::*;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use wire::{find_header, has_token, BodyReader, Framing, WireReader};

/// Largest request body accepted (bigger ones get a 413).
pub const MAX_BODY_BYTES: usize = 64 << 20;
const MAX_HEAD_BYTES: usize = 64 << 10;
/// Fixed multi-byte tail of every generated reply text.
pub const REPLY_SUFFIX: &str = " ✓ héllo 🌍";
/// Longest prefix of the user's text quoted in the reply (cut on a char boundary).
pub const QUOTE_LIMIT: usize = 64 << 10;
/// Arguments of every mock tool call, as the JSON string OpenAI carries.
pub const TOOL_ARGS: &str = r#"{"location":"Paris","unit":"c"}"#;
/// How the tool arguments are split in OpenAI and Anthropic streams.
pub const TOOL_ARG_FRAGMENTS: [&str; 3] = [r#"{"location":"#, r#""Paris","#, r#""unit":"c"}"#];
/// Prefix of the `[[agent-tool:…]]` reply text after a tool result (see
/// [`agent_tool_reply`]).
pub const AGENT_TOOL_RESULT_PREFIX: &str = "tool result: ";
/// Tool name used when the request declares no tool.
pub const FALLBACK_TOOL: &str = "get_weather";
/// Text of the `[[thinking]]` block / thought part.
pub const THINKING_TEXT: &str = "Thinking it over ✓ step by step.";
/// Signature of the `[[thinking]]` block (Anthropic).
pub const THINKING_SIGNATURE: &str = "bW9jay10aGlua2luZy1zaWduYXR1cmU=";
/// `encrypted_content` of the `[[thinking]]` reasoning item (Responses).
pub const REASONING_ENCRYPTED_CONTENT: &str =
    "gAAAAABtb2NrLXJlYXNvbmluZy1lbmNyeXB0ZWQtY29udGVudA==";
const DEFAULT_MAX_PIECE: usize = 24;
/// Stream bytes written in small random pieces; the rest goes in large writes.
const SMALL_WRITE_BUDGET: usize = 64 << 10;
const LARGE_WRITE: usize = 64 << 10;
const MAX_DELTAS: usize = 48;

/// The four upstream wire protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    OpenAi,
    Anthropic,
    Gemini,
    /// The OpenAI Responses API (`{base_url}/responses`).
    Responses,
}

impl Protocol {
    pub const ALL: [Protocol; 4] = [
        Protocol::OpenAi,
        Protocol::Anthropic,
        Protocol::Gemini,
        Protocol::Responses,
    ];

    /// The protocol's name as used in config: `openai`, `anthropic`, `gemini`,
    /// `responses`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::OpenAi => "openai",
            Protocol::Anthropic => "anthropic",
            Protocol::Gemini => "gemini",
            Protocol::Responses => "responses",
        }
    }

    /// Parses `openai`, `anthropic`, `gemini` (or `google`), `responses`.
    pub fn from_name(name: &str) -> Option<Protocol> {
        match name.to_ascii_lowercase().as_str() {
            "openai" => Some(Protocol::OpenAi),
            "anthropic" => Some(Protocol::Anthropic),
            "gemini" | "google" => Some(Protocol::Gemini),
            "responses" => Some(Protocol::Responses),
            _ => None,
        }
    }

    /// Path prefix of [`MockUpstream::base_url`]; the gateway appends the
    /// protocol's own route (`/chat/completions`, `/messages`,
    /// `/models/{model}:generateContent`, `/responses`).
    pub fn base_path(self) -> &'static str {
        match self {
            Protocol::OpenAi => "/openai/v1",
            Protocol::Anthropic => "/anthropic/v1",
            Protocol::Gemini => "/gemini/v1beta",
            Protocol::Responses => "/responses-api/v1",
        }
    }
}

/// The reply text the mock generates for `user_text` (the last user message's
/// text) when no `[[echo-request]]` marker is present.
pub fn expected_reply(protocol: Protocol, user_text: &str) -> String {
    let mut end = user_text.len().min(QUOTE_LIMIT);
    while !user_text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "Hello from {} mock: {}{}",
        protocol.name(),
        &user_text[..end],
        REPLY_SUFFIX
    )
}

/// The reply text of an `[[agent-tool:…]]` request whose last turn carries
/// tool results (`results`: their text, joined by newlines).
pub fn agent_tool_reply(protocol: Protocol, results: &str) -> String {
    expected_reply(protocol, &format!("{AGENT_TOOL_RESULT_PREFIX}{results}"))
}

/// One request as the mock received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    /// Request target: path with query string.
    pub path: String,
    /// Header names lowercased, values trimmed, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The decoded body (chunked transfer coding removed).
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// First value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The path without the query string.
    pub fn path_only(&self) -> &str {
        split_target(&self.path).0
    }

    /// The query string (after `?`), if any.
    pub fn query(&self) -> Option<&str> {
        split_target(&self.path).1
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    fn to_json(&self) -> Value {
        let mut headers = serde_json::Map::new();
        for (name, value) in &self.headers {
            match headers.get_mut(name) {
                Some(Value::String(joined)) => {
                    joined.push_str(", ");
                    joined.push_str(value);
                }
                _ => {
                    headers.insert(name.clone(), Value::String(value.clone()));
                }
            }
        }
        json!({
            "method": self.method,
            "path": self.path,
            "headers": headers,
            "header_list": self.headers,
            "body": self.body_text(),
            "body_len": self.body.len(),
        })
    }
}

#[derive(Default)]
struct State {
    requests: Mutex<Vec<RecordedRequest>>,
    connections: AtomicUsize,
    seq: AtomicU64,
    verbose: AtomicBool,
    /// Streams whose reader went away while they were stalled.
    aborted: AtomicUsize,
    /// Requests seen per faulty path segment (for `every:N`).
    fault_counts: Mutex<std::collections::HashMap<String, u64>>,
    /// `~prompt-cache`: the turns of each earlier request, per path.
    prompt_cache: Mutex<std::collections::HashMap<String, Vec<Vec<String>>>>,
    /// The clouds' credentials and issued tokens (`cloud`).
    cloud: Mutex<CloudState>,
    /// AWS's keys, Bedrock keys and issued temporary keys (`bedrock`).
    aws: Mutex<AwsState>,
    /// The key Cohere calls must carry (`rerank`).
    cohere_key: Mutex<Option<String>>,
}

impl State {
    fn requests(&self) -> MutexGuard<'_, Vec<RecordedRequest>> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running mock upstream. Dropping it stops the server and its connections.
pub struct MockUpstream {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl MockUpstream {
    /// Starts on an ephemeral port of 127.0.0.1.
    #[expect(
        clippy::expect_used,
        reason = "test helper: failing to bind fails the test"
    )]
    pub async fn start() -> MockUpstream {
        MockUpstream::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("mock upstream: bind 127.0.0.1:0")
    }

    /// Starts on `addr` (port 0 for an ephemeral one).
    pub async fn bind(addr: SocketAddr) -> io::Result<MockUpstream> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&state)));
        Ok(MockUpstream { addr, state, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT/openai/v1`, `…/anthropic/v1`, `…/gemini/v1beta`
    /// or `…/responses-api/v1`.
    pub fn base_url(&self, protocol: Protocol) -> String {
        format!("http://{}{}", self.addr, protocol.base_path())
    }

    /// Requests received so far (control routes under `/__mock/` excluded).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests().clone()
    }

    pub fn last_request(&self) -> Option<RecordedRequest> {
        self.state.requests().last().cloned()
    }

    /// Forgets the recorded requests.
    pub fn clear(&self) {
        self.state.requests().clear();
    }

    /// TCP connections accepted so far (to check keep-alive reuse).
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Streams whose reader (the gateway) closed the connection during a
    /// `[[stall:MS]]` wait, noticed as soon as it happened.
    pub fn aborted_streams(&self) -> usize {
        self.state.aborted.load(Ordering::SeqCst)
    }

    /// Logs one line per request on stderr.
    pub fn set_verbose(&self, on: bool) {
        self.state.verbose.store(on, Ordering::Relaxed);
    }
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}
