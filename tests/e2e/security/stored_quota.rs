//! Stored responses without a quota (item 14): one request could store an
//! 8 MiB inline image whole, and nothing limited what one key stores. Now a
//! record over `--responses-max-record-bytes` is refused before the upstream
//! is called (400 naming `store`), or, when only the answer makes it too
//! large, answered with `store: false` and not kept; a key whose stored
//! responses would pass `--responses-key-quota-bytes` is refused with 429
//! `stored_responses_quota_exceeded`, and is admitted again once a stored
//! response is deleted or expires. Usage is tracked by every backend: the
//! embedded SQLite file (kept across a restart) and Redis.

use crate::common::families::{assert_error, eventually};
use crate::common::gateway::{authed, model, Gateway, TempDir, KEY};
use crate::common::http_client::{Request, Response};
use crate::common::mock_upstream::{MockUpstream, Protocol};
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const OTHER: &str = "sk-other-quota";
const REDIS: &str = "redis://127.0.0.1:6379";

fn catalog(mock: &MockUpstream) -> Value {
    json!({
        "providers": [{"id": "rs", "families": ["openai", "anthropic", "gemini"], "upstreams": [
            {"protocol": "responses", "base_url": mock.base_url(Protocol::Responses), "api_key_env": "SB_TEST_KEY_RESPONSES"}]}],
        "models": [model("m-rs", "rs", json!({"upstream_model": "up-rs"}))]
    })
}

fn keys() -> Value {
    json!({"keys": [{"id": "test", "key": KEY}, {"id": "other", "key": OTHER}]})
}

async fn start(mock: &MockUpstream, args: &[&str]) -> Gateway {
    Gateway::start_with(&catalog(mock), &keys(), args).await
}

/// A `POST /v1/responses` of `key` with `input`, stored unless `store` says otherwise.
async fn post(gw: &Gateway, key: &str, input: Value, store: Option<bool>) -> Response {
    let mut body = json!({"model": "rs/m-rs", "input": input});
    if let Some(s) = store {
        body["store"] = json!(s);
    }
    gw.send(&authed("openai", "/v1/responses", key, &body))
        .await
}

fn d3(method: &str, id: &str, key: &str) -> Request {
    Request::new(method, &format!("/v1/responses/{id}"))
        .header("authorization", &format!("Bearer {key}"))
}

/// Where a gateway keeps its stored responses.
enum Store {
    /// `DIR/responses.sqlite`.
    Sqlite(std::path::PathBuf),
    /// Redis, under this key prefix.
    Redis(String),
}

impl Store {
    /// Whether the record `id` is in the backend.
    async fn holds(&self, id: &str) -> bool {
        match self {
            Store::Sqlite(dir) => {
                let Ok(c) = rusqlite::Connection::open(dir.join("responses.sqlite")) else {
                    return false;
                };
                c.query_row("SELECT COUNT(*) FROM responses WHERE id = ?1", [id], |r| {
                    r.get::<_, i64>(0)
                })
                .is_ok_and(|n| n == 1)
            }
            Store::Redis(prefix) => {
                let client = redis::Client::open(REDIS).unwrap();
                let mut c = client.get_multiplexed_async_connection().await.unwrap();
                let n: i64 = redis::cmd("EXISTS")
                    .arg(format!("{prefix}response:{id}"))
                    .query_async(&mut c)
                    .await
                    .unwrap();
                n == 1
            }
        }
    }
}

/// Waits until the record `id` is in the backend (stored responses are
/// written off the response path, and count once written).
async fn landed(store: &Store, id: &str) {
    eventually(
        Duration::from_secs(5),
        "the stored response's write",
        || async { store.holds(id).await.then_some(()) },
    )
    .await;
}

/// A text input of about `n` bytes.
fn text(n: usize) -> Value {
    json!("q".repeat(n))
}

/// Stores a turn of about 21 KB (10 KB asked, quoted back by the mock) for `KEY`; its id once readable.
async fn store_one(gw: &Gateway, store: &Store) -> String {
    let r = post(gw, KEY, text(10_000), None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["store"], true, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    landed(store, &id).await;
    id
}

/// The 429 a key over its quota gets, in family D's shape.
fn assert_over_quota(r: &Response) {
    let e = assert_error(Protocol::Responses, r, 429);
    assert_eq!(e["code"], "stored_responses_quota_exceeded", "{e}");
    assert_eq!(e["param"], "store", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("70000"),
        "the message names the quota: {e}"
    );
}

/// Three turns of ~21 KB fill a 70,000-byte quota: the fourth is refused
/// before the upstream is called, while another key is not affected.
async fn fill(gw: &Gateway, mock: &MockUpstream, store: &Store) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(store_one(gw, store).await);
    }
    let upstream_calls = mock.requests().len();
    let r = post(gw, KEY, text(10_000), None).await;
    assert_over_quota(&r);
    assert_eq!(
        mock.requests().len(),
        upstream_calls,
        "refused before the upstream"
    );
    // Not storing is always possible; the quota is the key's own.
    let r = post(gw, KEY, text(10_000), Some(false)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(gw, OTHER, text(10_000), None).await;
    assert_eq!(r.status, 200, "another key: {}", r.text());
    ids
}

