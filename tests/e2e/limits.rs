//! End-to-end: per-key rpm / tpm over a sliding minute and budgets that hold
//! exactly (docs/configuration.md "Limits and budgets"), on the real binary over sockets with the
//! mock upstream: embedded (budgets in `--data`, shared by two processes on one directory and
//! across an upgrade; a file locked by another process) and in Redis (two instances sharing
//! one budget and one rpm; Redis going away mid-load under `--redis-fail open` and `closed`;
//! Redis stalling: late and lost reservations, leases renewed).
//!
//! Costs are deterministic: the `metered` model's prompt is free and its
//! completion costs 0.001 USD a token; every request asks for at most 8 output
//! tokens and the mock answers "hi" with exactly 8 (one per word, see
//! common/mock_upstream), so the worst case reserved equals the real
//! cost, 0.008 USD, and a budget of 0.08 USD pays for exactly 10 requests.
//!
//! The Redis tests, in module `needs_redis`, need a Redis on 127.0.0.1:6379:
//! ignored by a plain `cargo test`, run by tests/run.sh (which starts one;
//! so does `crate::common::servers::ensure_redis` when `redis-server` is installed);
//! each uses a key prefix of its own, removed at the end. The full-disk
//! tests, in module `needs_root`, mount a small tmpfs: ignored, run as root
//! with `cargo test --test e2e -- --ignored needs_root::`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{authed, catalog, keys, model, Gateway, TempDir};
use crate::common::http_client::{self, parse_sse, Request, Response};
use crate::common::mock_upstream::{MockUpstream, Protocol};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchboard::config::{BudgetPeriod, KeyStore};
use switchboard::obs::metrics::Metrics;
use switchboard::state::limits::{period_at, FailMode, Limits, LimitsConfig};

const BUDGET_KEY: &str = "sk-budget";
const RPM_KEY: &str = "sk-rpm-limits";
const TPM_KEY: &str = "sk-tpm";
const LOAD_KEY: &str = "sk-load";
const DAILY_KEY: &str = "sk-daily";
/// 0.001 USD per completion token, in nano-USD.
const TOKEN_NANOS: i64 = 1_000_000;
const REDIS: &str = "redis://127.0.0.1:6379";

fn limits_catalog(mock: &MockUpstream) -> Value {
    let mut c = catalog(mock);
    c["models"].as_array_mut().unwrap().push(model(
        "metered",
        "deepseek",
        json!({"pricing": {"prompt": "0", "completion": "0.001"}}),
    ));
    c
}

fn limits_keys(budget_usd: &str) -> Value {
    let mut k = keys();
    k["keys"].as_array_mut().unwrap().extend([
        json!({"id": "budgeted", "key": BUDGET_KEY, "budget": {"usd": budget_usd, "period": "total"}}),
        json!({"id": "rpm-limited", "key": RPM_KEY, "rpm": 2}),
        json!({"id": "tpm-limited", "key": TPM_KEY, "tpm": 300}),
        json!({"id": "load", "key": LOAD_KEY, "rpm": 100000, "budget": {"usd": "100", "period": "month"}}),
        json!({"id": "daily", "key": DAILY_KEY, "tpm": 100000, "budget": {"usd": "1", "period": "day"}}),
    ]);
    k
}

/// Request `i` of a mixed load: A whole, A stream (with usage), B whole, C
/// whole; each asks for at most 8 output tokens.
fn metered(i: usize, key: &str) -> (Protocol, Request) {
    match i % 4 {
        0 => (
            Protocol::OpenAi,
            authed(
                "openai",
                CHAT,
                key,
                &json!({"model": "metered", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
            ),
        ),
        1 => (
            Protocol::OpenAi,
            authed(
                "openai",
                CHAT,
                key,
                &json!({"model": "deepseek/metered", "max_tokens": 8, "stream": true,
                        "stream_options": {"include_usage": true},
                        "messages": [{"role": "user", "content": "hi"}]}),
            ),
        ),
        2 => {
            let mut b = anthropic_body("metered", "hi", None, false);
            b["max_tokens"] = json!(8);
            (Protocol::Anthropic, authed("anthropic", MESSAGES, key, &b))
        }
        _ => {
            let mut b = gemini_body("hi", None);
            b["generationConfig"] = json!({"maxOutputTokens": 8});
            (
                Protocol::Gemini,
                authed(
                    "gemini",
                    &gemini_path("deepseek/metered", GeminiMode::Whole),
                    key,
                    &b,
                ),
            )
        }
    }
}

/// The output tokens a successful response reports.
fn output_tokens(p: Protocol, r: &Response) -> i64 {
    if r.header("content-type")
        .unwrap_or("")
        .starts_with("text/event-stream")
    {
        let usage = parse_sse(&r.body)
            .iter()
            .filter_map(|e| e.json())
            .rfind(|v| v["usage"].is_object())
            .unwrap_or_else(|| panic!("no usage chunk in {}", r.text()));
        return usage["usage"]["completion_tokens"].as_i64().unwrap();
    }
    let v = r.json();
    match p {
        Protocol::OpenAi | Protocol::Responses => v["usage"]["completion_tokens"].as_i64(),
        Protocol::Anthropic => v["usage"]["output_tokens"].as_i64(),
        Protocol::Gemini => v["usageMetadata"]["candidatesTokenCount"].as_i64(),
    }
    .unwrap_or_else(|| panic!("no usage in {v}"))
}

/// Sends `n` mixed requests with `key` at once, spread over `gateways`.
async fn burst(gateways: &[SocketAddr], key: &str, n: usize) -> Vec<(Protocol, Response)> {
    team_burst(gateways, &[key], n).await
}

/// Checks a burst against a budget that pays for exactly `fits` requests;
/// returns the real cost of the successful ones (nano-USD).
fn check_budget_burst(results: &[(Protocol, Response)], fits: usize) -> i64 {
    let ok: Vec<_> = results.iter().filter(|(_, r)| r.status == 200).collect();
    let refused: Vec<_> = results.iter().filter(|(_, r)| r.status != 200).collect();
    assert_eq!(
        ok.len(),
        fits,
        "statuses: {:?}",
        results.iter().map(|(_, r)| r.status).collect::<Vec<_>>()
    );
    for (p, r) in &refused {
        let e = assert_error(*p, r, 429);
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains("budget of 0.08 USD in total"), "{msg}");
        if *p == Protocol::OpenAi {
            assert_eq!(e["code"], "insufficient_quota", "{e}");
        }
        assert!(r.header("retry-after").is_none(), "a budget is not a rate");
        assert!(r.header("x-switchboard-budget-remaining").is_some());
    }
    let mut cost = 0;
    for (p, r) in &ok {
        let left: f64 = r
            .header("x-switchboard-budget-remaining")
            .expect("budget header")
            .parse()
            .unwrap();
        assert!((0.0..0.08).contains(&left), "{left}");
        let out = output_tokens(*p, r);
        assert_eq!(out, 8, "the mock's usage this test relies on");
        cost += out * TOKEN_NANOS;
    }
    cost
}

#[tokio::test]
async fn forty_concurrent_requests_get_exactly_what_the_budget_pays_for() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("0.08"), &[]).await;
    let results = burst(&[gw.addr], BUDGET_KEY, 40).await;
    let cost = check_budget_burst(&results, 10);
    assert_eq!(cost, 80_000_000);
    // Nothing is left, and the header says so.
    let (p, req) = metered(0, BUDGET_KEY);
    let r = gw.send(&req).await;
    assert_error(p, &r, 429);
    assert_eq!(r.header("x-switchboard-budget-remaining"), Some("0.00"));
    // Other keys are not affected; keys without a budget carry no header.
    let (_, req) = metered(0, crate::common::gateway::KEY);
    let r = gw.send(&req).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("x-switchboard-budget-remaining").is_none());
}

