//! Criterion benchmarks of streamed responses, decode + translate per frame:
//! every (upstream family → client family) pair through the
//! [`StreamTranslator`] (same-family pairs included, for comparison), and the
//! same-family [`PassthroughStream`] rewrite. Each upstream stream is a
//! realistic text answer of 100 content frames plus its opening and closing
//! frames, pushed one network read per frame; throughput is in frames, so
//! the per-frame time is the inverse of the reported element rate.
#![allow(clippy::panic)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use switchboard::family::Family;
use switchboard::translate::passthrough::{model_json, Framing, PassthroughStream};
use switchboard::translate::stream::StreamTranslator;

const WORDS: [&str; 10] = [
    "Hello",
    " there",
    "!",
    " h\u{e9}llo",
    " \u{1F30D}",
    " \u{65E5}\u{672C}",
    " the \\\"quick\\\"",
    " brown",
    " fox\\n",
    " jumps",
];
const CONTENT_FRAMES: usize = 100;

fn openai_stream() -> Vec<Vec<u8>> {
    let head = r#"{"id":"chatcmpl-AbC123xyz","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":"#;
    let mut s = vec![format!(
        "data: {head}{{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n"
    )];
    for i in 0..CONTENT_FRAMES {
        let word = WORDS[i % WORDS.len()];
        s.push(format!(
            "data: {head}{{\"content\":\"{word}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n"
        ));
    }
    s.push(format!(
        "data: {head}{{}},\"logprobs\":null,\"finish_reason\":\"stop\"}}],\"usage\":null}}\n\n"
    ));
    s.push(r#"data: {"id":"chatcmpl-AbC123xyz","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":100,"total_tokens":112}}

"#.to_string());
    s.push("data: [DONE]\n\n".to_string());
    s.into_iter().map(String::into_bytes).collect()
}

fn anthropic_stream() -> Vec<Vec<u8>> {
    let mut s = vec![
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n".to_string(),
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".to_string(),
        "event: ping\ndata: {\"type\": \"ping\"}\n\n".to_string(),
    ];
    for i in 0..CONTENT_FRAMES {
        let word = WORDS[i % WORDS.len()];
        s.push(format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{word}\"}}}}\n\n"
        ));
    }
    s.push(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
            .to_string(),
    );
    s.push("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":100}}\n\n".to_string());
    s.push("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_string());
    s.into_iter().map(String::into_bytes).collect()
}

fn gemini_stream() -> Vec<Vec<u8>> {
    let mut s = Vec::new();
    for i in 0..CONTENT_FRAMES {
        let word = WORDS[i % WORDS.len()];
        let finish = if i + 1 == CONTENT_FRAMES {
            ",\"finishReason\":\"STOP\""
        } else {
            ""
        };
        s.push(format!(
            "data: {{\"candidates\": [{{\"content\": {{\"parts\": [{{\"text\": \"{word}\"}}],\"role\": \"model\"}}{finish},\"index\": 0}}],\"usageMetadata\": {{\"promptTokenCount\": 12,\"candidatesTokenCount\": {i},\"totalTokenCount\": {},\"promptTokensDetails\": [{{\"modality\": \"TEXT\",\"tokenCount\": 12}}]}},\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"Xy2bZ5-oLqGz1MkPq7n5qAc\"}}\r\n\r\n",
            12 + i
        ));
    }
    s.into_iter().map(String::into_bytes).collect()
}

fn responses_stream() -> Vec<Vec<u8>> {
    let envelope = |status: &str, output: &str, usage: &str| {
        format!("{{\"id\":\"resp_68a1f0c2b3d4\",\"object\":\"response\",\"created_at\":1730000000,\"status\":\"{status}\",\"background\":false,\"error\":null,\"incomplete_details\":null,\"instructions\":null,\"max_output_tokens\":null,\"model\":\"gpt-4o-mini-2024-07-18\",\"output\":[{output}],\"parallel_tool_calls\":true,\"previous_response_id\":null,\"reasoning\":{{\"effort\":null,\"summary\":null}},\"store\":false,\"temperature\":1.0,\"text\":{{\"format\":{{\"type\":\"text\"}}}},\"tool_choice\":\"auto\",\"tools\":[],\"top_p\":1.0,\"truncation\":\"disabled\",\"usage\":{usage},\"user\":null,\"metadata\":{{}}}}")
    };
    let event = |kind: &str, seq: usize, body: &str| {
        format!("event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{seq},{body}}}\n\n")
    };
    let item = "\"item_id\":\"msg_68a1f0c2b3d4\",\"output_index\":0,\"content_index\":0";
    let mut s = vec![
        event("response.created", 0, &format!("\"response\":{}", envelope("in_progress", "", "null"))),
        event("response.output_item.added", 1, "\"output_index\":0,\"item\":{\"id\":\"msg_68a1f0c2b3d4\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"}"),
        event("response.content_part.added", 2, &format!("{item},\"part\":{{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"\"}}")),
    ];
    let mut text = String::new();
    for i in 0..CONTENT_FRAMES {
        let word = WORDS[i % WORDS.len()];
        text.push_str(word);
        s.push(event(
            "response.output_text.delta",
            3 + i,
            &format!("{item},\"delta\":\"{word}\",\"logprobs\":[],\"obfuscation\":\"a1b2\""),
        ));
    }
    let n = 3 + CONTENT_FRAMES;
    let part = format!(
        "{{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"{text}\"}}"
    );
    let message = format!("{{\"id\":\"msg_68a1f0c2b3d4\",\"type\":\"message\",\"status\":\"completed\",\"content\":[{part}],\"role\":\"assistant\"}}");
    s.push(event(
        "response.output_text.done",
        n,
        &format!("{item},\"text\":\"{text}\",\"logprobs\":[]"),
    ));
    s.push(event(
        "response.content_part.done",
        n + 1,
        &format!("{item},\"part\":{part}"),
    ));
    s.push(event(
        "response.output_item.done",
        n + 2,
        &format!("\"output_index\":0,\"item\":{message}"),
    ));
    let usage = "{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":100,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":112}";
    s.push(event(
        "response.completed",
        n + 3,
        &format!("\"response\":{}", envelope("completed", &message, usage)),
    ));
    s.into_iter().map(String::into_bytes).collect()
}

