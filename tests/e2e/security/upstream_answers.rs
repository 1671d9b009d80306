//! Upstream answers that must not read as the client's fault or reach it raw.
//!
//! - [`credentials`] (item 5): an upstream 401/403 says the gateway's own
//!   credential was refused: the client gets a 502 in its family's shape
//!   naming the provider (never a 401 that reads as its key being wrong),
//!   the operator a warning naming the provider, the upstream cools and the
//!   next upstream answers. An upstream 3xx is a 502 too, its body not relayed.
//! - [`beta_header`] (item 6): the client's `anthropic-beta` reaches
//!   Anthropic upstreams of family B requests only, never translated ones.
//! - [`padded_answer`]: a whole Responses answer with whitespace around its
//!   object is relayed, and stored as the object alone (a stored record's
//!   JSON is not parsed again, so the store trims it itself).

/// Item 5: refused credentials and redirects.
mod credentials {
    use crate::common::gateway::{authed, Gateway, KEY};
    use crate::common::mock_upstream::{MockUpstream, Protocol};
    use crate::security::relayed_secrets::{http, scripted, wait_until, Recorded};
    use serde_json::{json, Value};

    const REFUSED_KEY: &str = "sk-refused-7Hq2Lp9Xw4Rt6Yu1";

    /// An OpenAI-protocol upstream answering `status` with OpenAI's error body.
    fn refusing(status: u16) -> impl Fn(&Recorded) -> Vec<u8> + Send + Sync {
        move |_: &Recorded| {
            let body = json!({"error": {"message": format!("Incorrect API key provided: {REFUSED_KEY}."),
                "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
            http(
                status,
                &[("content-type", "application/json")],
                &body.to_string(),
            )
        }
    }

    fn catalog(base_url: &str) -> Value {
        json!({
            "providers": [{"id": "refusing-provider", "families": ["openai", "gemini"], "retries": 0,
                "upstreams": [{"protocol": "openai", "base_url": base_url, "api_key_env": "SB_SEC_REFUSED_KEY"}]}],
            "models": [crate::common::gateway::model("m", "refusing-provider",
                json!({"protocols": ["openai", "anthropic", "gemini"], "upstream_model": "up"}))]
        })
    }

    async fn gateway(catalog: &Value) -> Gateway {
        Gateway::start_with_env(
            catalog,
            &crate::common::gateway::keys(),
            &[],
            &[("SB_SEC_REFUSED_KEY", REFUSED_KEY)],
        )
        .await
    }

    /// One request per client family; the answer's status and body.
    async fn each_family(gw: &Gateway) -> Vec<(&'static str, u16, Value)> {
        let chat = json!({"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]});
        let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
        let responses = json!({"model": "m", "input": "hi"});
        let mut out = Vec::new();
        for (family, path, body) in [
            ("openai", "/v1/chat/completions", &chat),
            ("anthropic", "/anthropic/v1/messages", &chat),
            ("gemini", "/google/v1beta/models/m:generateContent", &gemini),
            ("responses", "/v1/responses", &responses),
        ] {
            let r = gw.send(&authed(family, path, KEY, body)).await;
            let v = r
                .try_json()
                .unwrap_or_else(|_| panic!("{family}: {}", r.text()));
            out.push((family, r.status, v));
        }
        out
    }

    /// Checks a 502 in each family's own error shape, naming the provider.
    fn assert_family_502(family: &str, status: u16, v: &Value, code: &str) {
        assert_eq!(status, 502, "{family}: {v}");
        let message = match family {
            "anthropic" => {
                assert_eq!(v["type"], "error", "{v}");
                assert_eq!(v["error"]["type"], "api_error", "{v}");
                v["error"]["message"].as_str()
            }
            "gemini" => {
                assert_eq!(v["error"]["code"], 502, "{v}");
                assert_eq!(v["error"]["status"], "UNAVAILABLE", "{v}");
                v["error"]["message"].as_str()
            }
            _ => {
                assert_eq!(v["error"]["type"], "server_error", "{family}: {v}");
                assert_eq!(v["error"]["code"], code, "{family}: {v}");
                v["error"]["message"].as_str()
            }
        }
        .unwrap_or_default();
        assert!(message.contains("refusing-provider"), "{family}: {v}");
        assert!(!message.contains(REFUSED_KEY), "{family}: {v}");
    }

    /// A 401 and a 403 from the upstream: every family gets a 502 in its
    /// own shape naming the provider; the log has a warning naming it (and
    /// no key); the upstream is cooled for it.
    #[tokio::test]
    async fn an_upstream_401_or_403_is_a_502_naming_the_provider() {
        for status in [401, 403] {
            let up = scripted(refusing(status)).await;
            let gw = gateway(&catalog(&up.base_url("/v1"))).await;
            for (family, st, v) in each_family(&gw).await {
                assert_family_502(family, st, &v, "upstream_credential_refused");
            }
            // Cooling may leave later requests without an attempt (the
            // panic path then tries the upstream anyway): at least the first.
            assert!(!up.seen().is_empty());
            wait_until("the refused-credential warning", || {
                gw.log().lines().any(|l| {
                    l.contains("WARN")
                        && l.contains("refusing-provider")
                        && l.contains("refused the gateway's credential")
                })
            })
            .await;
            let log = gw.log();
            assert!(!log.contains(REFUSED_KEY), "{log}");
            let metrics = crate::common::http_client::send(
                gw.metrics,
                &crate::common::http_client::Request::get("/metrics"),
            )
            .await
            .unwrap()
            .text();
            assert!(
                metrics.lines().any(|l| l.starts_with(
                    "switchboard_upstream_cooldowns_total{provider=\"refusing-provider\""
                ) && l.contains("reason=\"credential_refused\"")),
                "{metrics}"
            );
        }
    }

    /// An upstream redirect (a wrong `base_url`) is a 502 too; its body and
    /// its `location` do not reach the client.
    #[tokio::test]
    async fn an_upstream_redirect_is_a_502_and_not_relayed() {
        let up = scripted(|_: &Recorded| {
            http(
                301,
                &[
                    ("location", "https://elsewhere.example/v1/chat/completions"),
                    ("content-type", "application/json"),
                ],
                r#"{"message":"moved permanently to elsewhere"}"#,
            )
        })
        .await;
        let gw = gateway(&catalog(&up.base_url("/v1"))).await;
        for (family, st, v) in each_family(&gw).await {
            assert_family_502(family, st, &v, "upstream_redirect");
            assert!(!v.to_string().contains("elsewhere"), "{family}: {v}");
        }
    }

    /// A refused credential is the upstream's failure, not the request's:
    /// the next upstream of the provider answers.
    #[tokio::test]
    async fn a_refused_credential_moves_on_to_the_next_upstream() {
        let up = scripted(refusing(401)).await;
        let mock = MockUpstream::start().await;
        let catalog = json!({
            "providers": [{"id": "refusing-provider", "families": ["openai"],
                "upstreams": [
                    {"protocol": "openai", "base_url": up.base_url("/v1"), "api_key_env": "SB_SEC_REFUSED_KEY"},
                    {"protocol": "anthropic", "base_url": mock.base_url(Protocol::Anthropic), "api_key_env": "SB_TEST_KEY_ANTHROPIC"}]}],
            "models": [crate::common::gateway::model("m", "refusing-provider",
                json!({"protocols": ["openai"], "upstream_model": "up"}))]
        });
        let gw = gateway(&catalog).await;
        let chat = json!({"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]});
        // The client's own protocol is tried first: the refusing upstream.
        let r = gw
            .send(&authed("openai", "/v1/chat/completions", KEY, &chat))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(up.seen().len(), 1);
        let chat_line = || {
            gw.access_log()
                .lines()
                .find(|l| l.contains("/v1/chat/completions"))
                .map(str::to_string)
        };
        wait_until("the access-log line", || chat_line().is_some()).await;
        let line: Value = serde_json::from_str(&chat_line().unwrap()).unwrap();
        assert_eq!(line["attempts"], 2, "{line}");
        assert_eq!(line["tried"][0]["failure"], "credential_refused", "{line}");
        assert_eq!(line["tried"][0]["status"], 401, "{line}");
    }
}

/// Item 6: `anthropic-beta` is for family B to family B only.
mod beta_header {
    use crate::common::gateway::{authed, Gateway, KEY};
    use crate::common::mock_upstream::MockUpstream;
    use serde_json::json;

    const BETA: &str = "context-management-2025-06-27";

    /// A mock that records the upstream request headers: the header reaches
    /// an Anthropic upstream from a family B client, and not from a family
    /// A, C or D client whose request the gateway translated.
    #[tokio::test]
    async fn anthropic_beta_reaches_anthropic_upstreams_of_family_b_only() {
        let mock = MockUpstream::start().await;
        let gw = Gateway::start(&mock).await;
        let chat = |m: &str| json!({"model": m, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]});
        let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
        let responses = json!({"model": "claude-sonnet-4.7", "input": "hi"});
        let cases = [
            (
                "anthropic",
                "/anthropic/v1/messages",
                chat("claude-sonnet-4.7"),
                true,
            ),
            (
                "openai",
                "/v1/chat/completions",
                chat("claude-sonnet-4.7"),
                false,
            ),
            (
                "gemini",
                "/google/v1beta/models/kimi/kimi-2.6:generateContent",
                gemini,
                false,
            ),
            ("responses", "/v1/responses", responses, false),
        ];
        for (family, path, body, forwarded) in cases {
            mock.clear();
            let r = gw
                .send(&authed(family, path, KEY, &body).header("anthropic-beta", BETA))
                .await;
            assert_eq!(r.status, 200, "{family}: {}", r.text());
            let req = mock.last_request().expect("the upstream was called");
            assert!(req.path.contains("/messages"), "{family}: {}", req.path);
            let seen = req.header("anthropic-beta");
            if forwarded {
                assert_eq!(seen, Some(BETA), "{family}");
            } else {
                assert_eq!(
                    seen, None,
                    "{family}: a translated request carried anthropic-beta"
                );
            }
        }
    }
}

/// A whole answer with whitespace around its JSON object.
mod padded_answer {
    use crate::common::families::eventually;
    use crate::common::gateway::{authed, Gateway, KEY};
    use crate::security::relayed_secrets::{http, scripted, Recorded};
    use serde_json::{json, Value};
    use std::time::Duration;

    /// A Responses upstream answering with blank lines and spaces before
    /// and after the object: the client's answer is the object, stored
    /// under the gateway's id; reading it back gives the object's bytes
    /// alone, and a continuation sends its output to the upstream.
    #[tokio::test]
    async fn a_whole_answer_with_whitespace_around_it_is_stored_as_its_object() {
        let answer = json!({"id": "resp_up", "object": "response", "created_at": 1,
            "status": "completed", "model": "up",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "padded hello", "annotations": []}]}],
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}});
        let up = scripted(move |_: &Recorded| {
            let body = format!(" \r\n\t{answer}\n\n ");
            http(200, &[("content-type", "application/json")], &body)
        })
        .await;
        let catalog = json!({
            "providers": [{"id": "padded", "families": ["openai"], "retries": 0,
                "upstreams": [{"protocol": "responses", "base_url": up.base_url("/v1"),
                    "api_key_env": "SB_SEC_PADDED_KEY"}]}],
            "models": [crate::common::gateway::model("m", "padded", json!({"upstream_model": "up"}))]
        });
        let gw = Gateway::start_with_env(
            &catalog,
            &crate::common::gateway::keys(),
            &[],
            &[("SB_SEC_PADDED_KEY", "sk-padded-upstream")],
        )
        .await;
        let post = |body: &Value| authed("openai", "/v1/responses", KEY, body);
        let r = gw.send(&post(&json!({"model": "m", "input": "hi"}))).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let first: Value = r.json();
        let id = first["id"].as_str().unwrap().to_string();
        assert_ne!(id, "resp_up", "the gateway's own id");
        assert_eq!(first["output"][0]["content"][0]["text"], "padded hello");
        let path = format!("/v1/responses/{id}");
        let stored = eventually(Duration::from_secs(10), "the stored response", || async {
            let get = crate::common::http_client::Request::new("GET", &path)
                .header("authorization", &format!("Bearer {KEY}"));
            let r = gw.send(&get).await;
            (r.status == 200).then(|| r.text())
        })
        .await;
        assert!(
            stored.starts_with('{') && stored.ends_with('}'),
            "the object's bytes alone: {stored:?}"
        );
        assert_eq!(serde_json::from_str::<Value>(&stored).unwrap(), first);
        let r = gw
            .send(&post(
                &json!({"model": "m", "input": "again", "previous_response_id": id}),
            ))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let sent: Value = serde_json::from_str(&up.seen().last().unwrap().body).unwrap();
        let input = sent["input"].to_string();
        assert!(
            input.contains("padded hello") && input.contains("again"),
            "{input}"
        );
    }
}