#[tokio::test]
async fn a_budget_survives_a_restart() {
    let mock = MockUpstream::start().await;
    let data = TempDir::new();
    let dir = data.file("data");
    let args = ["--data", dir.to_str().unwrap()];
    let (c, k) = (limits_catalog(&mock), limits_keys("0.04"));
    {
        let gw = Gateway::start_with(&c, &k, &args).await;
        for (i, left) in ["0.032", "0.024", "0.016"].iter().enumerate() {
            let (_, req) = metered(i * 2, BUDGET_KEY);
            let r = gw.send(&req).await;
            assert_eq!(r.status, 200, "{}", r.text());
            assert_eq!(r.header("x-switchboard-budget-remaining"), Some(*left));
        }
        // Dropped: the process is killed (SIGKILL), no shutdown hook runs.
    }
    assert!(dir.join("limits.sqlite").exists());
    let gw = Gateway::start_with(&c, &k, &args).await;
    for left in ["0.008", "0.00"] {
        let (_, req) = metered(0, BUDGET_KEY);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-switchboard-budget-remaining"), Some(left));
    }
    let (p, req) = metered(2, BUDGET_KEY);
    let r = gw.send(&req).await;
    let e = assert_error(p, &r, 429);
    assert!(e["message"].as_str().unwrap().contains("budget"), "{e}");
}

/// What `DATA/limits.sqlite` holds for a key's budget: (spent, held).
fn spend_in_file(dir: &std::path::Path, key_id: &str, period: &str) -> (i64, i64) {
    let db = rusqlite::Connection::open(dir.join("limits.sqlite")).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    db.query_row(
        "SELECT spent_nanos, held_nanos FROM budget_spend WHERE key_id = ?1 AND period = ?2",
        [key_id, period],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap_or((0, 0))
}

/// Two processes on one data directory (the old and the new process of an
/// upgrade, both serving): forty requests at once, spread over both, and a
/// budget that pays for ten: exactly ten are served, and the file holds
/// their spend. (Each process with its own view admitted ten of its own.)
#[tokio::test]
async fn two_processes_on_one_data_directory_enforce_one_budget_exactly() {
    let mock = MockUpstream::start().await;
    let data = TempDir::new();
    let dir = data.file("data");
    let args = ["--data", dir.to_str().unwrap()];
    let (c, k) = (limits_catalog(&mock), limits_keys("0.08"));
    let a = Gateway::start_with(&c, &k, &args).await;
    let b = Gateway::start_with(&c, &k, &args).await;
    let results = burst(&[a.addr, b.addr], BUDGET_KEY, 40).await;
    let cost = check_budget_burst(&results, 10);
    assert_eq!(cost, 80_000_000);
    for gw in [&a, &b] {
        let (p, req) = metered(2, BUDGET_KEY);
        let r = gw.send(&req).await;
        assert_error(p, &r, 429);
        assert_eq!(r.header("x-switchboard-budget-remaining"), Some("0.00"));
    }
    // Streams settle just after their last byte.
    eventually(Duration::from_secs(10), "nothing held", || async {
        (spend_in_file(&dir, "budgeted", "total") == (80_000_000, 0)).then_some(())
    })
    .await;
}

/// A stream in flight on one process holds its worst case on the other;
/// when its client goes away, the other sees the budget whole again.
#[tokio::test]
async fn a_reservation_in_flight_on_one_process_holds_on_the_other() {
    let mock = MockUpstream::start().await;
    let data = TempDir::new();
    let dir = data.file("data");
    let args = ["--data", dir.to_str().unwrap()];
    let (c, k) = (limits_catalog(&mock), limits_keys("0.016"));
    let a = Gateway::start_with(&c, &k, &args).await;
    let b = Gateway::start_with(&c, &k, &args).await;
    let req = authed(
        "openai",
        CHAT,
        BUDGET_KEY,
        &json!({"model": "metered", "max_tokens": 8, "stream": true, "messages": [
            {"role": "system", "content": "[[stall:30000]]"}, {"role": "user", "content": "hi"}]}),
    );
    let mut s = http_client::send_streaming(a.addr, &req).await.unwrap();
    assert_eq!(s.header("x-switchboard-budget-remaining"), Some("0.008"));
    assert!(s.next_chunk().await.unwrap().is_some());
    assert_eq!(budget_left(&b, BUDGET_KEY).await, "0.008");
    // One more fits, on either; then none.
    let (_, req) = metered(0, BUDGET_KEY);
    let r = b.send(&req).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-switchboard-budget-remaining"), Some("0.00"));
    let (p, req) = metered(2, BUDGET_KEY);
    assert_error(p, &a.send(&req).await, 429);
    drop(s);
    eventually(
        Duration::from_secs(20),
        "the other process to see the release",
        || async { (budget_left(&b, BUDGET_KEY).await == "0.008").then_some(()) },
    )
    .await;
}

/// Another process holds the budget file's write lock for longer than the
/// store waits (2 s): the request is served without its budget checked
/// (no budget header), counted and logged, and what it reserved and spent
/// is written once the lock is free.
#[tokio::test]
async fn a_budget_file_locked_by_another_process_admits_and_writes_the_spend_later() {
    let mock = MockUpstream::start().await;
    let data = TempDir::new();
    let dir = data.file("data");
    let args = ["--data", dir.to_str().unwrap()];
    let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("0.08"), &args).await;
    let (_, req) = metered(0, BUDGET_KEY);
    let r = gw.send(&req).await;
    assert_eq!(r.header("x-switchboard-budget-remaining"), Some("0.072"));
    let (locked, release) = (
        std::sync::mpsc::channel::<()>(),
        std::sync::mpsc::channel::<()>(),
    );
    let file = dir.join("limits.sqlite");
    let holder = std::thread::spawn(move || {
        let db = rusqlite::Connection::open(file).unwrap();
        db.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked.0.send(()).unwrap();
        release.1.recv().unwrap();
        db.execute_batch("COMMIT").unwrap();
    });
    locked.1.recv().unwrap();
    let (_, req) = metered(0, BUDGET_KEY);
    let r = gw.send(&req).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("x-switchboard-budget-remaining").is_none());
    let m = metrics_text(gw.metrics).await;
    assert!(
        metric_value(&m, "switchboard_limits_store_late_total", &[]).unwrap() >= 1.0,
        "{m}"
    );
    assert!(
        gw.log().contains("did not answer within 2 s"),
        "{}",
        gw.log()
    );
    release.0.send(()).unwrap();
    holder.join().unwrap();
    eventually(Duration::from_secs(20), "the spend in the file", || async {
        (spend_in_file(&dir, "budgeted", "total") == (16_000_000, 0)).then_some(())
    })
    .await;
    let (_, req) = metered(0, BUDGET_KEY);
    let r = gw.send(&req).await;
    assert_eq!(r.header("x-switchboard-budget-remaining"), Some("0.056"));
}

/// A gateway process started by hand (the harness waits on a port of its
/// own choosing; an upgrade's new process listens on the old one's).
struct Process {
    child: std::process::Child,
    dir: TempDir,
}

impl Process {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.file("gateway.log")).unwrap_or_default()
    }

    fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.file("access.log")).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A zero-downtime upgrade on one data directory: five streams in flight
