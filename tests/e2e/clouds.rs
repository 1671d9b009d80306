//! End-to-end: the cloud upstreams (docs/clouds.md) through the real binary
//! against the mock's Azure OpenAI and Vertex AI, which check the
//! credential as the real services do: `azure` and `azure-responses` with
//! an `api-key` and with an Entra ID token, the deployment form with its
//! `api-version`; `vertex` and `vertex-anthropic` with a service-account
//! key (an RS256 JWT the mock verifies) and with the metadata server. Tokens
//! are fetched once and shared, refreshed once expired; a credential that
//! cannot be obtained is a 502/503 in the client's shape naming the
//! provider and the source, and no secret or token reaches a log.
//! Embeddings on Azure (`/embeddings`, v1 and deployment) and Vertex
//! (`:predict`, its instance limits) with the same credentials.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{authed, keys, model, Gateway, TempDir, KEY};
use crate::common::http_client::{Request, Response};
use crate::common::mock_upstream::{
    expected_reply, impersonation_path, mock_embed_tokens, mock_vector, MockUpstream, Protocol,
    GOOGLE_TOKEN_PATH, METADATA_TOKEN_PATH, STS_TOKEN_PATH, SUBJECT_TOKEN_PATH,
    VERTEX_ANTHROPIC_VERSION,
};
use serde_json::{json, Value};
use std::time::Duration;

use Protocol::{Anthropic, Gemini, OpenAi, Responses};

const AZURE_KEY: &str = "azure-key-e2e-5f1c9a";
const ENTRA_SECRET: &str = "entra-secret-e2e-b7d204";
const WRONG_SECRET: &str = "entra-wrong-secret-e2e-31aa";
const TENANT: &str = "tenant-e2e";
const CLIENT_ID: &str = "client-e2e";
const SA_EMAIL: &str = "gateway@proj-e2e.iam.gserviceaccount.com";
const SA_KEY: &str = include_str!("common/mock_upstream/keys/service-account.pem");
const SA_PUBLIC: &str = include_str!("common/mock_upstream/keys/service-account.pub.pem");
const WIF_AUDIENCE: &str =
    "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/e2e";
const SUBJECT_TOKEN: &str = "eyJ.subject-token-e2e-0c4d.sig";
const OTHER_KEY: &str = include_str!("common/mock_upstream/keys/other-key.pem");

/// A service-account key file for the mock's token endpoint, signed by `pem`.
fn key_file(dir: &TempDir, name: &str, mock: &MockUpstream, pem: &str) -> String {
    let path = dir.file(name);
    let key = json!({
        "type": "service_account",
        "project_id": "proj-e2e",
        "private_key_id": "e2e-key-1",
        "private_key": pem,
        "client_email": SA_EMAIL,
        "client_id": "1234567890",
        "token_uri": format!("http://{}{GOOGLE_TOKEN_PATH}", mock.addr()),
    });
    std::fs::write(&path, key.to_string()).unwrap();
    path.display().to_string()
}

