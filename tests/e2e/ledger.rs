//! End-to-end: the usage ledger (docs/operations.md "Usage ledger") and the admin usage API, on the
//! real binary over real sockets: its sums match the requests sent (counts,
//! tokens, cost), in the embedded SQLite file and in PostgreSQL; the gateway
//! keeps serving when PostgreSQL is unreachable or goes away (rows dropped
//! and counted, writing resumes when it is back); a graceful shutdown writes
//! what is queued; retention deletes rows and keeps the daily rollups.
//!
//! The PostgreSQL tests, in module `needs_postgres`, use `SWITCHBOARD_TEST_POSTGRES`
//! (default `postgres://postgres@127.0.0.1:5432/test`, the server `tests/run.sh`
//! starts): ignored by a plain `cargo test`, run by tests/run.sh; each makes a
//! database of its own and drops it after.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::{eventually, metric_value, metrics_text, GOOGLE};
use crate::common::gateway::{authed, catalog, free_port, keys, Gateway, KEY, LIMITED_KEY};
use crate::common::http_client::{self, Request, Response};
use crate::common::mock_upstream::MockUpstream;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ADMIN_KEY: &str = "sk-admin-test-secret";

/// GET an admin path on the metrics listener, with `Authorization: Bearer key`.
async fn admin(gw: &Gateway, path: &str, key: Option<&str>) -> Response {
    let mut r = Request::get(path);
    if let Some(k) = key {
        r = r.header("authorization", &format!("Bearer {k}"));
    }
    http_client::send(gw.metrics, &r).await.unwrap()
}

async fn usage(gw: &Gateway, query: &str) -> Value {
    let r = admin(gw, &format!("/admin/usage{query}"), Some(ADMIN_KEY)).await;
    assert_eq!(r.status, 200, "{query}: {}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    r.json()
}

async fn ledger_metric(gw: &Gateway, name: &str) -> f64 {
    metric_value(&metrics_text(gw.metrics).await, name, &[]).unwrap_or(0.0)
}

/// Sums the ledger should hold, computed from the access-log lines.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Expected {
    requests: u64,
    errors: u64,
    input: u64,
    output: u64,
    cached: u64,
    cache_write: u64,
    reasoning: u64,
    cost: f64,
}

impl Expected {
    fn add(&mut self, line: &Value) {
        let n = |k: &str| line[k].as_u64().unwrap_or(0);
        self.requests += 1;
        self.errors += u64::from(line["status"].as_u64().unwrap() >= 400);
        self.input += n("input_tokens");
        self.output += n("output_tokens");
        self.cached += n("cached_tokens");
        self.cache_write += n("cache_write_tokens");
        self.reasoning += n("reasoning_tokens");
        self.cost += line["cost_usd"].as_f64().unwrap_or(0.0);
    }