/// on the old process hold their worst case while the new one (`-u`, the
/// old one's sockets) starts and serves; a budget that pays for ten gets
/// exactly ten answers across both. (The new process used to start with
/// the spend the file held and none of the old one's reservations: 15.)
#[tokio::test]
async fn an_upgrade_keeps_one_budget_across_the_old_and_the_new_process() {
    use crate::common::gateway::provider_key;
    let mock = MockUpstream::start().await;
    let data = TempDir::new();
    let dir = data.file("data");
    let conf_s = crate::common::gateway::pingora_conf(
        &data.file("pingora.yaml"),
        &format!(
            "upgrade_sock: {}\ngrace_period_seconds: 30\n",
            data.file("upgrade.sock").display()
        ),
    );
    let (c, k) = (limits_catalog(&mock), limits_keys("0.08"));
    let dir_s = dir.display().to_string();
    let old = Gateway::start_with(&c, &k, &["--data", &dir_s, "--conf", &conf_s]).await;
    let stream = authed(
        "openai",
        CHAT,
        BUDGET_KEY,
        &json!({"model": "metered", "max_tokens": 8, "stream": true, "messages": [
            {"role": "system", "content": "[[stall:15000]]"}, {"role": "user", "content": "hi"}]}),
    );
    let mut streams = Vec::new();
    for left in ["0.072", "0.064", "0.056", "0.048", "0.04"] {
        let mut s = http_client::send_streaming(old.addr, &stream)
            .await
            .unwrap();
        assert_eq!(s.header("x-switchboard-budget-remaining"), Some(left));
        assert!(s.next_chunk().await.unwrap().is_some());
        streams.push(tokio::spawn(async move {
            let mut body = Vec::new();
            while let Some(chunk) = s.next_chunk().await.unwrap() {
                body.extend_from_slice(&chunk);
            }
            String::from_utf8_lossy(&body).contains("[DONE]")
        }));
    }
    // The new process, on the same address and data directory: it waits for
    // the old one's sockets, sent on SIGQUIT.
    let files = TempDir::new();
    std::fs::write(files.file("catalog.json"), c.to_string()).unwrap();
    std::fs::write(files.file("keys.json"), k.to_string()).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--catalog")
        .arg(files.file("catalog.json"))
        .arg("--keys")
        .arg(files.file("keys.json"))
        .args(["--listen", &old.addr.to_string()])
        .args(["--metrics", &old.metrics.to_string()])
        .args(["--data", &dir_s, "--conf", &conf_s, "-u"])
        .env("SB_TEST_KEY_OPENAI", provider_key("openai"))
        .env("SB_TEST_KEY_ANTHROPIC", provider_key("anthropic"))
        .env("SB_TEST_KEY_GEMINI", provider_key("gemini"))
        .env_remove("SWITCHBOARD_REDIS")
        .env_remove("SWITCHBOARD_DATA")
        .env("RUST_LOG", "info")
        .stdout(std::fs::File::create(files.file("access.log")).unwrap())
        .stderr(std::fs::File::create(files.file("gateway.log")).unwrap())
        .spawn()
        .unwrap();
    let new = Process { child, dir: files };
    eventually(
        Duration::from_secs(30),
        "the new process to wait for the sockets",
        || async { new.log().contains("Bootstrap starting").then_some(()) },
    )
    .await;
    // Pingora's new process listens on the upgrade socket; the old one
    // connects to it on SIGQUIT (retrying a while if it is not there yet).
    old.signal("QUIT");
    eventually(
        Duration::from_secs(30),
        "the new process to start",
        || async { new.log().contains("switchboard listening on").then_some(()) },
    )
    .await;
    // The old process stops taking connections (after Pingora's 5 s) and
    // drains its streams.
    eventually(
        Duration::from_secs(30),
        "the old process to drain",
        || async {
            old.log()
                .contains("Graceful shutdown started")
                .then_some(())
        },
    )
    .await;
    // Twenty more, on the new process, while the streams are still in
    // flight on the old one: five fit.
    let mut served = 0;
    for i in 0..20 {
        let (p, req) = metered(i, BUDGET_KEY);
        let r = http_client::send(old.addr, &req).await.unwrap();
        if r.status == 200 {
            served += 1;
        } else {
            let e = assert_error(p, &r, 429);
            assert!(e["message"].as_str().unwrap().contains("budget"), "{e}");
        }
    }
    let mut whole = 0;
    for s in streams {
        whole += usize::from(s.await.unwrap());
    }
    assert_eq!(whole, 5, "the streams in flight finished");
    assert_eq!(served, 5, "the budget pays for ten in all");
    assert!(
        new.access_log().contains(CHAT),
        "the new process served: {}",
        new.log()
    );
    eventually(Duration::from_secs(10), "the spend in the file", || async {
        (spend_in_file(&dir, "budgeted", "total") == (80_000_000, 0)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn failed_requests_release_their_reservation() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("0.016"), &[]).await;
    // Upstream errors, before and after the first byte: nothing is spent.
    for marker in ["[[status:500]]", "[[status:429]]"] {
        let r = gw
            .send(&authed(
                "openai",
                CHAT,
                BUDGET_KEY,
                &json!({"model": "metered", "max_tokens": 8, "messages": [{"role": "user", "content": format!("hi {marker}")}]}),
            ))
            .await;
        assert!(r.status >= 500 || r.status == 429, "{}", r.text());
        assert_eq!(r.header("x-switchboard-budget-remaining"), Some("0.016"));
    }
    // Still room for exactly two.
    for left in ["0.008", "0.00"] {
        let (_, req) = metered(0, BUDGET_KEY);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-switchboard-budget-remaining"), Some(left));
    }
}

/// The budget left as a request that fails after its reservation reports it
/// (a model whose provider key is unset: refused after the reservation, so
/// it spends nothing and holds nothing).
async fn budget_left(gw: &Gateway, key: &str) -> String {
    let r = gw
        .send(&authed(
            "openai",
            CHAT,
            key,
            &json!({"model": "orphan-key", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
        ))
        .await;
    assert!(r.status >= 400, "{}", r.text());
    r.header("x-switchboard-budget-remaining")
        .unwrap_or_else(|| panic!("no budget header: {:?}", r.headers))
        .to_string()
}

#[tokio::test]
async fn a_client_gone_mid_stream_releases_its_reservation() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("0.016"), &[]).await;
    assert_eq!(budget_left(&gw, BUDGET_KEY).await, "0.016");
    let req = authed(
        "openai",
        CHAT,
        BUDGET_KEY,
        &json!({"model": "metered", "max_tokens": 8, "stream": true, "messages": [
            {"role": "system", "content": "[[stall:30000]]"}, {"role": "user", "content": "hi"}]}),
    );
    let mut s = http_client::send_streaming(gw.addr, &req).await.unwrap();
    assert_eq!(s.header("x-switchboard-budget-remaining"), Some("0.008"));
    assert!(s.next_chunk().await.unwrap().is_some());
    // While the stream is in flight its worst case is held.
    assert_eq!(budget_left(&gw, BUDGET_KEY).await, "0.008");
    drop(s);
    // The upstream reports usage only at the end, so nothing is known: the
    // whole reservation comes back.
    eventually(
        Duration::from_secs(20),
        "the reservation's release",
        || async { (budget_left(&gw, BUDGET_KEY).await == "0.016").then_some(()) },
    )
    .await;
    eventually(
        Duration::from_secs(20),
        "the upstream stream to be dropped",
        || async { (mock.aborted_streams() >= 1).then_some(()) },
    )
    .await;
}

/// tpm 300: a request alone above it is refused for good; requests one
/// after another (spread over `gateways`) reserve about 100 tokens each and
/// settle to about 30, so more fit than the reservations alone would admit.
async fn tpm_reserves_the_worst_case_and_settles(gateways: &[SocketAddr]) {
    // Alone above the limit: refused, and waiting would not help.
    let big = authed(
        "openai",
        CHAT,
        TPM_KEY,
        &json!({"model": "metered", "max_tokens": 400, "messages": [{"role": "user", "content": "hi"}]}),
    );
    let r = http_client::send(gateways[0], &big).await.unwrap();
    let e = assert_error(Protocol::OpenAi, &r, 429);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("300 tokens per minute"),
        "{e}"
    );
    assert!(r.header("retry-after").is_none());
    // Each request reserves its bytes plus 8 (about 100 tokens) and settles
    // to the mock's count (a quarter of the bytes plus 8): more requests fit
    // one after another than the reservations alone would let in at once.
    let mut ok = 0;
    let refused = loop {
        let (_, req) = metered(0, TPM_KEY);
        let r = http_client::send(gateways[ok % gateways.len()], &req)
            .await
            .unwrap();
        if r.status != 200 {
            break r;
        }
        ok += 1;
        assert!(ok < 50, "tpm never refused");
    };
    assert!(ok > 3, "only {ok} requests fit");
    let e = assert_error(Protocol::OpenAi, &refused, 429);
    assert!(
        e["message"].as_str().unwrap().contains("tokens per minute"),
        "{e}"
    );
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=61).contains(&wait), "{wait}");
}

