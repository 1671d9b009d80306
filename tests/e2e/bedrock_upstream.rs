//! End-to-end: Amazon Bedrock as an upstream (docs/clouds.md "Amazon
//! Bedrock") through the real binary against the mock's Bedrock, which
//! recomputes every SigV4 signature with its own implementation and
//! refuses what AWS refuses. `bedrock-anthropic` (InvokeModel and its
//! event stream) from each client family, whole and streamed; keys from
//! the environment (with and without a session token), a shared
//! credentials file's profile, web identity (STS), IMDSv2; a Bedrock API
//! key; sources that cannot give keys; a refused signature; a frame whose
//! CRC is wrong. No secret, session token or signature reaches a log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{authed, keys, model, Gateway, TempDir, KEY};
use crate::common::http_client::{Request, Response};
use crate::common::mock_upstream::{
    converse_reply_text, expected_reply, mock_embed_tokens, mock_vector, MockUpstream, Protocol,
    RecordedRequest, AWS_STS_PATH, BEDROCK_ANTHROPIC_VERSION, CONTAINER_CREDENTIALS_PATH,
    DEFAULT_DIMENSIONS,
};
use serde_json::{json, Value};

use Protocol::{Anthropic, Gemini, OpenAi, Responses};

const KEY_ID: &str = "AKIAE2EBEDROCK0001";
const SECRET: &str = "e2e/bedrock+Secret/K7MDENG+bPxRfiCYzz01";
const TEMP_ID: &str = "ASIAE2EBEDROCK0002";
const TEMP_SECRET: &str = "e2e/temp+Secret/wJalrXUtnFEMI99";
const SESSION: &str = "e2e-session-token/IQoJb3JpZ2luX2VjE+abc==";
const BEDROCK_KEY: &str = "ABSKe2eBedrockApiKey7f3a91";
const MODEL_ID: &str = "anthropic.claude-3-5-sonnet-20241022-v2:0";
const ENCODED: &str = "anthropic.claude-3-5-sonnet-20241022-v2%3A0";
const ROLE: &str = "arn:aws:iam::123456789012:role/gateway-e2e";
const WEB_TOKEN: &str = "eyJ.web-identity-e2e-55aa.sig";

/// A catalog of Bedrock providers (`id` → its upstream's `auth`), each with
/// one model `m-{id}` on [`MODEL_ID`]; providers whose id starts with
/// `cv-` call Converse (`bedrock`), the others InvokeModel (`bedrock-anthropic`).
fn catalog(mock: &MockUpstream, providers: &[(&str, Value)]) -> Value {
    let base = format!("http://{}", mock.addr());
    let ps: Vec<Value> = providers
        .iter()
        .map(|(id, auth)| {
            let protocol = if id.starts_with("cv-") {
                "bedrock"
            } else {
                "bedrock-anthropic"
            };
            json!({"id": id, "families": ["openai", "anthropic", "gemini", "bedrock"], "upstreams": [
                {"protocol": protocol, "region": "us-east-1", "base_url": base, "auth": auth}]})
        })
        .collect();
    let ms: Vec<Value> = providers
        .iter()
        .map(|(id, _)| {
            model(
                &format!("m-{id}"),
                id,
                json!({"upstream_model": MODEL_ID, "protocols": ["openai", "anthropic", "gemini", "responses"]}),
            )
        })
        .collect();
    json!({"providers": ps, "models": ms})
}

/// The environment of a gateway that finds no AWS keys but those the test gives.
fn isolated<'a>(dir: &TempDir, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, String)> {
    let none = dir.file("none").display().to_string();
    let mut vars: Vec<(&str, String)> = vec![
        ("AWS_ACCESS_KEY_ID", String::new()),
        ("AWS_SECRET_ACCESS_KEY", String::new()),
        ("AWS_SESSION_TOKEN", String::new()),
        ("AWS_PROFILE", String::new()),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", String::new()),
        ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", String::new()),
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", String::new()),
        ("AWS_SHARED_CREDENTIALS_FILE", none.clone()),
        ("AWS_CONFIG_FILE", none),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ];
    for (k, v) in extra {
        vars.retain(|(n, _)| n != k);
        vars.push((k, v.to_string()));
    }
    vars
}