/// A ConverseStream answer, its event-stream messages in the SSE form the
/// translator reads once they are decoded (`:event-type` as the event name).
fn bedrock_stream() -> Vec<Vec<u8>> {
    let mut s = vec!["event: messageStart\ndata: {\"role\":\"assistant\"}\n\n".to_string()];
    for i in 0..CONTENT_FRAMES {
        let word = WORDS[i % WORDS.len()];
        s.push(format!(
            "event: contentBlockDelta\ndata: {{\"contentBlockIndex\":0,\"delta\":{{\"text\":\"{word}\"}}}}\n\n"
        ));
    }
    s.push("event: contentBlockStop\ndata: {\"contentBlockIndex\":0}\n\n".to_string());
    s.push("event: messageStop\ndata: {\"stopReason\":\"end_turn\"}\n\n".to_string());
    s.push("event: metadata\ndata: {\"usage\":{\"inputTokens\":12,\"outputTokens\":100,\"totalTokens\":112},\"metrics\":{\"latencyMs\":300}}\n\n".to_string());
    s.into_iter().map(String::into_bytes).collect()
}

fn stream_of(family: Family) -> Vec<Vec<u8>> {
    match family {
        Family::OpenAi => openai_stream(),
        Family::Anthropic => anthropic_stream(),
        Family::Gemini => gemini_stream(),
        Family::Responses => responses_stream(),
        Family::Bedrock => bedrock_stream(),
    }
}

fn client_model(client: Family) -> &'static str {
    match client {
        Family::OpenAi | Family::Responses => "openai/gpt-4o-mini",
        _ => "gpt-4o-mini",
    }
}

fn bench_translate(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream_translate");
    for upstream in Family::ALL {
        let frames = stream_of(upstream);
        group.throughput(Throughput::Elements(frames.len() as u64));
        let cases = Family::ALL
            .into_iter()
            .map(|client| (client, false))
            .chain(std::iter::once((Family::Anthropic, true)));
        for (client, recording) in cases {
            // `+recording`: what the client receives is recorded so a cut
            // stream can be continued (the default, `continuation: auto`).
            let name = format!(
                "{upstream}_to_{client}{}",
                if recording { "+recording" } else { "" }
            );
            group.bench_function(name, |b| {
                let mut out = Vec::with_capacity(1 << 16);
                b.iter(|| {
                    let t = StreamTranslator::new(
                        upstream,
                        client,
                        Framing::Sse,
                        client_model(client),
                        true,
                        1 << 20,
                    );
                    let mut t = if recording { t.recording() } else { t };
                    out.clear();
                    for frame in &frames {
                        if t.push(black_box(frame), &mut out).is_err() {
                            panic!("{upstream} -> {client}: malformed bench stream");
                        }
                    }
                    if t.finish(&mut out).is_err() {
                        panic!("{upstream} -> {client}: truncated bench stream");
                    }
                    black_box(out.len())
                });
            });
        }
    }
    group.finish();
}

fn bench_passthrough(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream_passthrough");
    // Bedrock clients' streams are event-stream messages: always translated.
    for (family, transcript) in Family::ALL
        .into_iter()
        .filter(|f| *f != Family::Bedrock)
        .flat_map(|f| [(f, false), (f, true)])
    {
        let frames = stream_of(family);
        group.throughput(Throughput::Elements(frames.len() as u64));
        let model = model_json(client_model(family));
        // `+transcript`: the bytes kept so a cut stream can be continued
        // (the default, `continuation: auto`).
        let name = if transcript {
            format!("{family}+transcript")
        } else {
            format!("{family}")
        };
        group.bench_function(name, |b| {
            let mut out = Vec::with_capacity(1 << 16);
            b.iter(|| {
                let mut p = PassthroughStream::new(family, Framing::Sse, model.clone(), 1 << 20);
                if transcript {
                    p.keep_transcript();
                }
                out.clear();
                for frame in &frames {
                    if p.push(black_box(frame), &mut out).is_err() {
                        panic!("{family}: malformed bench stream");
                    }
                }
                if p.finish(&mut out).is_err() {
                    panic!("{family}: truncated bench stream");
                }
                black_box(out.len())
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_translate, bench_passthrough);
criterion_main!(benches);
