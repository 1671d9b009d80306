//! Anthropic Messages: whole and streamed replies, its error types.
//! Imports `super::*` (the shared answer, ordered JSON, the reply writer);
//! never another protocol's file.

use super::*;

pub(super) fn anthropic_reply(a: &Answer, stream: bool, markers: &Markers) -> Reply {
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
    // Anthropic's `input_tokens` leaves out the tokens read from and
    // written to the cache; `cache_creation` splits the writes by lifetime.
    let usage = |output_tokens: u64| {
        let (read, write, write_1h) = (
            a.cached_tokens,
            a.cache_write_tokens,
            a.cache_write_1h_tokens,
        );
        let usage = obj! {
            "input_tokens": a.prompt_tokens - read - write,
            "output_tokens": output_tokens,
        };
        if read == 0 && write == 0 {
            return usage;
        }
        let usage = usage
            .with("cache_creation_input_tokens", write)
            .with("cache_read_input_tokens", read);
        if write == 0 {
            return usage;
        }
        usage.with(
            "cache_creation",
            obj! {
                "ephemeral_5m_input_tokens": write - write_1h,
                "ephemeral_1h_input_tokens": write_1h,
            },
        )
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

pub(super) fn anthropic_error_type(status: u16) -> &'static str {
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
