//! Keys and teams through the admin API (docs/keys.md), on the real binary:
//! a key made, used on an inference route, rotated (the old secret accepted
//! for its grace period, then refused), revoked (401 naming it, still
//! readable); expiry; a PATCHed rpm in force; the keys file's keys and teams
//! refused (409); the audit log newest first with actor, before and after and
//! no secret; bad input refused with the field named; two processes on one
//! data directory, and (module `needs_postgres`) two instances on one
//! PostgreSQL database, seeing each other's changes. No secret made here is
//! ever in the gateway's stdout or stderr.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::{eventually, CHAT, MESSAGES};
use crate::common::gateway::{authed, catalog, Gateway};
use crate::common::http_client::{self, Request, Response};
use crate::common::mock_upstream::MockUpstream;
use serde_json::{json, Value};
use std::time::Duration;

const ADMIN_KEY: &str = "sk-admin-keys-test";
/// The key the keys file defines (read only through the API).
const FILE_KEY: &str = "sk-file-key";
/// How long a test waits for an event before it fails (not a bound it asserts).
const PATIENCE: Duration = Duration::from_secs(30);

fn file_keys() -> Value {
    json!({"teams": [{"id": "ops", "rpm": 100}],
           "keys": [{"id": "file-key", "key": FILE_KEY, "team": "ops"}]})
}

async fn start(mock: &MockUpstream, extra: &[&str]) -> Gateway {
    let mut args = vec!["--admin-key", ADMIN_KEY];
    args.extend_from_slice(extra);
    Gateway::start_with(&catalog(mock), &file_keys(), &args).await
}

/// An admin request on the metrics listener, with the admin key.
async fn admin(gw: &Gateway, method: &str, path: &str, body: Option<Value>) -> Response {
    let mut r = Request::new(method, path).header("authorization", &format!("Bearer {ADMIN_KEY}"));
    if let Some(b) = body {
        r = r.json(&b);
    }
    http_client::send(gw.metrics, &r).await.unwrap()
}