    fn assert_matches(&self, got: &Value, what: &str) {
        let n = |k: &str| {
            got[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{what}: {k} in {got}"))
        };
        assert_eq!(n("requests"), self.requests, "{what}: {got}");
        assert_eq!(n("errors"), self.errors, "{what}: {got}");
        assert_eq!(n("input_tokens"), self.input, "{what}: {got}");
        assert_eq!(n("output_tokens"), self.output, "{what}: {got}");
        assert_eq!(n("cached_tokens"), self.cached, "{what}: {got}");
        assert_eq!(n("cache_write_tokens"), self.cache_write, "{what}: {got}");
        assert_eq!(n("reasoning_tokens"), self.reasoning, "{what}: {got}");
        let cost = got["cost_usd"].as_f64().unwrap();
        assert!(
            (cost - self.cost).abs() < 1e-9,
            "{what}: cost {cost} != {}",
            self.cost
        );
    }
}

/// The requests of the workload: billable ones (all four families, whole and
/// streamed, cached and reasoning tokens, a 400, an upstream 500, a second
/// key) and ones that get no row (a listing, a local count, a 401).
fn workload() -> Vec<(Request, bool)> {
    let chat = |text: &str| json!({"model": "openai/gpt-5", "messages": [{"role": "user", "content": text}]});
    let mut w = vec![
        (
            authed("openai", "/v1/chat/completions", KEY, &chat("hello there")),
            true,
        ),
        (
            authed(
                "openai",
                "/v1/chat/completions",
                KEY,
                &chat("a cached one [[cached:4]] with more words"),
            ),
            true,
        ),
        (
            authed(
                "openai",
                "/v1/chat/completions",
                KEY,
                &json!({"model": "gpt-5", "stream": true,
            "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "stream"}]}),
            ),
            true,
        ),
        (
            authed(
                "anthropic",
                "/anthropic/v1/messages",
                KEY,
                &json!({"model": "gemini-any", "max_tokens": 50,
            "stream": true, "messages": [{"role": "user", "content": "translated stream"}]}),
            ),
            true,
        ),
        (
            authed(
                "anthropic",
                "/anthropic/v1/messages",
                KEY,
                &json!({"model": "claude-sonnet-4.7", "max_tokens": 50,
            "messages": [{"role": "user", "content": "whole"}]}),
            ),
            true,
        ),
        (
            authed(
                "anthropic",
                "/anthropic/v1/messages",
                KEY,
                &json!({"model": "claude-sonnet-4.7", "max_tokens": 50, "stream": true,
            "messages": [{"role": "user", "content": "cache me [[cached:3]] [[cache-write:5]] [[cache-write-1h:2]]"}]}),
            ),
            true,
        ),
        (
            authed(
                "gemini",
                &format!("{GOOGLE}/google/gemini-3.1-pro:generateContent"),
                KEY,
                &json!({"contents": [{"role": "user", "parts": [{"text": "think [[thinking]]"}]}]}),
            ),
            true,
        ),
        (
            authed(
                "gemini",
                &format!("{GOOGLE}/google/gemini-any:streamGenerateContent?alt=sse"),
                KEY,
                &json!({"contents": [{"role": "user", "parts": [{"text": "think more [[thinking]]"}]}]}),
            ),
            true,
        ),
        (
            authed(
                "openai",
                "/v1/responses",
                KEY,
                &json!({"model": "openai/gpt-5", "input": "responses api"}),
            ),
            true,
        ),
        (
            authed(
                "openai",
                "/v1/chat/completions",
                KEY,
                &json!({"model": "openai/gpt-5", "temperature": 5,
            "messages": [{"role": "user", "content": "bad"}]}),
            ),
            true,
        ),
        (
            authed(
                "openai",
                "/v1/chat/completions",
                KEY,
                &chat("[[status:500]]"),
            ),
            true,
        ),
        (
            authed(
                "openai",
                "/v1/chat/completions",
                LIMITED_KEY,
                &chat("second key"),
            ),
            true,
        ),
        (
            authed(
                "openai",
                "/v1/chat/completions",
                LIMITED_KEY,
                &chat("second key again"),
            ),
            true,
        ),
        // no row: listing, local count, bad key
        (Request::get("/v1/models"), false),
        (
            authed(
                "anthropic",
                "/anthropic/v1/messages/count_tokens",
                KEY,
                &json!({"model": "claude-sonnet-4.7",
            "messages": [{"role": "user", "content": "count me"}]}),
            ),
            false,
        ),
        (
            authed("openai", "/v1/chat/completions", "sk-nobody", &chat("who")),
            false,
        ),
    ];
    for (i, (r, _)) in w.iter_mut().enumerate() {
        *r = r.clone().header("x-request-id", &format!("ledger-{i}"));
    }
    w
}

/// Sends the workload; the access lines of the billable requests.
async fn send_workload(gw: &Gateway) -> Vec<Value> {
    let w = workload();
    for (r, _) in &w {
        let resp = gw.send(r).await;
        assert!(resp.status > 0);
    }
    let billable: Vec<String> = w
        .iter()
        .enumerate()
        .filter(|(_, (_, b))| *b)
        .map(|(i, _)| format!("ledger-{i}"))
        .collect();
    eventually(Duration::from_secs(10), "the access lines", || async {
        let lines: Vec<Value> = gw
            .access_log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| billable.iter().any(|id| v["request_id"] == id.as_str()))
            .collect();
        (lines.len() == billable.len()).then_some(lines)
    })
    .await
}

/// The usage API agrees with the access lines: totals, each grouping, filters.
async fn assert_usage_matches(gw: &Gateway, lines: &[Value]) {
    let mut total = Expected::default();
    let mut by_key: BTreeMap<String, Expected> = BTreeMap::new();
    let mut by_model: BTreeMap<String, Expected> = BTreeMap::new();
    let mut by_day: BTreeMap<String, Expected> = BTreeMap::new();
    for l in lines {
        total.add(l);
        by_key
            .entry(l["key_id"].as_str().unwrap().into())
            .or_default()
            .add(l);
        let model = format!(
            "{}/{}",
            l["provider"].as_str().unwrap(),
            l["model"].as_str().unwrap()
        );
        by_model.entry(model).or_default().add(l);
        by_day
            .entry(l["time"].as_str().unwrap()[..10].into())
            .or_default()
            .add(l);
    }
    assert!(
        total.input > 0 && total.output > 0 && total.cost > 0.0,
        "{total:?}"
    );
    assert!(total.cached >= 7 && total.reasoning > 0, "{total:?}");
    assert_eq!(total.cache_write, 5, "{total:?}");
    assert_eq!(total.errors, 2, "a 400 and an upstream 500");
    let all = eventually(Duration::from_secs(10), "the ledger rows", || async {
        let u = usage(gw, "").await;
        (u["total"]["requests"].as_u64() == Some(total.requests)).then_some(u)
    })
    .await;
    total.assert_matches(&all["total"], "total");
    assert_eq!(all["source"], "rollups");
    assert!(all.get("groups").is_none(), "{all}");

    for (by, expected) in [("key", &by_key), ("model", &by_model), ("day", &by_day)] {
        let u = usage(gw, &format!("?group_by={by}")).await;
        assert_eq!(u["group_by"], by);
        let groups = u["groups"].as_array().unwrap();
        let names: Vec<&str> = groups.iter().map(|g| g[by].as_str().unwrap()).collect();
        assert_eq!(
            names,
            expected.keys().map(String::as_str).collect::<Vec<_>>(),
            "{u}"
        );
        for g in groups {
            expected[g[by].as_str().unwrap()].assert_matches(g, by);
        }
        total.assert_matches(&u["total"], by);
    }
    // filters
    by_key["limited"].assert_matches(&usage(gw, "?key=limited").await["total"], "key=limited");
    let gpt5 = by_model["openai/gpt-5"];
    gpt5.assert_matches(
        &usage(gw, "?model=openai%2Fgpt-5").await["total"],
        "provider/model",
    );
    gpt5.assert_matches(&usage(gw, "?model=gpt-5").await["total"], "bare model");
    let day = by_day.keys().next().unwrap().clone();
    total.assert_matches(
        &usage(gw, &format!("?from={day}&to={day}")).await["total"],
        "that day",
    );
    let u = usage(gw, "?from=2000-01-01&to=2000-01-02&group_by=day").await;
    assert_eq!(
        (
            u["total"]["requests"].as_u64(),
            u["groups"].as_array().unwrap().len()
        ),
        (Some(0), 0)
    );
    // an instant bound reads the rows rather than the rollups: the same sums
    let hour_ago = instant(-3600);
    let u = usage(gw, &format!("?from={hour_ago}&group_by=model")).await;
    assert_eq!(u["source"], "rows");
    total.assert_matches(&u["total"], "rows since an hour ago");
    for g in u["groups"].as_array().unwrap() {
        by_model[g["model"].as_str().unwrap()].assert_matches(g, "rows by model");
    }
    let u = usage(gw, &format!("?to={hour_ago}")).await;
    assert_eq!(u["total"]["requests"], 0);
}

/// RFC 3339 of now plus `secs`.
fn instant(secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    switchboard::util::rfc3339::Rfc3339::seconds(now + secs).to_string()
}

async fn start_with(mock: &MockUpstream, args: &[&str]) -> Gateway {
    let mut all = vec!["--admin-key", ADMIN_KEY];
    all.extend_from_slice(args);
    Gateway::start_with(&catalog(mock), &keys(), &all).await
}

#[tokio::test]
async fn sqlite_ledger_sums_match_the_requests_sent() {
    let mock = MockUpstream::start().await;
    let gw = start_with(&mock, &["--ledger-flush-ms", "50"]).await;
    let lines = send_workload(&gw).await;
    assert_eq!(lines.len(), 13);
    assert_usage_matches(&gw, &lines).await;
    assert!(gw.dir.file("data").join("ledger.sqlite").is_file());
    assert_eq!(
        ledger_metric(&gw, "switchboard_ledger_rows_written_total").await,
        13.0
    );
    assert_eq!(
        ledger_metric(&gw, "switchboard_ledger_rows_dropped_total").await,
        0.0
    );

    // The admin API: its key, constant errors, never a client key.
    let r = admin(&gw, "/admin/usage", None).await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r
        .header("www-authenticate")
        .is_some_and(|v| v.starts_with("Bearer")));
    assert_eq!(
        admin(&gw, "/admin/usage", Some("sk-admin-test-secreT"))
            .await
            .status,
        401
    );
    assert_eq!(admin(&gw, "/admin/usage", Some(KEY)).await.status, 401);
    let r = http_client::send(
        gw.metrics,
        &Request::get("/admin/usage").header("authorization", ADMIN_KEY),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 401, "a bare key without the Bearer scheme");
    let r = admin(&gw, "/admin/usage?group_by=hour", Some(ADMIN_KEY)).await;
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("group_by"),
        "{}",
        r.text()
    );
    let r = admin(&gw, "/admin/usage?from=last-week", Some(ADMIN_KEY)).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        admin(&gw, "/admin/nothing", Some(ADMIN_KEY)).await.status,
        404
    );
    assert_eq!(admin(&gw, "/admin/nothing", None).await.status, 401);
    let post = http_client::send(
        gw.metrics,
        &Request::post("/admin/usage").header("authorization", &format!("Bearer {ADMIN_KEY}")),
    )
    .await
    .unwrap();
    assert_eq!(post.status, 405);
    let by_key = admin(&gw, "/admin/usage?group_by=key", Some(ADMIN_KEY))
        .await
        .text();
    for secret in [KEY, LIMITED_KEY, ADMIN_KEY] {
        assert!(
            !by_key.contains(secret),
            "a key in the usage answer: {by_key}"
        );
        assert!(!gw.log().contains(secret), "a key in the log");
    }
    // The exposition still answers on every other path.
    assert!(metrics_text(gw.metrics)
        .await
        .contains("switchboard_requests_total"));
}