async fn gateway(
    mock: &MockUpstream,
    providers: &[(&str, Value)],
    env: &[(&str, String)],
) -> Gateway {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Gateway::start_with_env(&catalog(mock, providers), &keys(), &[], &env).await
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

fn answer_text(client: Protocol, r: &Response, stream: bool) -> String {
    assert_eq!(r.status, 200, "{}", r.text());
    if stream {
        stream_text(client, &event_json(&r.sse()))
    } else {
        reply_text(client, &r.json())
    }
}

/// The mock's last Bedrock model call.
fn last_call(mock: &MockUpstream) -> RecordedRequest {
    mock.requests()
        .into_iter()
        .rev()
        .find(|r| r.path.starts_with("/model/"))
        .expect("a Bedrock call")
}

/// Calls `provider`'s model from an OpenAI client, checks the answer,
/// and returns the upstream call.
async fn works(gw: &Gateway, mock: &MockUpstream, provider: &str, stream: bool) -> RecordedRequest {
    let user = format!("via {provider} stream={stream}");
    let r = gw
        .send(&client_request(
            OpenAi,
            &format!("{provider}/m-{provider}"),
            &user,
            stream,
        ))
        .await;
    assert_eq!(
        answer_text(OpenAi, &r, stream),
        expected_reply(Anthropic, &user),
        "{provider}"
    );
    last_call(mock)
}

/// No log line holds a secret, a session token, a signature or a key.
fn assert_logs_clean(gw: &Gateway, mock: &MockUpstream, more: &[&str]) {
    let logs = format!("{}\n{}", gw.log(), gw.access_log());
    let mut secrets: Vec<String> = [SECRET, TEMP_SECRET, SESSION, BEDROCK_KEY, WEB_TOKEN]
        .iter()
        .map(|s| s.to_string())
        .collect();
    secrets.extend(more.iter().map(|s| s.to_string()));
    for r in mock.requests() {
        if let Some(sig) = r
            .header("authorization")
            .and_then(|a| a.split("Signature=").nth(1))
        {
            secrets.push(sig.to_string());
        }
        if let Some(t) = r.header("x-amz-security-token") {
            secrets.push(t.to_string());
        }
    }
    for s in secrets {
        assert!(!logs.contains(&s), "a secret in the logs: {s}");
    }
}

/// The SigV4 `authorization` of a call: its key id and signed headers.
fn signed_with(call: &RecordedRequest) -> (String, String) {
    let auth = call.header("authorization").unwrap_or_default();
    assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential="), "{auth}");
    let cred = auth
        .split("Credential=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let signed = auth
        .split("SignedHeaders=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert!(cred.ends_with("/us-east-1/bedrock/aws4_request"), "{cred}");
    (
        cred.split('/').next().unwrap().to_string(),
        signed.to_string(),
    )
}

#[tokio::test]
async fn every_client_family_reaches_bedrock_anthropic_signed_or_with_a_key() {
    let mock = MockUpstream::start().await;
    mock.expect_aws_keys(KEY_ID, SECRET, None);
    mock.expect_bedrock_key(BEDROCK_KEY);
    let dir = TempDir::new();
    let env = isolated(
        &dir,
        &[
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("SB_TEST_BEDROCK_KEY", BEDROCK_KEY),
        ],
    );
    let gw = gateway(
        &mock,
        &[
            ("br-sig", json!({"type": "sigv4"})),
            (
                "br-key",
                json!({"type": "bearer", "env": "SB_TEST_BEDROCK_KEY"}),
            ),
        ],
        &env,
    )
    .await;
    for provider in ["br-sig", "br-key"] {
        for client in [OpenAi, Anthropic, Gemini, Responses] {
            for stream in [false, true] {
                let user = format!("hello {provider} from {client:?} stream={stream}");
                let r = gw
                    .send(&client_request(
                        client,
                        &format!("{provider}/m-{provider}"),
                        &user,
                        stream,
                    ))
                    .await;
                assert_eq!(
                    answer_text(client, &r, stream),
                    expected_reply(Anthropic, &user),
                    "{provider} {client:?} {stream}"
                );
                let up = last_call(&mock);
                let method = if stream {
                    "invoke-with-response-stream"
                } else {
                    "invoke"
                };
                assert_eq!(up.path, format!("/model/{ENCODED}/{method}"));
                let body = up.json().unwrap();
                assert_eq!(body["anthropic_version"], BEDROCK_ANTHROPIC_VERSION);
                assert!(
                    body.get("model").is_none() && body.get("stream").is_none(),
                    "{body}"
                );
                assert!(
                    up.header("x-api-key").is_none() && up.header("anthropic-version").is_none()
                );
                if stream {
                    assert_eq!(
                        up.header("accept"),
                        Some("application/vnd.amazon.eventstream")
                    );
                }
                if provider == "br-sig" {
                    let (id, signed) = signed_with(&up);
                    assert_eq!(id, KEY_ID);
                    assert!(
                        signed.contains("host") && signed.contains("x-amz-date"),
                        "{signed}"
                    );
                    assert!(up.header("x-amz-security-token").is_none());
                } else {
                    assert_eq!(
                        up.header("authorization"),
                        Some(format!("Bearer {BEDROCK_KEY}").as_str())
                    );
                    assert!(up.header("x-amz-date").is_none());
                }
            }
        }
    }
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn sigv4_with_a_session_token_and_without_the_one_the_keys_need() {
    let mock = MockUpstream::start().await;
    mock.expect_aws_keys(TEMP_ID, TEMP_SECRET, Some(SESSION));
    let dir = TempDir::new();
    let env = isolated(
        &dir,
        &[
            ("AWS_ACCESS_KEY_ID", TEMP_ID),
            ("AWS_SECRET_ACCESS_KEY", TEMP_SECRET),
            ("AWS_SESSION_TOKEN", SESSION),
        ],
    );
    let gw = gateway(&mock, &[("br", json!({"type": "sigv4"}))], &env).await;
    for stream in [false, true] {
        let up = works(&gw, &mock, "br", stream).await;
        let (id, signed) = signed_with(&up);
        assert_eq!(id, TEMP_ID);
        assert!(signed.contains("x-amz-security-token"), "{signed}");
        assert_eq!(up.header("x-amz-security-token"), Some(SESSION));
    }
    assert_logs_clean(&gw, &mock, &[]);
    drop(gw);
    // The same temporary keys without their session token: AWS refuses them,
    // the client gets a 502 naming the provider, nothing of the answer.
    let env = isolated(
        &dir,
        &[
            ("AWS_ACCESS_KEY_ID", TEMP_ID),
            ("AWS_SECRET_ACCESS_KEY", TEMP_SECRET),
        ],
    );
    let gw = gateway(&mock, &[("br", json!({"type": "sigv4"}))], &env).await;
    for client in [OpenAi, Anthropic] {
        let r = gw
            .send(&client_request(client, "br/m-br", "hi", false))
            .await;
        let e = assert_error(client, &r, 502);
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("provider br refused the gateway's credential"),
            "{message}"
        );
        assert!(!message.contains("security token"), "{message}");
    }
    assert!(gw
        .log()
        .contains("The security token included in the request is invalid"));
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn sigv4_from_a_profile_of_the_shared_files() {
    let mock = MockUpstream::start().await;
    mock.expect_aws_keys(KEY_ID, SECRET, None);
    mock.expect_aws_keys(TEMP_ID, TEMP_SECRET, Some(SESSION));
    let dir = TempDir::new();
    let creds = dir.file("credentials");
    std::fs::write(
        &creds,
        format!("[default]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n\n# the team's\n[team]\naws_access_key_id={TEMP_ID}\naws_secret_access_key = {TEMP_SECRET}\naws_session_token = {SESSION}\n"),
    )
    .unwrap();
    let creds = creds.display().to_string();
    let env = isolated(&dir, &[("AWS_SHARED_CREDENTIALS_FILE", &creds)]);
    let gw = gateway(
        &mock,
        &[
            ("br-team", json!({"type": "sigv4", "profile": "team"})),
            ("br-chain", json!({"type": "sigv4"})),
        ],
        &env,
    )
    .await;
    for stream in [false, true] {
        let up = works(&gw, &mock, "br-team", stream).await;
        assert_eq!(signed_with(&up).0, TEMP_ID);
        assert_eq!(up.header("x-amz-security-token"), Some(SESSION));
        // the chain reads the default profile
        let up = works(&gw, &mock, "br-chain", stream).await;
        assert_eq!(signed_with(&up).0, KEY_ID);
    }
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn sigv4_from_web_identity_through_sts() {
    let mock = MockUpstream::start().await;
    mock.expect_web_identity(ROLE, WEB_TOKEN);
    let dir = TempDir::new();
    let token_file = dir.file("web-identity-token");
    std::fs::write(&token_file, format!("{WEB_TOKEN}\n")).unwrap();
    let token_file = token_file.display().to_string();
    let sts = format!("http://{}{AWS_STS_PATH}", mock.addr());
    let env = isolated(
        &dir,
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", &token_file),
            ("AWS_ROLE_ARN", ROLE),
            ("AWS_ENDPOINT_URL_STS", &sts),
        ],
    );
    let gw = gateway(&mock, &[("br", json!({"type": "sigv4"}))], &env).await;
    for stream in [false, true, false] {
        let up = works(&gw, &mock, "br", stream).await;
        assert!(signed_with(&up).0.starts_with("ASIAMOCKSTS"));
        assert!(up
            .header("x-amz-security-token")
            .unwrap()
            .starts_with("mock-sts-session-token-"));
    }
    // One exchange: the keys are cached and shared.
    assert_eq!(mock.aws_fetches("sts"), 1);
    let call = mock
        .requests()
        .into_iter()
        .find(|r| r.path == AWS_STS_PATH)
        .unwrap();
    let form = call.body_text();
    assert!(
        form.contains("Action=AssumeRoleWithWebIdentity") && form.contains("RoleSessionName="),
        "{form}"
    );
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn sigv4_from_imds() {
    let mock = MockUpstream::start().await;
    mock.serve_imds();
    let dir = TempDir::new();
    let endpoint = format!("http://{}", mock.addr());
    let env = isolated(
        &dir,
        &[
            ("AWS_EC2_METADATA_DISABLED", ""),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &endpoint),
        ],
    );
    let gw = gateway(&mock, &[("br", json!({"type": "sigv4"}))], &env).await;
    for stream in [true, false] {
        let up = works(&gw, &mock, "br", stream).await;
        assert!(signed_with(&up).0.starts_with("ASIAMOCKIMDS"));
    }
    assert_eq!(mock.aws_fetches("imds"), 1);
    let put = mock
        .requests()
        .into_iter()
        .find(|r| r.path == "/latest/api/token")
        .unwrap();
    assert_eq!(put.method, "PUT");
    assert_logs_clean(&gw, &mock, &["imds-session-"]);
}

#[tokio::test]
async fn credentials_that_cannot_be_obtained_are_a_502_or_503_naming_the_provider_and_source() {
    let mock = MockUpstream::start().await;
    mock.expect_bedrock_key(BEDROCK_KEY);
    let dir = TempDir::new();
    let env = isolated(&dir, &[("SB_TEST_BEDROCK_KEY", BEDROCK_KEY)]);
    let gw = gateway(
        &mock,
        &[
            ("no-chain", json!({"type": "sigv4"})),
            ("no-profile", json!({"type": "sigv4", "profile": "absent"})),
            (
                "no-key",
                json!({"type": "bearer", "env": "SB_TEST_UNSET_BEDROCK_KEY"}),
            ),
            (
                "ok",
                json!({"type": "bearer", "env": "SB_TEST_BEDROCK_KEY"}),
            ),
        ],
        &env,
    )
    .await;
    let cases: &[(&str, u16, &[&str])] = &[
        (
            "no-chain",
            502,
            &[
                "AWS credential chain",
                "AWS_ACCESS_KEY_ID not set",
                "profile \"default\"",
                "IMDS: disabled",
            ],
        ),
        ("no-profile", 502, &["profile \"absent\"", "not found"]),
        ("no-key", 503, &["SB_TEST_UNSET_BEDROCK_KEY"]),
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
    assert!(
        gw.log()
            .contains("provider no-chain: cannot obtain AWS credentials"),
        "{}",
        gw.log()
    );
    // Other upstreams keep serving.
    works(&gw, &mock, "ok", false).await;
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn a_refused_signature_is_a_502_that_leaks_nothing() {
    let mock = MockUpstream::start().await;
    mock.expect_aws_keys(KEY_ID, "not-the-secret-the-gateway-has", None);
    let dir = TempDir::new();
    let env = isolated(
        &dir,
        &[
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
        ],
    );
    let gw = gateway(&mock, &[("br", json!({"type": "sigv4"}))], &env).await;
    for (client, stream) in [(OpenAi, false), (Anthropic, true), (Gemini, false)] {
        let r = gw
            .send(&client_request(client, "br/m-br", "hi", stream))
            .await;
        let e = assert_error(client, &r, 502);
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("provider br refused the gateway's credential (upstream status 403)"),
            "{message}"
        );
        assert!(
            !r.text().contains("Signature") && !r.text().contains(KEY_ID),
            "{}",
            r.text()
        );
    }
    // The operator learns why, the signature and the secret stay out.
    assert!(
        gw.log()
            .contains("The request signature we calculated does not match"),
        "{}",
        gw.log()
    );
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn a_frame_with_a_bad_crc_ends_the_stream_with_the_clients_error_event() {
    let mock = MockUpstream::start().await;
    mock.expect_bedrock_key(BEDROCK_KEY);
    let dir = TempDir::new();
    let env = isolated(&dir, &[("SB_TEST_BEDROCK_KEY", BEDROCK_KEY)]);
    let gw = gateway(
        &mock,
        &[(
            "br",
            json!({"type": "bearer", "env": "SB_TEST_BEDROCK_KEY"}),
        )],
        &env,
    )
    .await;
    for client in [OpenAi, Anthropic] {
        let req = client_request(
            client,
            "br/m-br",
            "a long enough answer to cut [[bad-crc]]",
            true,
        );
        let path = req.path.clone();
        let r = gw.send(&req).await;
        let e = stream_error(client, &path, &r);
        let message = e["message"].as_str().unwrap_or_default();
        assert!(message.contains("malformed"), "{client:?}: {e}");
    }
}

#[tokio::test]
async fn bedrock_error_bodies_reach_the_client_in_its_shape() {
    let mock = MockUpstream::start().await;
    mock.expect_bedrock_key(BEDROCK_KEY);
    let dir = TempDir::new();
    let env = isolated(&dir, &[("SB_TEST_BEDROCK_KEY", BEDROCK_KEY)]);
    let gw = gateway(
        &mock,
        &[(
            "br",
            json!({"type": "bearer", "env": "SB_TEST_BEDROCK_KEY"}),
        )],
        &env,
    )
    .await;
    for client in [OpenAi, Anthropic, Gemini] {
        let r = gw
            .send(&client_request(
                client,
                "br/m-br",
                "hi [[status:400]]",
                false,
            ))
            .await;
        let e = assert_error(client, &r, 400);
        let message = e["message"].as_str().unwrap();
        assert!(message.contains("mock: forced status 400"), "{message}");
    }
    // Bedrock's "Input is too long" is the client's context-length error.
    let r = gw
        .send(&client_request(
            OpenAi,
            "br/m-br",
            "hi [[context-overflow]]",
            false,
        ))
        .await;
    let e = assert_error(OpenAi, &r, 400);
    assert_eq!(e["code"], "context_length_exceeded", "{e}");
}

#[tokio::test]
async fn every_client_family_reaches_bedrock_converse_whole_and_streamed() {
    let mock = MockUpstream::start().await;
    mock.expect_aws_keys(TEMP_ID, TEMP_SECRET, Some(SESSION));
    let dir = TempDir::new();
    let env = isolated(
        &dir,
        &[
            ("AWS_ACCESS_KEY_ID", TEMP_ID),
            ("AWS_SECRET_ACCESS_KEY", TEMP_SECRET),
            ("AWS_SESSION_TOKEN", SESSION),
        ],
    );
    let gw = gateway(&mock, &[("cv-sig", json!({"type": "sigv4"}))], &env).await;
    for client in [OpenAi, Anthropic, Gemini, Responses] {
        for stream in [false, true] {
            let user = format!("converse from {client:?} stream={stream}");
            let r = gw
                .send(&client_request(client, "cv-sig/m-cv-sig", &user, stream))
                .await;
            assert_eq!(
                answer_text(client, &r, stream),
                converse_reply_text(&user),
                "{client:?} {stream}"
            );
            let up = last_call(&mock);
            let method = if stream {
                "converse-stream"
            } else {
                "converse"
            };
            assert_eq!(up.path, format!("/model/{ENCODED}/{method}"));
            assert_eq!(signed_with(&up).0, TEMP_ID);
            let body = up.json().unwrap();
            assert!(
                body["messages"].is_array() && body.get("model").is_none(),
                "{body}"
            );
            if stream {
                assert_eq!(
                    up.header("accept"),
                    Some("application/vnd.amazon.eventstream")
                );
            }
        }
    }
    // The usage of a Converse stream (its metadata event) reaches the client.
    let mut body = openai_body("cv-sig/m-cv-sig", "usage please", None, true);
    body["stream_options"] = json!({"include_usage": true});
    let r = gw.send(&authed("openai", CHAT, KEY, &body)).await;
    let events = event_json(&r.sse());
    assert!(
        events.iter().any(|e| e["usage"]["completion_tokens"]
            .as_u64()
            .is_some_and(|n| n > 0)),
        "{}",
        r.text()
    );
    // A frame whose CRC is wrong ends the client's stream with its error event.
    let req = client_request(
        Anthropic,
        "cv-sig/m-cv-sig",
        "a long enough answer [[bad-crc]]",
        true,
    );
    let path = req.path.clone();
    let e = stream_error(Anthropic, &path, &gw.send(&req).await);
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains("malformed"),
        "{e}"
    );
    assert_logs_clean(&gw, &mock, &[]);
}

/// The messages of an AWS event stream: (`:event-type` or
/// `:exception-type`, payload), each frame's CRCs checked.
fn event_stream(body: &[u8]) -> Vec<(String, Value)> {
    use aws_smithy_eventstream::frame::read_message_from;
    use aws_smithy_types::event_stream::HeaderValue;
    let mut rest = body;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let m = read_message_from(&rest[..len]).expect("a valid event-stream frame");
        rest = &rest[len..];
        let name = m
            .headers()
            .iter()
            .find(|h| matches!(h.name().as_str(), ":event-type" | ":exception-type"))
            .and_then(|h| match h.value() {
                HeaderValue::String(s) => Some(s.as_str().to_string()),
                _ => None,
            })
            .unwrap_or_default();
        out.push((name, serde_json::from_slice(m.payload()).unwrap()));
    }
    out
}

/// The text of an InvokeModel stream: its chunks' Anthropic text deltas.
fn invoke_stream_text(body: &[u8]) -> String {
    event_stream(body)
        .into_iter()
        .filter(|(name, _)| name == "chunk")
        .map(|(_, p)| {
            let bytes = base64_decode(p["bytes"].as_str().unwrap());
            serde_json::from_slice::<Value>(&bytes).unwrap()
        })
        .filter_map(|e| e["delta"]["text"].as_str().map(str::to_string))
        .collect()
}

fn base64_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[tokio::test]
async fn bedrock_clients_reach_both_bedrock_upstreams() {
    let mock = MockUpstream::start().await;
    mock.expect_aws_keys(KEY_ID, SECRET, None);
    mock.expect_bedrock_key(BEDROCK_KEY);
    let dir = TempDir::new();
    let env = isolated(
        &dir,
        &[
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("SB_TEST_BEDROCK_KEY", BEDROCK_KEY),
        ],
    );
    let gw = gateway(
        &mock,
        &[
            ("cv-sig", json!({"type": "sigv4"})),
            (
                "br-key",
                json!({"type": "bearer", "env": "SB_TEST_BEDROCK_KEY"}),
            ),
        ],
        &env,
    )
    .await;
    let call = |provider: &str, op: &str, body: &Value| {
        Request::post(&format!("/bedrock/model/{provider}%2Fm-{provider}/{op}"))
            .json(body)
            .header("authorization", &format!("Bearer {KEY}"))
    };
    for provider in ["cv-sig", "br-key"] {
        let expected = |user: &str| {
            if provider == "cv-sig" {
                converse_reply_text(user)
            } else {
                expected_reply(Anthropic, user)
            }
        };
        // E20, E21: Converse.
        let user = format!("converse to {provider}");
        let body = json!({"messages": [{"role": "user", "content": [{"text": user}]}],
            "inferenceConfig": {"maxTokens": 200}});
        let r = gw.send(&call(provider, "converse", &body)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let j = r.json();
        assert_eq!(
            j["output"]["message"]["content"][0]["text"],
            expected(&user),
            "{j}"
        );
        let r = gw.send(&call(provider, "converse-stream", &body)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let events = event_stream(&r.body);
        let text: String = events
            .iter()
            .filter(|(n, _)| n == "contentBlockDelta")
            .filter_map(|(_, p)| p["delta"]["text"].as_str())
            .collect();
        assert_eq!(text, expected(&user), "{provider}: {events:?}");
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            &names[names.len() - 2..],
            ["messageStop", "metadata"],
            "{names:?}"
        );
        // E22, E23: InvokeModel with an Anthropic Messages body.
        let user = format!("invoke to {provider}");
        let body = json!({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 200,
            "messages": [{"role": "user", "content": user}]});
        let r = gw.send(&call(provider, "invoke", &body)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.json()["content"][0]["text"],
            expected(&user),
            "{}",
            r.text()
        );
        let r = gw
            .send(&call(provider, "invoke-with-response-stream", &body))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(invoke_stream_text(&r.body), expected(&user), "{provider}");
        let up = last_call(&mock);
        if provider == "br-key" {
            let b = up.json().unwrap();
            assert_eq!(b["anthropic_version"], BEDROCK_ANTHROPIC_VERSION);
            assert!(b.get("stream").is_none() && b.get("model").is_none(), "{b}");
        } else {
            assert_eq!(signed_with(&up).0, KEY_ID);
        }
    }
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn embeddings_on_bedrock_titan_and_cohere() {
    let mock = MockUpstream::start().await;
    mock.expect_aws_keys(KEY_ID, SECRET, None);
    let dir = TempDir::new();
    let env = isolated(
        &dir,
        &[
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
        ],
    );
    let base = format!("http://{}", mock.addr());
    let embed = |id: &str, upstream: &str| {
        model(
            id,
            "br-embed",
            json!({"upstream_model": upstream, "supported_actions": ["embed"],
                "pricing": {"prompt": "0.00000002", "completion": "0"}, "protocols": ["openai", "gemini"]}),
        )
    };
    let catalog = json!({
        "providers": [{"id": "br-embed", "families": ["openai", "gemini"], "upstreams": [
            {"protocol": "bedrock", "region": "us-east-1", "base_url": base, "auth": {"type": "sigv4"}}]}],
        "models": [embed("titan", "amazon.titan-embed-text-v2:0"), embed("cohere", "cohere.embed-english-v3")]
    });
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let gw = Gateway::start_with_env(&catalog, &keys(), &[], &env).await;
    let floats = |v: &Value| -> Vec<f32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    // X1 to Titan: one call per text, dimensions passed on, Titan's token count.
    let texts = ["hello world", "the cat sat", "third one here"];
    let r = gw
        .send(&authed(
            "openai",
            "/v1/embeddings",
            KEY,
            &json!({"model": "br-embed/titan", "input": texts, "dimensions": 4}),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    for (i, t) in texts.iter().enumerate() {
        assert_eq!(floats(&v["data"][i]["embedding"]), mock_vector(t, 4), "{i}");
    }
    assert_eq!(v["usage"]["prompt_tokens"], mock_embed_tokens(&texts));
    let calls: Vec<RecordedRequest> = mock
        .requests()
        .into_iter()
        .filter(|r| {
            r.path
                .starts_with("/model/amazon.titan-embed-text-v2%3A0/invoke")
        })
        .collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[0].json().unwrap(),
        json!({"inputText": "hello world", "normalize": true, "dimensions": 4})
    );
    assert_eq!(signed_with(&calls[0]).0, KEY_ID);
    // X2 batch to Cohere: one call, the task type as Cohere's input_type.
    let r = gw
        .send(&authed(
            "gemini",
            "/google/v1beta/models/br-embed/cohere:batchEmbedContents",
            KEY,
            &json!({"requests": [
                {"content": {"parts": [{"text": "left"}]}, "taskType": "RETRIEVAL_QUERY"},
                {"content": {"parts": [{"text": "right"}]}, "taskType": "RETRIEVAL_QUERY"}]}),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let got: Vec<Vec<f32>> = v["embeddings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| floats(&e["values"]))
        .collect();
    assert_eq!(
        got,
        [
            mock_vector("left", DEFAULT_DIMENSIONS),
            mock_vector("right", DEFAULT_DIMENSIONS)
        ]
    );
    let call = last_call(&mock);
    assert_eq!(call.path, "/model/cohere.embed-english-v3/invoke");
    assert_eq!(
        call.json().unwrap(),
        json!({"texts": ["left", "right"], "input_type": "search_query"})
    );
    // Cohere has a fixed size: dimensions are the client's error.
    let r = gw
        .send(&authed(
            "openai",
            "/v1/embeddings",
            KEY,
            &json!({"model": "br-embed/cohere", "input": "x", "dimensions": 4}),
        ))
        .await;
    let e = assert_error(OpenAi, &r, 400);
    assert!(e["message"].as_str().unwrap().contains("dimensions"), "{e}");
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn a_throttling_exception_mid_stream_is_the_clients_rate_limit_error() {
    let mock = MockUpstream::start().await;
    mock.expect_bedrock_key(BEDROCK_KEY);
    let dir = TempDir::new();
    let env = isolated(&dir, &[("SB_TEST_BEDROCK_KEY", BEDROCK_KEY)]);
    let gw = gateway(
        &mock,
        &[(
            "br",
            json!({"type": "bearer", "env": "SB_TEST_BEDROCK_KEY"}),
        )],
        &env,
    )
    .await;
    let user = "a long enough answer to break [[stream-error]]";
    let r = gw
        .send(&client_request(Anthropic, "br/m-br", user, true))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // The exception reaches the client as the upstream's in-band error, in
    // its protocol: Anthropic's rate-limit error event.
    let path = client_request(Anthropic, "br/m-br", user, true).path;
    let e = stream_error(Anthropic, &path, &r);
    assert_eq!(e["type"], "rate_limit_error", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("throttlingException"),
        "{e}"
    );
    assert_logs_clean(&gw, &mock, &[]);
}

#[tokio::test]
async fn sigv4_from_the_container_endpoint() {
    let mock = MockUpstream::start().await;
    let token = "container-auth-token-e2e-9d1f";
    mock.serve_container_credentials(token);
    let dir = TempDir::new();
    let uri = format!("http://{}{CONTAINER_CREDENTIALS_PATH}", mock.addr());
    let token_file = dir.file("container-token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let token_file = token_file.display().to_string();
    let env = isolated(
        &dir,
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &token_file),
        ],
    );
    let gw = gateway(&mock, &[("br", json!({"type": "sigv4"}))], &env).await;
    for stream in [false, true] {
        let up = works(&gw, &mock, "br", stream).await;
        assert!(signed_with(&up).0.starts_with("ASIAMOCKCONTAINER"));
        assert!(up
            .header("x-amz-security-token")
            .unwrap()
            .starts_with("mock-container-session-token-"));
    }
    assert_eq!(mock.aws_fetches("container"), 1);
    assert_logs_clean(&gw, &mock, &[token]);
}