/// An OpenAI chat request with `key`.
async fn chat(gw: &Gateway, key: &str) -> Response {
    gw.send(&authed(
        "openai",
        CHAT,
        key,
        &json!({"model": "gpt-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
    ))
    .await
}

/// Makes a key; its object (with `key`, the secret).
async fn create(gw: &Gateway, body: Value) -> Value {
    let r = admin(gw, "POST", "/admin/keys", Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    r.json()
}

fn rfc3339(offset_secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    switchboard::util::rfc3339::Rfc3339::seconds(now + offset_secs).to_string()
}

/// Neither log of the gateway holds any of `secrets`.
fn assert_never_logged(gw: &Gateway, secrets: &[&str]) {
    let (log, access) = (gw.log(), gw.access_log());
    for s in secrets {
        assert!(!log.contains(s), "a secret in stderr:\n{log}");
        assert!(!access.contains(s), "a secret in stdout:\n{access}");
    }
}

#[tokio::test]
async fn a_key_is_made_used_rotated_and_revoked() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    let made = create(
        &gw,
        json!({"id": "ci", "team": "ops", "models": ["openai/*"], "metadata": {"owner": "ana"}}),
    )
    .await;
    let first = made["key"].as_str().unwrap().to_string();
    assert!(first.starts_with("sk-sb-") && first.len() > 40, "{first}");
    assert_eq!(made["source"], "api");
    assert_eq!(made["state"], "active");
    assert_eq!(made["team"], "ops");
    assert_eq!(made["metadata"], json!({"owner": "ana"}));
    assert!(made["created_at"].is_string());
    // In force at once, on an inference route; its model patterns apply.
    let r = chat(&gw, &first).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw
        .send(&authed(
            "anthropic",
            MESSAGES,
            &first,
            &json!({"model": "claude-sonnet-4.7", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
        ))
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    // Read back: never the secret.
    let one = admin(&gw, "GET", "/admin/keys/ci", None).await;
    assert_eq!(one.status, 200, "{}", one.text());
    assert!(!one.text().contains(&first));
    assert!(one.json().get("key").is_none());
    assert_eq!(one.json()["rpm"], Value::Null);

    // Rotation: the old secret works for the grace period, then is refused.
    let r = admin(
        &gw,
        "POST",
        "/admin/keys/ci/rotate",
        Some(json!({"grace_seconds": 3})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let second = r.json()["key"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    assert!(r.json()["grace_until"].is_string());
    assert_eq!(chat(&gw, &second).await.status, 200);
    eventually(
        PATIENCE,
        "the old secret refused after its grace",
        || async {
            let r = chat(&gw, &first).await;
            match r.status {
                200 => None,
                401 => Some(r),
                s => panic!("{s}: {}", r.text()),
            }
        },
    )
    .await;
    assert_eq!(chat(&gw, &second).await.status, 200);

    // Revocation: 204, then 401 naming it, and the key stays readable.
    let r = admin(&gw, "DELETE", "/admin/keys/ci", None).await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.body.is_empty());
    let r = chat(&gw, &second).await;
    assert_eq!(r.status, 401, "{}", r.text());
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("revoked"), "{message}");
    // The same in another family's error shape.
    let r = gw
        .send(&authed(
            "anthropic",
            MESSAGES,
            &second,
            &json!({"model": "gpt-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
        ))
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["type"], "error");
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("revoked"));
    let one = admin(&gw, "GET", "/admin/keys/ci", None).await.json();
    assert_eq!(one["state"], "revoked");
    assert!(one["revoked_at"].is_string());
    let listed = admin(&gw, "GET", "/admin/keys?state=revoked", None)
        .await
        .json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert_eq!(listed["data"][0]["id"], "ci");
    // A revoked key is not changed any more.
    let r = admin(&gw, "PATCH", "/admin/keys/ci", Some(json!({"rpm": 5}))).await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert_never_logged(&gw, &[&first, &second]);
}

#[tokio::test]
async fn expired_keys_are_refused_naming_it() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    let past = create(&gw, json!({"id": "old", "expires_at": rfc3339(-60)})).await;
    let r = chat(&gw, past["key"].as_str().unwrap()).await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expired"));
    assert_eq!(past["state"], "expired");
    // A later expiry: in force until it is moved into the past.
    let key = create(&gw, json!({"id": "soon", "expires_at": rfc3339(3600)})).await;
    let secret = key["key"].as_str().unwrap();
    assert_eq!(chat(&gw, secret).await.status, 200);
    let r = admin(
        &gw,
        "PATCH",
        "/admin/keys/soon",
        Some(json!({"expires_at": rfc3339(-1)})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "expired");
    let r = chat(&gw, secret).await;
    assert_eq!(r.status, 401);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expired"));
    // Removing the expiry (null) puts it back in force.
    let r = admin(
        &gw,
        "PATCH",
        "/admin/keys/soon",
        Some(json!({"expires_at": null})),
    )
    .await;
    assert_eq!(r.json()["expires_at"], Value::Null);
    assert_eq!(chat(&gw, secret).await.status, 200);
    let listed = admin(&gw, "GET", "/admin/keys?state=expired", None)
        .await
        .json();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["old"]);
}

#[tokio::test]
async fn a_patched_rpm_is_in_force() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    let key = create(&gw, json!({"id": "metered"})).await;
    let secret = key["key"].as_str().unwrap();
    for _ in 0..3 {
        assert_eq!(chat(&gw, secret).await.status, 200);
    }
    let r = admin(&gw, "PATCH", "/admin/keys/metered", Some(json!({"rpm": 2}))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["rpm"], json!({"limit": 2}));
    // Counted from the change: two more, then 429.
    for _ in 0..2 {
        assert_eq!(chat(&gw, secret).await.status, 200);
    }
    let r = chat(&gw, secret).await;
    assert_eq!(r.status, 429, "{}", r.text());
    let one = admin(&gw, "GET", "/admin/keys/metered", None).await.json();
    assert_eq!(one["rpm"], json!({"limit": 2, "used": 2}));
    let r = admin(
        &gw,
        "PATCH",
        "/admin/keys/metered",
        Some(json!({"rpm": null})),
    )
    .await;
    assert_eq!(r.json()["rpm"], Value::Null);
    assert_eq!(chat(&gw, secret).await.status, 200);
}

#[tokio::test]
async fn the_files_keys_and_teams_are_read_only() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    let one = admin(&gw, "GET", "/admin/keys/file-key", None).await.json();
    assert_eq!(
        (one["source"].as_str(), one["team"].as_str()),
        (Some("file"), Some("ops"))
    );
    for (method, path, body) in [
        ("PATCH", "/admin/keys/file-key", Some(json!({"rpm": 1}))),
        ("DELETE", "/admin/keys/file-key", None),
        ("POST", "/admin/keys/file-key/rotate", Some(json!({}))),
        ("POST", "/admin/keys", Some(json!({"id": "file-key"}))),
        ("PATCH", "/admin/teams/ops", Some(json!({"rpm": 1}))),
        ("DELETE", "/admin/teams/ops", None),
        ("POST", "/admin/teams", Some(json!({"id": "ops"}))),
    ] {
        let r = admin(&gw, method, path, body).await;
        assert_eq!(r.status, 409, "{method} {path}: {}", r.text());
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("keys file"),
            "{}",
            r.text()
        );
    }
    assert_eq!(chat(&gw, FILE_KEY).await.status, 200);
    let teams = admin(&gw, "GET", "/admin/teams", None).await.json();
    assert_eq!(teams["data"][0]["source"], "file");
    assert_eq!(teams["data"][0]["keys"], 1);
}

#[tokio::test]
async fn teams_are_made_changed_and_deleted() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    let r = admin(
        &gw,
        "POST",
        "/admin/teams",
        Some(json!({"id": "ml", "rpm": 50, "budget": {"usd": "10", "period": "month"}})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        r.json()["budget"],
        json!({"usd": "10.00", "period": "month"})
    );
    assert_eq!(r.json()["source"], "api");
    let key = create(&gw, json!({"id": "in-ml", "team": "ml"})).await;
    assert_eq!(chat(&gw, key["key"].as_str().unwrap()).await.status, 200);
    let r = admin(
        &gw,
        "PATCH",
        "/admin/teams/ml",
        Some(json!({"rpm": null, "tpm": 1000})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        (r.json()["rpm"].clone(), r.json()["tpm"].clone()),
        (Value::Null, json!({"limit": 1000}))
    );
    let one = admin(&gw, "GET", "/admin/teams/ml", None).await.json();
    assert_eq!(one["keys"], 1);
    assert_eq!(one["budget"]["usd"], "10.00");
    // A team a key names stays; moved away, it can go.
    let r = admin(&gw, "DELETE", "/admin/teams/ml", None).await;
    assert_eq!(r.status, 409, "{}", r.text());
    let r = admin(
        &gw,
        "PATCH",
        "/admin/keys/in-ml",
        Some(json!({"team": "ops"})),
    )
    .await;
    assert_eq!(r.json()["team"], "ops");
    assert_eq!(
        admin(&gw, "DELETE", "/admin/teams/ml", None).await.status,
        204
    );
    assert_eq!(admin(&gw, "GET", "/admin/teams/ml", None).await.status, 404);
    assert_eq!(
        admin(&gw, "DELETE", "/admin/teams/ml", None).await.status,
        404
    );
    let listed = admin(&gw, "GET", "/admin/keys?team=ops", None).await.json();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["file-key", "in-ml"]);
}

#[tokio::test]
async fn the_audit_log_is_newest_first_without_secrets() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    let made = create(&gw, json!({"id": "audited", "rpm": 10})).await;
    admin(
        &gw,
        "PATCH",
        "/admin/keys/audited",
        Some(json!({"rpm": 20})),
    )
    .await;
    let rotated = admin(
        &gw,
        "POST",
        "/admin/keys/audited/rotate",
        Some(json!({"grace_seconds": 60})),
    )
    .await
    .json();
    admin(&gw, "DELETE", "/admin/keys/audited", None).await;
    let r = admin(&gw, "GET", "/admin/audit", None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    let log = r.json();
    let entries = log["data"].as_array().unwrap();
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["key.revoke", "key.rotate", "key.update", "key.create"]
    );
    for e in entries {
        assert_eq!(e["actor"], "admin-key");
        assert_eq!(e["target"], json!({"type": "key", "id": "audited"}));
        assert!(e["at"].as_str().unwrap().ends_with('Z'));
    }
    assert_eq!(entries[2]["before"]["rpm"], 10);
    assert_eq!(entries[2]["after"]["rpm"], 20);
    assert_eq!(entries[3]["before"], Value::Null);
    assert!(entries[0]["after"]["revoked_at"].is_string());
    for secret in [
        made["key"].as_str().unwrap(),
        rotated["key"].as_str().unwrap(),
    ] {
        assert!(!text.contains(secret));
        // Not even the digest.
        let digest: String = sha2_hex(secret);
        assert!(!text.contains(&digest), "a digest in the audit log");
    }
    assert!(!text.contains("sha256"));
    // Pages.
    let page = admin(&gw, "GET", "/admin/audit?limit=3", None).await.json();
    assert_eq!(page["data"].as_array().unwrap().len(), 3);
    let next = page["next"].as_i64().unwrap();
    let rest = admin(
        &gw,
        "GET",
        &format!("/admin/audit?limit=3&before={next}"),
        None,
    )
    .await
    .json();
    assert_eq!(rest["data"][0]["action"], "key.create");
    assert_eq!(rest["next"], Value::Null);
    assert_never_logged(
        &gw,
        &[
            made["key"].as_str().unwrap(),
            rotated["key"].as_str().unwrap(),
        ],
    );
}