/// One provider per cloud protocol and credential, each with one model
/// `m-{provider}` whose upstream model is `up-{provider}`.
fn cloud_catalog(mock: &MockUpstream, sa_file: &str, extra: &[(&str, Value)]) -> Value {
    let base = format!("http://{}", mock.addr());
    let v1 = format!("{base}/azure/openai/v1");
    let entra = json!({"type": "entra", "tenant_id": TENANT, "client_id": CLIENT_ID,
        "client_secret_env": "SB_TEST_ENTRA_SECRET", "authority_host": base});
    let sa = json!({"type": "google-oauth", "credentials_file": sa_file});
    let md = json!({"type": "google-oauth"});
    let vx = |protocol: &str, auth: &Value| json!({"protocol": protocol, "base_url": base, "project": "proj-e2e", "location": "us-east5", "auth": auth});
    let mut ups: Vec<(&str, Value)> = vec![
        (
            "az-key",
            json!({"protocol": "azure", "base_url": v1, "api_key_env": "SB_TEST_AZURE_KEY"}),
        ),
        (
            "az-dep",
            json!({"protocol": "azure", "base_url": format!("{base}/azure"), "deployment": "gpt-dep",
            "api_version": "2024-10-21", "api_key_env": "SB_TEST_AZURE_KEY"}),
        ),
        (
            "az-entra",
            json!({"protocol": "azure", "base_url": v1, "auth": entra}),
        ),
        (
            "azr-key",
            json!({"protocol": "azure-responses", "base_url": v1, "api_key_env": "SB_TEST_AZURE_KEY"}),
        ),
        (
            "azr-entra",
            json!({"protocol": "azure-responses", "base_url": v1, "auth": entra}),
        ),
        ("vx-sa", vx("vertex", &sa)),
        ("vx-md", vx("vertex", &md)),
        ("vxa-sa", vx("vertex-anthropic", &sa)),
        ("vxa-md", vx("vertex-anthropic", &md)),
    ];
    ups.extend(extra.iter().cloned());
    let providers: Vec<Value> = ups
        .iter()
        .map(|(id, up)| json!({"id": id, "families": ["openai", "anthropic", "gemini"], "upstreams": [up]}))
        .collect();
    let models: Vec<Value> = ups
        .iter()
        .map(|(id, _)| {
            model(
                &format!("m-{id}"),
                id,
                json!({"upstream_model": format!("up-{id}"), "protocols": ["openai", "anthropic", "gemini", "responses"]}),
            )
        })
        .collect();
    // Embedding models on the Azure and Vertex upstreams.
    let mut models = models;
    for (id, upstream) in [
        ("az-key", "text-embedding-3-small"),
        ("az-dep", "text-embedding-3-small"),
        ("az-entra", "text-embedding-3-small"),
        ("vx-sa", "text-embedding-005"),
        ("vx-md", "gemini-embedding-001"),
    ] {
        models.push(model(
            &format!("e-{id}"),
            id,
            json!({"upstream_model": upstream, "supported_actions": ["embed"],
                "pricing": {"prompt": "0.00000002", "completion": "0"},
                "protocols": ["openai", "gemini"]}),
        ));
    }
    json!({"providers": providers, "models": models})
}

/// A mock that knows the test's credentials, and a gateway on the cloud
/// catalog (with `extra` providers and environment).
async fn start(extra: &[(&str, Value)], env: &[(&str, &str)]) -> (MockUpstream, Gateway, TempDir) {
    let mock = MockUpstream::start().await;
    mock.expect_azure_key(AZURE_KEY);
    mock.expect_entra(TENANT, CLIENT_ID, ENTRA_SECRET);
    mock.expect_service_account(SA_EMAIL, SA_PUBLIC);
    let dir = TempDir::new();
    let sa = key_file(&dir, "sa.json", &mock, SA_KEY);
    let metadata = mock.addr().to_string();
    let mut vars = vec![
        ("SB_TEST_AZURE_KEY", AZURE_KEY),
        ("SB_TEST_ENTRA_SECRET", ENTRA_SECRET),
        ("GCE_METADATA_HOST", metadata.as_str()),
    ];
    vars.extend_from_slice(env);
    let gw = Gateway::start_with_env(&cloud_catalog(&mock, &sa, extra), &keys(), &[], &vars).await;
    (mock, gw, dir)
}

/// The request a `client` of the gateway makes for `model`.
fn client_request(client: Protocol, model: &str, user: &str, stream: bool) -> Request {
    match client {
        OpenAi => authed("openai", CHAT, KEY, &openai_body(model, user, None, stream)),
        Anthropic => authed(
            "anthropic",
            MESSAGES,
            KEY,
            &anthropic_body(model, user, None, stream),
        ),
        Gemini => {
            let mode = if stream {
                GeminiMode::StreamSse
            } else {
                GeminiMode::Whole
            };
            authed(
                "gemini",
                &gemini_path(model, mode),
                KEY,
                &gemini_body(user, None),
            )
        }
        Responses => {
            let mut b = json!({"model": model, "input": user});
            if stream {
                b["stream"] = json!(true);
            }
            authed("openai", "/v1/responses", KEY, &b)
        }
    }
}

