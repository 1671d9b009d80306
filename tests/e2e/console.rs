//! End-to-end: the web console's side of the admin listener (docs/operations.md
//! "Console"), on the real binary: the embedded assets served without the key
//! and with their security headers; the JSON the pages read, after real
//! traffic through the mock upstream: the time series (`/admin/usage/series`),
//! the request list with each request's attempts, adjustments and error
//! (`/admin/requests`, keyset pages and filters), the usage CSV (quoting),
//! and each upstream's recent failures; none of it without the admin key,
//! none of it holding a secret. The browser side is tests/console/.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::eventually;
use crate::common::gateway::{authed, catalog, keys, Gateway, KEY};
use crate::common::http_client::{self, Request, Response};
use crate::common::mock_upstream::MockUpstream;
use serde_json::{json, Value};
use std::time::Duration;

const ADMIN_KEY: &str = "sk-admin-console-secret";
/// A key whose id needs quoting in CSV (a comma, quotes) and defusing (a leading `=`).
const ODD_KEY: &str = "sk-odd-key";
const ODD_ID: &str = "=ops,\"night\"";

/// `s` percent-encoded for a query value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn get(gw: &Gateway, path: &str, key: Option<&str>) -> Response {
    let mut r = Request::get(path);
    if let Some(k) = key {
        r = r.header("authorization", &format!("Bearer {k}"));
    }
    http_client::send(gw.metrics, &r).await.unwrap()
}

async fn admin_json(gw: &Gateway, path: &str) -> Value {
    let r = get(gw, path, Some(ADMIN_KEY)).await;
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.json()
}

async fn start(mock: &MockUpstream) -> Gateway {
    let mut k = keys();
    k["keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": ODD_ID, "key": ODD_KEY, "team": "night"}));
    k["teams"] = json!([{"id": "night"}]);
    Gateway::start_with(
        &catalog(mock),
        &k,
        &["--admin-key", ADMIN_KEY, "--ledger-flush-ms", "50"],
    )
    .await
}

