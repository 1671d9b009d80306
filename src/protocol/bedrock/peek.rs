//! Bedrock Converse: what the gateway reads from bodies without decoding
//! them. `request` fills [`Inspected`] (parameters by catalog name and the
//! client's own field path, caps; the stream flag comes from the path);
//! `response` reads the usage and terminal markers of a whole answer or of
//! one stream event's payload.

use crate::error::GatewayError;
use crate::protocol::common::peek::{
    bad, contains, number, parse_request, positive_int, present, AffinitySource, Inspected, Peeked,
    Raw, Usage,
};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InferencePeek<'a> {
    #[serde(borrow)]
    max_tokens: Raw<'a>,
    #[serde(borrow)]
    temperature: Raw<'a>,
    #[serde(borrow)]
    top_p: Raw<'a>,
    #[serde(borrow)]
    stop_sequences: Raw<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfigPeek<'a> {
    #[serde(borrow)]
    tools: Raw<'a>,
    #[serde(borrow)]
    tool_choice: Raw<'a>,
}

#[derive(Deserialize)]
struct AdditionalPeek<'a> {
    #[serde(borrow)]
    top_k: Raw<'a>,
    #[serde(borrow)]
    thinking: Raw<'a>,
    #[serde(borrow)]
    reasoning_config: Raw<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestPeek<'a> {
    #[serde(borrow)]
    messages: Raw<'a>,
    #[serde(borrow)]
    system: Raw<'a>,
    #[serde(borrow)]
    inference_config: Option<InferencePeek<'a>>,
    #[serde(borrow)]
    tool_config: Option<ToolConfigPeek<'a>>,
    #[serde(borrow)]
    additional_model_request_fields: Option<AdditionalPeek<'a>>,
}

