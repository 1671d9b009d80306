//! Gemini generateContent and streamGenerateContent, its error body.
//! Imports `super::*` (the shared answer, ordered JSON, the reply writer);
//! never another protocol's file.

use super::*;

/// `stream`: `None` for generateContent, `Some(sse)` for streamGenerateContent.
pub(super) fn gemini_reply(a: &Answer, stream: Option<bool>, markers: &Markers) -> Reply {
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

pub(super) fn gemini_error(status: u16, message: &str) -> J {
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
