//! OpenAI chat completions: whole and streamed replies, its error body.
//! Imports `super::*` (the shared answer, ordered JSON, the reply writer);
//! never another protocol's file.

use super::*;

pub(super) fn openai_reply(
    a: &Answer,
    stream: bool,
    include_usage: bool,
    markers: &Markers,
) -> Reply {
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
    if a.deepseek_cache {
        usage = usage.with("prompt_cache_hit_tokens", a.cached_tokens).with(
            "prompt_cache_miss_tokens",
            a.prompt_tokens - a.cached_tokens,
        );
    } else if a.cached_tokens > 0 || a.cache_write_tokens > 0 {
        let mut details = obj! { "cached_tokens": a.cached_tokens, "audio_tokens": 0u64 };
        if a.cache_write_tokens > 0 {
            // OpenRouter's field for the writes of the models that bill them.
            details = details.with("cache_write_tokens", a.cache_write_tokens);
        }
        usage = usage.with("prompt_tokens_details", details);
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

pub(super) fn openai_error(status: u16, message: &str) -> J {
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