/// The answer's text, whole or streamed.
fn answer_text(client: Protocol, r: &Response, stream: bool) -> String {
    assert_eq!(r.status, 200, "{}", r.text());
    if stream {
        stream_text(client, &event_json(&r.sse()))
    } else {
        reply_text(client, &r.json())
    }
}

/// The mock's last model call (token calls aside).
fn last_call(mock: &MockUpstream) -> crate::common::mock_upstream::RecordedRequest {
    mock.requests()
        .into_iter()
        .rev()
        .find(|r| r.path.starts_with("/azure/") || r.path.starts_with("/v1/projects/"))
        .expect("a model call")
}

/// What the upstream of `provider` must have been asked.
fn upstream_path(provider: &str, stream: bool) -> String {
    let vertex = "/v1/projects/proj-e2e/locations/us-east5/publishers";
    match provider {
        "az-key" | "az-entra" => "/azure/openai/v1/chat/completions".into(),
        "az-dep" => {
            "/azure/openai/deployments/gpt-dep/chat/completions?api-version=2024-10-21".into()
        }
        "azr-key" | "azr-entra" => "/azure/openai/v1/responses".into(),
        p if p.starts_with("vxa-") || p == "wif-url" => format!(
            "{vertex}/anthropic/models/up-{p}:{}",
            if stream {
                "streamRawPredict"
            } else {
                "rawPredict"
            }
        ),
        p => format!(
            "{vertex}/google/models/up-{p}:{}",
            if stream {
                "streamGenerateContent?alt=sse"
            } else {
                "generateContent"
            }
        ),
    }
}

/// What no log line may hold: the secrets, the key, every token the mock issued.
fn assert_logs_clean(gw: &Gateway, mock: &MockUpstream) {
    let logs = format!("{}\n{}", gw.log(), gw.access_log());
    let key_line = SA_KEY.lines().nth(3).unwrap();
    let mut secrets = vec![
        AZURE_KEY.to_string(),
        ENTRA_SECRET.into(),
        WRONG_SECRET.into(),
        key_line.into(),
        SUBJECT_TOKEN.into(),
    ];
    secrets.extend(mock.tokens_issued());
    for s in secrets {
        assert!(!logs.contains(&s), "a secret or token in the logs: {s}");
    }
}

#[tokio::test]
async fn every_cloud_protocol_answers_whole_and_streamed_with_each_credential() {
    let (mock, gw, _dir) = start(&[], &[]).await;
    // (provider, the upstream's wire, the client protocols to call it with)
    let cells: &[(&str, Protocol, &[Protocol])] = &[
        ("az-key", OpenAi, &[OpenAi, Anthropic]),
        ("az-dep", OpenAi, &[OpenAi]),
        ("az-entra", OpenAi, &[OpenAi, Gemini]),
        ("azr-key", Responses, &[Responses, OpenAi]),
        ("azr-entra", Responses, &[Responses]),
        ("vx-sa", Gemini, &[Gemini, OpenAi]),
        ("vx-md", Gemini, &[Gemini]),
        ("vxa-sa", Anthropic, &[Anthropic, OpenAi]),
        ("vxa-md", Anthropic, &[Anthropic]),
    ];
    let mut calls = 0;
    for &(provider, wire, clients) in cells {
        for &client in clients {
            for stream in [false, true] {
                let user = format!("hello {provider} from {client:?} stream={stream}");
                let model = format!("{provider}/m-{provider}");
                let r = gw
                    .send(&client_request(client, &model, &user, stream))
                    .await;
                let text = answer_text(client, &r, stream);
                assert_eq!(
                    text,
                    expected_reply(wire, &user),
                    "{provider} {client:?} {stream}"
                );
                calls += 1;
                let up = last_call(&mock);
                assert_eq!(up.path, upstream_path(provider, stream), "{provider}");
                let auth = up.header("authorization").unwrap_or_default().to_string();
                match provider {
                    "az-key" | "az-dep" | "azr-key" => {
                        assert_eq!(up.header("api-key"), Some(AZURE_KEY));
                        assert!(auth.is_empty(), "{auth}");
                    }
                    p if p.ends_with("entra") => {
                        assert!(auth.starts_with("Bearer mock-entra-token-"), "{auth}");
                        assert!(up.header("api-key").is_none());
                    }
                    p if p.ends_with("-sa") => {
                        assert!(auth.starts_with("Bearer mock-google-token-"), "{auth}")
                    }
                    _ => assert!(auth.starts_with("Bearer mock-metadata-token-"), "{auth}"),
                }
                if provider.starts_with("vxa-") {
                    let body = up.json().unwrap();
                    assert_eq!(body["anthropic_version"], VERTEX_ANTHROPIC_VERSION);
                    assert!(body.get("model").is_none(), "{body}");
                    assert!(
                        up.header("x-api-key").is_none()
                            && up.header("anthropic-version").is_none()
                    );
                }
            }
        }
    }
    assert!(calls > 20);
    // Each source was asked once: its token is cached and shared by every
    // upstream and request using it.
    assert_eq!(mock.token_fetches("entra"), 1);
    assert_eq!(mock.token_fetches("google"), 1);
    assert_eq!(mock.token_fetches("metadata"), 1);
    let md = mock
        .requests()
        .into_iter()
        .find(|r| r.path == METADATA_TOKEN_PATH)
        .unwrap();
    assert_eq!(
        (md.method.as_str(), md.header("metadata-flavor")),
        ("GET", Some("Google"))
    );
    assert_logs_clean(&gw, &mock);
}