#[tokio::test]
async fn tpm_reserves_the_worst_case_and_settles_to_the_real_count() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("1"), &[]).await;
    tpm_reserves_the_worst_case_and_settles(&[gw.addr]).await;
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Two requests late in a calendar minute; after the minute turns the third
/// is still refused (a calendar window would have reset), and after its
/// `retry-after` it is served.
async fn rpm_slides_over_the_minute_boundary(gateways: &[SocketAddr]) {
    let s = unix_now() % 60;
    if !(45..=50).contains(&s) {
        tokio::time::sleep(Duration::from_secs((45 + 60 - s) % 60)).await;
    }
    for (i, addr) in gateways.iter().cycle().take(2).enumerate() {
        let (_, req) = metered(i * 2, RPM_KEY);
        let r = http_client::send(addr, &req).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let minute = unix_now() / 60;
    while unix_now() / 60 == minute {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut wait = 0;
    for (i, addr) in gateways.iter().enumerate() {
        let (p, req) = metered(i * 2, RPM_KEY);
        let r = http_client::send(addr, &req).await.unwrap();
        let e = assert_error(p, &r, 429);
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("2 requests per minute"),
            "{e}"
        );
        wait = r.header("retry-after").unwrap().parse::<u64>().unwrap();
        assert!((1..=61).contains(&wait), "{wait}");
    }
    // Served once the window has slid past the first request.
    let mut tries = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(wait)).await;
        let (_, req) = metered(0, RPM_KEY);
        let r = http_client::send(gateways[0], &req).await.unwrap();
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 429, "{}", r.text());
        wait = r.header("retry-after").unwrap().parse().unwrap();
        tries += 1;
        assert!(tries < 3, "the window never slid");
    }
}

#[tokio::test]
async fn rpm_is_a_sliding_minute() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("1"), &[]).await;
    rpm_slides_over_the_minute_boundary(&[gw.addr]).await;
}

