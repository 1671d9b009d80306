//! Criterion benchmarks of the SSE decoder (network-sized and tiny chunks) and encoder.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use switchboard::sse::{encode_event, SseDecoder, SseItem, DEFAULT_MAX_FRAME_BYTES};

/// A realistic `OpenAI` chat-completions stream of 50 frames: a role frame, 47
/// content deltas (some with multi-byte text), a finish frame with usage, and
/// `data: [DONE]`.
fn openai_stream() -> Vec<u8> {
    let words = [
        "Hello",
        " there",
        "!",
        " h\u{e9}llo",
        " \u{1F30D}",
        " \u{65E5}\u{672C}",
        " the",
        " quick",
        " brown",
        " fox",
    ];
    let head = r#"{"id":"chatcmpl-AbC123xyz","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":"#;
    let mut s: Vec<String> = Vec::new();
    s.push(format!(
        "data: {head}{{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
    ));
    for i in 0..47 {
        let word = words[i % words.len()];
        s.push(format!(
            "data: {head}{{\"content\":\"{word}\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
        ));
    }
    s.push(format!(
        "data: {head}{{}},\"logprobs\":null,\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":12,\"completion_tokens\":47,\"total_tokens\":59}}}}\n\n"
    ));
    s.push("data: [DONE]\n\n".to_owned());
    s.concat().into_bytes()
}

/// Decodes `stream` in chunks of `chunk` bytes, returning the total data length.
fn decode(decoder: &mut SseDecoder, stream: &[u8], chunk: usize) -> usize {
    let mut total = 0;
    for piece in stream.chunks(chunk) {
        let pushed = decoder.push(piece, |item| {
            if let SseItem::Event(event) = item {
                total += black_box(event.data).len();
            }
        });
        if pushed.is_err() {
            return 0;
        }
    }
    if decoder.finish().is_err() {
        return 0;
    }
    total
}

fn bench_decode(c: &mut Criterion) {
    let stream = openai_stream();
    let mut group = c.benchmark_group("sse_decode");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    for chunk in [10usize, 1460] {
        group.bench_function(format!("openai_50_frames/{chunk}B_chunks"), |b| {
            let mut decoder = SseDecoder::new(DEFAULT_MAX_FRAME_BYTES);
            b.iter(|| decode(&mut decoder, black_box(&stream), chunk));
        });
    }
    group.finish();
}

fn bench_encode(c: &mut Criterion) {
    // The data payloads of the same stream, re-encoded as a gateway would.
    let stream = openai_stream();
    let mut payloads = Vec::new();
    let mut decoder = SseDecoder::new(DEFAULT_MAX_FRAME_BYTES);
    let pushed = decoder.push(&stream, |item| {
        if let SseItem::Event(event) = item {
            payloads.push(event.data.to_vec());
        }
    });
    assert!(pushed.is_ok() && payloads.len() == 50);

    let mut group = c.benchmark_group("sse_encode");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.bench_function("openai_50_frames", |b| {
        let mut out = Vec::with_capacity(stream.len());
        b.iter(|| {
            out.clear();
            for data in &payloads {
                encode_event(&mut out, None, black_box(data));
            }
            black_box(out.len())
        });
    });
    group.finish();
}

criterion_group!(benches, bench_decode, bench_encode);
criterion_main!(benches);