#[tokio::test]
async fn concurrent_first_requests_share_one_token_fetch() {
    let (mock, gw, _dir) = start(&[], &[]).await;
    let mut all = Vec::new();
    for (i, provider) in ["az-entra", "vx-sa"].iter().cycle().take(16).enumerate() {
        let req = client_request(
            OpenAi,
            &format!("{provider}/m-{provider}"),
            &format!("n{i}"),
            false,
        );
        let addr = gw.addr;
        all.push(tokio::spawn(async move {
            crate::common::http_client::send(addr, &req).await.unwrap()
        }));
    }
    for t in all {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(mock.token_fetches("entra"), 1);
    assert_eq!(mock.token_fetches("google"), 1);
}

#[tokio::test]
async fn an_expired_token_is_refreshed() {
    let (mock, gw, _dir) = start(&[], &[]).await;
    mock.set_token_life(1);
    for provider in ["az-entra", "vxa-sa"] {
        let r = gw
            .send(&client_request(
                OpenAi,
                &format!("{provider}/m-{provider}"),
                "first",
                false,
            ))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(
        (mock.token_fetches("entra"), mock.token_fetches("google")),
        (1, 1)
    );
    // The mock refuses an expired token: once both are, an answer proves a new one.
    eventually(Duration::from_secs(10), "the tokens to expire", || async {
        mock.tokens_expired().then_some(())
    })
    .await;
    for provider in ["az-entra", "vxa-sa"] {
        let r = gw
            .send(&client_request(
                Anthropic,
                &format!("{provider}/m-{provider}"),
                "again",
                true,
            ))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(!r.text().contains("\"error\""), "{}", r.text());
    }
    assert_eq!(
        (mock.token_fetches("entra"), mock.token_fetches("google")),
        (2, 2)
    );
    assert_logs_clean(&gw, &mock);
}

#[tokio::test]
async fn a_credential_that_cannot_be_obtained_is_a_502_or_503_naming_the_provider_and_source() {
    let dead = format!("127.0.0.1:{}", crate::common::gateway::free_port());
    let (mock, gw, dir) = {
        // Five sources that fail, beside the working ones.
        let mock = MockUpstream::start().await;
        mock.expect_entra(TENANT, CLIENT_ID, ENTRA_SECRET);
        mock.expect_service_account(SA_EMAIL, SA_PUBLIC);
        mock.expect_azure_key(AZURE_KEY);
        let dir = TempDir::new();
        let good = key_file(&dir, "sa.json", &mock, SA_KEY);
        let forged = key_file(&dir, "forged.json", &mock, OTHER_KEY);
        let missing = dir.file("missing.json").display().to_string();
        let base = format!("http://{}", mock.addr());
        let entra = |env: &str| {
            json!({"protocol": "azure", "base_url": format!("{base}/azure/openai/v1"), "auth": {"type": "entra",
                "tenant_id": TENANT, "client_id": CLIENT_ID, "client_secret_env": env, "authority_host": base}})
        };
        let vx = |file: Option<&str>| {
            let mut auth = json!({"type": "google-oauth"});
            if let Some(f) = file {
                auth["credentials_file"] = json!(f);
            }
            json!({"protocol": "vertex", "base_url": base, "project": "p", "location": "us-east5", "auth": auth})
        };
        let extra = [
            ("bad-unset", entra("SB_TEST_UNSET_SECRET")),
            ("bad-secret", entra("SB_TEST_WRONG_SECRET")),
            ("bad-file", vx(Some(&missing))),
            ("bad-key", vx(Some(&forged))),
            ("bad-meta", vx(None)),
        ];
        let vars = [
            ("SB_TEST_AZURE_KEY", AZURE_KEY),
            ("SB_TEST_ENTRA_SECRET", ENTRA_SECRET),
            ("SB_TEST_WRONG_SECRET", WRONG_SECRET),
            ("GCE_METADATA_HOST", dead.as_str()),
        ];
        let gw = Gateway::start_with_env(&cloud_catalog(&mock, &good, &extra), &keys(), &[], &vars)
            .await;
        (mock, gw, dir)
    };
    let missing = dir.file("missing.json").display().to_string();
    // (provider, status, what the message names besides the provider)
    let cases: &[(&str, u16, &[&str])] = &[
        ("bad-unset", 503, &["SB_TEST_UNSET_SECRET"]),
        ("bad-secret", 502, &["Entra ID", "invalid_client"]),
        ("bad-file", 502, &[missing.as_str(), "cannot read"]),
        ("bad-key", 502, &["forged.json", "Invalid JWT Signature"]),
        ("bad-meta", 502, &["metadata server", dead.as_str()]),
    ];
    for &(provider, status, names) in cases {
        for client in [OpenAi, Anthropic, Gemini] {
            let r = gw
                .send(&client_request(
                    client,
                    &format!("{provider}/m-{provider}"),
                    "hi",
                    false,
                ))
                .await;
            let e = assert_error(client, &r, status);
            let message = e["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("provider {provider}")),
                "{message}"
            );
            for n in names {
                assert!(message.contains(n), "{provider}: {n} not in {message}");
            }
        }
    }
    // A source that failed cooled its upstream (as a refused credential
    // does); the one not configured was skipped, not blamed.
    let text = metrics_text(gw.metrics).await;
    for (provider, cooled) in [
        ("bad-secret", true),
        ("bad-key", true),
        ("bad-meta", true),
        ("bad-unset", false),
    ] {
        let label = format!("provider=\"{provider}\"");
        let n = metric_value(
            &text,
            "switchboard_upstream_cooldowns_total",
            &[&label, "reason=\"credential_refused\""],
        );
        assert_eq!(n.is_some_and(|n| n >= 1.0), cooled, "{provider}: {n:?}");
    }
    // Other upstreams keep serving.
    for provider in ["az-key", "vx-sa"] {
        let r = gw
            .send(&client_request(
                OpenAi,
                &format!("{provider}/m-{provider}"),
                "still",
                false,
            ))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(mock.token_fetches("entra"), 0);
    // The failures are logged, naming the provider, without a secret.
    let log = gw.log();
    assert!(
        log.contains("provider bad-secret: cannot obtain an access token"),
        "{log}"
    );
    assert_logs_clean(&gw, &mock);
}

#[tokio::test]
async fn workload_identity_federation_from_a_file_or_a_url() {
    let mock = MockUpstream::start().await;
    let dir = TempDir::new();
    let base = format!("http://{}", mock.addr());
    let subject_file = dir.file("subject-token");
    std::fs::write(&subject_file, format!("{SUBJECT_TOKEN}\n")).unwrap();
    let external = |name: &str, source: Value, impersonate: bool| {
        let mut key = json!({
            "type": "external_account",
            "audience": WIF_AUDIENCE,
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": format!("{base}{STS_TOKEN_PATH}"),
            "credential_source": source,
        });
        if impersonate {
            key["service_account_impersonation_url"] =
                json!(format!("{base}{}", impersonation_path(SA_EMAIL)));
        }
        let path = dir.file(name);
        std::fs::write(&path, key.to_string()).unwrap();
        path.display().to_string()
    };
    let by_file = external("wif-file.json", json!({"file": subject_file}), true);
    let by_url = external(
        "wif-url.json",
        json!({"url": format!("{base}{SUBJECT_TOKEN_PATH}"), "headers": {"x-identity-header": "e2e"},
            "format": {"type": "json", "subject_token_field_name": "id_token"}}),
        false,
    );
    let vx = |protocol: &str, file: &str| {
        json!({"protocol": protocol, "base_url": base, "project": "proj-e2e", "location": "us-east5",
            "auth": {"type": "google-oauth", "credentials_file": file}})
    };
    mock.expect_federation(WIF_AUDIENCE, SUBJECT_TOKEN);
    let extra = [
        ("wif-file", vx("vertex", &by_file)),
        ("wif-url", vx("vertex-anthropic", &by_url)),
    ];
    let sa = key_file(&dir, "sa.json", &mock, SA_KEY);
    let gw = Gateway::start_with_env(&cloud_catalog(&mock, &sa, &extra), &keys(), &[], &[]).await;
    for (provider, wire, client, token) in [
        (
            "wif-file",
            Gemini,
            Gemini,
            "Bearer mock-impersonated-token-",
        ),
        ("wif-url", Anthropic, OpenAi, "Bearer mock-sts-token-"),
    ] {
        for stream in [false, true] {
            let user = format!("federated {provider} {stream}");
            let model = format!("{provider}/m-{provider}");
            let r = gw
                .send(&client_request(client, &model, &user, stream))
                .await;
            assert_eq!(answer_text(client, &r, stream), expected_reply(wire, &user));
            let up = last_call(&mock);
            assert_eq!(up.path, upstream_path(provider, stream));
            let auth = up.header("authorization").unwrap_or_default();
            assert!(auth.starts_with(token), "{provider}: {auth}");
        }
    }
    // One exchange per source; the file's federated token was impersonated once.
    assert_eq!(mock.token_fetches("sts"), 2);
    assert_eq!(mock.token_fetches("impersonated"), 1);
    let subject = mock
        .requests()
        .into_iter()
        .find(|r| r.path == SUBJECT_TOKEN_PATH)
        .unwrap();
    assert_eq!(subject.header("x-identity-header"), Some("e2e"));
    assert_logs_clean(&gw, &mock);
}

#[tokio::test]
async fn a_cached_token_the_upstream_refuses_is_replaced_and_the_request_sent_again() {
    let (mock, gw, _dir) = start(&[], &[]).await;
    let call = || client_request(OpenAi, "az-entra/m-az-entra", "hi", false);
    assert_eq!(gw.send(&call()).await.status, 200);
    let first = last_call(&mock)
        .header("authorization")
        .unwrap()
        .to_string();
    mock.revoke_tokens();
    // The refused token is dropped and the request sent once more with a
    // new one: the client does not see it.
    let r = gw.send(&call()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let refused = mock
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/azure/"))
        .count();
    assert_eq!(
        refused, 3,
        "the first call, the refused one, the one sent again"
    );
    assert_eq!(mock.token_fetches("entra"), 2);
    assert_ne!(last_call(&mock).header("authorization").unwrap(), first);
    assert_logs_clean(&gw, &mock);
}

fn vectors(v: &Value) -> Vec<Vec<f32>> {
    let items = match v.get("data") {
        Some(d) => d
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["embedding"])
            .collect::<Vec<_>>(),
        None => v["embeddings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| &e["values"])
            .collect(),
    };
    items
        .iter()
        .map(|x| {
            x.as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn embeddings_on_azure_and_vertex_with_each_credential() {
    let (mock, gw, _dir) = start(&[], &[]).await;
    let texts = ["alpha beta", "gamma", "delta epsilon zeta"];
    let vertex = "/v1/projects/proj-e2e/locations/us-east5/publishers/google/models";
    // (provider, the path each call goes to, the calls three inputs take)
    let cells = [
        ("az-key", "/azure/openai/v1/embeddings".to_string(), 1),
        (
            "az-dep",
            "/azure/openai/deployments/gpt-dep/embeddings?api-version=2024-10-21".into(),
            1,
        ),
        ("az-entra", "/azure/openai/v1/embeddings".into(), 1),
        ("vx-sa", format!("{vertex}/text-embedding-005:predict"), 1),
        // gemini-embedding-001 takes one instance a call on Vertex.
        ("vx-md", format!("{vertex}/gemini-embedding-001:predict"), 3),
    ];
    for (provider, path, calls) in cells {
        for gemini_client in [false, true] {
            mock.clear();
            let model = format!("{provider}/e-{provider}");
            let r = if gemini_client {
                let requests: Vec<Value> = texts
                    .iter()
                    .map(|t| {
                        json!({"content": {"parts": [{"text": t}]}, "outputDimensionality": 4,
                        "taskType": "RETRIEVAL_DOCUMENT"})
                    })
                    .collect();
                let p = format!("/google/v1beta/models/{model}:batchEmbedContents");
                gw.send(&authed("gemini", &p, KEY, &json!({"requests": requests})))
                    .await
            } else {
                let body = json!({"model": model, "input": texts, "dimensions": 4});
                gw.send(&authed("openai", "/v1/embeddings", KEY, &body))
                    .await
            };
            assert_eq!(r.status, 200, "{provider}: {}", r.text());
            let v = r.json();
            let want: Vec<Vec<f32>> = texts.iter().map(|t| mock_vector(t, 4)).collect();
            assert_eq!(vectors(&v), want, "{provider} {gemini_client}");
            if !gemini_client {
                // Azure reports usage, Vertex its token counts: the mock's words.
                assert_eq!(
                    v["usage"]["prompt_tokens"],
                    mock_embed_tokens(&texts),
                    "{v}"
                );
                assert_eq!(v["model"], model);
            }
            let ups: Vec<_> = mock
                .requests()
                .into_iter()
                .filter(|r| r.path.starts_with("/azure/") || r.path.starts_with("/v1/projects/"))
                .collect();
            assert_eq!(ups.len(), calls, "{provider}");
            for up in &ups {
                assert_eq!(up.path, path, "{provider}");
                let body = up.json().unwrap();
                let auth = up.header("authorization").unwrap_or_default();
                if provider.starts_with("az-") {
                    assert_eq!(body["model"], "text-embedding-3-small");
                    assert_eq!(body["dimensions"], 4);
                    if provider == "az-entra" {
                        assert!(auth.starts_with("Bearer mock-entra-token-"), "{auth}");
                    } else {
                        assert_eq!(up.header("api-key"), Some(AZURE_KEY));
                        assert!(auth.is_empty());
                    }
                } else {
                    assert_eq!(body["parameters"], json!({"outputDimensionality": 4}));
                    let task = &body["instances"][0]["task_type"];
                    if gemini_client {
                        assert_eq!(task, "RETRIEVAL_DOCUMENT", "{body}");
                    } else {
                        assert!(task.is_null(), "{body}");
                    }
                    let source = if provider == "vx-sa" {
                        "google"
                    } else {
                        "metadata"
                    };
                    assert!(
                        auth.starts_with(&format!("Bearer mock-{source}-token-")),
                        "{auth}"
                    );
                }
            }
        }
    }
    assert_logs_clean(&gw, &mock);
}

#[tokio::test]
async fn a_vertex_batch_over_its_limit_is_split() {
    let (mock, gw, _dir) = start(&[], &[]).await;
    let texts: Vec<String> = (0..260).map(|i| format!("doc {i}")).collect();
    let body = json!({"model": "vx-sa/e-vx-sa", "input": texts});
    let r = gw
        .send(&authed("openai", "/v1/embeddings", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let want: Vec<Vec<f32>> = texts.iter().map(|t| mock_vector(t, 8)).collect();
    assert_eq!(vectors(&r.json()), want);
    let sizes: Vec<usize> = mock
        .requests()
        .iter()
        .filter(|r| r.path.ends_with(":predict"))
        .map(|r| r.json().unwrap()["instances"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [250, 10]);
    assert_eq!(r.json()["usage"]["prompt_tokens"], 520);
}