#[tokio::test]
async fn without_an_admin_key_the_admin_routes_are_404() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    for key in [None, Some(ADMIN_KEY), Some("")] {
        let r = admin(&gw, "/admin/usage", key).await;
        assert_eq!(r.status, 404, "{}", r.text());
    }
    // An empty --admin-key (or SWITCHBOARD_ADMIN_KEY) is no key at all.
    let gw = Gateway::start_with_env(
        &catalog(&mock),
        &keys(),
        &[],
        &[("SWITCHBOARD_ADMIN_KEY", "")],
    )
    .await;
    assert_eq!(admin(&gw, "/admin/usage", Some("")).await.status, 404);
    let gw = Gateway::start_with_env(
        &catalog(&mock),
        &keys(),
        &[],
        &[("SWITCHBOARD_ADMIN_KEY", ADMIN_KEY)],
    )
    .await;
    assert_eq!(
        admin(&gw, "/admin/usage", Some(ADMIN_KEY)).await.status,
        200
    );
}

/// Rows in `ledger.sqlite`, and the rollups' request count.
fn sqlite_counts(path: &std::path::Path) -> (i64, i64) {
    let db = rusqlite::Connection::open(path).unwrap();
    let rows: i64 = db
        .query_row("SELECT COUNT(*) FROM ledger_requests", [], |r| r.get(0))
        .unwrap();
    let rolled: i64 = db
        .query_row(
            "SELECT COALESCE(SUM(requests), 0) FROM ledger_daily",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (rows, rolled)
}

#[tokio::test]
async fn a_graceful_shutdown_writes_what_is_queued() {
    let mock = MockUpstream::start().await;
    for signal in ["TERM", "INT"] {
        // Nothing is written before shutdown: batches wait an hour.
        let mut gw = start_with(
            &mock,
            &["--ledger-flush-ms", "3600000", "--ledger-batch", "100000"],
        )
        .await;
        let n = 40;
        for i in 0..n {
            let body = json!({"model": "openai/gpt-5", "messages": [{"role": "user", "content": format!("n{i}")}]});
            let r = gw
                .send(&authed("openai", "/v1/chat/completions", KEY, &body))
                .await;
            assert_eq!(r.status, 200);
        }
        let text = metrics_text(gw.metrics).await;
        assert_eq!(
            metric_value(&text, "switchboard_ledger_rows_written_total", &[]),
            Some(0.0)
        );
        eventually(
            Duration::from_secs(5),
            "the rows taken by the writer",
            || async {
                let text = metrics_text(gw.metrics).await;
                (metric_value(&text, "switchboard_ledger_rows_pending", &[]) == Some(n as f64))
                    .then_some(())
            },
        )
        .await;
        gw.stop(signal);
        let path = gw.dir.file("data").join("ledger.sqlite");
        assert_eq!(sqlite_counts(&path), (n, n), "{signal}\n{}", gw.log());
        assert!(gw.log().contains("ledger: queue flushed"), "{}", gw.log());
    }
}

#[tokio::test]
async fn retention_deletes_old_rows_and_keeps_the_rollups() {
    let mock = MockUpstream::start().await;
    let mut gw = start_with(&mock, &["--ledger-flush-ms", "20"]).await;
    let body = json!({"model": "openai/gpt-5", "messages": [{"role": "user", "content": "now"}]});
    assert_eq!(
        gw.send(&authed("openai", "/v1/chat/completions", KEY, &body))
            .await
            .status,
        200
    );
    eventually(Duration::from_secs(10), "the row", || async {
        (ledger_metric(&gw, "switchboard_ledger_rows_written_total").await == 1.0).then_some(())
    })
    .await;
    gw.signal("TERM");
    assert!(gw.wait_exit(Duration::from_secs(30)).is_some());
    // A row and its rollup from 2020, as an earlier run would have left them.
    let data = gw.dir.file("data");
    {
        let db = rusqlite::Connection::open(data.join("ledger.sqlite")).unwrap();
        db.execute_batch(
            "INSERT INTO ledger_requests (request_id, time_ms, key_id, family, provider, model, status, input_tokens, output_tokens, cost_usd, latency_ms)
                 VALUES ('old', 1577880000000, 'test', 'openai', 'openai', 'gpt-5', 200, 7, 3, 0.5, 12.0);
             INSERT INTO ledger_daily (day, key_id, provider, model, requests, errors, input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost_usd)
                 VALUES ('2020-01-01', 'test', 'openai', 'gpt-5', 1, 0, 7, 3, 0, 0, 0.5);",
        )
        .unwrap();
    }
    assert_eq!(sqlite_counts(&data.join("ledger.sqlite")), (2, 2));
    // Restart on the same data directory, keeping rows 30 days.
    let data_arg = data.display().to_string();
    let gw2 = start_with(
        &mock,
        &["--data", &data_arg, "--ledger-retention-days", "30"],
    )
    .await;
    eventually(Duration::from_secs(10), "the purge", || async {
        (sqlite_counts(&data.join("ledger.sqlite")).0 == 1).then_some(())
    })
    .await;
    let u = usage(&gw2, "?group_by=day").await;
    let days: Vec<&str> = u["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["day"].as_str().unwrap())
        .collect();
    assert_eq!(days.len(), 2, "{u}");
    assert_eq!(days[0], "2020-01-01");
    assert_eq!(u["total"]["requests"], 2);
    assert_eq!(u["groups"][0]["input_tokens"], 7);
    // From the rows (an instant bound), 2020 is gone.
    let u = usage(&gw2, "?from=2019-01-01T00:00:00Z").await;
    assert_eq!(
        (u["source"].as_str(), u["total"]["requests"].as_u64()),
        (Some("rows"), Some(1))
    );
    drop(gw);
}

// ---------------------------------------------------------------- PostgreSQL

fn pg_base() -> String {
    std::env::var("SWITCHBOARD_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

async fn pg_connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!("PostgreSQL at {url}: {e} (tests/run.sh starts it; set SWITCHBOARD_TEST_POSTGRES to use another)")
        });
    tokio::spawn(conn);
    client
}

/// A database of its own for one test, dropped after it.
struct PgDb {
    name: String,
}

impl PgDb {
    async fn create(tag: &str) -> PgDb {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("sb_ledger_{tag}_{}_{nanos}", std::process::id());
        let admin = pg_connect(&pg_base()).await;
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        PgDb { name }
    }

    /// Its URL, through `port` (the real server's, or a proxy's).
    fn url(&self, port: u16) -> String {
        let base = pg_base();
        let base: tokio_postgres::Config = base.parse().unwrap();
        let user = base.get_user().unwrap_or("postgres");
        format!("postgres://{user}@127.0.0.1:{port}/{}", self.name)
    }
}

fn pg_port() -> u16 {
    let base: tokio_postgres::Config = pg_base().parse().unwrap();
    base.get_ports().first().copied().unwrap_or(5432)
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // A runtime of its own: drop runs inside the test's runtime.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let admin = pg_connect(&pg_base()).await;
                let _ = admin
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await;
            });
        })
        .join();
    }
}

