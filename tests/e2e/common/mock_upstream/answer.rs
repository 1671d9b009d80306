//! What a request asks of the mock: its `[[markers]]`, and the answer they
//! and the request make (reply text, tool calls, the last user text), read
//! alike for every protocol.
//! Imports `super::*` (the rest of the mock upstream).

use super::*;

/// Behaviour switches found in the request body.
#[derive(Debug, Default)]
pub(super) struct Markers {
    pub(super) status: Option<u16>,
    pub(super) retry_after: Option<String>,
    pub(super) slow: Option<Duration>,
    pub(super) hold: Option<Duration>,
    pub(super) stall: Option<Duration>,
    /// `[[stall-mid:MS]]`: a stream stalls after half of its frames.
    pub(super) stall_mid: Option<Duration>,
    pub(super) cut: bool,
    /// `[[cut-end]]`: a stream's connection closes before its last frame.
    pub(super) cut_end: bool,
    pub(super) malformed: bool,
    pub(super) stream_error: bool,
    /// `[[bad-crc]]`: Bedrock's event stream: a frame whose CRC is wrong.
    pub(super) bad_crc: bool,
    pub(super) tool: bool,
    pub(super) text_tool: bool,
    pub(super) thinking: bool,
    pub(super) echo: bool,
    pub(super) crlf: bool,
    pub(super) sse_comments: bool,
    pub(super) max_piece: Option<usize>,
    /// `[[max-tokens]]`: the answer ends at its token limit.
    pub(super) max_tokens: bool,
    /// `[[cached:N]]`: prompt tokens read from the cache.
    pub(super) cached: Option<u64>,
    /// `[[cache-write:N]]`: prompt tokens written to the cache.
    pub(super) cache_write: Option<u64>,
    /// `[[cache-write-1h:N]]`: of those, the ones written for an hour.
    pub(super) cache_write_1h: Option<u64>,
    /// `[[prompt-tokens:N]]`: the prompt tokens reported.
    pub(super) prompt_tokens: Option<u64>,
    /// `[[deepseek-cache]]`: OpenAI chat usage in DeepSeek's shape.
    pub(super) deepseek_cache: bool,
    /// `[[agent-tool:NAME:JSON]]`: the tool's name and arguments.
    pub(super) agent_tool: Option<(String, Value)>,
    /// `[[no-terminator]]`: a stream's last frame is left out.
    pub(super) no_terminator: bool,
    /// `[[context-overflow]]`: a 400 saying the prompt is too long.
    pub(super) context_overflow: bool,
    /// `[[no-prefill]]`: a request ending with an assistant prefill gets a 400.
    pub(super) no_prefill: bool,
    /// `[[json-answer]]`: the reply conforms to the request's enforced schema.
    pub(super) json_answer: bool,
}