#[tokio::test]
async fn count_tokens_counts_against_rpm_only() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("0.001"), &[]).await;
    // A budget too small for any inference does not stop counting.
    let body = anthropic_body("metered", "hi", None, false);
    let r = gw
        .send(&authed("anthropic", COUNT, BUDGET_KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    for _ in 0..2 {
        let r = gw.send(&authed("anthropic", COUNT, RPM_KEY, &body)).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let r = gw.send(&authed("anthropic", COUNT, RPM_KEY, &body)).await;
    assert_error(Protocol::Anthropic, &r, 429);
}

#[test]
fn invalid_limits_are_refused_at_load_with_their_path() {
    let dir = TempDir::new();
    let mut k = keys();
    k["keys"][0]["budget"] = json!({"usd": "50", "period": "week"});
    std::fs::write(dir.file("keys.json"), k.to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["--check", "--catalog", "conf/catalog.json", "--keys"])
        .arg(dir.file("keys.json"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("$.keys[0].budget.period"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["--redis-fail", "sometimes", "--check"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--redis-fail"));
}

// ---------------------------------------------------------------------------
// Teams (docs/configuration.md "Teams"): a request must fit its key's limits
// and its team's, reserved together.

const ML_A: &str = "sk-team-ml-a";
const ML_B: &str = "sk-team-ml-b";
const WEB_A: &str = "sk-team-web-a";
const WEB_B: &str = "sk-team-web-b";
const TEAM_ADMIN: &str = "sk-admin-teams";

/// The limits keys plus two teams: `ml` (a budget of `ml_budget` in total,
/// shared by `ml-a`, with no limits of its own, and `ml-b`, with a budget
/// of its own), and `web` (2 requests a minute, shared by `web-a`, with
/// 100 of its own, and `web-b`); and a key named `ml` with a budget of its
/// own, which is no part of team `ml`.
fn team_keys(ml_budget: &str) -> Value {
    let mut k = limits_keys("1");
    k["teams"] = json!([
        {"id": "ml", "budget": {"usd": ml_budget, "period": "total"}},
        {"id": "web", "rpm": 2},
    ]);
    k["keys"].as_array_mut().unwrap().extend([
        json!({"id": "ml-a", "key": ML_A, "team": "ml"}),
        json!({"id": "ml-b", "key": ML_B, "team": "ml", "budget": {"usd": "1", "period": "total"}}),
        json!({"id": "web-a", "key": WEB_A, "team": "web", "rpm": 100}),
        json!({"id": "web-b", "key": WEB_B, "team": "web"}),
        json!({"id": "ml", "key": "sk-key-named-ml", "budget": {"usd": "0.5", "period": "total"}}),
    ]);
    k
}

/// `n` mixed requests at once, alternating between `keys`, spread over `gateways`.
async fn team_burst(gateways: &[SocketAddr], keys: &[&str], n: usize) -> Vec<(Protocol, Response)> {
    let mut tasks = Vec::new();
    for i in 0..n {
        let (p, req) = metered(i, keys[i % keys.len()]);
        let addr = gateways[i % gateways.len()];
        tasks.push(tokio::spawn(async move {
            (p, http_client::send(addr, &req).await.unwrap())
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

async fn admin_get(gw: &Gateway, path: &str) -> Value {
    let r = http_client::send(
        gw.metrics,
        &Request::get(path).header("authorization", &format!("Bearer {TEAM_ADMIN}")),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.json()
}

/// Checks a burst against a team budget that pays for exactly 10 requests:
/// the refusals name the team.
fn check_team_burst(results: &[(Protocol, Response)]) {
    let ok = results.iter().filter(|(_, r)| r.status == 200).count();
    assert_eq!(
        ok,
        10,
        "statuses: {:?}",
        results.iter().map(|(_, r)| r.status).collect::<Vec<_>>()
    );
    for (p, r) in results.iter().filter(|(_, r)| r.status != 200) {
        let e = assert_error(*p, r, 429);
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains("budget of 0.08 USD in total exhausted for team \"ml\""),
            "{msg}"
        );
        assert!(r.header("retry-after").is_none(), "a budget is not a rate");
    }
    for (p, r) in results.iter().filter(|(_, r)| r.status == 200) {
        assert_eq!(
            output_tokens(*p, r),
            8,
            "the mock's usage this test relies on"
        );
    }
}

/// Two keys of one team share its rpm: the second key is refused once the
/// team's minute is used, by a refusal that names the team; a key of
/// another team, and the key's own window, are untouched.
#[tokio::test]
async fn two_keys_of_a_team_share_its_rpm() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(
        &limits_catalog(&mock),
        &team_keys("1"),
        &["--admin-key", TEAM_ADMIN],
    )
    .await;
    for key in [WEB_A, WEB_B] {
        let (_, req) = metered(0, key);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    for (i, key) in [WEB_B, WEB_A].iter().enumerate() {
        let (p, req) = metered(i * 2, key);
        let r = gw.send(&req).await;
        let e = assert_error(p, &r, 429);
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains("rate limit of 2 requests per minute exceeded for team \"web\""),
            "{msg}"
        );
        let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=61).contains(&wait), "{wait}");
    }
    // web-a's own window counts only its one admitted request.
    let a = admin_get(&gw, "/admin/keys/web-a").await;
    assert_eq!(a["rpm"], json!({"limit": 100, "used": 1}), "{a}");
    let t = admin_get(&gw, "/admin/teams/web").await;
    assert_eq!(t["rpm"], json!({"limit": 2, "used": 2}), "{t}");
    // Other keys go on.
    let (_, req) = metered(0, ML_A);
    assert_eq!(gw.send(&req).await.status, 200);
    // The refusals carry the team on their access lines.
    eventually(Duration::from_secs(5), "the access lines", || async {
        let lines: Vec<Value> = gw
            .access_log()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let web: Vec<_> = lines.iter().filter(|l| l["team"] == "web").collect();
        (web.len() == 4).then_some(())
    })
    .await;
    assert!(!gw.access_log().contains(WEB_A), "no key in the access log");
}

/// Forty requests at once from two keys of one team whose budget pays for
/// ten: exactly ten are served; the team's state reads like a key's; the
/// usage ledger groups them under the team; the key named like the team
/// spends nothing of it.
#[tokio::test]
async fn a_team_budget_holds_exactly_under_concurrent_requests_from_two_keys() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(
        &limits_catalog(&mock),
        &team_keys("0.08"),
        &["--admin-key", TEAM_ADMIN, "--ledger-flush-ms", "50"],
    )
    .await;
    let results = team_burst(&[gw.addr], &[ML_A, ML_B], 40).await;
    check_team_burst(&results);
    // Streams settle just after their last byte.
    let t = eventually(
        Duration::from_secs(10),
        "the team's holds to settle",
        || async {
            let t = admin_get(&gw, "/admin/teams/ml").await;
            (t["budget"]["reserved_usd"] == "0.00").then_some(t)
        },
    )
    .await;
    assert_eq!(t["id"], "ml");
    assert_eq!(t["budget"]["usd"], "0.08");
    assert_eq!(t["budget"]["spent_usd"], "0.08");
    assert_eq!(t["budget"]["remaining_usd"], "0.00");
    assert_eq!(
        (t["rpm"].clone(), t["tpm"].clone()),
        (Value::Null, Value::Null)
    );
    // ml-b's own budget holds what its own requests spent.
    let served_b = results
        .iter()
        .enumerate()
        .filter(|(i, (_, r))| i % 2 == 1 && r.status == 200)
        .count();
    let b = admin_get(&gw, "/admin/keys/ml-b").await;
    let spent_b: f64 = b["budget"]["spent_usd"].as_str().unwrap().parse().unwrap();
    assert!((spent_b - 0.008 * served_b as f64).abs() < 1e-9, "{b}");
    // The key named ml has its own budget, untouched.
    let k = admin_get(&gw, "/admin/keys/ml").await;
    assert_eq!(k["budget"]["spent_usd"], "0.00", "{k}");
    // Usage by team: the forty requests, ten of them paid.
    let u = eventually(Duration::from_secs(10), "the ledger rows", || async {
        let u = admin_get(&gw, "/admin/usage?group_by=team").await;
        let ml = u["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["team"] == "ml")
            .cloned();
        ml.filter(|g| g["requests"] == 40)
    })
    .await;
    assert_eq!(u["errors"], 30, "{u}");
    assert!((u["cost_usd"].as_f64().unwrap() - 0.08).abs() < 1e-9, "{u}");
    let by_key = admin_get(&gw, "/admin/usage?team=ml&group_by=key").await;
    let keys: Vec<_> = by_key["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys, ["ml-a", "ml-b"]);
    // An unknown team: 404 in the admin error shape.
    let r = http_client::send(
        gw.metrics,
        &Request::get("/admin/teams/nobody")
            .header("authorization", &format!("Bearer {TEAM_ADMIN}")),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"].is_string());
}

// ---------------------------------------------------------------------------
// Fleet mode: Redis.

/// Needs a Redis: ignored by a plain `cargo test`, run by tests/run.sh.
mod needs_redis {
    use super::*;
    use crate::common::servers::ensure_redis;

    /// A key prefix of this test's own, and a connection to read what it holds.
    struct RedisNs {
        prefix: String,
        conn: redis::aio::MultiplexedConnection,
    }

    impl RedisNs {
        async fn new(name: &str) -> RedisNs {
            ensure_redis();
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let client = redis::Client::open(REDIS).unwrap();
            RedisNs {
                prefix: format!("sbtest:{}:{nanos}:{name}:", std::process::id()),
                conn: client.get_multiplexed_async_connection().await.unwrap(),
            }
        }

        async fn get(&self, key_id: &str, what: &str) -> i64 {
            self.get_raw(&format!("{{{key_id}}}:{what}")).await
        }

        /// A team's figure, under the team namespace (`PREFIXteam:{ID}:what`).
        async fn team_get(&self, team: &str, what: &str) -> i64 {
            self.get_raw(&format!("team:{{{team}}}:{what}")).await
        }

        /// The integer at `PREFIX` + `rest` (0 when absent).
        async fn get_raw(&self, rest: &str) -> i64 {
            let mut c = self.conn.clone();
            let v: Option<i64> = redis::cmd("GET")
                .arg(format!("{}{rest}", self.prefix))
                .query_async(&mut c)
                .await
                .unwrap();
            v.unwrap_or(0)
        }

        async fn cleanup(&self) {
            let mut c = self.conn.clone();
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{}*", self.prefix))
                .query_async(&mut c)
                .await
                .unwrap();
            if !keys.is_empty() {
                let _: i64 = redis::cmd("DEL")
                    .arg(keys)
                    .query_async(&mut c)
                    .await
                    .unwrap();
            }
        }
    }

    async fn fleet(mock: &MockUpstream, ns: &RedisNs, budget: &str, extra: &[&str]) -> Gateway {
        let mut args = vec!["--redis", REDIS, "--redis-prefix", ns.prefix.as_str()];
        args.extend_from_slice(extra);
        Gateway::start_with(&limits_catalog(mock), &limits_keys(budget), &args).await
    }

    /// Two instances on one Redis, two keys of one team, forty requests at
    /// once, a team budget that pays for ten: exactly ten are served, and
    /// Redis holds the team's spend under the team's own namespace (the key
    /// named like the team holds nothing).
    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn two_instances_on_one_redis_share_a_team_budget_exactly() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("team").await;
        let mut gws = Vec::new();
        for _ in 0..2 {
            gws.push(
                Gateway::start_with(
                    &limits_catalog(&mock),
                    &team_keys("0.08"),
                    &[
                        "--redis",
                        REDIS,
                        "--redis-prefix",
                        ns.prefix.as_str(),
                        "--admin-key",
                        TEAM_ADMIN,
                    ],
                )
                .await,
            );
        }
        let results = team_burst(&[gws[0].addr, gws[1].addr], &[ML_A, ML_B], 40).await;
        check_team_burst(&results);
        eventually(
            Duration::from_secs(10),
            "reservations to settle",
            || async {
                (ns.team_get("ml", "held:total").await == 0
                    && ns.get("ml-b", "held:total").await == 0)
                    .then_some(())
            },
        )
        .await;
        assert_eq!(ns.team_get("ml", "spent:total").await, 80_000_000);
        assert_eq!(ns.get("ml", "spent:total").await, 0, "the key named ml");
        let served_b = results
            .iter()
            .enumerate()
            .filter(|(i, (_, r))| i % 2 == 1 && r.status == 200)
            .count() as i64;
        assert_eq!(
            ns.get("ml-b", "spent:total").await,
            served_b * 8 * TOKEN_NANOS
        );
        // Both instances read the team's state from Redis.
        for gw in &gws {
            let t = admin_get(gw, "/admin/teams/ml").await;
            assert_eq!(t["backend"], "redis");
            assert_eq!(t["budget"]["spent_usd"], "0.08", "{t}");
        }
        ns.cleanup().await;
    }

    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn two_instances_on_one_redis_enforce_one_budget_exactly() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("budget").await;
        let a = fleet(&mock, &ns, "0.08", &[]).await;
        let b = fleet(&mock, &ns, "0.08", &[]).await;
        let results = burst(&[a.addr, b.addr], BUDGET_KEY, 40).await;
        let cost = check_budget_burst(&results, 10);
        // Streams settle just after their last byte: wait until nothing is held.
        eventually(
            Duration::from_secs(10),
            "reservations to settle",
            || async { (ns.get("budgeted", "held:total").await == 0).then_some(()) },
        )
        .await;
        let spent = ns.get("budgeted", "spent:total").await;
        assert_eq!(
            spent, cost,
            "Redis holds the sum of the successful requests' costs"
        );
        assert!(spent <= 80_000_000);
        for gw in [&a, &b] {
            let (p, req) = metered(2, BUDGET_KEY);
            let r = gw.send(&req).await;
            assert_error(p, &r, 429);
            assert_eq!(r.header("x-switchboard-budget-remaining"), Some("0.00"));
        }
        // The state the admin route shows, read through the library.
        let limits = Limits::open(
            &LimitsConfig {
                data_dir: None,
                redis: Some(REDIS.into()),
                redis_prefix: ns.prefix.clone(),
                fail: FailMode::Closed,
            },
            Arc::new(Metrics::default()),
        )
        .unwrap();
        let keys = KeyStore::from_str("keys.json", &limits_keys("0.08").to_string()).unwrap();
        let st = limits.state(keys.by_id("budgeted").unwrap()).await.unwrap();
        let bs = st.budget.unwrap();
        assert_eq!((bs.spent, bs.reserved, bs.remaining()), (spent, 0, 0));
        assert_eq!(bs.period.id, "total");
        // Day and month periods: Redis (Lua, on its own clock) names them as the
        // gateway does.
        for (key, id, kind) in [
            (DAILY_KEY, "daily", BudgetPeriod::Day),
            (LOAD_KEY, "load", BudgetPeriod::Month),
        ] {
            let (_, req) = metered(0, key);
            let r = a.send(&req).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let period = period_at(kind, unix_now() as i64).id;
            assert_eq!(ns.get(id, &format!("spent:{period}")).await, 8_000_000);
            let st = limits.state(keys.by_id(id).unwrap()).await.unwrap();
            assert_eq!(st.budget.unwrap().spent, 8_000_000);
        }
        let st = limits.state(keys.by_id("daily").unwrap()).await.unwrap();
        assert_eq!(st.tpm.map(|(l, _)| l), Some(100_000));
        assert!(
            st.tpm.unwrap().1 > 8,
            "the settled tokens are in the window"
        );
        drop((a, b));
        ns.cleanup().await;
    }

    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn a_shared_rpm_admits_exactly_the_limit_across_instances() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("rpm").await;
        let a = fleet(&mock, &ns, "1", &[]).await;
        let b = fleet(&mock, &ns, "1", &[]).await;
        let results = burst(&[a.addr, b.addr], RPM_KEY, 12).await;
        let ok = results.iter().filter(|(_, r)| r.status == 200).count();
        assert_eq!(ok, 2, "rpm 2 across both instances");
        for (p, r) in results.iter().filter(|(_, r)| r.status != 200) {
            let e = assert_error(*p, r, 429);
            assert!(
                e["message"]
                    .as_str()
                    .unwrap()
                    .contains("2 requests per minute"),
                "{e}"
            );
            let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
            assert!((1..=61).contains(&wait), "{wait}");
        }
        drop((a, b));
        ns.cleanup().await;
    }

    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn a_shared_tpm_reserves_and_settles_across_instances() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("tpm").await;
        let a = fleet(&mock, &ns, "1", &[]).await;
        let b = fleet(&mock, &ns, "1", &[]).await;
        tpm_reserves_the_worst_case_and_settles(&[a.addr, b.addr]).await;
        drop((a, b));
        ns.cleanup().await;
    }

    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn a_shared_rpm_slides_over_the_minute_boundary() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("slide").await;
        let a = fleet(&mock, &ns, "1", &[]).await;
        let b = fleet(&mock, &ns, "1", &[]).await;
        rpm_slides_over_the_minute_boundary(&[a.addr, b.addr]).await;
        drop((a, b));
        ns.cleanup().await;
    }

    /// A TCP forwarder to the test Redis that can be cut (an outage) and
    /// started again on the same port.
    struct Forwarder {
        port: u16,
        stop: tokio::sync::watch::Sender<bool>,
    }

    impl Forwarder {
        async fn start(port: u16) -> Forwarder {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .unwrap();
            let port = listener.local_addr().unwrap().port();
            let (stop, mut stopped) = tokio::sync::watch::channel(false);
            tokio::spawn(async move {
                let mut conns = tokio::task::JoinSet::new();
                loop {
                    tokio::select! {
                        a = listener.accept() => {
                            let Ok((mut down, _)) = a else { break };
                            conns.spawn(async move {
                                if let Ok(mut up) = tokio::net::TcpStream::connect("127.0.0.1:6379").await {
                                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                                }
                            });
                        }
                        _ = stopped.changed() => break,
                    }
                }
                conns.abort_all();
            });
            Forwarder { port, stop }
        }

        fn cut(&self) {
            let _ = self.stop.send(true);
        }
    }

    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn redis_going_away_fails_open_or_closed_as_configured() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("outage").await;
        let fwd = Forwarder::start(0).await;
        let url = format!("redis://127.0.0.1:{}", fwd.port);
        let start = |fail: &'static str| {
            let args = [
                "--redis",
                url.as_str(),
                "--redis-prefix",
                ns.prefix.as_str(),
                "--redis-fail",
                fail,
            ]
            .map(str::to_string);
            let (c, k) = (limits_catalog(&mock), limits_keys("1"));
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Gateway::start_with(&c, &k, &args).await
            }
        };
        let open = start("open").await;
        let closed = start("closed").await;
        for gw in [&open, &closed] {
            let (_, req) = metered(0, LOAD_KEY);
            let r = gw.send(&req).await;
            assert_eq!(r.status, 200, "{}", r.text());
            assert!(r.header("x-switchboard-budget-remaining").is_some());
        }
        // Load on the open instance while Redis goes away under it.
        let load = {
            let addr = open.addr;
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for i in 0..30 {
                    let (_, req) = metered(i, LOAD_KEY);
                    statuses.push(http_client::send(addr, &req).await.unwrap().status);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                statuses
            })
        };
        tokio::time::sleep(Duration::from_millis(150)).await;
        fwd.cut();
        let statuses = load.await.unwrap();
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
        // Open: still served; the failures are counted and the outage logged once.
        let (_, req) = metered(0, LOAD_KEY);
        assert_eq!(open.send(&req).await.status, 200);
        let m = metrics_text(open.metrics).await;
        let failures = metric_value(
            &m,
            "switchboard_limits_redis_failures_total",
            &["mode=\"open\""],
        )
        .unwrap();
        assert!(failures >= 1.0, "{m}");
        let log = open.log();
        assert_eq!(log.matches("Redis unreachable").count(), 1, "{log}");
        // Closed: refused with 503 in each family's shape.
        for i in 0..4 {
            let (p, req) = metered(i, LOAD_KEY);
            let r = closed.send(&req).await;
            let e = assert_error(p, &r, 503);
            assert!(
                e["message"]
                    .as_str()
                    .unwrap()
                    .contains("--redis-fail closed"),
                "{e}"
            );
        }
        let m = metrics_text(closed.metrics).await;
        assert!(
            metric_value(
                &m,
                "switchboard_limits_redis_failures_total",
                &["mode=\"closed\""]
            )
            .unwrap()
                >= 4.0,
            "{m}"
        );
        // Redis back: the closed instance serves again.
        let back = Forwarder::start(fwd.port).await;
        eventually(
            Duration::from_secs(30),
            "the closed instance to recover",
            || async {
                let (_, req) = metered(0, LOAD_KEY);
                (closed.send(&req).await.status == 200).then_some(())
            },
        )
        .await;
        assert!(closed.log().contains("reachable again"), "{}", closed.log());
        drop((open, closed));
        back.cut();
        ns.cleanup().await;
    }

    /// A TCP relay to the test Redis that can stall: while stalled it passes
    /// nothing on (a Redis that accepts connections but stops answering) and
    /// keeps what it got; resumed, it hands all of it to Redis, late, as a
    /// Redis that had stopped would run what was queued.
    struct Staller {
        port: u16,
        stalled: tokio::sync::watch::Sender<bool>,
        held: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Staller {
        async fn start() -> Staller {
            use std::sync::atomic::Ordering;
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .unwrap();
            let port = listener.local_addr().unwrap().port();
            let (stalled, watch) = tokio::sync::watch::channel(false);
            let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let counter = held.clone();
            tokio::spawn(async move {
                while let Ok((down, _)) = listener.accept().await {
                    let Ok(up) = tokio::net::TcpStream::connect("127.0.0.1:6379").await else {
                        continue;
                    };
                    let (mut down_r, mut down_w) = down.into_split();
                    let (mut up_r, mut up_w) = up.into_split();
                    tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut up_r, &mut down_w).await;
                    });
                    let (mut watch, counter) = (watch.clone(), counter.clone());
                    tokio::spawn(async move {
                        let mut pending = Vec::new();
                        let mut buf = vec![0u8; 16 * 1024];
                        let mut open = true;
                        loop {
                            tokio::select! {
                                n = down_r.read(&mut buf), if open => {
                                    let n = n.unwrap_or(0);
                                    if n == 0 {
                                        open = false;
                                        if pending.is_empty() { break; }
                                        continue;
                                    }
                                    if *watch.borrow() {
                                        counter.fetch_add(n, Ordering::SeqCst);
                                        pending.extend_from_slice(&buf[..n]);
                                    } else if up_w.write_all(&buf[..n]).await.is_err() {
                                        break;
                                    }
                                }
                                r = watch.changed() => {
                                    if r.is_err() { break; }
                                    if !*watch.borrow() && !pending.is_empty() {
                                        let late = std::mem::take(&mut pending);
                                        if up_w.write_all(&late).await.is_err() { break; }
                                        if !open {
                                            // Let Redis run what it got before the connection closes.
                                            tokio::time::sleep(Duration::from_secs(1)).await;
                                            break;
                                        }
                                    }
                                }
                            }
                        }
                    });
                }
            });
            Staller {
                port,
                stalled,
                held,
            }
        }

        fn stall(&self) {
            self.stalled.send_replace(true);
        }

        fn resume(&self) {
            self.stalled.send_replace(false);
        }

        /// Bytes the gateway sent while the relay was stalled.
        fn held(&self) -> usize {
            self.held.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    /// The number of fields of a hash (the reservations of a key: `resv`).
    async fn hlen(ns: &RedisNs, key_id: &str, what: &str) -> i64 {
        let mut c = ns.conn.clone();
        redis::cmd("HLEN")
            .arg(format!("{}{{{key_id}}}:{what}", ns.prefix))
            .query_async(&mut c)
            .await
            .unwrap()
    }

    /// A reserve whose answer never reached the gateway (Redis stalled past
    /// the 2 s timeout and ran it later, within its answer-by time) holds
    /// nothing once its request is over: the gateway releases it by id, and
    /// its lease, never renewed, would end it too. It held for an hour.
    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn a_reservation_whose_answer_was_lost_holds_nothing() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("lost").await;
        let relay = Staller::start().await;
        let url = format!("redis://127.0.0.1:{}", relay.port);
        let args = [
            "--redis",
            url.as_str(),
            "--redis-prefix",
            ns.prefix.as_str(),
            "--redis-fail",
            "open",
        ];
        let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("1"), &args).await;
        let (_, req) = metered(0, BUDGET_KEY);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.header("x-switchboard-budget-remaining").is_some());
        let spent = ns.get("budgeted", "spent:total").await;
        assert_eq!(ns.get("budgeted", "held:total").await, 0);

        relay.stall();
        let (_, req) = metered(0, BUDGET_KEY);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "failing open: {}", r.text());
        assert!(r.header("x-switchboard-budget-remaining").is_none());
        assert!(relay.held() > 0, "the reserve went to the stalled Redis");
        // Redis runs what it held now, well within the reserve's answer-by time.
        relay.resume();
        eventually(Duration::from_secs(60), "nothing held", || async {
            (ns.get("budgeted", "held:total").await == 0
                && hlen(&ns, "budgeted", "resv").await == 0)
                .then_some(())
        })
        .await;
        assert_eq!(ns.get("budgeted", "spent:total").await, spent);
        // Limits are enforced again.
        let (_, req) = metered(0, BUDGET_KEY);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.header("x-switchboard-budget-remaining").is_some());
        drop(gw);
        ns.cleanup().await;
    }

    /// A stream that runs longer than a reservation's lease keeps its hold
    /// (its instance renews the lease); when it ends, the hold goes.
    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn a_long_stream_keeps_its_reservation_past_the_lease() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("renew").await;
        let gw = fleet(&mock, &ns, "0.016", &[]).await;
        let req = authed(
            "openai",
            CHAT,
            BUDGET_KEY,
            &json!({"model": "metered", "max_tokens": 8, "stream": true, "messages": [
                {"role": "system", "content": "[[stall:600000]]"}, {"role": "user", "content": "hi"}]}),
        );
        let mut s = http_client::send_streaming(gw.addr, &req).await.unwrap();
        assert_eq!(s.header("x-switchboard-budget-remaining"), Some("0.008"));
        assert!(s.next_chunk().await.unwrap().is_some());
        let lease = switchboard::state::limits::RESERVATION_LEASE_SECS;
        tokio::time::sleep(Duration::from_secs(lease + 10)).await;
        // Read through the reserve script, which drops ended leases first.
        assert_eq!(budget_left(&gw, BUDGET_KEY).await, "0.008");
        assert_eq!(ns.get("budgeted", "held:total").await, 8_000_000);
        drop(s);
        eventually(Duration::from_secs(20), "the release", || async {
            (ns.get("budgeted", "held:total").await == 0).then_some(())
        })
        .await;
        drop(gw);
        ns.cleanup().await;
    }

    /// A Redis that accepts connections but stops answering: after three
    /// calls in a row that waited out the response timeout, the breaker
    /// answers at once (here: failing open) without calling Redis; the
    /// reservations it was sent and runs late, once it answers again, hold
    /// nothing; and limits are enforced again once it answers.
    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn a_redis_that_stops_answering_trips_the_breaker_and_late_reservations_hold_nothing() {
        let mock = MockUpstream::start().await;
        let ns = RedisNs::new("stall").await;
        let relay = Staller::start().await;
        let url = format!("redis://127.0.0.1:{}", relay.port);
        let args = [
            "--redis",
            url.as_str(),
            "--redis-prefix",
            ns.prefix.as_str(),
            "--redis-fail",
            "open",
        ];
        let gw = Gateway::start_with(&limits_catalog(&mock), &limits_keys("1"), &args).await;
        let (_, req) = metered(0, BUDGET_KEY);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.header("x-switchboard-budget-remaining").is_some());
        let spent = ns.get("budgeted", "spent:total").await;
        assert!(spent > 0);

        relay.stall();
        for i in 0..3 {
            let (_, req) = metered(i, BUDGET_KEY);
            let r = gw.send(&req).await;
            assert_eq!(r.status, 200, "failing open: {}", r.text());
            assert!(r.header("x-switchboard-budget-remaining").is_none());
        }
        let sent = relay.held();
        assert!(sent > 0, "the calls went to the stalled Redis");
        // The breaker is open: these are answered without a call to Redis.
        for i in 0..3 {
            let (_, req) = metered(i, BUDGET_KEY);
            assert_eq!(gw.send(&req).await.status, 200);
        }
        assert_eq!(
            relay.held(),
            sent,
            "a call went to a Redis that kept failing"
        );

        // Redis runs what it was sent only after those calls' answer-by time.
        tokio::time::sleep(Duration::from_secs(11)).await;
        relay.resume();
        eventually(Duration::from_secs(20), "limits enforced again", || async {
            let (_, req) = metered(0, BUDGET_KEY);
            let r = gw.send(&req).await;
            (r.status == 200 && r.header("x-switchboard-budget-remaining").is_some()).then_some(())
        })
        .await;
        // Streams settle just after their last byte.
        eventually(Duration::from_secs(10), "nothing held", || async {
            (ns.get("budgeted", "held:total").await == 0).then_some(())
        })
        .await;
        assert!(ns.get("budgeted", "spent:total").await > spent);
        drop(gw);
        ns.cleanup().await;
    }
}

