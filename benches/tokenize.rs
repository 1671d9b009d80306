//! Criterion benchmarks of the token counter on 1 MiB of each kind of input,
//! ordinary and hostile: the worst kind's time per MiB is the cost a hostile
//! client can impose per MiB of body (docs/security.md, "Hostile input").

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use switchboard::admit::tokens::{count, count_text, Cancel, Countable};

const MIB: usize = 1 << 20;

/// `unit` repeated to about 1 MiB.
fn run_of(unit: &str) -> String {
    unit.repeat(MIB / unit.len())
}

/// Ordinary prose and code: the repository's README, docs and sources, repeated to 1 MiB.
fn ordinary() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap_or_default();
    // The reference prose moved from the README to docs/: keep the same mix.
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    docs.sort();
    for p in docs {
        text.push_str(&std::fs::read_to_string(p).unwrap_or_default());
    }
    text.push_str(&std::fs::read_to_string(root.join("src/tokens.rs")).unwrap_or_default());
    let mut out = String::with_capacity(MIB + text.len());
    while out.len() < MIB {
        out.push_str(&text);
    }
    out
}

fn inputs() -> Vec<(&'static str, String)> {
    vec![
        ("ordinary", ordinary()),
        ("one-ascii-char", run_of("a")),
        ("two-byte-char", run_of("é")),
        ("cjk-char", run_of("中")),
        ("emoji", run_of("😀")),
        ("combining-mark", run_of("\u{301}")),
        ("digits", run_of("7")),
        ("punctuation", run_of("!")),
        ("spaces", run_of(" ")),
        ("newlines", run_of("\n")),
        ("alternating", run_of("aB")),
        ("tiny-words", run_of("a ")),
    ]
}

fn bench_count(c: &mut Criterion) {
    let mut g = c.benchmark_group("count_tokens_1MiB");
    g.sample_size(10);
    let cancel = Cancel::default();
    for (name, text) in inputs() {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| count_text(black_box(&text), u64::MAX, &cancel))
        });
    }
    g.finish();
    // The reference (tiktoken) on ordinary text, for the ratio: the linear
    // counter must not make the common case slower.
    let mut g = c.benchmark_group("reference_tiktoken_1MiB");
    g.sample_size(10);
    let text = ordinary();
    let bpe = tiktoken_rs::o200k_base_singleton();
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("ordinary", |b| {
        b.iter(|| bpe.encode_ordinary(black_box(&text)).len())
    });
    g.finish();
}

/// The whole request path of a count: JSON parse, text extraction, count, for
/// 1 MiB of tiny messages and 1 MiB of one character in one message.
fn bench_request(c: &mut Criterion) {
    let mut g = c.benchmark_group("count_request_1MiB");
    g.sample_size(10);
    let tiny: Vec<String> = (0..MIB / 40)
        .map(|i| format!("{{\"role\":\"user\",\"content\":\"m{i}\"}}"))
        .collect();
    let tiny = format!("{{\"messages\":[{}]}}", tiny.join(","));
    let one = format!(
        "{{\"messages\":[{{\"role\":\"user\",\"content\":\"{}\"}}]}}",
        run_of("a")
    );
    let cancel = Cancel::default();
    for (name, body) in [("tiny-messages", tiny), ("one-char-message", one)] {
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let v: serde_json::Value =
                    serde_json::from_str(black_box(&body)).unwrap_or_default();
                let mut c = Countable::default();
                if let Some(m) = v.get("messages") {
                    c.add(m);
                }
                count(&c, u64::MAX, &cancel)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_count, bench_request);
criterion_main!(benches);