#[tokio::test]
async fn the_gateway_serves_on_when_postgres_is_unreachable() {
    let mock = MockUpstream::start().await;
    let closed = format!("postgres://postgres@127.0.0.1:{}/nothing", free_port());
    let gw = start_with(
        &mock,
        &[
            "--database",
            &closed,
            "--ledger-queue",
            "5",
            "--ledger-flush-ms",
            "20",
        ],
    )
    .await;
    let n = 20;
    for i in 0..n {
        let body = json!({"model": "openai/gpt-5", "messages": [{"role": "user", "content": format!("n{i}")}]});
        // Answered although the ledger cannot write: no request waits on it
        // (the drops below show the writer never took these rows).
        let r = gw
            .send(&authed("openai", "/v1/chat/completions", KEY, &body))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // 5 held for a retry, the rest dropped and counted.
    eventually(Duration::from_secs(10), "the drops", || async {
        let text = metrics_text(gw.metrics).await;
        let dropped = metric_value(&text, "switchboard_ledger_rows_dropped_total", &[]).unwrap();
        let pending = metric_value(&text, "switchboard_ledger_rows_pending", &[]).unwrap();
        (dropped + pending == n as f64 && dropped >= 15.0).then_some(())
    })
    .await;
    assert_eq!(
        ledger_metric(&gw, "switchboard_ledger_rows_written_total").await,
        0.0
    );
    let r = admin(&gw, "/admin/usage", Some(ADMIN_KEY)).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(gw.log().contains("ledger: cannot write"), "{}", gw.log());
}

/// A TCP relay to PostgreSQL that the test can cut (every connection closed,
/// the port refusing) and bring back on the same port.
struct Relay {
    port: u16,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Relay {
    async fn start(port: u16, target: SocketAddr) -> Relay {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let t = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let conn = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                t.lock().unwrap().push(conn);
            }
        });
        tasks.lock().unwrap().push(accept);
        Relay { port, tasks }
    }

    fn cut(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

/// Needs a PostgreSQL: ignored by a plain `cargo test`, run by tests/run.sh.
mod needs_postgres {
    use super::*;

    /// The ledger tables as the first schema made them (no `cache_write_tokens`).
    const FIRST_SCHEMA: &str = "
    CREATE TABLE ledger_requests (request_id text NOT NULL, time timestamptz NOT NULL, key_id text NOT NULL,
        family text NOT NULL, provider text, model text, upstream_protocol text, upstream_host text,
        status integer NOT NULL, input_tokens bigint, output_tokens bigint, cached_tokens bigint,
        reasoning_tokens bigint, cost_usd double precision, latency_ms double precision NOT NULL,
        ttft_ms double precision);
    CREATE INDEX ledger_requests_time ON ledger_requests (time);
    CREATE TABLE ledger_daily (day date NOT NULL, key_id text NOT NULL, provider text NOT NULL,
        model text NOT NULL, requests bigint NOT NULL, errors bigint NOT NULL, input_tokens bigint NOT NULL,
        output_tokens bigint NOT NULL, cached_tokens bigint NOT NULL, reasoning_tokens bigint NOT NULL,
        cost_usd double precision NOT NULL, PRIMARY KEY (day, key_id, provider, model));
    INSERT INTO ledger_requests (request_id, time, key_id, family, provider, model, status, input_tokens, output_tokens, cost_usd, latency_ms)
        VALUES ('old', now() - interval '1 minute', 'test', 'openai', 'openai', 'gpt-5', 200, 7, 3, 0.5, 12.0);
    INSERT INTO ledger_daily VALUES (current_date, 'test', 'openai', 'gpt-5', 1, 0, 7, 3, 0, 0, 0.5);";

    /// A database of its own holding the tables as [`FIRST_SCHEMA`] made
    /// them, and its URL.
    async fn first_schema_db(name: &str) -> (PgDb, String) {
        let db = PgDb::create(name).await;
        let url = db.url(pg_port());
        pg_connect(&url)
            .await
            .batch_execute(FIRST_SCHEMA)
            .await
            .unwrap();
        (db, url)
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL (SWITCHBOARD_TEST_POSTGRES, else 127.0.0.1:5432/test; tests/run.sh starts one and runs these)"]
    async fn a_database_made_before_cache_writes_is_migrated() {
        let (_db, url) = first_schema_db("migrate").await;
        let mock = MockUpstream::start().await;
        let gw = start_with(&mock, &["--database", &url, "--ledger-flush-ms", "20"]).await;
        let body = json!({"model": "claude-sonnet-4.7", "max_tokens": 50,
            "messages": [{"role": "user", "content": "cache me [[cached:3]] [[cache-write:5]]"}]});
        let r = gw
            .send(&authed("anthropic", "/anthropic/v1/messages", KEY, &body))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        // The old rollup and the new row, from the rollups and from the rows.
        for query in ["", "?from=2000-01-01T00:00:00Z"] {
            let u = eventually(Duration::from_secs(10), "the new row", || async {
                let u = usage(&gw, query).await;
                (u["total"]["requests"] == 2).then_some(u)
            })
            .await;
            assert_eq!(u["total"]["cache_write_tokens"], 5, "{query}: {u}");
            assert_eq!(u["total"]["cached_tokens"], 3, "{query}: {u}");
        }
        let row = pg_connect(&url)
            .await
            .query_one(
                "SELECT COUNT(cache_write_tokens), SUM(cache_write_tokens)::int8 FROM ledger_requests",
                &[],
            )
            .await
            .unwrap();
        assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1, 5));
    }

    /// The console's questions (docs/operations.md "Console") on PostgreSQL:
    /// a database made before the attempts' columns gets them, and the
    /// request pages, their filters and the series answer as on SQLite.
    #[tokio::test]
    #[ignore = "needs PostgreSQL (SWITCHBOARD_TEST_POSTGRES, else 127.0.0.1:5432/test; tests/run.sh starts one and runs these)"]
    async fn console_pages_and_series_on_postgres() {
        let (_db, url) = first_schema_db("console").await;
        let mock = MockUpstream::start().await;
        let gw = start_with(&mock, &["--database", &url, "--ledger-flush-ms", "20"]).await;
        let chat = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "pg console"}]});
        for (id, model) in [
            ("pg-1", "gpt-5"),
            ("pg-2", "offline"),
            ("pg-3", "flaky-model"),
        ] {
            let r = gw
                .send(
                    &authed("openai", "/v1/chat/completions", KEY, &chat(model))
                        .header("x-request-id", id),
                )
                .await;
            assert!(r.status > 0);
        }
        let page = eventually(Duration::from_secs(10), "the rows", || async {
            let v = admin(&gw, "/admin/requests", Some(ADMIN_KEY)).await.json();
            (v["data"].as_array().unwrap().len() == 4).then_some(v)
        })
        .await;
        // The old row (no attempts kept), then the three, newest first.
        let ids: Vec<&str> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["request_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["pg-3", "pg-2", "pg-1", "old"]);
        let flaky = &page["data"][0];
        assert_eq!(flaky["tried"][0]["failure"], "unreachable", "{flaky}");
        assert_eq!(flaky["tried"][1]["status"], 200);
        assert_eq!(page["data"][1]["status"], 502);
        assert!(page["data"][1]["error"].as_str().is_some());
        assert_eq!(page["data"][3]["tried"], json!([]));
        let first = admin(&gw, "/admin/requests?limit=2", Some(ADMIN_KEY))
            .await
            .json();
        let next = first["next"].as_str().unwrap().replace(':', "%3A");
        let rest = admin(
            &gw,
            &format!("/admin/requests?before={next}"),
            Some(ADMIN_KEY),
        )
        .await
        .json();
        assert_eq!(rest["data"][0]["request_id"], "pg-1");
        assert_eq!(rest["data"].as_array().unwrap().len(), 2);
        let errors = admin(
            &gw,
            "/admin/requests?status=error&key=test",
            Some(ADMIN_KEY),
        )
        .await
        .json();
        assert_eq!(errors["data"][0]["request_id"], "pg-2");
        assert_eq!(errors["data"].as_array().unwrap().len(), 1);
        // The series: hours from the rows, days from the rollups.
        for (query, requests) in [("bucket=hour&by=model", 4), ("bucket=day&by=key&top=1", 4)] {
            let s = admin(
                &gw,
                &format!("/admin/usage/series?{query}"),
                Some(ADMIN_KEY),
            )
            .await
            .json();
            assert_eq!(s["total"]["requests"], requests, "{query}: {s}");
            assert_eq!(s["total"]["errors"], 1, "{query}: {s}");
        }
        let s = admin(&gw, "/admin/usage/series?by=model", Some(ADMIN_KEY))
            .await
            .json();
        let gpt5 = s["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "openai/gpt-5")
            .unwrap_or_else(|| panic!("{s}"));
        assert_eq!(
            gpt5["requests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .sum::<i64>(),
            2
        );
    }

    /// A database made before teams gets the `team` columns; requests of a
    /// key in a team group under it, from the rollups and from the rows;
    /// the old rows group under no team.
    #[tokio::test]
    #[ignore = "needs PostgreSQL (SWITCHBOARD_TEST_POSTGRES, else 127.0.0.1:5432/test; tests/run.sh starts one and runs these)"]
    async fn usage_by_team_in_a_database_made_before_teams() {
        let (_db, url) = first_schema_db("teams").await;
        let mock = MockUpstream::start().await;
        let mut k = keys();
        k["teams"] = json!([{"id": "ml"}]);
        k["keys"]
            .as_array_mut()
            .unwrap()
            .push(json!({"id": "ml-a", "key": "sk-ml-a-ledger", "team": "ml"}));
        let gw = Gateway::start_with(
            &catalog(&mock),
            &k,
            &[
                "--admin-key",
                ADMIN_KEY,
                "--database",
                &url,
                "--ledger-flush-ms",
                "20",
            ],
        )
        .await;
        let body = json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]});
        for _ in 0..2 {
            let r = gw
                .send(&authed(
                    "openai",
                    "/v1/chat/completions",
                    "sk-ml-a-ledger",
                    &body,
                ))
                .await;
            assert_eq!(r.status, 200, "{}", r.text());
        }
        for query in ["?group_by=team", "?group_by=team&from=2000-01-01T00:00:00Z"] {
            let u = eventually(Duration::from_secs(10), "the new rows", || async {
                let u = usage(&gw, query).await;
                (u["total"]["requests"] == 3).then_some(u)
            })
            .await;
            let groups: Vec<_> = u["groups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| {
                    (
                        g["team"].as_str().unwrap().to_string(),
                        g["requests"].as_i64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(
                groups,
                [("".to_string(), 1), ("ml".to_string(), 2)],
                "{query}: {u}"
            );
        }
        let u = usage(&gw, "?team=ml&group_by=key").await;
        assert_eq!(u["groups"][0]["key"], "ml-a", "{u}");
        assert_eq!(u["total"]["requests"], 2, "{u}");
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL (SWITCHBOARD_TEST_POSTGRES, else 127.0.0.1:5432/test; tests/run.sh starts one and runs these)"]
    async fn postgres_ledger_sums_match_the_requests_sent() {
        let db = PgDb::create("sums").await;
        let url = db.url(pg_port());
        let mock = MockUpstream::start().await;
        let gw = start_with(&mock, &["--database", &url, "--ledger-flush-ms", "50"]).await;
        let lines = send_workload(&gw).await;
        assert_usage_matches(&gw, &lines).await;
        assert!(
            !gw.dir.file("data").join("ledger.sqlite").exists(),
            "postgres instead of the file"
        );
        let client = pg_connect(&url).await;
        let row = client
        .query_one("SELECT COUNT(*), COUNT(DISTINCT request_id), SUM(input_tokens)::int8 FROM ledger_requests", &[])
        .await
        .unwrap();
        assert_eq!(row.get::<_, i64>(0), 13);
        assert_eq!(row.get::<_, i64>(1), 13);
        let input: u64 = lines
            .iter()
            .map(|l| l["input_tokens"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(row.get::<_, i64>(2) as u64, input);
        let r = client
        .query_one("SELECT key_id, status, upstream_protocol FROM ledger_requests WHERE request_id = 'ledger-3'", &[])
        .await
        .unwrap();
        assert_eq!(
            (r.get::<_, String>(0), r.get::<_, i32>(1)),
            ("test".into(), 200)
        );
        assert_eq!(r.get::<_, Option<String>>(2).as_deref(), Some("gemini"));
        assert!(!gw.log().contains(KEY));
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL (SWITCHBOARD_TEST_POSTGRES, else 127.0.0.1:5432/test; tests/run.sh starts one and runs these)"]
    async fn postgres_going_away_costs_no_request_and_writing_resumes() {
        let db = PgDb::create("away").await;
        let target: SocketAddr = format!("127.0.0.1:{}", pg_port()).parse().unwrap();
        let relay = Relay::start(free_port(), target).await;
        let url = db.url(relay.port);
        let mock = MockUpstream::start().await;
        let gw = start_with(&mock, &["--database", &url, "--ledger-flush-ms", "20"]).await;
        let send = |i: usize| {
            let body = json!({"model": "openai/gpt-5", "messages": [{"role": "user", "content": format!("n{i}")}]});
            authed("openai", "/v1/chat/completions", KEY, &body)
        };
        let written = |want: f64| {
            let gw = &gw;
            async move {
                eventually(
                    Duration::from_secs(30),
                    &format!("{want} rows written"),
                    || async {
                        (ledger_metric(gw, "switchboard_ledger_rows_written_total").await == want)
                            .then_some(())
                    },
                )
                .await
            }
        };
        for i in 0..10 {
            assert_eq!(gw.send(&send(i)).await.status, 200);
        }
        written(10.0).await;

        // PostgreSQL goes away: requests are served as before; rows are held.
        relay.cut();
        for i in 10..20 {
            // Answered while the database is gone (the failed write below):
            // no request waits on the ledger.
            assert_eq!(gw.send(&send(i)).await.status, 200);
        }
        eventually(Duration::from_secs(10), "the failed write", || async {
            gw.log().contains("ledger: cannot write").then_some(())
        })
        .await;
        assert_eq!(
            ledger_metric(&gw, "switchboard_ledger_rows_written_total").await,
            10.0
        );
        assert_eq!(
            admin(&gw, "/admin/usage", Some(ADMIN_KEY)).await.status,
            503
        );

        // It comes back on the same address: the writer reconnects, nothing was lost.
        let relay = Relay::start(relay.port, target).await;
        written(20.0).await;
        assert_eq!(
            ledger_metric(&gw, "switchboard_ledger_rows_dropped_total").await,
            0.0
        );
        let u = usage(&gw, "").await;
        assert_eq!(u["total"]["requests"], 20);
        assert!(gw.log().contains("ledger: writing again"), "{}", gw.log());
        relay.cut();
    }
}

/// The ledger's bytes per request (docs/operations.md, "Usage ledger"): the file's growth
/// over N requests (3 keys, 4 models, four families), with the daily rollups
/// and without them (dropped, on a copy), after a graceful shutdown has
/// checkpointed the WAL; and, when PostgreSQL is there, its tables' size.
/// `cargo test --release --test e2e -- --ignored --nocapture ledger::bytes_per_request`
#[tokio::test]
#[ignore = "a measurement for the README, not a check"]
async fn bytes_per_request() {
    let n: usize = std::env::var("LEDGER_MEASURE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let mock = MockUpstream::start().await;
    let keys_ = [KEY, LIMITED_KEY, "test"];
    let request = |i: usize| {
        let key = keys_[i % 3];
        let text = format!("request number {i} with a few words of prompt");
        match (i / 3) % 4 {
            _ if key == LIMITED_KEY => authed(
                "openai",
                "/v1/chat/completions",
                key,
                &json!({"model": "openai/gpt-5", "messages": [{"role": "user", "content": text}]}),
            ),
            0 => authed(
                "openai",
                "/v1/chat/completions",
                key,
                &json!({"model": "deepseek/deepseek-v4-pro", "messages": [{"role": "user", "content": text}]}),
            ),
            1 => authed(
                "anthropic",
                "/anthropic/v1/messages",
                key,
                &json!({"model": "claude-sonnet-4.7",
                "max_tokens": 100, "messages": [{"role": "user", "content": text}]}),
            ),
            2 => authed(
                "gemini",
                &format!("{GOOGLE}/google/gemini-3.1-pro:generateContent"),
                key,
                &json!({"contents": [{"role": "user", "parts": [{"text": text}]}]}),
            ),
            _ => authed(
                "openai",
                "/v1/responses",
                key,
                &json!({"model": "openai/gpt-5", "input": text}),
            ),
        }
    };
    let data_dir = crate::common::gateway::TempDir::new();
    let data = data_dir.0.display().to_string();
    let file = data_dir.0.join("ledger.sqlite");
    let mut gw = start_with(&mock, &["--data", &data]).await;
    gw.stop("TERM");
    let empty = std::fs::metadata(&file).unwrap().len();

    let db = PgDb::create("size").await;
    let url = db.url(pg_port());
    let mut runs = vec![("sqlite", vec!["--data", data.as_str()])];
    runs.push(("postgres", vec!["--database", url.as_str()]));
    for (what, args) in runs {
        let mut gw = start_with(&mock, &args).await;
        let gw_addr = gw.addr;
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let next = next.clone();
            let reqs: Vec<Request> = (0..n).map(request).collect();
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = http_client::send(gw_addr, &reqs[i]).await.unwrap();
                    assert_eq!(r.status, 200, "{}", r.text());
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        if what == "postgres" {
            eventually(Duration::from_secs(30), "rows", || async {
                (ledger_metric(&gw, "switchboard_ledger_rows_written_total").await == n as f64)
                    .then_some(())
            })
            .await;
            let c = pg_connect(&url).await;
            c.batch_execute("VACUUM ANALYZE").await.unwrap();
            let q = |sql: &'static str| {
                let c = &c;
                async move { c.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
            };
            let rows = q("SELECT pg_total_relation_size('ledger_requests')").await;
            let daily = q("SELECT pg_total_relation_size('ledger_daily')").await;
            let count = q("SELECT COUNT(*) FROM ledger_daily").await;
            println!(
                "postgres, {n} requests: ledger_requests {rows} bytes ({:.0} B/request, index included), ledger_daily {daily} bytes ({count} rollup rows)",
                rows as f64 / n as f64
            );
            gw.stop("TERM");
            continue;
        }
        gw.stop("TERM");
        let full = std::fs::metadata(&file).unwrap().len();
        let copy = data_dir.0.join("copy.sqlite");
        let measure = |sql: &str| {
            std::fs::copy(&file, &copy).unwrap();
            let c = rusqlite::Connection::open(&copy).unwrap();
            c.execute_batch(sql).unwrap();
            c.execute_batch("VACUUM").unwrap();
            drop(c);
            std::fs::metadata(&copy).unwrap().len()
        };
        let vacuumed = measure("");
        let no_rollups = measure("DROP TABLE ledger_daily;");
        let no_index = measure("DROP TABLE ledger_daily; DROP INDEX ledger_requests_time;");
        let rollup_rows: i64 = rusqlite::Connection::open(&file)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM ledger_daily", [], |r| r.get(0))
            .unwrap();
        let per = |b: u64| (b as f64 - empty as f64) / n as f64;
        println!(
            "sqlite, {n} requests: empty file {empty} B; after {full} B ({:.1} B/request)",
            per(full)
        );
        println!(
            "  vacuumed copies: with rollups {vacuumed} B ({:.1} B/request, {rollup_rows} rollup rows), without rollups {no_rollups} B ({:.1} B/request), without rollups or the time index {no_index} B ({:.1} B/request)",
            per(vacuumed), per(no_rollups), per(no_index)
        );
    }
}

#[tokio::test]
async fn admin_keys_reports_a_keys_limits_and_use_never_the_key() {
    let mock = MockUpstream::start().await;
    let mut k = keys();
    k["keys"].as_array_mut().unwrap().push(
        json!({"id": "budgeted", "key": "sk-budgeted-secret", "rpm": 50,
            "budget": {"usd": "5.00", "period": "month"}}),
    );
    let gw = Gateway::start_with(&catalog(&mock), &k, &["--admin-key", ADMIN_KEY]).await;
    let r = gw
        .send(&authed(
            "openai",
            "/v1/chat/completions",
            "sk-budgeted-secret",
            &json!({"model": "openai/gpt-5", "messages": [{"role": "user", "content": "hi"}]}),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = admin(&gw, "/admin/keys/budgeted", Some(ADMIN_KEY)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["rpm"]["limit"], 50, "{v}");
    assert_eq!(v["rpm"]["used"], 1, "{v}");
    assert_eq!(v["budget"]["usd"], "5.00", "{v}");
    assert_eq!(v["budget"]["period"], "month", "{v}");
    assert!(v["budget"]["remaining_usd"].as_str().is_some(), "{v}");
    assert!(!r.text().contains("sk-budgeted-secret"));
    assert_eq!(
        admin(&gw, "/admin/keys/nobody", Some(ADMIN_KEY))
            .await
            .status,
        404
    );
    assert_eq!(admin(&gw, "/admin/keys/budgeted", None).await.status, 401);
}
