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
//! - `GET /__mock/requests`, `POST /__mock/reset` (recorded requests, for
//!   out-of-process users)
//!
//! Faults of one upstream: a path segment `~MARKER,MARKER,...` in the base
//! URL (e.g. `http://127.0.0.1:PORT/~status:429,retry-after:7/openai/v1`) applies
//! those markers (written without brackets) to every request on that path, so
//! one mock serves a healthy and a failing upstream side by side. `every:N`
//! among them applies the others to every Nth request on the path only
//! (`~every:2,status:503`: half of them fail).
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
//! - `[[cut]]`: stream: close the connection after half of the frames, without
//!   the final chunk; non-stream: close after half of the body.
//! - `[[malformed]]`: stream: a frame whose data is not JSON, mid-stream;
//!   non-stream: a truncated JSON body with status 200.
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
//! - `[[echo-request]]`: the reply text is the whole request body.
//! - `[[chunk:N]]`: stream TCP writes of 1..=N bytes (default 24; 0 = one
//!   write per frame). `[[crlf]]`: CRLF line endings in OpenAI/Anthropic
//!   streams. `[[sse-comments]]`: an SSE comment line before every frame.

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

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    // Owning the connection tasks here means aborting this task ends them too.
    let mut connections = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                state.connections.fetch_add(1, Ordering::SeqCst);
                let state = Arc::clone(&state);
                connections.spawn(async move {
                    // A connection error only ends that connection.
                    let _ = serve_connection(&state, stream).await;
                });
            }
            // Out of descriptors and the like: back off instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
        while connections.try_join_next().is_some() {}
    }
}

async fn serve_connection(state: &State, stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut conn = WireReader::new(stream);
    loop {
        let Some(head) = conn.read_head(MAX_HEAD_BYTES).await? else {
            return Ok(());
        };
        let mut start = head.start_line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (start.next(), start.next(), start.next(), start.next())
        else {
            let reply = Reply::full(400, "text/plain", b"bad request line".to_vec());
            write_reply(conn.get_mut(), reply, false).await?;
            return Ok(());
        };
        let (method, target) = (method.to_owned(), target.to_owned());
        let connection = head.header("connection");
        let keep_alive = match version {
            "HTTP/1.1" => !has_token(connection, "close"),
            "HTTP/1.0" => has_token(connection, "keep-alive"),
            _ => false,
        };
        if has_token(head.header("expect"), "100-continue") {
            let io = conn.get_mut();
            io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
            io.flush().await?;
        }
        let body = match Framing::of_request(&head) {
            Ok(framing) => {
                BodyReader::new(framing)
                    .read_to_end(&mut conn, MAX_BODY_BYTES)
                    .await
            }
            Err(e) => Err(e),
        };
        let body = match body {
            Ok(body) => body,
            Err(e) => {
                let protocol = guess_protocol(split_target(&target).0);
                let reply = match e.kind() {
                    io::ErrorKind::FileTooLarge => {
                        error_reply(protocol, 413, "mock: request body too large")
                    }
                    io::ErrorKind::InvalidData => {
                        error_reply(protocol, 400, &format!("mock: bad request body: {e}"))
                    }
                    _ => return Err(e),
                };
                write_reply(conn.get_mut(), reply, false).await?;
                lingering_close(&mut conn).await;
                return Ok(());
            }
        };
        let request = RecordedRequest {
            method,
            path: target,
            headers: head.headers,
            body,
        };
        let reply = respond(state, request);
        let status = reply.status;
        let keep = match write_reply(conn.get_mut(), reply, keep_alive).await {
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {
                state.aborted.fetch_add(1, Ordering::SeqCst);
                return Err(e);
            }
            written => written?,
        };
        if state.verbose.load(Ordering::Relaxed) {
            eprintln!("mock_upstream: {} -> {status}", head.start_line);
        }
        if !keep {
            return Ok(());
        }
    }
}

/// Ends a connection whose request body was not read to its end. Closing a
/// socket with unread input makes the kernel send a reset, which can destroy
/// the reply still in flight; so shut the write side and drain the input.
async fn lingering_close(conn: &mut WireReader<TcpStream>) {
    if conn.get_mut().shutdown().await.is_err() {
        return;
    }
    let drain = async {
        while let Ok(piece) = conn.read_some(1 << 16).await {
            if piece.is_empty() {
                break;
            }
        }
    };
    // Whatever happens while draining, the connection is over.
    let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
}

fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    }
}

fn query_has(query: Option<&str>, pair: &str) -> bool {
    query.is_some_and(|q| q.split('&').any(|p| p == pair))
}