#[tokio::test]
async fn assets_are_served_without_the_key_with_their_security_headers() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    let page = get(&gw, "/admin/ui/", None).await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.starts_with("default-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let html = page.text();
    for link in [
        "Overview",
        "Keys",
        "Teams",
        "Usage",
        "Upstreams",
        "Requests",
    ] {
        assert!(html.contains(&format!(">{link}</a>")), "{link}");
    }
    assert!(html.contains(r#"type="password""#));
    // The script the shell names, cached for good under its version.
    let src = html
        .split("src=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap();
    assert!(src.starts_with("app.js?v="), "{src}");
    let js = get(&gw, &format!("/admin/ui/{src}"), None).await;
    assert_eq!(js.status, 200);
    assert_eq!(
        js.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(js.header("cache-control").unwrap().contains("immutable"));
    assert!(js.text().contains("sessionStorage"));
    let css = get(&gw, "/admin/ui/app.css", None).await;
    assert_eq!(css.status, 200);
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    let bare = get(&gw, "/admin/ui", None).await;
    assert_eq!(bare.status, 308);
    assert_eq!(bare.header("location"), Some("/admin/ui/"));
    assert_eq!(get(&gw, "/admin/ui/secrets.json", None).await.status, 404);

    // The data is the API's, behind the key.
    for path in [
        "/admin/usage/series",
        "/admin/requests",
        "/admin/usage?group_by=model&format=csv",
        "/admin/upstreams",
    ] {
        assert_eq!(get(&gw, path, None).await.status, 401, "{path}");
        assert_eq!(get(&gw, path, Some(KEY)).await.status, 401, "{path}");
    }

    // Without an admin key there is no admin listener's console either.
    let off = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    assert_eq!(get(&off, "/admin/ui/", None).await.status, 404);
}

/// Sends the traffic the pages show; returns the request ids, in order.
async fn traffic(gw: &Gateway) -> Vec<&'static str> {
    let chat = |model: &str, extra: Value| {
        let mut body =
            json!({"model": model, "messages": [{"role": "user", "content": "hello console"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let sends = [
        ("console-ok", KEY, chat("openai/gpt-5", json!({}))),
        (
            "console-stream",
            KEY,
            chat(
                "gpt-5",
                json!({"stream": true, "stream_options": {"include_usage": true}}),
            ),
        ),
        // Nothing listens behind `down`: a 502 after the attempts.
        ("console-error", KEY, chat("offline", json!({}))),
        // A dead upstream first, then one that answers.
        ("console-failover", KEY, chat("flaky-model", json!({}))),
        // Past the model's max_output_tokens: clamped (the catalog adapts).
        (
            "console-adjusted",
            ODD_KEY,
            chat("tiny", json!({"max_tokens": 5000})),
        ),
    ];
    let mut ids = Vec::new();
    for (id, key, body) in sends {
        let r = gw
            .send(&authed("openai", "/v1/chat/completions", key, &body).header("x-request-id", id))
            .await;
        assert!(r.status > 0, "{id}");
        ids.push(id);
        // Rows are listed by their millisecond, then by request id: two
        // requests in one millisecond (a fast machine answers a stream
        // that quickly) would list by id, not in the order sent.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    ids
}

#[tokio::test]
async fn the_pages_data_after_traffic() {
    let mock = MockUpstream::start().await;
    let gw = start(&mock).await;
    let ids = traffic(&gw).await;
    let page = eventually(Duration::from_secs(10), "the ledger rows", || async {
        let v = admin_json(&gw, "/admin/requests").await;
        (v["data"].as_array().unwrap().len() == ids.len()).then_some(v)
    })
    .await;

    // Newest first, every request with its story.
    let rows = page["data"].as_array().unwrap();
    let got: Vec<&str> = rows
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(got, newest_first);
    assert_eq!(page["next"], Value::Null);
    let by_id = |id: &str| rows.iter().find(|r| r["request_id"] == id).unwrap();
    let ok = by_id("console-ok");
    assert_eq!(ok["status"], 200);
    assert_eq!(ok["key_id"], "test");
    assert_eq!(ok["model"], "gpt-5");
    assert_eq!(ok["attempts"], 1);
    assert_eq!(ok["tried"][0]["status"], 200);
    assert_eq!(ok["tried"][0]["failure"], Value::Null);
    assert!(ok["cost_usd"].as_f64().unwrap() > 0.0, "{ok}");
    assert!(ok["time"].as_str().unwrap().ends_with('Z'));
    assert!(by_id("console-stream")["ttft_ms"].as_f64().is_some());
    let failed = by_id("console-error");
    assert_eq!(failed["status"], 502);
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .starts_with("bad_gateway: "),
        "{failed}"
    );
    assert_eq!(failed["tried"][0]["failure"], "unreachable");
    let failover = by_id("console-failover");
    assert_eq!(failover["status"], 200);
    assert_eq!(failover["attempts"], 2);
    assert_eq!(failover["tried"][0]["failure"], "unreachable");
    assert_eq!(failover["tried"][1]["status"], 200);
    let adjusted = by_id("console-adjusted");
    assert!(
        adjusted["adjusted"]
            .as_str()
            .unwrap()
            .contains("max_tokens"),
        "{adjusted}"
    );
    assert_eq!(adjusted["key_id"], ODD_ID);

    // Keyset pages: two, then the rest, no row twice.
    let first = admin_json(&gw, "/admin/requests?limit=2").await;
    assert_eq!(first["data"].as_array().unwrap().len(), 2);
    let next = first["next"].as_str().unwrap().to_string();
    let second = admin_json(
        &gw,
        &format!("/admin/requests?limit=10&before={}", enc(&next)),
    )
    .await;
    let rest: Vec<&str> = second["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(rest, newest_first[2..]);
    // Filters.
    let errors = admin_json(&gw, "/admin/requests?status=error").await;
    assert_eq!(errors["data"].as_array().unwrap().len(), 1);
    assert_eq!(errors["data"][0]["request_id"], "console-error");
    let odd = admin_json(&gw, &format!("/admin/requests?key={}", enc(ODD_ID))).await;
    assert_eq!(odd["data"][0]["request_id"], "console-adjusted");
    let r = get(&gw, "/admin/requests?limit=9999", Some(ADMIN_KEY)).await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limit"));

    // The series: every request in the last 24 hours, by model.
    let s = admin_json(&gw, "/admin/usage/series?bucket=hour&by=model").await;
    assert_eq!(s["buckets"].as_array().unwrap().len(), 24);
    assert_eq!(s["total"]["requests"], 5);
    assert_eq!(s["total"]["errors"], 1);
    let series = s["series"].as_array().unwrap();
    let gpt5 = series.iter().find(|g| g["name"] == "openai/gpt-5").unwrap();
    let last = gpt5["requests"].as_array().unwrap().len() - 1;
    // The current hour (a request sent just before an hour turned is in the one before).
    let sent: u64 = gpt5["requests"].as_array().unwrap()[last - 1..]
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(sent, 2);
    assert!(gpt5["mean_latency_ms"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v.as_f64().is_some_and(|m| m > 0.0)));
    let top1 = admin_json(&gw, "/admin/usage/series?by=key&top=1").await;
    let names: Vec<&str> = top1["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[1], "other");
    let teams = admin_json(&gw, "/admin/usage/series?by=team").await;
    let per_team: Vec<(&str, i64)> = teams["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let n = g["requests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .sum();
            (g["name"].as_str().unwrap(), n)
        })
        .collect();
    assert!(per_team.contains(&("night", 1)), "{per_team:?}");
    assert!(per_team.contains(&("", 4)), "{per_team:?}");
    let days = admin_json(&gw, "/admin/usage/series?bucket=day").await;
    assert_eq!(days["source"], "rollups");
    assert_eq!(days["total"]["requests"], 5);
    let r = get(&gw, "/admin/usage/series?bucket=week", Some(ADMIN_KEY)).await;
    assert_eq!(r.status, 400);

    // The usage CSV: quoted, defused, the sums of the JSON answer.
    let csv = get(&gw, "/admin/usage?group_by=key&format=csv", Some(ADMIN_KEY)).await;
    assert_eq!(csv.status, 200, "{}", csv.text());
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(
        csv.header("content-disposition"),
        Some("attachment; filename=\"switchboard-usage-by-key.csv\"")
    );
    let text = csv.text();
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert!(lines[0].starts_with("key,requests,errors,"), "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("\"'=ops,\"\"night\"\"\",1,0,")),
        "{text}"
    );
    assert!(lines.iter().any(|l| l.starts_with("test,4,1,")), "{text}");
    let by_model = get(
        &gw,
        "/admin/usage?group_by=model&format=csv",
        Some(ADMIN_KEY),
    )
    .await
    .text();
    assert!(by_model.contains("\r\nopenai/gpt-5,2,0,"), "{by_model}");
    assert_eq!(
        get(&gw, "/admin/usage?format=xml", Some(ADMIN_KEY))
            .await
            .status,
        400
    );

    // The dead upstream's failures, for the Upstreams page.
    let ups = admin_json(&gw, "/admin/upstreams").await;
    let flaky = ups["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "flaky")
        .unwrap();
    let dead = &flaky["upstreams"][0]["recent_failures"][0];
    assert_eq!(dead["reason"], "unreachable", "{flaky}");
    assert!(dead["at"].as_str().unwrap().ends_with('Z'));

    // No secret anywhere the console reads.
    let everything = [
        admin_json(&gw, "/admin/requests").await.to_string(),
        s.to_string(),
        top1.to_string(),
        text,
        ups.to_string(),
    ]
    .join("\n");
    for secret in [
        KEY,
        ODD_KEY,
        ADMIN_KEY,
        "upstream-key",
        "SB_TEST_KEY_OPENAI=",
    ] {
        assert!(!everything.contains(secret), "{secret} in an answer");
    }
}
