//! End-to-end: model aliases (docs/configuration.md "Aliases", docs/api.md
//! "Aliases"). A request by alias in every client family reaches the
//! upstream with the model's `upstream_model` and is answered with the
//! canonical name; keys authorize the canonical model; listings carry the
//! aliases without listing them; a catalog with a duplicate alias does not
//! start, and a reload with one keeps the previous catalog.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{authed, catalog, keys, Gateway, TempDir, KEY, LIMITED_KEY};
use crate::common::http_client::Request;
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

/// The test catalog with aliases on four models: one for an Anthropic
/// upstream, one for OpenAI, one for Gemini, and one holding a '/' whose
/// first part is no provider.
fn aliased(mock: &MockUpstream) -> Value {
    let mut c = catalog(mock);
    for m in c["models"].as_array_mut().unwrap() {
        let aliases = match m["id"].as_str().unwrap() {
            "claude-sonnet-4.7" => json!(["claude-sonnet-4-7", "sonnet-latest"]),
            "gpt-5" => json!(["gpt-5-latest"]),
            "gemini-3.1-pro" => json!(["gemini-pro-latest"]),
            "deepseek-v4-pro" => json!(["vendor/deepseek-pro"]),
            _ => continue,
        };
        m["aliases"] = aliases;
    }
    c
}

async fn start_aliased() -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&aliased(&mock), &keys(), &[]).await;
    (mock, gw)
}

const ALIASES: [&str; 5] = [
    "claude-sonnet-4-7",
    "sonnet-latest",
    "gpt-5-latest",
    "gemini-pro-latest",
    "vendor/deepseek-pro",
];

