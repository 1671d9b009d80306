//! Criterion benchmarks of the gateway's same-family hot path: request
//! inspection (2 KB and 200 KB bodies), alone and followed by the
//! session-affinity hash of the stable prefix it leaves for a pick that
//! needs it, that hash alone, passthrough rewriting of response bodies and of
//! SSE frames per family, and listing rendering.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use switchboard::admit::validate::inspect;
use switchboard::config::{Catalog, KeyStore};
use switchboard::family::Family;
use switchboard::runtime::Snapshot;
use switchboard::translate::passthrough::{model_json, rewrite_body, Framing, PassthroughStream};

fn openai_request(bytes: usize) -> Vec<u8> {
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(bytes / 45 + 1);
    serde_json::json!({
        "model": "openai/gpt-5",
        "temperature": 0.7,
        "max_tokens": 512,
        "stream": true,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": &filler[..bytes.saturating_sub(200)]}
        ]
    })
    .to_string()
    .into_bytes()
}

fn frames(family: Family, n: usize) -> Vec<u8> {
    let mut s = String::new();
    for i in 0..n {
        match family {
            Family::OpenAi => s.push_str(&format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-5-2025-08-07\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token{i} \"}},\"finish_reason\":null}}]}}\n\n"
            )),
            Family::Anthropic => s.push_str(&format!(
                "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"token{i} \"}}}}\n\n"
            )),
            Family::Responses => s.push_str(&format!(
                "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{seq},\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"token{i} \",\"logprobs\":[]}}\n\n",
                seq = i + 4
            )),
            // Gemini counts the tokens so far in every chunk.
            Family::Gemini => s.push_str(&format!(
                "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"token{i} \"}}],\"role\":\"model\"}},\"index\":0}}],\"usageMetadata\":{{\"promptTokenCount\":12,\"candidatesTokenCount\":{i},\"totalTokenCount\":{total}}},\"modelVersion\":\"gemini-3.1-pro\",\"responseId\":\"r1\"}}\r\n\r\n",
                total = i + 12
            )),
            // Bedrock streams are event-stream frames, decoded before the
            // translator sees them; the SSE form of their events.
            Family::Bedrock => s.push_str(&format!(
                "event: contentBlockDelta\ndata: {{\"contentBlockIndex\":0,\"delta\":{{\"text\":\"token{i} \"}}}}\n\n"
            )),
        }
    }
    s.into_bytes()
}

fn bench_inspect(c: &mut Criterion) {
    let mut g = c.benchmark_group("inspect_request");
    for size in [2 * 1024, 200 * 1024] {
        let body = openai_request(size);
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(size), &body, |b, body| {
            b.iter(|| inspect(Family::OpenAi, black_box(body), false).map(|r| r.params.len()))
        });
        // What a request pays when a pick compares upstreams by its prefix
        // (no session header, no cache key, two usable upstreams): the
        // peek, then the hash it left for later.
        g.bench_with_input(
            BenchmarkId::new("then_affinity_hash", size),
            &body,
            |b, body| {
                b.iter(|| {
                    inspect(Family::OpenAi, black_box(body), false)
                        .map(|r| r.affinity.hash(black_box(body)))
                })
            },
        );
    }
    g.finish();
}

/// The prefix hash alone (`peek::affinity` on the same bodies' `messages`):
/// what session affinity costs a request whose pick compares upstreams.
fn bench_affinity(c: &mut Criterion) {
    #[derive(serde::Deserialize)]
    struct Messages<'a> {
        #[serde(borrow)]
        messages: &'a serde_json::value::RawValue,
    }
    let mut g = c.benchmark_group("affinity_prefix_hash");
    for size in [2 * 1024, 200 * 1024] {
        let body = openai_request(size);
        let Ok(m) = serde_json::from_slice::<Messages<'_>>(&body) else {
            return;
        };
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(size), &m.messages, |b, raw| {
            b.iter(|| {
                switchboard::protocol::common::peek::affinity(
                    None,
                    None,
                    Some(black_box(raw.get().as_bytes())),
                )
            })
        });
    }
    g.finish();
}

fn bench_rewrite_body(c: &mut Criterion) {
    let body = br#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-5-2025-08-07","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how can I help you today?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}"#;
    let name = model_json("openai/gpt-5");
    c.bench_function("rewrite_body/openai", |b| {
        b.iter(|| rewrite_body(Family::OpenAi, black_box(body), &name).map_or(0, |r| r.0.len()))
    });
    // A whole answer as OpenAI sends it (pretty-printed, usage with its
    // details: the load benchmark's fixture), two of them in turn so that
    // no peek is answered from the last document it read.
    let pretty = std::fs::read("benches/load/fixtures/openai_response.json").unwrap_or_default();
    let other = String::from_utf8_lossy(&pretty)
        .replacen("chatcmpl-", "chatcmpl-X", 1)
        .into_bytes();
    let bodies = [pretty, other];
    let mut turn = 0;
    c.bench_function("rewrite_body/openai_pretty", |b| {
        b.iter(|| {
            turn ^= 1;
            rewrite_body(Family::OpenAi, black_box(&bodies[turn]), &name).map_or(0, |r| r.0.len())
        })
    });
}

fn bench_passthrough_frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("passthrough_per_frame");
    for family in Family::ALL {
        let input = frames(family, 50);
        g.throughput(Throughput::Elements(50));
        g.bench_function(family.name(), |b| {
            let mut out = Vec::with_capacity(input.len() * 2);
            b.iter(|| {
                let mut s = PassthroughStream::new(family, Framing::Sse, model_json("m"), 1 << 20);
                out.clear();
                for chunk in input.chunks(1460) {
                    let _ = s.push(chunk, &mut out);
                }
                out.len()
            })
        });
    }
    g.finish();
}

fn bench_listings(c: &mut Criterion) {
    let text = std::fs::read_to_string("conf/catalog.json").unwrap_or_default();
    let Ok(catalog) = Catalog::from_str("conf/catalog.json", &text, &|_| None) else {
        return;
    };
    c.bench_function("render_listings/default_catalog", |b| {
        b.iter(|| Snapshot::new(black_box(catalog.clone()), KeyStore::default()))
    });
}

criterion_group!(
    benches,
    bench_inspect,
    bench_affinity,
    bench_rewrite_body,
    bench_passthrough_frames,
    bench_listings
);
criterion_main!(benches);