/// The protocol whose error shape an unknown path gets.
fn guess_protocol(path: &str) -> Protocol {
    if path.contains("/responses") {
        Protocol::Responses
    } else if path.contains("/messages") || path.contains("anthropic") {
        Protocol::Anthropic
    } else if path.contains("/models/")
        || path.contains("v1beta")
        || path.contains("gemini")
        || path.contains("google")
    {
        Protocol::Gemini
    } else {
        Protocol::OpenAi
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Route {
    Chat,
    Responses,
    ResponsesCount,
    Messages,
    AnthropicCount,
    Generate { model: String },
    StreamGenerate { model: String, sse: bool },
    GeminiCount { model: String },
    NotFound(Protocol),
}

fn classify(method: &str, target: &str) -> Route {
    let (path, query) = split_target(target);
    let path = path.trim_end_matches('/');
    if method != "POST" {
        return Route::NotFound(guess_protocol(path));
    }
    if path.ends_with("/chat/completions") {
        return Route::Chat;
    }
    if path.ends_with("/responses/input_tokens") {
        return Route::ResponsesCount;
    }
    if path.ends_with("/responses") {
        return Route::Responses;
    }
    if path.ends_with("/messages/count_tokens") {
        return Route::AnthropicCount;
    }
    if path.ends_with("/messages") {
        return Route::Messages;
    }
    if let Some(at) = path.rfind("/models/") {
        if let Some((model, action)) = path[at + "/models/".len()..].rsplit_once(':') {
            let model = model.to_owned();
            match action {
                "generateContent" => return Route::Generate { model },
                "streamGenerateContent" => {
                    let sse = query_has(query, "alt=sse");
                    return Route::StreamGenerate { model, sse };
                }
                "countTokens" => return Route::GeminiCount { model },
                _ => {}
            }
        }
    }
    Route::NotFound(guess_protocol(path))
}

fn respond(state: &State, request: RecordedRequest) -> Reply {
    let (path, _) = split_target(&request.path);
    if let Some(control) = path.strip_prefix("/__mock/") {
        return control_reply(state, &request.method, control);
    }
    let seq = state.seq.fetch_add(1, Ordering::SeqCst) + 1;
    let faults = path_faults(state, path);
    let reply = provider_reply(
        classify(&request.method, &request.path),
        &request,
        seq,
        &faults,
    );
    state.requests().push(request);
    reply
}

/// The markers of a `~…` path segment, as bracketed marker text, unless an
/// `every:N` among them skips this request.
fn path_faults(state: &State, path: &str) -> String {
    let Some(segment) = path.split('/').find_map(|s| s.strip_prefix('~')) else {
        return String::new();
    };
    let mut every = 1u64;
    let mut text = String::new();
    for m in segment.split(',').filter(|m| !m.is_empty()) {
        match m.strip_prefix("every:") {
            Some(n) => every = n.parse().unwrap_or(1).max(1),
            None => {
                text.push_str("[[");
                text.push_str(m);
                text.push_str("]]");
            }
        }
    }
    let mut counts = state
        .fault_counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let n = counts.entry(segment.to_owned()).or_default();
    *n += 1;
    if (*n).is_multiple_of(every) {
        text
    } else {
        String::new()
    }
}

fn control_reply(state: &State, method: &str, what: &str) -> Reply {
    match (method, what.trim_end_matches('/')) {
        ("GET", "requests") => {
            let list: Vec<Value> = state
                .requests()
                .iter()
                .map(RecordedRequest::to_json)
                .collect();
            Reply::json(200, &Value::Array(list))
        }
        ("POST", "reset") => {
            let cleared = std::mem::take(&mut *state.requests()).len();
            Reply::json(200, &json!({ "cleared": cleared }))
        }
        _ => Reply::json(
            404,
            &json!({ "error": format!("no mock control route {method} /__mock/{what}") }),
        ),
    }
}

fn provider_reply(route: Route, request: &RecordedRequest, seq: u64, faults: &str) -> Reply {
    let protocol = match &route {
        Route::Chat => Protocol::OpenAi,
        Route::Responses | Route::ResponsesCount => Protocol::Responses,
        Route::Messages | Route::AnthropicCount => Protocol::Anthropic,
        Route::Generate { .. } | Route::StreamGenerate { .. } | Route::GeminiCount { .. } => {
            Protocol::Gemini
        }
        Route::NotFound(protocol) => {
            let message = format!("mock: no route for {} {}", request.method, request.path);
            return error_reply(*protocol, 404, &message);
        }
    };
    let text = String::from_utf8_lossy(&request.body);
    let markers = if faults.is_empty() {
        Markers::parse(&text)
    } else {
        Markers::parse(&format!("{faults}{text}"))
    };
    let slow = Effects {
        slow: markers.slow,
        hold: markers.hold,
        ..Effects::default()
    };
    if let Some(status) = markers.status {
        let message = format!("mock: forced status {status}");
        let reply = error_reply(protocol, status, &message);
        let reply = match &markers.retry_after {
            Some(v) => reply.header("retry-after", v),
            None => reply,
        };
        return reply.with_effects(slow);
    }
    let Ok(body @ Value::Object(_)) = serde_json::from_slice::<Value>(&request.body) else {
        return error_reply(protocol, 400, "mock: request body is not a JSON object")
            .with_effects(slow);
    };
    let prompt_tokens = request.body.len() as u64 / 4;
    let count = |value: Value| Reply::json(200, &value).with_effects(slow);
    let model = match route {
        Route::AnthropicCount => return count(json!({ "input_tokens": prompt_tokens })),
        Route::GeminiCount { .. } => return count(json!({ "totalTokens": prompt_tokens })),
        Route::ResponsesCount => {
            let body = J::Obj(vec![
                ("object", J::from("response.input_tokens")),
                ("input_tokens", J::from(prompt_tokens)),
            ]);
            return Reply::json_ordered(200, "application/json", &body).with_effects(slow);
        }
        Route::Generate { ref model } | Route::StreamGenerate { ref model, .. } => model.clone(),
        _ => body["model"].as_str().unwrap_or("mock-model").to_owned(),
    };
    let mut tool = (markers.tool || markers.text_tool).then(|| first_tool_name(protocol, &body));
    let mut tool_args = tool_args();
    let mut reply_text = if markers.echo {
        text.into_owned()
    } else {
        expected_reply(protocol, &last_user_text(protocol, &body))
    };
    if let Some((name, args)) = &markers.agent_tool {
        if declares_tools(&body) {
            match last_turn_tool_results(protocol, &body) {
                Some(results) => reply_text = agent_tool_reply(protocol, &results),
                None => {
                    tool = Some(name.clone());
                    tool_args = args.clone();
                }
            }
        }
    }
    let answer = Answer {
        model,
        seq,
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        thinking: markers.thinking,
        text: (tool.is_none() || markers.text_tool).then_some(reply_text),
        tool,
        tool_args,
        prompt_tokens,
        cached_tokens: markers.cached.unwrap_or(0).min(prompt_tokens),
        max_tokens: markers.max_tokens,
        newline: if markers.crlf { "\r\n" } else { "\n" },
    };
    let streaming = body["stream"] == Value::Bool(true);
    let reply = match route {
        Route::Chat => {
            let include_usage = body["stream_options"]["include_usage"] == Value::Bool(true);
            openai_reply(&answer, streaming, include_usage, &markers)
        }
        Route::Responses => responses_reply(&answer, &body, streaming, &markers),
        Route::Messages => anthropic_reply(&answer, streaming, &markers),
        Route::Generate { .. } => gemini_reply(&answer, None, &markers),
        Route::StreamGenerate { sse, .. } => gemini_reply(&answer, Some(sse), &markers),
        _ => error_reply(protocol, 500, "mock: unreachable route"),
    };
    reply.with_effects(Effects {
        slow: markers.slow,
        hold: markers.hold,
        stall: markers.stall,
        cut: markers.cut,
        max_piece: markers.max_piece.unwrap_or(DEFAULT_MAX_PIECE),
        seed: fnv1a(&request.body),
    })
}

/// Behaviour switches found in the request body.
#[derive(Debug, Default)]
struct Markers {
    status: Option<u16>,
    retry_after: Option<String>,
    slow: Option<Duration>,
    hold: Option<Duration>,
    stall: Option<Duration>,
    cut: bool,
    malformed: bool,
    stream_error: bool,
    tool: bool,
    text_tool: bool,
    thinking: bool,
    echo: bool,
    crlf: bool,
    sse_comments: bool,
    max_piece: Option<usize>,
    /// `[[max-tokens]]`: the answer ends at its token limit.
    max_tokens: bool,
    /// `[[cached:N]]`: prompt tokens read from the cache.
    cached: Option<u64>,
    /// `[[agent-tool:NAME:JSON]]`: the tool's name and arguments.
    agent_tool: Option<(String, Value)>,
}

impl Markers {
    fn parse(text: &str) -> Markers {
        let mut markers = Markers::default();
        let mut rest = text;
        while let Some(open) = rest.find("[[") {
            rest = &rest[open + 2..];
            let Some(close) = rest.find("]]") else { break };
            let inner = &rest[..close];
            if inner.contains("[[") {
                continue;
            }
            let (name, arg) = inner.split_once(':').unwrap_or((inner, ""));
            let ms = || arg.trim().parse().ok().map(Duration::from_millis);
            match name.trim() {
                "status" => {
                    markers.status = arg.trim().parse().ok().filter(|s| (100..1000).contains(s))
                }
                "slow" => markers.slow = ms(),
                "hold" => markers.hold = ms(),
                "retry-after" => markers.retry_after = Some(arg.trim().to_owned()),
                "stall" => markers.stall = ms(),
                "cut" => markers.cut = true,
                "malformed" => markers.malformed = true,
                "stream-error" => markers.stream_error = true,
                "tool" => markers.tool = true,
                "text+tool" => markers.text_tool = true,
                "thinking" => markers.thinking = true,
                "echo-request" => markers.echo = true,
                "crlf" => markers.crlf = true,
                "sse-comments" => markers.sse_comments = true,
                "chunk" => markers.max_piece = arg.trim().parse().ok(),
                "max-tokens" => markers.max_tokens = true,
                "cached" => markers.cached = arg.trim().parse().ok(),
                "agent-tool" => markers.agent_tool = parse_agent_tool(arg),
                _ => {}
            }
            rest = &rest[close + 2..];
        }
        markers
    }

    /// Applies `[[malformed]]`, `[[stream-error]]` and `[[sse-comments]]` to a
    /// finished frame list.
    fn shape_stream(
        &self,
        mut frames: Vec<Vec<u8>>,
        bad: Vec<u8>,
        error: Vec<u8>,
        comment: Option<&str>,
    ) -> Vec<Vec<u8>> {
        let mid = (frames.len() / 2).max(1);
        if self.stream_error {
            frames.truncate(mid);
            frames.push(error);
        } else if self.malformed {
            frames.insert(mid, bad);
        }
        match comment {
            Some(comment) if self.sse_comments => frames
                .into_iter()
                .flat_map(|frame| [comment.as_bytes().to_vec(), frame])
                .collect(),
            _ => frames,
        }
    }
}

/// Everything a protocol encoder needs to answer one request.
struct Answer {
    model: String,
    seq: u64,
    created: u64,
    thinking: bool,
    /// Reply text; `None` for a tool call alone.
    text: Option<String>,
    /// Name of the tool to call.
    tool: Option<String>,
    /// Arguments of the tool call (a JSON object).
    tool_args: Value,
    prompt_tokens: u64,
    /// Of the prompt tokens, those read from the cache (`[[cached:N]]`).
    cached_tokens: u64,
    /// `[[max-tokens]]`: the answer stops for its token limit.
    max_tokens: bool,
    /// Line ending of OpenAI, Anthropic and Responses SSE frames.
    newline: &'static str,
}

impl Answer {
    fn text_deltas(&self) -> Vec<String> {
        self.text.as_deref().map(split_deltas).unwrap_or_default()
    }

    /// The tool arguments as the JSON string OpenAI carries.
    fn tool_args_json(&self) -> String {
        self.tool_args.to_string()
    }

    /// The tool arguments split for streaming: [`TOOL_ARG_FRAGMENTS`] for the
    /// default arguments, else three pieces cut on character boundaries.
    fn tool_arg_fragments(&self) -> Vec<String> {
        let args = self.tool_args_json();
        if args == TOOL_ARGS {
            return TOOL_ARG_FRAGMENTS.map(str::to_owned).to_vec();
        }
        let bounds: Vec<usize> = args.char_indices().map(|(i, _)| i).collect();
        if bounds.len() < 3 {
            return vec![args];
        }
        let (a, b) = (bounds[bounds.len() / 3], bounds[2 * bounds.len() / 3]);
        vec![
            args[..a].to_owned(),
            args[a..b].to_owned(),
            args[b..].to_owned(),
        ]
    }
}

/// `NAME:JSON` of an `[[agent-tool:NAME:JSON]]` marker. The JSON is read as
/// written, or, when the marker sits inside a JSON string of the request body,
/// after undoing that string's escapes. Unreadable arguments become `{}`.
fn parse_agent_tool(arg: &str) -> Option<(String, Value)> {
    let (name, args) = arg.split_once(':').unwrap_or((arg, "{}"));
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    let args = args.trim();
    let parsed = serde_json::from_str::<Value>(args).ok().or_else(|| {
        serde_json::from_str::<String>(&format!("\"{args}\""))
            .ok()
            .and_then(|unescaped| serde_json::from_str(&unescaped).ok())
    });
    let args = match parsed {
        Some(args @ Value::Object(_)) => args,
        _ => json!({}),
    };
    Some((name.to_owned(), args))
}

/// Whether the request declares at least one tool.
fn declares_tools(body: &Value) -> bool {
    body["tools"]
        .as_array()
        .is_some_and(|tools| !tools.is_empty())
}

/// Text of a tool result's content: a string, or the text of its text parts.
fn tool_result_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The tool results carried by the conversation's last turn (system messages
/// aside), joined by newlines; `None` when that turn carries none.
fn last_turn_tool_results(protocol: Protocol, body: &Value) -> Option<String> {
    let empty = Vec::new();
    let results: Vec<String> = match protocol {
        Protocol::OpenAi => {
            let messages = body["messages"].as_array().unwrap_or(&empty);
            let turn: Vec<&Value> = messages
                .iter()
                .rev()
                .filter(|m| m["role"] != "system" && m["role"] != "developer")
                .take_while(|m| m["role"] == "tool")
                .collect();
            turn.iter()
                .rev()
                .map(|m| tool_result_text(&m["content"]))
                .collect()
        }
        Protocol::Anthropic => {
            let last = body["messages"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .rev()
                .find(|m| m["role"] != "system")?;
            last["content"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .filter(|block| block["type"] == "tool_result")
                .map(|block| tool_result_text(&block["content"]))
                .collect()
        }
        Protocol::Responses => {
            let items = body["input"].as_array().unwrap_or(&empty);
            let turn: Vec<&Value> = items
                .iter()
                .rev()
                .filter(|i| !(is_responses_message(i) && is_system_role(&i["role"])))
                .take_while(|i| {
                    i["type"] == "function_call_output" || i["type"] == "custom_tool_call_output"
                })
                .collect();
            turn.iter()
                .rev()
                .map(|i| tool_result_text(&i["output"]))
                .collect()
        }
        Protocol::Gemini => {
            let last = body["contents"].as_array().unwrap_or(&empty).last()?;
            last["parts"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .filter_map(|p| {
                    p.get("functionResponse")
                        .or_else(|| p.get("function_response"))
                })
                .map(|call| match &call["response"] {
                    // `{"output": "…"}` and the like: the one string it holds.
                    Value::Object(fields) if fields.len() == 1 => match fields.values().next() {
                        Some(Value::String(text)) => text.clone(),
                        _ => call["response"].to_string(),
                    },
                    other => tool_result_text(other),
                })
                .collect()
        }
    };
    (!results.is_empty()).then(|| results.join("\n"))
}

/// Splits text into stream deltas: one per word (the space stays with the word
/// before it), at least 3 when the text has 3 characters, at most 48.
pub fn split_deltas(text: &str) -> Vec<String> {
    let mut pieces: Vec<&str> = text.split_inclusive(' ').collect();
    if pieces.len() < 3 {
        let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        if chars.len() >= 3 {
            let (a, b) = (chars[chars.len() / 3], chars[2 * chars.len() / 3]);
            pieces = vec![&text[..a], &text[a..b], &text[b..]];
        }
    }
    if pieces.len() > MAX_DELTAS {
        let per = pieces.len().div_ceil(MAX_DELTAS);
        return pieces.chunks(per).map(|group| group.concat()).collect();
    }
    pieces.into_iter().map(str::to_owned).collect()
}

/// Whether a Responses input item is a message (`type` may be left out).
fn is_responses_message(item: &Value) -> bool {
    item["type"].is_null() || item["type"] == "message"
}

fn is_system_role(role: &Value) -> bool {
    role == "system" || role == "developer"
}

/// Text of a Responses message's content: a string, or its text parts.
fn text_of_responses_content(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "input_text" || p["type"] == "output_text")
            .filter_map(|p| p["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

fn text_of_openai_content(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// Text of the last user message that has any text.
fn last_user_text(protocol: Protocol, body: &Value) -> String {
    let empty = Vec::new();
    let texts: Vec<String> = match protocol {
        Protocol::OpenAi | Protocol::Anthropic => body["messages"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| text_of_openai_content(&m["content"]))
            .collect(),
        Protocol::Gemini => body["contents"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter(|c| c["role"].is_null() || c["role"] == "user")
            .map(|c| {
                c["parts"]
                    .as_array()
                    .unwrap_or(&empty)
                    .iter()
                    .filter(|p| p["thought"] != true)
                    .filter_map(|p| p["text"].as_str())
                    .collect()
            })
            .collect(),
        Protocol::Responses => match &body["input"] {
            Value::String(text) => vec![text.clone()],
            Value::Array(items) => items
                .iter()
                .filter(|i| is_responses_message(i) && i["role"] == "user")
                .map(|i| text_of_responses_content(&i["content"]))
                .collect(),
            _ => Vec::new(),
        },
    };
    texts
        .into_iter()
        .rev()
        .find(|t| !t.is_empty())
        .unwrap_or_default()
}

fn first_tool_name(protocol: Protocol, body: &Value) -> String {
    if protocol == Protocol::Responses {
        // Function tools are flat; built-in tools (web_search, …) have no name.
        return body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["type"] == "function")
            .and_then(|t| t["name"].as_str())
            .unwrap_or(FALLBACK_TOOL)
            .to_owned();
    }
    let tool = &body["tools"][0];
    let name = match protocol {
        Protocol::Responses => &Value::Null,
        Protocol::OpenAi => &tool["function"]["name"],
        Protocol::Anthropic => &tool["name"],
        Protocol::Gemini => {
            let declarations = &tool["functionDeclarations"];
            if declarations.is_null() {
                &tool["function_declarations"][0]["name"]
            } else {
                &declarations[0]["name"]
            }
        }
    };
    name.as_str().unwrap_or(FALLBACK_TOOL).to_owned()
}

// ---------------------------------------------------------------------------
// Ordered JSON: serde_json's `Value` sorts keys, real APIs do not.

/// A JSON value whose objects keep their key order when serialised.
#[derive(Clone, Debug)]
enum J {
    Raw(Value),
    Obj(Vec<(&'static str, J)>),
    Arr(Vec<J>),
}

const NULL: J = J::Raw(Value::Null);

macro_rules! obj {
    ($($key:literal : $value:expr),* $(,)?) => {
        J::Obj(vec![$(($key, J::from($value))),*])
    };
}

impl J {
    fn with(mut self, key: &'static str, value: impl Into<J>) -> J {
        if let J::Obj(fields) = &mut self {
            fields.push((key, value.into()));
        }
        self
    }

    /// Appends the fields of `other` (an object) to this object.
    fn with_all(mut self, other: J) -> J {
        if let (J::Obj(fields), J::Obj(more)) = (&mut self, other) {
            fields.extend(more);
        }
        self
    }

    fn to_json_string(&self) -> String {
        // Serialising string keys and JSON values cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            J::Raw(value) => value.serialize(serializer),
            J::Obj(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            J::Arr(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
        }
    }
}

impl From<Value> for J {
    fn from(value: Value) -> J {
        J::Raw(value)
    }
}

impl From<&str> for J {
    fn from(value: &str) -> J {
        J::Raw(Value::from(value))
    }
}

impl From<&String> for J {
    fn from(value: &String) -> J {
        J::Raw(Value::from(value.as_str()))
    }
}

impl From<String> for J {
    fn from(value: String) -> J {
        J::Raw(Value::from(value))
    }
}

impl From<bool> for J {
    fn from(value: bool) -> J {
        J::Raw(Value::from(value))
    }
}

impl From<u64> for J {
    fn from(value: u64) -> J {
        J::Raw(Value::from(value))
    }
}

impl From<Vec<J>> for J {
    fn from(items: Vec<J>) -> J {
        J::Arr(items)
    }
}

impl<T: Into<J>> From<Option<T>> for J {
    fn from(value: Option<T>) -> J {
        value.map_or(NULL, Into::into)
    }
}

fn tool_args() -> Value {
    json!({ "location": "Paris", "unit": "c" })
}

fn sse(event: Option<&str>, data: &str, newline: &str) -> Vec<u8> {
    let mut frame = String::new();
    if let Some(event) = event {
        frame.push_str("event: ");
        frame.push_str(event);
        frame.push_str(newline);
    }
    frame.push_str("data: ");
    frame.push_str(data);
    frame.push_str(newline);
    frame.push_str(newline);
    frame.into_bytes()
}

// ---------------------------------------------------------------------------
// OpenAI chat completions

fn openai_reply(a: &Answer, stream: bool, include_usage: bool, markers: &Markers) -> Reply {
    let id = format!("chatcmpl-mock{:08}", a.seq);
    let call_id = format!("call_mock{:08}", a.seq);
    let deltas = a.text_deltas();
    let fragments = if a.tool.is_some() {
        a.tool_arg_fragments()
    } else {
        Vec::new()
    };
    let completion = (deltas.len() + fragments.len()) as u64;
    let mut usage = obj! {
        "prompt_tokens": a.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": a.prompt_tokens + completion,
    };
    if a.cached_tokens > 0 {
        usage = usage.with(
            "prompt_tokens_details",
            obj! { "cached_tokens": a.cached_tokens, "audio_tokens": 0u64 },
        );
    }
    let finish = if a.tool.is_some() {
        "tool_calls"
    } else if a.max_tokens {
        "length"
    } else {
        "stop"
    };
    if !stream {
        if markers.malformed {
            return Reply::malformed_json(&format!(
                "{{\"id\":\"{id}\",\"object\":\"chat.completion\",\"choices\":[{{"
            ));
        }
        let mut message = obj! { "role": "assistant", "content": a.text.as_ref(), "refusal": NULL };
        if let Some(name) = &a.tool {
            let call = obj! {
                "id": &call_id,
                "type": "function",
                "function": obj! { "name": name, "arguments": a.tool_args_json() },
            };
            message = message.with("tool_calls", vec![call]);
        }
        let body = obj! {
            "id": &id,
            "object": "chat.completion",
            "created": a.created,
            "model": &a.model,
            "choices": vec![obj! {
                "index": 0u64,
                "message": message,
                "logprobs": NULL,
                "finish_reason": finish,
            }],
            "usage": usage,
            "system_fingerprint": "fp_mock",
        };
        return Reply::json_ordered(200, "application/json", &body);
    }
    let chunk = |choices: Vec<J>| {
        let chunk = obj! {
            "id": &id,
            "object": "chat.completion.chunk",
            "created": a.created,
            "model": &a.model,
            "system_fingerprint": "fp_mock",
            "choices": choices,
        };
        if include_usage {
            chunk.with("usage", NULL)
        } else {
            chunk
        }
    };
    let delta = |delta: J, finish: J| {
        chunk(vec![obj! {
            "index": 0u64,
            "delta": delta,
            "logprobs": NULL,
            "finish_reason": finish,
        }])
    };
    let content = if a.text.is_some() { J::from("") } else { NULL };
    let mut chunks = vec![delta(
        obj! { "role": "assistant", "content": content, "refusal": NULL },
        NULL,
    )];
    chunks.extend(deltas.iter().map(|d| delta(obj! { "content": d }, NULL)));
    if let Some(name) = &a.tool {
        let call = obj! {
            "index": 0u64,
            "id": &call_id,
            "type": "function",
            "function": obj! { "name": name, "arguments": "" },
        };
        chunks.push(delta(obj! { "tool_calls": vec![call] }, NULL));
        for fragment in &fragments {
            let call = obj! { "index": 0u64, "function": obj! { "arguments": fragment } };
            chunks.push(delta(obj! { "tool_calls": vec![call] }, NULL));
        }
    }
    chunks.push(delta(obj! {}, J::from(finish)));
    if include_usage {
        let mut last = chunk(Vec::new());
        if let J::Obj(fields) = &mut last {
            fields.retain(|(key, _)| *key != "usage");
        }
        chunks.push(last.with("usage", usage));
    }
    let nl = a.newline;
    let mut frames: Vec<Vec<u8>> = chunks
        .iter()
        .map(|c| sse(None, &c.to_json_string(), nl))
        .collect();
    frames.push(sse(None, "[DONE]", nl));
    let bad = sse(
        None,
        &format!("{{\"id\":\"{id}\",\"choices\":[{{\"delta\":{{\"content\":"),
        nl,
    );
    let error = obj! { "error": openai_error(500, "mock: upstream failed mid-stream") };
    let error = sse(None, &error.to_json_string(), nl);
    let comment = format!(": keep-alive{nl}{nl}");
    let frames = markers.shape_stream(frames, bad, error, Some(&comment));
    Reply::stream("text/event-stream; charset=utf-8", frames)
}

fn openai_error(status: u16, message: &str) -> J {
    let (kind, code) = match status {
        401 => ("invalid_request_error", Some("invalid_api_key")),
        403 => (
            "invalid_request_error",
            Some("unsupported_country_region_territory"),
        ),
        404 => ("invalid_request_error", Some("not_found")),
        429 => ("requests", Some("rate_limit_exceeded")),
        500..=599 => ("server_error", None),
        _ => ("invalid_request_error", None),
    };
    obj! { "message": message, "type": kind, "param": NULL, "code": code }
}

// ---------------------------------------------------------------------------
// OpenAI Responses

/// Pads each streamed delta like the Responses API's `obfuscation` field.
fn obfuscation(delta: &str) -> String {
    const PAD: &str = "mK3xQ9vL2pZ7wR4tYb8n";
    PAD[..PAD.len() - delta.len() % 16].to_owned()
}

/// Numbers the events of a Responses stream (`sequence_number` from 0).
struct ResponsesEvents {
    frames: Vec<Vec<u8>>,
    newline: &'static str,
}

impl ResponsesEvents {
    /// The event of `kind` with `fields` (an object) after `type` and
    /// `sequence_number`.
    fn event(kind: &str, sequence: u64, fields: J) -> J {
        let mut all = vec![
            ("type", J::from(kind)),
            ("sequence_number", J::from(sequence)),
        ];
        if let J::Obj(rest) = fields {
            all.extend(rest);
        }
        J::Obj(all)
    }

    fn push(&mut self, kind: &str, fields: J) {
        let event = ResponsesEvents::event(kind, self.frames.len() as u64, fields);
        self.frames
            .push(sse(Some(kind), &event.to_json_string(), self.newline));
    }
}

fn responses_reply(a: &Answer, request: &Value, stream: bool, markers: &Markers) -> Reply {
    let id = format!("resp_mock{:08}", a.seq);
    let reasoning_id = format!("rs_mock{:08}", a.seq);
    let message_id = format!("msg_mock{:08}", a.seq);
    let call_item_id = format!("fc_mock{:08}", a.seq);
    let call_id = format!("call_mock{:08}", a.seq);
    let deltas = a.text_deltas();
    let summary_deltas = if a.thinking {
        split_deltas(THINKING_TEXT)
    } else {
        Vec::new()
    };
    let fragments = if a.tool.is_some() {
        a.tool_arg_fragments()
    } else {
        Vec::new()
    };
    let reasoning_tokens = summary_deltas.len() as u64;
    let output_tokens = (deltas.len() + fragments.len()) as u64 + reasoning_tokens;
    let usage = obj! {
        "input_tokens": a.prompt_tokens,
        "input_tokens_details": obj! { "cached_tokens": a.cached_tokens },
        "output_tokens": output_tokens,
        "output_tokens_details": obj! { "reasoning_tokens": reasoning_tokens },
        "total_tokens": a.prompt_tokens + output_tokens,
    };
    let incomplete = a.max_tokens && a.tool.is_none();
    let (final_status, final_event) = if incomplete {
        ("incomplete", "response.incomplete")
    } else {
        ("completed", "response.completed")
    };
    // The request's settings, echoed as the API does (with its defaults).
    let field = |key: &str, default: Value| match request.get(key) {
        Some(value) if !value.is_null() => value.clone(),
        _ => default,
    };
    let text_config = match request["text"].get("format") {
        Some(format) => json!({ "format": format, "verbosity": "medium" }),
        None => json!({ "format": { "type": "text" }, "verbosity": "medium" }),
    };
    let response = |status: &str, output: Vec<J>, usage: J, error: J| {
        let finished = status != "in_progress";
        obj! {
            "id": &id,
            "object": "response",
            "created_at": a.created,
            "status": status,
            "background": false,
            "completed_at": (status == "completed").then_some(a.created),
            "error": error,
            "incomplete_details": if status == "incomplete" {
                obj! { "reason": "max_output_tokens" }
            } else {
                NULL
            },
            "instructions": field("instructions", Value::Null),
            "max_output_tokens": field("max_output_tokens", Value::Null),
            "max_tool_calls": NULL,
            "model": &a.model,
            "output": output,
            "parallel_tool_calls": field("parallel_tool_calls", Value::Bool(true)),
            "previous_response_id": field("previous_response_id", Value::Null),
            "prompt_cache_key": field("prompt_cache_key", Value::Null),
            "reasoning": obj! {
                "effort": request["reasoning"]["effort"].clone(),
                "summary": request["reasoning"]["summary"].clone(),
            },
            "safety_identifier": field("safety_identifier", Value::Null),
            "service_tier": if finished { "default" } else { "auto" },
            "store": field("store", Value::Bool(true)),
            "temperature": field("temperature", json!(1.0)),
            "text": text_config.clone(),
            "tool_choice": field("tool_choice", json!("auto")),
            "tools": field("tools", json!([])),
            "top_logprobs": 0u64,
            "top_p": field("top_p", json!(1.0)),
            "truncation": field("truncation", json!("disabled")),
            "usage": usage,
            "user": NULL,
            "metadata": field("metadata", json!({})),
        }
    };
    let summary = |text: &str| obj! { "type": "summary_text", "text": text };
    let reasoning_item = |summary: Vec<J>, encrypted: bool| {
        let item = obj! { "id": &reasoning_id, "type": "reasoning" };
        let item = if encrypted {
            item.with("encrypted_content", REASONING_ENCRYPTED_CONTENT)
        } else {
            item
        };
        item.with("summary", summary)
    };
    let output_text = |text: &str| {
        obj! { "type": "output_text", "annotations": Vec::<J>::new(), "logprobs": Vec::<J>::new(), "text": text }
    };
    let message_status = if incomplete {
        "incomplete"
    } else {
        "completed"
    };
    let message_item = |status: &str, content: Vec<J>| {
        obj! {
            "id": &message_id,
            "type": "message",
            "status": status,
            "content": content,
            "role": "assistant",
        }
    };
    let args = a.tool_args_json();
    let call_item = |status: &str, arguments: &str, name: &str| {
        obj! {
            "id": &call_item_id,
            "type": "function_call",
            "status": status,
            "arguments": arguments,
            "call_id": &call_id,
            "name": name,
        }
    };
    // The finished output items, in order.
    let mut items = Vec::new();
    if a.thinking {
        items.push(reasoning_item(vec![summary(THINKING_TEXT)], true));
    }
    if let Some(text) = &a.text {
        items.push(message_item(message_status, vec![output_text(text)]));
    }
    if let Some(name) = &a.tool {
        items.push(call_item("completed", &args, name));
    }
    if !stream {
        if markers.malformed {
            return Reply::malformed_json(&format!(
                "{{\"id\":\"{id}\",\"object\":\"response\",\"output\":[{{"
            ));
        }
        let body = response(final_status, items, usage, NULL);
        return Reply::json_ordered(200, "application/json", &body);
    }
    let mut events = ResponsesEvents {
        frames: Vec::new(),
        newline: a.newline,
    };
    let started = response("in_progress", Vec::new(), NULL, NULL);
    events.push("response.created", obj! { "response": started.clone() });
    events.push("response.in_progress", obj! { "response": started });
    let mut index = 0u64;
    if a.thinking {
        let at = |fields: J| {
            obj! { "item_id": &reasoning_id, "output_index": index, "summary_index": 0u64 }
                .with_all(fields)
        };
        events.push(
            "response.output_item.added",
            obj! { "output_index": index, "item": reasoning_item(Vec::new(), false) },
        );
        events.push(
            "response.reasoning_summary_part.added",
            at(obj! { "part": summary("") }),
        );
        for d in &summary_deltas {
            events.push(
                "response.reasoning_summary_text.delta",
                at(obj! { "delta": d, "obfuscation": obfuscation(d) }),
            );
        }
        events.push(
            "response.reasoning_summary_text.done",
            at(obj! { "text": THINKING_TEXT }),
        );
        events.push(
            "response.reasoning_summary_part.done",
            at(obj! { "part": summary(THINKING_TEXT) }),
        );
        events.push(
            "response.output_item.done",
            obj! { "output_index": index, "item": items[0].clone() },
        );
        index += 1;
    }
    if let Some(text) = &a.text {
        let at = |fields: J| {
            obj! { "item_id": &message_id, "output_index": index, "content_index": 0u64 }
                .with_all(fields)
        };
        events.push(
            "response.output_item.added",
            obj! { "output_index": index, "item": message_item("in_progress", Vec::new()) },
        );
        events.push(
            "response.content_part.added",
            at(obj! { "part": output_text("") }),
        );
        for d in &deltas {
            events.push(
                "response.output_text.delta",
                at(obj! { "delta": d, "logprobs": Vec::<J>::new(), "obfuscation": obfuscation(d) }),
            );
        }
        events.push(
            "response.output_text.done",
            at(obj! { "text": text, "logprobs": Vec::<J>::new() }),
        );
        events.push(
            "response.content_part.done",
            at(obj! { "part": output_text(text) }),
        );
        events.push(
            "response.output_item.done",
            obj! {
                "output_index": index,
                "item": message_item(message_status, vec![output_text(text)]),
            },
        );
        index += 1;
    }
    if let Some(name) = &a.tool {
        let at =
            |fields: J| obj! { "item_id": &call_item_id, "output_index": index }.with_all(fields);
        events.push(
            "response.output_item.added",
            obj! { "output_index": index, "item": call_item("in_progress", "", name) },
        );
        for f in &fragments {
            events.push(
                "response.function_call_arguments.delta",
                at(obj! { "delta": f, "obfuscation": obfuscation(f) }),
            );
        }
        events.push(
            "response.function_call_arguments.done",
            at(obj! { "arguments": &args, "name": name }),
        );
        events.push(
            "response.output_item.done",
            obj! { "output_index": index, "item": call_item("completed", &args, name) },
        );
    }
    events.push(
        final_event,
        obj! { "response": response(final_status, items, usage, NULL) },
    );
    let nl = a.newline;
    let frames = events.frames;
    // `[[stream-error]]` keeps the first half of the frames: the error event
    // and `response.failed` carry on their numbering.
    let mid = (frames.len() / 2).max(1) as u64;
    let message = "mock: upstream failed mid-stream";
    let error = ResponsesEvents::event(
        "error",
        mid,
        obj! { "code": "server_error", "message": message, "param": NULL },
    );
    let failed = ResponsesEvents::event(
        "response.failed",
        mid + 1,
        obj! {
            "response": response(
                "failed",
                Vec::new(),
                NULL,
                obj! { "code": "server_error", "message": message },
            ),
        },
    );
    let mut error = sse(Some("error"), &error.to_json_string(), nl);
    error.extend(sse(Some("response.failed"), &failed.to_json_string(), nl));
    let bad = sse(
        Some("response.output_text.delta"),
        &format!(
            "{{\"type\":\"response.output_text.delta\",\"item_id\":\"{message_id}\",\"delta\":"
        ),
        nl,
    );
    let comment = format!(": keep-alive{nl}{nl}");
    let frames = markers.shape_stream(frames, bad, error, Some(&comment));
    Reply::stream("text/event-stream; charset=utf-8", frames)
}

// ---------------------------------------------------------------------------
// Anthropic messages

fn anthropic_reply(a: &Answer, stream: bool, markers: &Markers) -> Reply {
    let id = format!("msg_mock{:08}", a.seq);
    let tool_id = format!("toolu_mock{:08}", a.seq);
    let deltas = a.text_deltas();
    let thinking_deltas = if a.thinking {
        split_deltas(THINKING_TEXT)
    } else {
        Vec::new()
    };
    let fragments = if a.tool.is_some() {
        a.tool_arg_fragments()
    } else {
        Vec::new()
    };
    let output_tokens = (deltas.len() + thinking_deltas.len() + fragments.len()) as u64;
    let stop_reason = if a.tool.is_some() {
        "tool_use"
    } else if a.max_tokens {
        "max_tokens"
    } else {
        "end_turn"
    };
    // Anthropic's `input_tokens` leaves out the tokens read from the cache.
    let usage = |output_tokens: u64| {
        let usage = obj! {
            "input_tokens": a.prompt_tokens - a.cached_tokens,
            "output_tokens": output_tokens,
        };
        if a.cached_tokens > 0 {
            usage
                .with("cache_creation_input_tokens", 0u64)
                .with("cache_read_input_tokens", a.cached_tokens)
        } else {
            usage
        }
    };
    if !stream {
        if markers.malformed {
            return Reply::malformed_json(&format!(
                "{{\"id\":\"{id}\",\"type\":\"message\",\"content\":[{{"
            ));
        }
        let mut content = Vec::new();
        if a.thinking {
            content.push(obj! {
                "type": "thinking",
                "thinking": THINKING_TEXT,
                "signature": THINKING_SIGNATURE,
            });
        }
        if let Some(text) = &a.text {
            content.push(obj! { "type": "text", "text": text });
        }
        if let Some(name) = &a.tool {
            content.push(
                obj! { "type": "tool_use", "id": &tool_id, "name": name, "input": a.tool_args.clone() },
            );
        }
        let body = obj! {
            "id": &id,
            "type": "message",
            "role": "assistant",
            "model": &a.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": NULL,
            "usage": usage(output_tokens),
        };
        return Reply::json_ordered(200, "application/json", &body);
    }
    let nl = a.newline;
    let frame = |event: &str, data: J| sse(Some(event), &data.to_json_string(), nl);
    let mut frames = vec![frame(
        "message_start",
        obj! {
            "type": "message_start",
            "message": obj! {
                "id": &id,
                "type": "message",
                "role": "assistant",
                "model": &a.model,
                "content": Vec::<J>::new(),
                "stop_reason": NULL,
                "stop_sequence": NULL,
                "usage": usage(1),
            },
        },
    )];
    let mut index = 0u64;
    let mut block = |frames: &mut Vec<Vec<u8>>, start: J, deltas: Vec<J>| {
        frames.push(frame(
            "content_block_start",
            obj! { "type": "content_block_start", "index": index, "content_block": start },
        ));
        if index == 0 {
            frames.push(frame("ping", obj! { "type": "ping" }));
        }
        for delta in deltas {
            frames.push(frame(
                "content_block_delta",
                obj! { "type": "content_block_delta", "index": index, "delta": delta },
            ));
        }
        frames.push(frame(
            "content_block_stop",
            obj! { "type": "content_block_stop", "index": index },
        ));
        index += 1;
    };
    if a.thinking {
        let mut thinking: Vec<J> = thinking_deltas
            .iter()
            .map(|d| obj! { "type": "thinking_delta", "thinking": d })
            .collect();
        thinking.push(obj! { "type": "signature_delta", "signature": THINKING_SIGNATURE });
        block(
            &mut frames,
            obj! { "type": "thinking", "thinking": "" },
            thinking,
        );
    }
    if a.text.is_some() {
        let text = deltas
            .iter()
            .map(|d| obj! { "type": "text_delta", "text": d })
            .collect();
        block(&mut frames, obj! { "type": "text", "text": "" }, text);
    }
    if let Some(name) = &a.tool {
        let start = obj! { "type": "tool_use", "id": &tool_id, "name": name, "input": json!({}) };
        let args = std::iter::once("")
            .chain(fragments.iter().map(String::as_str))
            .map(|f| obj! { "type": "input_json_delta", "partial_json": f })
            .collect();
        block(&mut frames, start, args);
    }
    frames.push(frame(
        "message_delta",
        obj! {
            "type": "message_delta",
            "delta": obj! { "stop_reason": stop_reason, "stop_sequence": NULL },
            "usage": obj! { "output_tokens": output_tokens },
        },
    ));
    frames.push(frame("message_stop", obj! { "type": "message_stop" }));
    let bad = format!(
        "event: content_block_delta{nl}\
         data: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{{nl}{nl}"
    );
    let error = frame(
        "error",
        obj! {
            "type": "error",
            "error": obj! { "type": "overloaded_error", "message": "Overloaded" },
        },
    );
    let comment = format!(": keep-alive{nl}{nl}");
    let frames = markers.shape_stream(frames, bad.into_bytes(), error, Some(&comment));
    Reply::stream("text/event-stream; charset=utf-8", frames)
}

fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

// ---------------------------------------------------------------------------
// Gemini generateContent

/// `stream`: `None` for generateContent, `Some(sse)` for streamGenerateContent.
fn gemini_reply(a: &Answer, stream: Option<bool>, markers: &Markers) -> Reply {
    let response_id = format!("mock{:08}", a.seq);
    let deltas = a.text_deltas();
    let thought_deltas = if a.thinking {
        split_deltas(THINKING_TEXT)
    } else {
        Vec::new()
    };
    let call = a.tool.as_ref().map(|name| {
        obj! {
            "functionCall": obj! { "name": name, "args": a.tool_args.clone() },
        }
    });
    let candidates = (deltas.len() + usize::from(call.is_some())) as u64;
    let thoughts = thought_deltas.len() as u64;
    let mut usage = obj! {
        "promptTokenCount": a.prompt_tokens,
        "candidatesTokenCount": candidates,
        "totalTokenCount": a.prompt_tokens + candidates + thoughts,
    };
    if a.cached_tokens > 0 {
        usage = usage.with("cachedContentTokenCount", a.cached_tokens);
    }
    if a.thinking {
        usage = usage.with("thoughtsTokenCount", thoughts);
    }
    let finish = if a.max_tokens && a.tool.is_none() {
        "MAX_TOKENS"
    } else {
        "STOP"
    };
    let response = |parts: Vec<J>, last: bool| {
        let mut candidate = obj! { "content": obj! { "parts": parts, "role": "model" } };
        if last {
            candidate = candidate.with("finishReason", finish);
        }
        let mut response = obj! { "candidates": vec![candidate.with("index", 0u64)] };
        if last {
            response = response.with("usageMetadata", usage.clone());
        }
        response
            .with("modelVersion", &a.model)
            .with("responseId", &response_id)
    };
    let thought = |text: &str| obj! { "text": text, "thought": true };
    let Some(sse_mode) = stream else {
        if markers.malformed {
            return Reply::malformed_json("{\"candidates\":[{\"content\":{\"parts\":[");
        }
        let mut parts = Vec::new();
        if a.thinking {
            parts.push(thought(THINKING_TEXT));
        }
        if let Some(text) = &a.text {
            parts.push(obj! { "text": text });
        }
        parts.extend(call);
        return Reply::json_ordered(
            200,
            "application/json; charset=UTF-8",
            &response(parts, true),
        );
    };
    let mut parts: Vec<J> = thought_deltas.iter().map(|d| thought(d)).collect();
    parts.extend(deltas.iter().map(|d| obj! { "text": d }));
    parts.extend(call);
    let count = parts.len();
    let chunks: Vec<J> = parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| response(vec![part], i + 1 == count))
        .collect();
    let error = obj! { "error": gemini_error(503, "mock: upstream failed mid-stream") };
    if sse_mode {
        let frames = chunks
            .iter()
            .map(|c| sse(None, &c.to_json_string(), "\r\n"))
            .collect();
        let bad = sse(None, "{\"candidates\": [{\"content\": {", "\r\n");
        let error = sse(None, &error.to_json_string(), "\r\n");
        let frames = markers.shape_stream(frames, bad, error, Some(": keep-alive\r\n\r\n"));
        return Reply::stream("text/event-stream", frames);
    }
    // A JSON array written incrementally, one pretty-printed element per frame.
    let pretty = |value: &J| serde_json::to_string_pretty(value).unwrap_or_default();
    let mut frames: Vec<Vec<u8>> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}{}", if i == 0 { "[" } else { "\n," }, pretty(c)).into_bytes())
        .collect();
    frames.push(b"\n]".to_vec());
    let bad = b"\n,{\"candidates\": [{\"content\": {".to_vec();
    let error = format!("\n,{}\n]", pretty(&error)).into_bytes();
    let frames = markers.shape_stream(frames, bad, error, None);
    Reply::stream("application/json; charset=UTF-8", frames)
}

fn gemini_error(status: u16, message: &str) -> J {
    let name = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        413 => "INVALID_ARGUMENT",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        500..=599 => "INTERNAL",
        _ => "FAILED_PRECONDITION",
    };
    obj! { "code": u64::from(status), "message": message, "status": name }
}

/// `status` with `protocol`'s error body (429 adds `retry-after: 1`).
fn error_reply(protocol: Protocol, status: u16, message: &str) -> Reply {
    let (body, content_type) = match protocol {
        Protocol::OpenAi | Protocol::Responses => (
            obj! { "error": openai_error(status, message) },
            "application/json",
        ),
        Protocol::Anthropic => (
            obj! {
                "type": "error",
                "error": obj! { "type": anthropic_error_type(status), "message": message },
            },
            "application/json",
        ),
        Protocol::Gemini => (
            obj! { "error": gemini_error(status, message) },
            "application/json; charset=UTF-8",
        ),
    };
    let reply = Reply::json_ordered(status, content_type, &body);
    if status == 429 {
        reply.header("retry-after", "1")
    } else {
        reply
    }
}

// ---------------------------------------------------------------------------
// Writing responses

enum ReplyBody {
    /// Sent with `content-length`.
    Full(Vec<u8>),
    /// Frames sent with `transfer-encoding: chunked`, in small random writes.
    Stream(Vec<Vec<u8>>),
}

#[derive(Clone, Copy, Debug, Default)]
struct Effects {
    slow: Option<Duration>,
    hold: Option<Duration>,
    stall: Option<Duration>,
    cut: bool,
    /// Largest random stream write; 0 writes each frame whole.
    max_piece: usize,
    seed: u64,
}

struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: ReplyBody,
    effects: Effects,
}

impl Reply {
    fn full(status: u16, content_type: &str, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: vec![("content-type", content_type.to_owned())],
            body: ReplyBody::Full(body),
            effects: Effects::default(),
        }
    }

    fn json(status: u16, body: &Value) -> Reply {
        Reply::full(status, "application/json", body.to_string().into_bytes())
    }

    fn json_ordered(status: u16, content_type: &str, body: &J) -> Reply {
        Reply::full(status, content_type, body.to_json_string().into_bytes())
    }

    fn malformed_json(prefix: &str) -> Reply {
        Reply::full(200, "application/json", prefix.as_bytes().to_vec())
    }

    fn stream(content_type: &str, frames: Vec<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: vec![
                ("content-type", content_type.to_owned()),
                ("cache-control", "no-cache".to_owned()),
            ],
            body: ReplyBody::Stream(frames),
            effects: Effects::default(),
        }
    }

    fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name, value.to_owned()));
        self
    }

    fn with_effects(mut self, effects: Effects) -> Reply {
        self.effects = effects;
        self
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Writes `reply`; returns whether the connection may carry another request.
async fn write_reply(io: &mut TcpStream, reply: Reply, keep_alive: bool) -> io::Result<bool> {
    let fx = reply.effects;
    if let Some(delay) = fx.slow {
        tokio::time::sleep(delay).await;
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        reply.status,
        reason_phrase(reply.status)
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match &reply.body {
        ReplyBody::Full(body) => head.push_str(&format!("content-length: {}\r\n", body.len())),
        ReplyBody::Stream(_) => head.push_str("transfer-encoding: chunked\r\n"),
    }
    if !keep_alive {
        head.push_str("connection: close\r\n");
    }
    head.push_str("\r\n");
    match reply.body {
        ReplyBody::Full(body) => {
            if fx.cut {
                io.write_all(head.as_bytes()).await?;
                io.write_all(&body[..body.len() / 2]).await?;
                io.flush().await?;
                return Ok(false);
            }
            if let Some(delay) = fx.stall.or(fx.hold) {
                io.write_all(head.as_bytes()).await?;
                io.flush().await?;
                tokio::time::sleep(delay).await;
                io.write_all(&body).await?;
            } else {
                let mut all = head.into_bytes();
                all.extend_from_slice(&body);
                io.write_all(&all).await?;
            }
            io.flush().await?;
            Ok(keep_alive)
        }
        ReplyBody::Stream(frames) => {
            io.write_all(head.as_bytes()).await?;
            io.flush().await?;
            if let Some(delay) = fx.hold {
                if stall_unless_closed(io, delay).await {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the reader closed the connection before the first frame",
                    ));
                }
            }
            let cut_after = if fx.cut {
                (frames.len() / 2).max(1)
            } else {
                usize::MAX
            };
            let mut writer = PieceWriter {
                rng: XorShift::new(fx.seed),
                max_piece: fx.max_piece,
                small_budget: SMALL_WRITE_BUDGET,
            };
            for (i, frame) in frames.iter().enumerate() {
                if i == cut_after {
                    // Abrupt end: no last chunk; the caller drops the socket.
                    return Ok(false);
                }
                writer.write_frame(io, frame).await?;
                if i == 0 {
                    if let Some(delay) = fx.stall {
                        if stall_unless_closed(io, delay).await {
                            return Err(io::Error::new(
                                io::ErrorKind::ConnectionAborted,
                                "the reader closed the connection during a stall",
                            ));
                        }
                    }
                }
            }
            io.write_all(b"0\r\n\r\n").await?;
            io.flush().await?;
            Ok(keep_alive)
        }
    }
}

/// Waits `delay`, watching the connection: true (at once) if the peer closes it.
async fn stall_unless_closed(io: &mut TcpStream, delay: Duration) -> bool {
    let sleep = tokio::time::sleep(delay);
    tokio::pin!(sleep);
    let mut probe = [0u8; 1];
    tokio::select! {
        () = &mut sleep => false,
        seen = io.peek(&mut probe) => match seen {
            Ok(0) | Err(_) => true,
            // Bytes of a next request: the reader is still there.
            Ok(_) => {
                sleep.await;
                false
            }
        },
    }
}

/// Writes stream bytes as many small HTTP chunks, each its own TCP write, so
/// the reader sees frames split inside lines and inside UTF-8 characters.
struct PieceWriter {
    rng: XorShift,
    max_piece: usize,
    small_budget: usize,
}

impl PieceWriter {
    async fn write_frame(&mut self, io: &mut TcpStream, frame: &[u8]) -> io::Result<()> {
        let mut rest = frame;
        while !rest.is_empty() {
            let small = self.max_piece > 0 && self.small_budget > 0;
            let size = if small {
                1 + self.rng.below(self.max_piece)
            } else if self.max_piece == 0 {
                LARGE_WRITE
            } else {
                LARGE_WRITE.max(self.max_piece)
            };
            let (piece, tail) = rest.split_at(size.min(rest.len()));
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(piece);
            chunk.extend_from_slice(b"\r\n");
            io.write_all(&chunk).await?;
            io.flush().await?;
            if small {
                self.small_budget = self.small_budget.saturating_sub(piece.len());
                if self.rng.below(16) == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            rest = tail;
        }
        Ok(())
    }
}

/// xorshift64: a tiny deterministic generator for write sizes.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-enough value in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub mod wire {
    //! HTTP/1.1 message framing shared by the mock server and the test client.

    use std::io;

    use tokio::io::{AsyncRead, AsyncReadExt};

    const READ_RESERVE: usize = 64 << 10;
    const MAX_PIECE: u64 = 256 << 10;
    const MAX_LINE: usize = 8 << 10;

    pub fn invalid(message: impl Into<String>) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, message.into())
    }

    fn eof(what: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("connection closed {what}"),
        )
    }

    /// First value of a header (case-insensitive name).
    pub fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether a comma-separated header value has `token` (case-insensitive).
    pub fn has_token(value: Option<&str>, token: &str) -> bool {
        value.is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack.windows(needle.len()).position(|w| w == needle)
    }

    /// A start line and header fields (names lowercased, values trimmed).
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct Head {
        pub start_line: String,
        pub headers: Vec<(String, String)>,
    }

    impl Head {
        pub fn header(&self, name: &str) -> Option<&str> {
            find_header(&self.headers, name)
        }

        fn header_has(&self, name: &str, token: &str) -> bool {
            self.headers
                .iter()
                .any(|(n, v)| n.eq_ignore_ascii_case(name) && has_token(Some(v), token))
        }

        fn parse(bytes: &[u8]) -> io::Result<Head> {
            let text = String::from_utf8_lossy(bytes);
            let mut lines = text.split("\r\n");
            let start_line = lines.next().unwrap_or_default().to_owned();
            let mut headers = Vec::new();
            for line in lines {
                let (name, value) = line
                    .split_once(':')
                    .ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
            Ok(Head {
                start_line,
                headers,
            })
        }
    }

    /// A buffered reader of HTTP/1.1 framing over any byte stream.
    pub struct WireReader<S> {
        io: S,
        buf: Vec<u8>,
        pos: usize,
    }

    impl<S: AsyncRead + Unpin> WireReader<S> {
        pub fn new(io: S) -> WireReader<S> {
            WireReader {
                io,
                buf: Vec::new(),
                pos: 0,
            }
        }

        pub fn get_mut(&mut self) -> &mut S {
            &mut self.io
        }

        pub fn get_ref(&self) -> &S {
            &self.io
        }

        /// Bytes read from the stream and not consumed yet.
        pub fn buffered(&self) -> &[u8] {
            &self.buf[self.pos..]
        }

        fn consume(&mut self, n: usize) {
            self.pos += n;
            if self.pos >= self.buf.len() {
                self.buf.clear();
                self.pos = 0;
            }
        }

        /// Reads more bytes; 0 at end of stream.
        async fn fill(&mut self) -> io::Result<usize> {
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            self.buf.reserve(READ_RESERVE);
            self.io.read_buf(&mut self.buf).await
        }

        /// Reads a start line and headers; `None` at a clean end of stream.
        pub async fn read_head(&mut self, limit: usize) -> io::Result<Option<Head>> {
            loop {
                // Empty lines before a start line are tolerated (RFC 9112 2.2).
                while self.buffered().starts_with(b"\r\n") {
                    self.consume(2);
                }
                if let Some(end) = find(self.buffered(), b"\r\n\r\n") {
                    let head = Head::parse(&self.buffered()[..end])?;
                    self.consume(end + 4);
                    return Ok(Some(head));
                }
                if self.buffered().len() > limit {
                    return Err(invalid("header section too large"));
                }
                if self.fill().await? == 0 {
                    return if self.buffered().is_empty() {
                        Ok(None)
                    } else {
                        Err(eof("inside a header section"))
                    };
                }
            }
        }

        /// Reads one CRLF-terminated line, without the CRLF.
        pub async fn read_line(&mut self, limit: usize) -> io::Result<Vec<u8>> {
            loop {
                if let Some(end) = find(self.buffered(), b"\r\n") {
                    let line = self.buffered()[..end].to_vec();
                    self.consume(end + 2);
                    return Ok(line);
                }
                if self.buffered().len() > limit {
                    return Err(invalid("line too long"));
                }
                if self.fill().await? == 0 {
                    return Err(eof("inside a line"));
                }
            }
        }

        /// Up to `max` bytes: what is buffered, else one read. Empty at end of stream.
        pub async fn read_some(&mut self, max: usize) -> io::Result<Vec<u8>> {
            if self.buffered().is_empty() && self.fill().await? == 0 {
                return Ok(Vec::new());
            }
            let n = self.buffered().len().min(max);
            let out = self.buffered()[..n].to_vec();
            self.consume(n);
            Ok(out)
        }
    }

    /// How a message body is delimited.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Framing {
        Empty,
        Length(u64),
        Chunked,
        UntilClose,
    }

    impl Framing {
        pub fn of_request(head: &Head) -> io::Result<Framing> {
            if head.header_has("transfer-encoding", "chunked") {
                return Ok(Framing::Chunked);
            }
            Ok(content_length(head)?.map_or(Framing::Empty, Framing::Length))
        }

        pub fn of_response(head: &Head, status: u16, request_method: &str) -> io::Result<Framing> {
            if request_method.eq_ignore_ascii_case("HEAD")
                || (100..200).contains(&status)
                || status == 204
                || status == 304
            {
                return Ok(Framing::Empty);
            }
            if head.header_has("transfer-encoding", "chunked") {
                return Ok(Framing::Chunked);
            }
            Ok(content_length(head)?.map_or(Framing::UntilClose, Framing::Length))
        }
    }

    fn content_length(head: &Head) -> io::Result<Option<u64>> {
        head.header("content-length")
            .map(|v| {
                v.parse()
                    .map_err(|_| invalid(format!("bad content-length {v:?}")))
            })
            .transpose()
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum BodyState {
        /// Bytes left of a content-length body (or of the stream).
        Remaining(u64),
        ChunkSize,
        ChunkData(u64),
        ChunkEnd,
        Done,
    }

    /// Incremental decoder of one message body.
    #[derive(Debug)]
    pub struct BodyReader {
        framing: Framing,
        state: BodyState,
    }

    impl BodyReader {
        pub fn new(framing: Framing) -> BodyReader {
            let state = match framing {
                Framing::Empty | Framing::Length(0) => BodyState::Done,
                Framing::Length(n) => BodyState::Remaining(n),
                Framing::Chunked => BodyState::ChunkSize,
                Framing::UntilClose => BodyState::Remaining(u64::MAX),
            };
            BodyReader { framing, state }
        }

        pub fn framing(&self) -> Framing {
            self.framing
        }

        pub fn is_done(&self) -> bool {
            self.state == BodyState::Done
        }

        /// The next piece of body as it arrives; `None` at its end. A stream
        /// that ends before the body does is an `UnexpectedEof` error.
        pub async fn next<S: AsyncRead + Unpin>(
            &mut self,
            reader: &mut WireReader<S>,
        ) -> io::Result<Option<Vec<u8>>> {
            loop {
                match self.state {
                    BodyState::Done => return Ok(None),
                    BodyState::Remaining(left) => {
                        let piece = reader.read_some(left.min(MAX_PIECE) as usize).await?;
                        if piece.is_empty() {
                            if self.framing == Framing::UntilClose {
                                self.state = BodyState::Done;
                                return Ok(None);
                            }
                            return Err(eof("before the end of the body"));
                        }
                        if self.framing != Framing::UntilClose {
                            let left = left - piece.len() as u64;
                            self.state = if left == 0 {
                                BodyState::Done
                            } else {
                                BodyState::Remaining(left)
                            };
                        }
                        return Ok(Some(piece));
                    }
                    BodyState::ChunkSize => {
                        let line = reader.read_line(MAX_LINE).await?;
                        let line = String::from_utf8_lossy(&line);
                        let size = line.split(';').next().unwrap_or_default().trim();
                        let size = u64::from_str_radix(size, 16)
                            .map_err(|_| invalid(format!("bad chunk size line {line:?}")))?;
                        if size == 0 {
                            // Trailer fields, then the empty line.
                            while !reader.read_line(MAX_LINE).await?.is_empty() {}
                            self.state = BodyState::Done;
                            return Ok(None);
                        }
                        self.state = BodyState::ChunkData(size);
                    }
                    BodyState::ChunkData(left) => {
                        let piece = reader.read_some(left.min(MAX_PIECE) as usize).await?;
                        if piece.is_empty() {
                            return Err(eof("inside a chunk"));
                        }
                        let left = left - piece.len() as u64;
                        self.state = if left == 0 {
                            BodyState::ChunkEnd
                        } else {
                            BodyState::ChunkData(left)
                        };
                        return Ok(Some(piece));
                    }
                    BodyState::ChunkEnd => {
                        if !reader.read_line(MAX_LINE).await?.is_empty() {
                            return Err(invalid("chunk data not followed by CRLF"));
                        }
                        self.state = BodyState::ChunkSize;
                    }
                }
            }
        }

        /// The rest of the body; a `FileTooLarge` error past `limit` bytes.
        pub async fn read_to_end<S: AsyncRead + Unpin>(
            &mut self,
            reader: &mut WireReader<S>,
            limit: usize,
        ) -> io::Result<Vec<u8>> {
            let too_large = || io::Error::new(io::ErrorKind::FileTooLarge, "body too large");
            let mut body = Vec::new();
            if let Framing::Length(n) = self.framing {
                if n > limit as u64 {
                    return Err(too_large());
                }
                body.reserve(n as usize);
            }
            while let Some(piece) = self.next(reader).await? {
                if body.len() + piece.len() > limit {
                    return Err(too_large());
                }
                body.extend_from_slice(&piece);
            }
            Ok(body)
        }
    }
}