/// Scans a request body (`path_stream`: `/converse-stream`).
pub fn request(body: &[u8], path_stream: bool) -> Result<Inspected, GatewayError> {
    let mut out = Inspected::default();
    let p: RequestPeek<'_> = parse_request(body)?;
    if !present(p.messages) {
        return Err(bad("messages", "messages is required"));
    }
    out.stream = path_stream;
    out.uses(out.stream, "stream", "stream");
    if let Some(c) = p.inference_config {
        out.temperature = number(c.temperature, "inferenceConfig.temperature")?;
        out.max_tokens = positive_int(c.max_tokens, "inferenceConfig.maxTokens")?;
        if let Some(n) = out.max_tokens {
            out.caps.push(("inferenceConfig.maxTokens", n));
        }
        out.uses(
            out.temperature.is_some(),
            "temperature",
            "inferenceConfig.temperature",
        );
        out.uses(present(c.top_p), "top_p", "inferenceConfig.topP");
        out.uses(
            out.max_tokens.is_some(),
            "max_tokens",
            "inferenceConfig.maxTokens",
        );
        out.uses(
            present(c.stop_sequences),
            "stop",
            "inferenceConfig.stopSequences",
        );
    }
    if let Some(t) = p.tool_config {
        out.uses(present(t.tools), "tools", "toolConfig.tools");
        out.uses(
            present(t.tool_choice),
            "tool_choice",
            "toolConfig.toolChoice",
        );
    }
    if let Some(a) = p.additional_model_request_fields {
        out.uses(
            present(a.top_k),
            "top_k",
            "additionalModelRequestFields.top_k",
        );
        out.uses(
            present(a.thinking),
            "reasoning",
            "additionalModelRequestFields.thinking",
        );
        out.uses(
            present(a.reasoning_config),
            "reasoning",
            "additionalModelRequestFields.reasoning_config",
        );
    }
    if contains(body, b"\"cachePoint\"") {
        out.uses(true, "cache_control", "cachePoint");
    }
    out.affinity = AffinitySource::new(body, None, p.system, p.messages);
    Ok(out)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct UsagePeek {
    /// The uncached input tokens only.
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_write_input_tokens: Option<u64>,
}

impl UsagePeek {
    /// The accounting view: the input is every prompt token (uncached, read
    /// from and written to the cache).
    fn accounted(self) -> Usage {
        Usage {
            input: self.input_tokens.map(|i| {
                i.saturating_add(self.cache_read_input_tokens.unwrap_or(0))
                    .saturating_add(self.cache_write_input_tokens.unwrap_or(0))
            }),
            output: self.output_tokens,
            cached: self.cache_read_input_tokens,
            cache_write: self.cache_write_input_tokens,
            cache_write_1h: None,
            reasoning: None,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponsePeek<'a> {
    usage: Option<UsagePeek>,
    stop_reason: Option<&'a str>,
    /// An exception payload (`{"message": …}`) has a message and nothing else.
    message: Option<serde::de::IgnoredAny>,
    output: Option<serde::de::IgnoredAny>,
}

/// Reads the usage and end markers of a whole answer or of one stream
/// event's payload (`messageStop` has the stop reason, `metadata` the usage
/// and ends the stream). Converse answers carry no model name.
pub fn response(doc: &[u8]) -> Option<Peeked> {
    let mut out = Peeked::default();
    let p: ResponsePeek<'_> = serde_json::from_slice(doc).ok()?;
    let has_usage = p.usage.is_some();
    if let Some(u) = p.usage {
        out.usage = u.accounted();
    }
    out.finished = p.stop_reason.is_some_and(|s| !s.is_empty());
    out.terminal = has_usage && p.output.is_none();
    out.error = p.message.is_some() && p.output.is_none() && p.stop_reason.is_none();
    Some(out)
}

/// Whether the first bytes of a ConverseStream answer (AWS event-stream
/// frames, whose `:event-type` header values are plain ASCII in the frame)
/// carry the answer's first token or its end: a block delta, the stop, the
/// metadata or an exception; `messageStart` and a tool call's block start do not.
pub fn stream_started(bytes: &[u8]) -> bool {
    contains(bytes, b"contentBlockDelta")
        || contains(bytes, b"messageStop")
        || contains(bytes, b"Exception")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn request_peek_names_fields_as_sent() {
        let body = br#"{"messages":[{"role":"user","content":[{"text":"hi"}]}],
            "inferenceConfig":{"maxTokens":100,"temperature":0.5,"stopSequences":["x"]},
            "toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{}}}}],"toolChoice":{"auto":{}}},
            "additionalModelRequestFields":{"top_k":5}}"#;
        let r = request(body, true).unwrap();
        assert!(r.stream);
        assert_eq!(r.max_tokens, Some(100));
        assert_eq!(r.temperature, Some(0.5));
        let fields: Vec<_> = r.uses.iter().map(|u| u.field).collect();
        assert!(fields.contains(&"inferenceConfig.stopSequences"));
        assert!(fields.contains(&"toolConfig.toolChoice"));
        assert!(fields.contains(&"additionalModelRequestFields.top_k"));
        assert!(request(b"{}", false).is_err());
        assert!(request(
            br#"{"messages":[],"inferenceConfig":{"maxTokens":0}}"#,
            false
        )
        .is_err());
    }

    #[test]
    fn response_peek_reads_usage_and_ends() {
        let whole = br#"{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5,"cacheReadInputTokens":4}}"#;
        let p = response(whole).unwrap();
        assert_eq!(p.usage.input, Some(7));
        assert_eq!(p.usage.cached, Some(4));
        assert!(p.finished && !p.error);
        let meta = response(br#"{"usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3},"metrics":{"latencyMs":1}}"#).unwrap();
        assert!(meta.terminal);
        assert!(response(br#"{"message":"boom"}"#).unwrap().error);
        assert!(stream_started(
            b"..:event-type\x07\x00\x11contentBlockDelta.."
        ));
        assert!(!stream_started(b"..messageStart.."));
    }
}
