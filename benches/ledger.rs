//! Criterion benchmark of the usage ledger's SQLite writer: a batch of 256
//! rows (the writer's batch under load) shaped as a benchmark request's
//! (one attempt, a key, a model, an upstream host), written in one
//! transaction into a file in a temporary directory, with its rollups.
//! Reported per row: the ledger thread's cost per request under load.
#![allow(clippy::panic)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use switchboard::obs::outcome::AttemptNote;
use switchboard::state::ledger::sqlite::Sqlite;
use switchboard::state::ledger::{Backend, Row};

fn row(i: i64) -> Row {
    Row {
        request_id: format!("0193a5c2-7d1e-7c3a-9f00-{i:012x}"),
        time_ms: 1_764_460_800_000 + i,
        key_id: "bench".into(),
        team: None,
        family: "openai",
        provider: Some("openai".into()),
        model: Some("gpt-5-mini".into()),
        upstream_protocol: Some("openai"),
        upstream_host: Some("127.0.0.1:28100".into()),
        status: 200,
        input_tokens: Some(182),
        output_tokens: Some(96),
        cached_tokens: Some(0),
        cache_write_tokens: None,
        reasoning_tokens: Some(0),
        cost_usd: Some(0.000_237_5),
        latency_ms: 1.234,
        ttft_ms: None,
        tried: vec![AttemptNote {
            provider: "openai".into(),
            model: "gpt-5-mini".into(),
            upstream: "openai".into(),
            status: Some(200),
            failure: None,
            cooled_ms: None,
            ms: 1,
        }],
        adjusted: None,
        error: None,
    }
}

fn bench_write(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("switchboard-ledger-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("{}: {e}", dir.display());
    }
    let mut db = Sqlite::open(&dir.join("ledger.sqlite")).unwrap_or_else(|e| panic!("{e}"));
    let mut next = 0i64;
    let mut g = c.benchmark_group("ledger_sqlite");
    g.throughput(Throughput::Elements(256));
    g.bench_function("write_256_rows", |b| {
        b.iter_batched(
            || {
                let rows: Vec<Row> = (next..next + 256).map(row).collect();
                next += 256;
                rows
            },
            |rows| {
                if let Err(e) = db.write(&rows) {
                    panic!("ledger write: {e}");
                }
            },
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench_write);
criterion_main!(benches);