fn sha2_hex(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    let send = |req: Request| async {
        let r = http_client::send(
            gw.metrics,
            &req.header("authorization", &format!("Bearer {ADMIN_KEY}")),
        )
        .await
        .unwrap();
        let msg = r
            .try_json()
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_default();
        (r.status, msg)
    };
    let json_post = |path: &str, body: &str| {
        Request::post(path)
            .header("content-type", "application/json")
            .body(body.as_bytes().to_vec())
    };
    for (body, status, names) in [
        ("{", 400, "JSON"),
        ("[1]", 400, "object"),
        (r#"{"rpm": 0}"#, 400, "rpm"),
        (r#"{"rpm": "5"}"#, 400, "rpm"),
        (r#"{"tpm": -1}"#, 400, "tpm"),
        (
            r#"{"budget": {"usd": 5, "period": "day"}}"#,
            400,
            "budget.usd",
        ),
        (
            r#"{"budget": {"usd": "5", "period": "week"}}"#,
            400,
            "budget.period",
        ),
        (r#"{"policy": "loose"}"#, 400, "policy"),
        (r#"{"expires_at": "tomorrow"}"#, 400, "expires_at"),
        (r#"{"metadata": [1]}"#, 400, "metadata"),
        (r#"{"team": "nobody"}"#, 400, "team"),
        (r#"{"models": "openai/*"}"#, 400, "models"),
        (r#"{"id": "a/b"}"#, 400, "id"),
        (r#"{"sha256": "00"}"#, 400, "sha256"),
        (r#"{"colour": "red"}"#, 400, "colour"),
    ] {
        let (s, msg) = send(json_post("/admin/keys", body)).await;
        assert_eq!(s, status, "{body}: {msg}");
        assert!(msg.contains(names), "{body}: {msg}");
    }
    let (s, msg) = send(
        Request::post("/admin/keys")
            .header("content-type", "text/plain")
            .body(b"{}".to_vec()),
    )
    .await;
    assert_eq!(s, 415, "{msg}");
    let big = format!(r#"{{"metadata": {{"x": "{}"}}}}"#, "a".repeat(70_000));
    let (s, _) = send(json_post("/admin/keys", &big)).await;
    assert_eq!(s, 413);
    let (s, _) = send(Request::new("PUT", "/admin/keys/x")).await;
    assert_eq!(s, 405);
    let (s, msg) = send(json_post(
        "/admin/keys/nobody/rotate",
        r#"{"grace_seconds": -1}"#,
    ))
    .await;
    assert_eq!(s, 400, "{msg}");
    assert!(msg.contains("grace_seconds"));
    let (s, _) = send(json_post("/admin/keys/nobody/rotate", "{}")).await;
    assert_eq!(s, 404);
    let (s, msg) = send(Request::get("/admin/keys?state=lost")).await;
    assert_eq!(s, 400);
    assert!(msg.contains("state"));
    let (s, msg) = send(json_post("/admin/teams", r#"{"rpm": 3}"#)).await;
    assert_eq!(s, 400);
    assert!(msg.contains("id"), "{msg}");
    // Nothing was made by any of them.
    let listed = admin(&gw, "GET", "/admin/keys?source=api", None)
        .await
        .json();
    assert_eq!(listed["data"], json!([]));
    let audit = admin(&gw, "GET", "/admin/audit", None).await.json();
    assert_eq!(audit["data"], json!([]));
    // Without the admin key: 401, nothing made.
    let r = http_client::send(gw.metrics, &Request::post("/admin/keys").json(&json!({})))
        .await
        .unwrap();
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn keys_are_listed_a_page_at_a_time() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    for i in 0..5 {
        create(&gw, json!({"id": format!("p{i}")})).await;
    }
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let q = match &after {
            Some(a) => format!("/admin/keys?source=api&limit=2&after={a}"),
            None => "/admin/keys?source=api&limit=2".to_string(),
        };
        let page = admin(&gw, "GET", &q, None).await.json();
        for k in page["data"].as_array().unwrap() {
            assert!(k.get("key").is_none());
            seen.push(k["id"].as_str().unwrap().to_string());
        }
        match page["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4"]);
}

#[tokio::test]
async fn two_processes_on_one_data_directory_see_each_others_changes() {
    let mock = MockUpstream::start().await;
    let shared = crate::common::gateway::TempDir::new();
    let data = shared.file("data");
    let data = data.to_str().unwrap();
    let a = start(&mock, &["--data", data]).await;
    let b = start(&mock, &["--data", data]).await;
    let made = create(&a, json!({"id": "shared"})).await;
    let secret = made["key"].as_str().unwrap();
    eventually(
        PATIENCE,
        "the key in force on the other process",
        || async { (chat(&b, secret).await.status == 200).then_some(()) },
    )
    .await;
    let r = admin(&b, "DELETE", "/admin/keys/shared", None).await;
    assert_eq!(r.status, 204, "{}", r.text());
    eventually(
        PATIENCE,
        "the revocation in force on the first process",
        || async {
            let r = chat(&a, secret).await;
            (r.status == 401).then_some(())
        },
    )
    .await;
    let r = chat(&a, secret).await;
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("revoked"));
    // Both audit logs are the one log.
    let log = admin(&a, "GET", "/admin/audit", None).await.json();
    assert_eq!(log["data"].as_array().unwrap().len(), 2);
    assert_never_logged(&a, &[secret]);
    assert_never_logged(&b, &[secret]);
}

#[tokio::test]
async fn an_id_in_both_the_file_and_the_store_is_refused_at_load() {
    let mock = MockUpstream::start().await;
    let shared = crate::common::gateway::TempDir::new();
    let data = shared.file("data");
    let data = data.to_str().unwrap();
    let gw = start(&mock, &["--data", data]).await;
    let made = create(&gw, json!({"id": "clash"})).await;
    let secret = made["key"].as_str().unwrap();
    // The file gains the same id: the reload is refused, the old keys stay.
    let mut keys = file_keys();
    keys["keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "clash", "key": "sk-file-clash"}));
    gw.write_keys(&keys);
    eventually(PATIENCE, "the reload refused", || async {
        gw.log().contains("clash").then_some(())
    })
    .await;
    assert!(gw.log().contains("key store"), "{}", gw.log());
    assert_eq!(chat(&gw, secret).await.status, 200);
    assert_eq!(chat(&gw, "sk-file-clash").await.status, 401);
    assert_eq!(
        crate::common::families::metric_value(
            &crate::common::families::metrics_text(gw.metrics).await,
            "switchboard_catalog_reload_failures_total",
            &[]
        ),
        Some(1.0)
    );
    // A start on that file and that store is refused, naming the id.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--catalog")
        .arg(gw.dir.file("catalog.json"))
        .arg("--keys")
        .arg(gw.dir.file("keys.json"))
        .args([
            "--data",
            data,
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"clash\"") && stderr.contains("key store"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_file_that_drops_a_team_a_stored_key_names_is_refused() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock, &[]).await;
    let made = create(&gw, json!({"id": "in-ops", "team": "ops"})).await;
    let secret = made["key"].as_str().unwrap();
    gw.write_keys(&json!({"keys": [{"id": "file-key", "key": FILE_KEY}]}));
    eventually(PATIENCE, "the reload refused", || async {
        gw.log().contains("in neither").then_some(())
    })
    .await;
    assert!(gw.log().contains("\"in-ops\""), "{}", gw.log());
    // The previous keys stay: the stored key and its file team.
    assert_eq!(chat(&gw, secret).await.status, 200);
    let one = admin(&gw, "GET", "/admin/keys/in-ops", None).await.json();
    assert_eq!(one["team"], "ops");
}

mod needs_postgres {
    use super::*;

    fn base() -> String {
        std::env::var("SWITCHBOARD_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
    }

    async fn connect(url: &str) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {url}: {e} (tests/run.sh starts it)"));
        tokio::spawn(conn);
        client
    }

    /// A database of this test's own; dropped at the end.
    struct Db(String);

    impl Db {
        async fn create() -> Db {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let name = format!("sb_keys_{}_{nanos}", std::process::id());
            connect(&base())
                .await
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
            Db(name)
        }

        fn url(&self) -> String {
            let cfg: tokio_postgres::Config = base().parse().unwrap();
            let user = cfg.get_user().unwrap_or("postgres");
            let port = cfg.get_ports().first().copied().unwrap_or(5432);
            format!("postgres://{user}@127.0.0.1:{port}/{}", self.0)
        }
    }

    impl Drop for Db {
        fn drop(&mut self) {
            let name = self.0.clone();
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let _ = connect(&base())
                        .await
                        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                });
            })
            .join();
        }
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL (SWITCHBOARD_TEST_POSTGRES, else 127.0.0.1:5432/test; tests/run.sh starts one and runs these)"]
    async fn two_instances_on_one_database_see_each_others_changes() {
        let db = Db::create().await;
        let url = db.url();
        let mock = MockUpstream::start().await;
        let a = start(&mock, &["--database", &url]).await;
        let b = start(&mock, &["--database", &url]).await;
        let r = admin(
            &a,
            "POST",
            "/admin/teams",
            Some(json!({"id": "fleet", "rpm": 100})),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text());
        let made = create(&a, json!({"id": "roaming", "team": "fleet"})).await;
        let first = made["key"].as_str().unwrap().to_string();
        eventually(
            PATIENCE,
            "the key in force on the other instance",
            || async { (chat(&b, &first).await.status == 200).then_some(()) },
        )
        .await;
        let one = admin(&b, "GET", "/admin/keys/roaming", None).await.json();
        assert_eq!(one["team"], "fleet");
        // A rotation made on B: A takes the new secret, and refuses the old one.
        let r = admin(
            &b,
            "POST",
            "/admin/keys/roaming/rotate",
            Some(json!({"grace_seconds": 0})),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let second = r.json()["key"].as_str().unwrap().to_string();
        eventually(
            PATIENCE,
            "the rotation in force on the first instance",
            || async {
                (chat(&a, &second).await.status == 200 && chat(&a, &first).await.status == 401)
                    .then_some(())
            },
        )
        .await;
        admin(&a, "DELETE", "/admin/keys/roaming", None).await;
        eventually(PATIENCE, "the revocation on the other instance", || async {
            let r = chat(&b, &second).await;
            (r.status == 401 && r.text().contains("revoked")).then_some(())
        })
        .await;
        // One audit log for the fleet, newest first.
        let log = admin(&b, "GET", "/admin/audit", None).await.json();
        let actions: Vec<&str> = log["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action"].as_str().unwrap())
            .collect();
        assert_eq!(
            actions,
            ["key.revoke", "key.rotate", "key.create", "team.create"]
        );
        assert_never_logged(&a, &[&first, &second]);
        assert_never_logged(&b, &[&first, &second]);
    }

    /// Forwards connections on `port` to the real PostgreSQL, from now on.
    async fn forward(port: u16) -> tokio::task::JoinHandle<()> {
        let cfg: tokio_postgres::Config = base().parse().unwrap();
        let target = format!(
            "127.0.0.1:{}",
            cfg.get_ports().first().copied().unwrap_or(5432)
        );
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let target = target.clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        })
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL (SWITCHBOARD_TEST_POSTGRES, else 127.0.0.1:5432/test; tests/run.sh starts one and runs these)"]
    async fn an_instance_started_while_postgres_is_down_takes_the_stored_keys_once_it_answers() {
        let db = Db::create().await;
        let url = db.url();
        let mock = MockUpstream::start().await;
        let a = start(&mock, &["--database", &url]).await;
        let made = create(&a, json!({"id": "early"})).await;
        let secret = made["key"].as_str().unwrap().to_string();
        // B's database address answers nothing yet: B starts on the file's keys.
        let port = crate::common::gateway::free_port();
        let down = url.replacen(&format!(":{}/", db_port()), &format!(":{port}/"), 1);
        assert_ne!(down, url);
        let b = start(&mock, &["--database", &down]).await;
        assert_eq!(chat(&b, FILE_KEY).await.status, 200);
        assert_eq!(chat(&b, &secret).await.status, 401);
        let r = admin(&b, "POST", "/admin/keys", Some(json!({"id": "while-down"}))).await;
        assert_eq!(r.status, 503, "{}", r.text());
        assert!(b.log().contains("key store"), "{}", b.log());
        // Once it answers, B reads the store and the key is in force there.
        let proxy = forward(port).await;
        eventually(
            PATIENCE,
            "the stored key in force once the database answers",
            || async { (chat(&b, &secret).await.status == 200).then_some(()) },
        )
        .await;
        proxy.abort();
        assert_never_logged(&b, &[&secret]);
    }

    fn db_port() -> u16 {
        let cfg: tokio_postgres::Config = base().parse().unwrap();
        cfg.get_ports().first().copied().unwrap_or(5432)
    }
}