#[tokio::test]
async fn a_request_by_alias_reaches_the_upstream_model_and_answers_the_canonical_name() {
    let (mock, gw) = start_aliased().await;

    // OpenAI chat, by alias and by `provider/alias`: an Anthropic upstream.
    for name in ["sonnet-latest", "anthropic/sonnet-latest"] {
        mock.clear();
        let r = gw
            .send(&call(
                Protocol::OpenAi,
                CHAT,
                &openai_body(name, "by alias", None, false),
            ))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        assert_eq!(r.json()["model"], "anthropic/claude-sonnet-4.7", "{name}");
        assert_eq!(
            reply_text(Protocol::OpenAi, &r.json()),
            expected_reply(Protocol::Anthropic, "by alias")
        );
        let sent = mock.last_request().unwrap();
        assert_upstream_request(Protocol::Anthropic, &sent, "claude-sonnet-4-7", false);
    }

    // OpenAI chat streamed: every chunk names the canonical model.
    mock.clear();
    let r = gw
        .send(&call(
            Protocol::OpenAi,
            CHAT,
            &openai_body("gpt-5-latest", "streamed", None, true),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let chunks = event_json(&r.sse());
    assert!(!chunks.is_empty());
    for c in &chunks {
        assert_eq!(c["model"], "openai/gpt-5", "{c}");
    }
    assert_eq!(
        stream_text(Protocol::OpenAi, &chunks),
        expected_reply(Protocol::OpenAi, "streamed")
    );
    assert_upstream_request(
        Protocol::OpenAi,
        &mock.last_request().unwrap(),
        "gpt-5-2025-08-07",
        true,
    );

    // Anthropic Messages: same-family pass-through, the body's model renamed.
    mock.clear();
    let r = gw
        .send(&call(
            Protocol::Anthropic,
            MESSAGES,
            &anthropic_body("sonnet-latest", "messages", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "claude-sonnet-4.7");
    assert_eq!(
        reply_text(Protocol::Anthropic, &r.json()),
        expected_reply(Protocol::Anthropic, "messages")
    );
    assert_upstream_request(
        Protocol::Anthropic,
        &mock.last_request().unwrap(),
        "claude-sonnet-4-7",
        false,
    );

    // Responses: an OpenAI upstream.
    mock.clear();
    let body = json!({"model": "gpt-5-latest", "input": "responses", "store": false});
    let r = gw
        .send(&authed("openai", "/v1/responses", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "openai/gpt-5");
    assert_eq!(
        reply_text(Protocol::Responses, &r.json()),
        expected_reply(Protocol::OpenAi, "responses")
    );
    assert_upstream_request(
        Protocol::OpenAi,
        &mock.last_request().unwrap(),
        "gpt-5-2025-08-07",
        false,
    );

    // Gemini path, bare alias and `provider/alias`: the upstream path names the model.
    for name in ["gemini-pro-latest", "google/gemini-pro-latest"] {
        mock.clear();
        let r = gw
            .send(&call(
                Protocol::Gemini,
                &gemini_path(name, GeminiMode::Whole),
                &gemini_body("gemini path", None),
            ))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        assert_eq!(r.json()["modelVersion"], "gemini-3.1-pro", "{name}");
        assert_eq!(
            reply_text(Protocol::Gemini, &r.json()),
            expected_reply(Protocol::Gemini, "gemini path")
        );
        assert_upstream_request(
            Protocol::Gemini,
            &mock.last_request().unwrap(),
            "gemini-3.1-pro",
            false,
        );
    }
    // An alias holding a '/' on the Gemini path (its first part is no provider).
    mock.clear();
    let r = gw
        .send(&call(
            Protocol::Gemini,
            &gemini_path("vendor/deepseek-pro", GeminiMode::Whole),
            &gemini_body("slash", None),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["modelVersion"], "deepseek-v4-pro");
    assert_eq!(mock.requests().len(), 1);

    // Count-tokens routes take an alias too.
    let r = gw
        .send(&call(
            Protocol::Anthropic,
            COUNT,
            &anthropic_body("sonnet-latest", "count me", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["input_tokens"].as_u64().unwrap() > 0);
    let r = gw
        .send(&call(
            Protocol::Gemini,
            &format!("{GOOGLE}/gemini-pro-latest:countTokens"),
            &gemini_body("count me", None),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["totalTokens"].as_u64().unwrap() > 0);

    // The access log names the canonical model, never an alias.
    let logged: Vec<Value> = eventually(Duration::from_secs(5), "ten access log lines", || async {
        let lines: Vec<Value> = gw
            .access_log()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|l: &Value| l["method"] == "POST")
            .collect();
        (lines.len() == 10).then_some(lines)
    })
    .await;
    for l in &logged {
        let model = l["model"].as_str().unwrap_or_else(|| panic!("{l}"));
        assert!(
            [
                "claude-sonnet-4.7",
                "gpt-5",
                "gemini-3.1-pro",
                "deepseek-v4-pro"
            ]
            .contains(&model),
            "{l}"
        );
    }
}

#[tokio::test]
async fn keys_authorize_the_canonical_model_and_unknown_names_stay_404() {
    let (mock, gw) = start_aliased().await;
    // `limited` may use `openai/*`: the alias of openai/gpt-5 is allowed...
    let r = gw
        .send(&authed(
            "openai",
            CHAT,
            LIMITED_KEY,
            &openai_body("gpt-5-latest", "allowed", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // ...and an alias of a model of another provider is not, whatever it is called.
    for name in ["claude-sonnet-4-7", "anthropic/sonnet-latest"] {
        let r = gw
            .send(&authed(
                "openai",
                CHAT,
                LIMITED_KEY,
                &openai_body(name, "denied", None, false),
            ))
            .await;
        let e = assert_error(Protocol::OpenAi, &r, 403);
        assert!(e.to_string().contains("anthropic/claude-sonnet-4.7"), "{e}");
    }
    assert_eq!(mock.requests().len(), 1);
    // An alias under the wrong provider, or of a model the family does not
    // see, is not found, in the client's error shape.
    let r = gw
        .send(&call(
            Protocol::OpenAi,
            CHAT,
            &openai_body("openai/sonnet-latest", "x", None, false),
        ))
        .await;
    assert_error(Protocol::OpenAi, &r, 404);
    let r = gw
        .send(&call(
            Protocol::Anthropic,
            MESSAGES,
            &anthropic_body("gpt-5-latest", "x", None, false),
        ))
        .await;
    assert_error(Protocol::Anthropic, &r, 404);
    let r = gw
        .send(&call(
            Protocol::Gemini,
            &gemini_path("sonnet-latest", GeminiMode::Whole),
            &gemini_body("x", None),
        ))
        .await;
    assert_error(Protocol::Gemini, &r, 404);
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn listings_carry_aliases_and_single_model_routes_answer_by_alias() {
    let (mock, gw) = start_aliased().await;
    let all = gw.get("/v1/models").await.json();
    let data = all["data"].as_array().unwrap();
    // One entry per catalog model: no alias is an entry of its own.
    assert_eq!(
        data.len(),
        aliased(&mock)["models"].as_array().unwrap().len()
    );
    for m in data {
        assert!(!ALIASES.contains(&m["id"].as_str().unwrap()), "{m}");
        assert!(m["aliases"].is_array(), "{m}");
    }
    let sonnet = data
        .iter()
        .find(|m| m["id"] == "claude-sonnet-4.7")
        .unwrap();
    assert_eq!(
        sonnet["aliases"],
        json!(["claude-sonnet-4-7", "sonnet-latest"])
    );
    let tiny = data.iter().find(|m| m["id"] == "tiny").unwrap();
    assert_eq!(tiny["aliases"], json!([]));
    // The OpenAI SDK's models.retrieve(alias), bare or with its provider.
    for path in [
        "/v1/models/sonnet-latest",
        "/v1/models/anthropic/sonnet-latest",
        "/v1/models/anthropic%2Fsonnet-latest",
        "/v1/models/claude-sonnet-4-7",
    ] {
        let r = gw.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert_eq!(&r.json(), sonnet, "{path}");
    }
    let ds = gw.get("/v1/models/vendor/deepseek-pro").await;
    assert_eq!(ds.status, 200, "{}", ds.text());
    assert_eq!(ds.json()["id"], "deepseek-v4-pro");
    assert_eq!(gw.get("/v1/models/openai/sonnet-latest").await.status, 404);

    // Anthropic: the listing object carries the aliases; the alias answers it.
    let page = gw.get("/anthropic/v1/models").await.json();
    let ids: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(!ids.iter().any(|i| i.contains("sonnet-latest")), "{ids:?}");
    let one = gw.get("/anthropic/v1/models/sonnet-latest").await;
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(one.json()["id"], "models/claude-sonnet-4.7");
    assert_eq!(
        one.json()["aliases"],
        json!(["claude-sonnet-4-7", "sonnet-latest"])
    );
    assert_eq!(
        gw.get("/anthropic/v1/models/models%2Fclaude-sonnet-4-7")
            .await
            .json(),
        one.json()
    );
    // A model Anthropic clients do not see stays unseen by its alias.
    assert_eq!(
        gw.get("/anthropic/v1/models/gpt-5-latest").await.status,
        404
    );

    // Gemini: the alias answers the canonical object, which keeps Gemini's own fields.
    let g = gw.get("/google/v1beta/models/gemini-pro-latest").await;
    assert_eq!(g.status, 200, "{}", g.text());
    assert_eq!(g.json()["name"], "models/gemini-3.1-pro");
    assert!(g.json().get("aliases").is_none());
    let list = gw.get("/google/v1beta/models").await.json();
    assert!(!list.to_string().contains("gemini-pro-latest"));
}

#[tokio::test]
async fn a_reload_with_a_duplicate_alias_keeps_the_previous_catalog() {
    let (mock, gw) = start_aliased().await;
    let mut bad = aliased(&mock);
    let models = bad["models"].as_array_mut().unwrap();
    let at = models.iter().position(|m| m["id"] == "gpt-5-any").unwrap();
    // An added model would show the reload took; the clash forbids it.
    let mut added = models[0].clone();
    added["id"] = json!("gpt-5-added");
    added["aliases"] = json!(["gpt-5-added-latest"]);
    models.push(added);
    models[at]["aliases"] = json!(["sonnet-latest"]);
    gw.write_catalog(&bad);
    let want = format!("$.models[{at}].aliases[0]");
    eventually(
        Duration::from_secs(5),
        "the reload failure in the log",
        || async {
            let log = gw.log();
            (log.contains("reload failed") && log.contains(&want)).then_some(())
        },
    )
    .await;
    let log = gw.log();
    assert!(
        log.contains("alias \"sonnet-latest\" is already an alias of $.models["),
        "{log}"
    );
    let text = metrics_text(gw.metrics).await;
    assert!(
        metric_value(&text, "switchboard_catalog_reload_failures_total", &[]).unwrap() >= 1.0,
        "{text}"
    );
    // The previous catalog serves on: the alias still names its model.
    assert_eq!(gw.get("/v1/models/gpt-5-added").await.status, 404);
    let r = gw
        .send(&call(
            Protocol::OpenAi,
            CHAT,
            &openai_body("sonnet-latest", "kept", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "anthropic/claude-sonnet-4.7");
    // Fixed: picked up, the new alias with it.
    bad["models"][at]["aliases"] = json!(["gpt-any-latest"]);
    gw.write_catalog(&bad);
    eventually(Duration::from_secs(5), "the fixed catalog", || async {
        (gw.get("/v1/models/gpt-5-added-latest").await.status == 200).then_some(())
    })
    .await;
    let r = gw
        .send(&call(
            Protocol::OpenAi,
            CHAT,
            &openai_body("gpt-any-latest", "fixed", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "openai/gpt-5-any");
}

#[tokio::test]
async fn a_duplicate_alias_stops_startup_naming_the_clash() {
    let mock = MockUpstream::start().await;
    let mut bad = aliased(&mock);
    let at = bad["models"]
        .as_array()
        .unwrap()
        .iter()
        .position(|m| m["id"] == "tiny")
        .unwrap();
    bad["models"][at]["aliases"] = json!(["openai/gpt-5"]);
    let dir = TempDir::new();
    std::fs::write(dir.file("catalog.json"), bad.to_string()).unwrap();
    std::fs::write(dir.file("keys.json"), keys().to_string()).unwrap();
    let port = crate::common::gateway::free_port();
    for check in [false, true] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        if check {
            cmd.arg("--check");
        } else {
            cmd.arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--metrics")
                .arg(format!("127.0.0.1:{}", crate::common::gateway::free_port()));
        }
        let out = cmd
            .arg("--catalog")
            .arg(dir.file("catalog.json"))
            .arg("--keys")
            .arg(dir.file("keys.json"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "started with a duplicate alias");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("$.models[{at}].aliases[0]")), "{err}");
        assert!(
            err.contains("\"openai/gpt-5\" is already the qualified id of $.models[0]"),
            "{err}"
        );
    }
}

/// Bedrock's model ids hold a ':' (`us.anthropic.claude-…-v1:0`, what
/// Claude Code in Bedrock mode sends): as an alias, one is answered on the
/// Bedrock routes (the ':' raw or escaped), in a body, and on Gemini's
/// `{name}:{method}` path, which splits at the last ':'.
#[tokio::test]
async fn a_bedrock_model_id_holding_a_colon_is_an_alias() {
    const ID: &str = "us.anthropic.claude-sonnet-4-7-v1:0";
    // Visible to Gemini clients (the catalog's Claude is not).
    const GEMINI_ID: &str = "google.gemini-3-1-pro-v1:0";
    let mock = MockUpstream::start().await;
    let mut cat = aliased(&mock);
    for m in cat["models"].as_array_mut().unwrap() {
        if m["id"] == "claude-sonnet-4.7" {
            m["aliases"].as_array_mut().unwrap().push(json!(ID));
        }
        if m["id"] == "gemini-3.1-pro" {
            m["aliases"].as_array_mut().unwrap().push(json!(GEMINI_ID));
        }
    }
    let gw = Gateway::start_with(&cat, &keys(), &[]).await;

    let r = gw
        .send(&call(
            Protocol::OpenAi,
            CHAT,
            &openai_body(ID, "by a bedrock id", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "anthropic/claude-sonnet-4.7");

    let r = gw
        .send(&call(
            Protocol::Gemini,
            &gemini_path(GEMINI_ID, GeminiMode::Whole),
            &gemini_body("gemini path", None),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["modelVersion"], "gemini-3.1-pro");

    let invoke = json!({
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "invoke"}]
    });
    for segment in [ID.to_string(), ID.replace(':', "%3A")] {
        mock.clear();
        let r = gw
            .send(
                &Request::post(&format!("/bedrock/model/{segment}/invoke"))
                    .json(&invoke)
                    .header("authorization", &format!("Bearer {KEY}")),
            )
            .await;
        assert_eq!(r.status, 200, "{segment}: {}", r.text());
        assert_eq!(r.json()["model"], "claude-sonnet-4.7", "{segment}");
        assert_upstream_request(
            Protocol::Anthropic,
            &mock.last_request().unwrap(),
            "claude-sonnet-4-7",
            false,
        );
    }
}
