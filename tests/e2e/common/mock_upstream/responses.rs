//! OpenAI Responses: whole replies and the typed event stream.
//! Imports `super::*` (the shared answer, ordered JSON, the reply writer);
//! never another protocol's file.

use super::*;

/// Pads each streamed delta like the Responses API's `obfuscation` field.
pub(super) fn obfuscation(delta: &str) -> String {
    const PAD: &str = "mK3xQ9vL2pZ7wR4tYb8n";
    PAD[..PAD.len() - delta.len() % 16].to_owned()
}

/// Numbers the events of a Responses stream (`sequence_number` from 0).
pub(super) struct ResponsesEvents {
    pub(super) frames: Vec<Vec<u8>>,
    pub(super) newline: &'static str,
}

impl ResponsesEvents {
    /// The event of `kind` with `fields` (an object) after `type` and
    /// `sequence_number`.
    pub(super) fn event(kind: &str, sequence: u64, fields: J) -> J {
        let mut all = vec![
            ("type", J::from(kind)),
            ("sequence_number", J::from(sequence)),
        ];
        if let J::Obj(rest) = fields {
            all.extend(rest);
        }
        J::Obj(all)
    }

    pub(super) fn push(&mut self, kind: &str, fields: J) {
        let event = ResponsesEvents::event(kind, self.frames.len() as u64, fields);
        self.frames
            .push(sse(Some(kind), &event.to_json_string(), self.newline));
    }
}

pub(super) fn responses_reply(
    a: &Answer,
    request: &Value,
    stream: bool,
    markers: &Markers,
) -> Reply {
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
    let mut input_details = obj! { "cached_tokens": a.cached_tokens };
    if a.cache_write_tokens > 0 {
        input_details = input_details.with("cache_write_tokens", a.cache_write_tokens);
    }
    let usage = obj! {
        "input_tokens": a.prompt_tokens,
        "input_tokens_details": input_details,
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