impl Markers {
    pub(super) fn parse(text: &str) -> Markers {
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
                "stall-mid" => markers.stall_mid = ms(),
                "cut" => markers.cut = true,
                "cut-end" => markers.cut_end = true,
                "malformed" => markers.malformed = true,
                "no-terminator" => markers.no_terminator = true,
                "context-overflow" => markers.context_overflow = true,
                "no-prefill" => markers.no_prefill = true,
                "json-answer" => markers.json_answer = true,
                "stream-error" => markers.stream_error = true,
                "bad-crc" => markers.bad_crc = true,
                "tool" => markers.tool = true,
                "text+tool" => markers.text_tool = true,
                "thinking" => markers.thinking = true,
                "echo-request" => markers.echo = true,
                "crlf" => markers.crlf = true,
                "sse-comments" => markers.sse_comments = true,
                "chunk" => markers.max_piece = arg.trim().parse().ok(),
                "max-tokens" => markers.max_tokens = true,
                "cached" => markers.cached = arg.trim().parse().ok(),
                "cache-write" => markers.cache_write = arg.trim().parse().ok(),
                "cache-write-1h" => markers.cache_write_1h = arg.trim().parse().ok(),
                "prompt-tokens" => markers.prompt_tokens = arg.trim().parse().ok(),
                "deepseek-cache" => markers.deepseek_cache = true,
                "agent-tool" => markers.agent_tool = parse_agent_tool(arg),
                _ => {}
            }
            rest = &rest[close + 2..];
        }
        markers
    }

    /// Applies `[[no-terminator]]`, `[[malformed]]`, `[[stream-error]]` and
    /// `[[sse-comments]]` to a finished frame list.
    pub(super) fn shape_stream(
        &self,
        mut frames: Vec<Vec<u8>>,
        bad: Vec<u8>,
        error: Vec<u8>,
        comment: Option<&str>,
    ) -> Vec<Vec<u8>> {
        if self.no_terminator {
            frames.pop();
        }
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
pub(super) struct Answer {
    pub(super) model: String,
    pub(super) seq: u64,
    pub(super) created: u64,
    pub(super) thinking: bool,
    /// Reply text; `None` for a tool call alone.
    pub(super) text: Option<String>,
    /// Name of the tool to call.
    pub(super) tool: Option<String>,
    /// Arguments of the tool call (a JSON object).
    pub(super) tool_args: Value,
    pub(super) prompt_tokens: u64,
    /// Of the prompt tokens, those read from the cache (`[[cached:N]]`).
    pub(super) cached_tokens: u64,
    /// Of the prompt tokens, those written to the cache (`[[cache-write:N]]`).
    pub(super) cache_write_tokens: u64,
    /// Of those, the ones written for an hour (`[[cache-write-1h:N]]`).
    pub(super) cache_write_1h_tokens: u64,
    /// `[[deepseek-cache]]`: OpenAI chat usage in DeepSeek's shape.
    pub(super) deepseek_cache: bool,
    /// `[[max-tokens]]`: the answer stops for its token limit.
    pub(super) max_tokens: bool,
    /// Line ending of OpenAI, Anthropic and Responses SSE frames.
    pub(super) newline: &'static str,
}

impl Answer {
    pub(super) fn text_deltas(&self) -> Vec<String> {
        self.text.as_deref().map(split_deltas).unwrap_or_default()
    }

    /// The tool arguments as the JSON string OpenAI carries.
    pub(super) fn tool_args_json(&self) -> String {
        self.tool_args.to_string()
    }

    /// The tool arguments split for streaming: [`TOOL_ARG_FRAGMENTS`] for the
    /// default arguments, else three pieces cut on character boundaries.
    pub(super) fn tool_arg_fragments(&self) -> Vec<String> {
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
pub(super) fn parse_agent_tool(arg: &str) -> Option<(String, Value)> {
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
pub(super) fn declares_tools(body: &Value) -> bool {
    body["tools"]
        .as_array()
        .is_some_and(|tools| !tools.is_empty())
}

/// Text of a tool result's content: a string, or the text of its text parts.
pub(super) fn tool_result_text(content: &Value) -> String {
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
pub(super) fn last_turn_tool_results(protocol: Protocol, body: &Value) -> Option<String> {
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
pub(super) fn is_responses_message(item: &Value) -> bool {
    item["type"].is_null() || item["type"] == "message"
}

pub(super) fn is_system_role(role: &Value) -> bool {
    role == "system" || role == "developer"
}

/// Text of a Responses message's content: a string, or its text parts.
pub(super) fn text_of_responses_content(content: &Value) -> String {
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

pub(super) fn text_of_openai_content(content: &Value) -> String {
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
pub(super) fn last_user_text(protocol: Protocol, body: &Value) -> String {
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

pub(super) fn first_tool_name(protocol: Protocol, body: &Value) -> String {
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

/// The text of the assistant turn that ends the conversation (a prefill the
/// answer continues), if it does: OpenAI and Anthropic a last `assistant`
/// message (OpenAI: without tool calls), Gemini a last `model` turn,
/// Responses a last assistant message item.
pub(super) fn assistant_prefill(protocol: Protocol, body: &Value) -> Option<String> {
    let text = match protocol {
        Protocol::OpenAi | Protocol::Anthropic => {
            let last = body["messages"].as_array()?.last()?;
            if last["role"] != "assistant" || last.get("tool_calls").is_some() {
                return None;
            }
            text_of_openai_content(&last["content"])
        }
        Protocol::Gemini => {
            let last = body["contents"].as_array()?.last()?;
            if last["role"] != "model" {
                return None;
            }
            last["parts"]
                .as_array()?
                .iter()
                .filter(|p| p["thought"] != true)
                .filter_map(|p| p["text"].as_str())
                .collect()
        }
        Protocol::Responses => {
            let last = body["input"].as_array()?.last()?;
            if !(is_responses_message(last) && last["role"] == "assistant") {
                return None;
            }
            text_of_responses_content(&last["content"])
        }
    };
    (!text.is_empty()).then_some(text)
}