#[tokio::test]
async fn a_large_inline_image_is_not_stored_whole() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &["--responses-max-record-bytes", "1048576"]).await;
    // A 2 MiB inline image, stored by default (no `store` member).
    let image = format!(
        "data:image/png;base64,{}",
        "iVBORw0KGgo".repeat(2 * 1024 * 1024 / 11)
    );
    let input = json!([{"role": "user", "content": [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": image}]}]);
    let r = post(&gw, KEY, input.clone(), None).await;
    let e = assert_error(Protocol::Responses, &r, 400);
    assert_eq!(e["param"], "store", "{e}");
    assert_eq!(e["code"], "stored_response_too_large", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("1048576"), "names the limit: {e}");
    assert!(message.contains("store"), "says how to go on: {e}");
    assert!(mock.requests().is_empty(), "refused before the upstream");
    // The same request without storing is answered.
    let r = post(&gw, KEY, input, Some(false)).await;
    assert_eq!(r.status, 200, "{}", r.text());

    // An input under the limit whose answer takes the record over it: the
    // answer is sent, says `store: false`, and is not kept.
    let gw = start(&mock, &["--responses-max-record-bytes", "2100"]).await;
    let r = post(&gw, KEY, text(2000), None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["store"], false, "{v}");
    let id = v["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(gw.send(&d3("GET", id, KEY)).await.status, 404);
    assert!(gw.log().contains("answered but not stored"), "{}", gw.log());
}

#[tokio::test]
async fn a_key_over_its_quota_is_refused_until_a_response_is_deleted_or_expires() {
    let mock = MockUpstream::start().await;
    let data = TempDir::new();
    let data_dir = data.file("data");
    let data_arg = data_dir.to_str().unwrap();
    let args = ["--responses-key-quota-bytes", "70000", "--data", data_arg];
    let gw = start(&mock, &args).await;
    let ids = fill(&gw, &mock, &Store::Sqlite(data_dir.clone())).await;

    // The usage is in the file: a restarted gateway still refuses.
    drop(gw);
    let gw = start(&mock, &args).await;
    assert_over_quota(&post(&gw, KEY, text(10_000), None).await);

    // Deleting a stored response frees its share.
    let r = gw.send(&d3("DELETE", &ids[0], KEY)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(&gw, KEY, text(10_000), None).await;
    assert_eq!(r.status, 200, "after a delete: {}", r.text());
    drop(gw);

    // Expiry frees it too.
    let mut short = args.to_vec();
    short.extend_from_slice(&["--responses-ttl-secs", "5"]);
    let dir = TempDir::new();
    let fresh = dir.file("data");
    short[3] = fresh.to_str().unwrap();
    let gw = start(&mock, &short).await;
    fill(&gw, &mock, &Store::Sqlite(fresh.clone())).await;
    eventually(
        Duration::from_secs(30),
        "expired records freeing the quota",
        || async {
            let r = post(&gw, KEY, text(10_000), Some(true)).await;
            (r.status == 200).then_some(())
        },
    )
    .await;
}

/// Needs a Redis: ignored by a plain `cargo test`, run by tests/run.sh.
mod needs_redis {
    use super::*;
    use crate::common::servers::ensure_redis;

    /// Removes every Redis key under `prefix`.
    async fn redis_cleanup(prefix: &str) {
        let client = redis::Client::open(REDIS).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
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

    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn redis_tracks_a_keys_usage_across_instances_and_deletes() {
        ensure_redis();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let prefix = format!("sbtest:{}:{nanos}:stored_quota:", std::process::id());
        let mock = MockUpstream::start().await;
        let args = [
            "--redis",
            REDIS,
            "--redis-prefix",
            prefix.as_str(),
            "--responses-key-quota-bytes",
            "70000",
        ];
        let gw = start(&mock, &args).await;
        let ids = fill(&gw, &mock, &Store::Redis(prefix.clone())).await;
        // A second instance on the same Redis (or this one restarted) sees the usage.
        let other = start(&mock, &args).await;
        assert_over_quota(&post(&other, KEY, text(10_000), None).await);
        // A delete through one instance frees the quota for both.
        let r = other.send(&d3("DELETE", &ids[1], KEY)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let r = post(&gw, KEY, text(10_000), None).await;
        assert_eq!(r.status, 200, "after a delete: {}", r.text());
        drop((gw, other));
        redis_cleanup(&prefix).await;
    }
}