// ---------------------------------------------------------------------------
// A full disk under the embedded store.

/// Needs root (it mounts a small tmpfs): ignored by a plain `cargo test`;
/// run with `cargo test --test e2e -- --ignored needs_root::`.
mod needs_root {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// A small filesystem of its own (a tmpfs of 4 MiB), unmounted on drop,
    /// that a filler file can fill to the last byte.
    struct SmallDisk {
        mount: PathBuf,
        _dir: TempDir,
    }

    impl SmallDisk {
        fn mount() -> SmallDisk {
            let dir = TempDir::new();
            let mount = dir.file("disk");
            std::fs::create_dir_all(&mount).unwrap();
            let ok = Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
                .arg(&mount)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "cannot mount a tmpfs (these tests need root)");
            SmallDisk { mount, _dir: dir }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.mount.join(name)
        }

        /// Writes a filler file until the disk is full.
        fn fill(&self) {
            use std::io::Write;
            let mut f = std::fs::File::create(self.path("filler")).unwrap();
            let block = vec![0u8; 4096];
            loop {
                match f.write_all(&block) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(28) => break,
                    Err(e) => panic!("filling the disk: {e}"),
                }
            }
            let _ = f.sync_all();
        }

        fn free(&self) {
            std::fs::remove_file(self.path("filler")).unwrap();
        }
    }

    impl Drop for SmallDisk {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        }
    }

    async fn metric(gw: &Gateway, name: &str) -> f64 {
        metric_value(&metrics_text(gw.metrics).await, name, &[]).unwrap_or(f64::NAN)
    }

    fn data_args(dir: &Path) -> Vec<String> {
        vec!["--data".into(), dir.display().to_string()]
    }

    async fn start(mock: &MockUpstream, dir: &Path) -> Gateway {
        let args = data_args(dir);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Gateway::start_with(&limits_catalog(mock), &limits_keys("0.08"), &args).await
    }

    async fn served(gw: &Gateway, left: &str) {
        let (_, req) = metered(0, BUDGET_KEY);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-switchboard-budget-remaining"), Some(left));
    }

    /// The disk fills under a running gateway: requests are served and
    /// their budget enforced, the spend that cannot be written is kept in
    /// memory (logged, counted) and written once space returns. A restart
    /// on a full disk starts, degraded, and enforces what the file holds.
    #[tokio::test]
    #[ignore = "needs root: mounts a small tmpfs (run with -- --ignored needs_root::)"]
    async fn a_full_disk_keeps_budgets_and_writes_the_spend_when_space_returns() {
        let mock = MockUpstream::start().await;
        let disk = SmallDisk::mount();
        let dir = disk.path("data");
        let gw = start(&mock, &dir).await;
        served(&gw, "0.072").await;
        assert_eq!(spend_in_file(&dir, "budgeted", "total"), (8_000_000, 0));

        disk.fill();
        for left in ["0.064", "0.056", "0.048"] {
            served(&gw, left).await;
        }
        assert_eq!(
            spend_in_file(&dir, "budgeted", "total").0,
            8_000_000,
            "nothing could be written"
        );
        eventually(
            Duration::from_secs(10),
            "the unwritten spend gauge",
            || async {
                (metric(&gw, "switchboard_limits_store_unwritten_usd").await == 0.024).then_some(())
            },
        )
        .await;
        assert_eq!(metric(&gw, "switchboard_limits_store_degraded").await, 1.0);
        assert!(metric(&gw, "switchboard_limits_store_write_failures_total").await >= 3.0);
        assert!(gw.log().contains("serving degraded"), "{}", gw.log());

        // Space returns: the spend kept in memory is written.
        disk.free();
        eventually(
            Duration::from_secs(20),
            "the kept spend in the file",
            || async {
                (spend_in_file(&dir, "budgeted", "total") == (32_000_000, 0)).then_some(())
            },
        )
        .await;
        assert_eq!(metric(&gw, "switchboard_limits_store_degraded").await, 0.0);
        assert_eq!(metric(&gw, "switchboard_limits_store_unwritten").await, 0.0);
        assert!(gw.log().contains("is written again"), "{}", gw.log());
        served(&gw, "0.04").await;

        // A restart on a full disk: it starts, says it is degraded, and
        // enforces the budget the file holds.
        drop(gw);
        disk.fill();
        let gw = start(&mock, &dir).await;
        for left in ["0.032", "0.024", "0.016", "0.008", "0.00"] {
            served(&gw, left).await;
        }
        let (p, req) = metered(2, BUDGET_KEY);
        assert_error(p, &gw.send(&req).await, 429);
        eventually(Duration::from_secs(10), "the degraded gauge", || async {
            (metric(&gw, "switchboard_limits_store_degraded").await == 1.0).then_some(())
        })
        .await;
        disk.free();
        eventually(
            Duration::from_secs(20),
            "the kept spend in the file",
            || async {
                (spend_in_file(&dir, "budgeted", "total") == (80_000_000, 0)).then_some(())
            },
        )
        .await;
        drop(gw);
    }

    /// A first start on a full disk (an empty data directory): served,
    /// budgets enforced from memory, said and counted; once space returns
    /// the spend, the usage ledger's rows and the budget store are written.
    #[tokio::test]
    #[ignore = "needs root: mounts a small tmpfs (run with -- --ignored needs_root::)"]
    async fn a_first_start_on_a_full_disk_serves_and_writes_when_space_returns() {
        let mock = MockUpstream::start().await;
        let disk = SmallDisk::mount();
        let dir = disk.path("data");
        std::fs::create_dir_all(&dir).unwrap();
        disk.fill();
        let gw = start(&mock, &dir).await;
        for left in ["0.072", "0.064"] {
            served(&gw, left).await;
        }
        eventually(
            Duration::from_secs(10),
            "the unwritten spend gauge",
            || async {
                (metric(&gw, "switchboard_limits_store_unwritten_usd").await == 0.016).then_some(())
            },
        )
        .await;
        assert_eq!(metric(&gw, "switchboard_limits_store_degraded").await, 1.0);
        let log = gw.log();
        assert!(log.contains("starting degraded"), "{log}");
        assert!(log.contains("usage ledger"), "{log}");
        disk.free();
        eventually(
            Duration::from_secs(20),
            "the kept spend in the file",
            || async {
                (spend_in_file(&dir, "budgeted", "total") == (16_000_000, 0)).then_some(())
            },
        )
        .await;
        eventually(Duration::from_secs(30), "the ledger rows", || async {
            let db = rusqlite::Connection::open(dir.join("ledger.sqlite")).ok()?;
            let n: i64 = db
                .query_row("SELECT COUNT(*) FROM ledger_requests", [], |r| r.get(0))
                .ok()?;
            (n == 2).then_some(())
        })
        .await;
        served(&gw, "0.056").await;
        drop(gw);
    }
}
