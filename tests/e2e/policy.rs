//! End-to-end: the policy (docs/api.md "Adapt or refuse") over real sockets. Under `adapt`
//! (the default) over-large output caps are lowered and optional knobs the
//! model lacks are dropped, reported in `x-switchboard-adjusted` and in the
//! adaptations metric, and the upstream really receives the adapted body;
//! what would change the kind of answer is still a 400. Under `strict` (set
//! in the catalog or on a key) each of those is a 400 naming the parameter.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{authed, catalog, keys, Gateway, KEY};
use crate::common::http_client::Response;
use crate::common::mock_upstream::{MockUpstream, Protocol};
use serde_json::{json, Value};
use std::time::Duration;

use Protocol::{Anthropic, Gemini, OpenAi};

const STRICT_KEY: &str = "sk-strict";
const ADAPT_KEY: &str = "sk-adapt";
const ADJUSTED: &str = "x-switchboard-adjusted";

/// Models that lack the optional knobs real clients send: on each upstream
/// protocol, with tools and vision, 8192 output tokens of 200000.
fn lean(id: &str, provider: &str) -> Value {
    json!({
        "id": id, "provider": provider, "context_length": 200000, "max_output_tokens": 8192,
        "pricing": {"prompt": "0.000001", "completion": "0.000002"},
        "supported_parameters": ["temperature", "top_p", "max_tokens", "stream", "stop", "tools", "tool_choice"],
        "supported_features": {"vision": true, "tool_use": true, "streaming": true},
        "protocols": ["openai", "anthropic", "gemini"]
    })
}

/// The test catalog plus `lean-claude` (anthropic upstream), `lean-gpt`
/// (openai), `lean-gemini` (gemini) and `lean-kimi` (anthropic, reachable
/// from family C), and `plain` / `plain-gemini` (openai / gemini upstream, no
/// tools, no vision, no JSON output), with `policy` at the top when given.
fn policy_catalog(mock: &MockUpstream, policy: Option<&str>) -> Value {
    let mut c = catalog(mock);
    let models = c["models"].as_array_mut().unwrap();
    models.push(lean("lean-claude", "anthropic"));
    models.push(lean("lean-gpt", "openai"));
    models.push(lean("lean-gemini", "google"));
    models.push(lean("lean-kimi", "kimi"));
    for (id, provider) in [("plain", "openai"), ("plain-gemini", "google")] {
        let mut plain = lean(id, provider);
        plain["supported_parameters"] = json!(["temperature", "max_tokens", "stream"]);
        plain["supported_features"] =
            json!({"vision": false, "tool_use": false, "streaming": true});
        models.push(plain);
    }
    if let Some(p) = policy {
        c["policy"] = json!(p);
    }
    c
}

/// The test keys plus a strict key and an adapt key.
fn policy_keys() -> Value {
    let mut k = keys();
    let list = k["keys"].as_array_mut().unwrap();
    list.push(json!({"id": "strict", "key": STRICT_KEY, "policy": "strict"}));
    list.push(json!({"id": "adapt", "key": ADAPT_KEY, "policy": "adapt"}));
    k
}

async fn start(policy: Option<&str>) -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&policy_catalog(&mock, policy), &policy_keys(), &[]).await;
    (mock, gw)
}

/// A request shaped like Claude Code 2.1's: thinking, effort, context
/// management, metadata, cache hints on system, messages and the last of 24
/// tools, and a field no API knows yet.
fn claude_code(model: &str, stream: bool) -> Value {
    let tools: Vec<Value> = (0..24)
        .map(|i| {
            let mut t = json!({"name": format!("Tool{i}"), "description": format!("tool {i}"),
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}});
            if i == 23 {
                t["cache_control"] = json!({"type": "ephemeral"});
            }
            t
        })
        .collect();
    json!({
        "model": model,
        "max_tokens": 32000,
        "stream": stream,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "say hi"},
            {"type": "text", "text": "really", "cache_control": {"type": "ephemeral"}}
        ]}],
        "tools": tools,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {"user_id": "user_abc_account_123_session_456"},
        "x_future_field": {"kept": [1, 2.50, "three"]}
    })
}

const BETAS: &str =
    "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27";
const CLAUDE_CODE_DROPS: &str =
    "dropped=thinking,output_config.effort,metadata,context_management,cache_control";

fn messages_call(key: &str, body: &Value) -> crate::common::http_client::Request {
    authed("anthropic", &format!("{MESSAGES}?beta=true"), key, body).header("anthropic-beta", BETAS)
}

fn cache_hints(v: &Value) -> usize {
    match v {
        Value::Object(o) => {
            usize::from(o.contains_key("cache_control"))
                + o.values().map(cache_hints).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(cache_hints).sum(),
        _ => 0,
    }
}

fn adjusted(r: &Response) -> &str {
    r.header(ADJUSTED)
        .unwrap_or_else(|| panic!("no {ADJUSTED} header: {:?}", r.headers))
}

#[tokio::test]
async fn claude_code_on_the_same_protocol_is_clamped_and_stripped_upstream() {
    let (mock, gw) = start(None).await;
    for stream in [false, true] {
        mock.clear();
        let r = gw
            .send(&messages_call(KEY, &claude_code("lean-claude", stream)))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            adjusted(&r),
            format!("max_tokens=8192 (was 32000); {CLAUDE_CODE_DROPS}")
        );
        if stream {
            assert!(stream_text(Anthropic, &event_json(&r.sse())).contains("say hi"));
        } else {
            assert!(reply_text(Anthropic, &r.json()).contains("say hi"));
        }
        let up = mock.last_request().unwrap();
        let body = up.json().unwrap();
        assert_eq!(body["max_tokens"], 8192);
        for gone in [
            "thinking",
            "output_config",
            "context_management",
            "metadata",
        ] {
            assert!(
                body.get(gone).is_none(),
                "{gone} reached the upstream: {body}"
            );
        }
        assert_eq!(cache_hints(&body), 0, "{body}");
        // Everything else arrives as sent: unknown fields, tools, betas.
        assert_eq!(body["x_future_field"], json!({"kept": [1, 2.50, "three"]}));
        assert_eq!(body["tools"].as_array().unwrap().len(), 24);
        assert_eq!(body["system"][0]["text"], "You are Claude Code.");
        assert_eq!(body["messages"][0]["content"][1]["text"], "really");
        assert_eq!(up.header("anthropic-beta"), Some(BETAS));
        assert_eq!(up.query(), Some("beta=true"), "?beta=true forwarded");
        let keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(
            keys.windows(2).any(|w| w == ["tools", "x_future_field"]),
            "key order changed: {keys:?}"
        );
    }
}

#[tokio::test]
async fn same_protocol_edit_keeps_every_other_byte() {
    let (mock, gw) = start(None).await;
    let raw = "{ \"model\" : \"anthropic/lean-claude\",\n  \"max_tokens\":  9000 ,\n  \"zeta\": {\"b\": 1.50, \"a\": [true,null]},\n  \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 4096},\n  \"messages\": [{\"role\": \"user\", \"content\": \"h\\u00e9llo\"}],\n  \"top_k\": 5\n}";
    let r = gw
        .send(&authed("anthropic", MESSAGES, KEY, &json!(null)).body(raw.as_bytes().to_vec()))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        adjusted(&r),
        "max_tokens=8192 (was 9000); dropped=top_k,thinking"
    );
    assert_eq!(
        mock.last_request().unwrap().body_text(),
        "{ \"model\" : \"lean-claude\",\n  \"max_tokens\":  8192 ,\n  \"zeta\": {\"b\": 1.50, \"a\": [true,null]},\n  \"messages\": [{\"role\": \"user\", \"content\": \"h\\u00e9llo\"}]\n}"
    );
    // Nothing to change: no header, the body untouched but for the model name.
    let r = gw
        .send(&call(
            Anthropic,
            MESSAGES,
            &anthropic_body("lean-claude", "plain", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header(ADJUSTED), None);
}

#[tokio::test]
async fn cross_protocol_requests_are_adapted_before_translation() {
    let (mock, gw) = start(None).await;
    // Claude Code's shape to a model on an OpenAI upstream.
    let r = gw
        .send(&messages_call(KEY, &claude_code("lean-gpt", false)))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let header = adjusted(&r).to_string();
    assert!(
        header.starts_with(&format!("max_tokens=8192 (was 32000); {CLAUDE_CODE_DROPS}")),
        "{header}"
    );
    let up = mock.last_request().unwrap();
    assert!(up.path_only().ends_with("/chat/completions"), "{}", up.path);
    let body = up.json().unwrap();
    let cap = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64);
    assert_eq!(cap, Some(8192), "{body}");
    for gone in ["reasoning_effort", "user", "metadata"] {
        assert!(
            body.get(gone).is_none(),
            "{gone} reached the upstream: {body}"
        );
    }
    // Gemini CLI's thinkingConfig and a large cap to a model on an Anthropic upstream.
    let mut g = gemini_body("gemini cli", None);
    g["generationConfig"] = json!({"maxOutputTokens": 65536, "temperature": 0.7,
        "thinkingConfig": {"thinkingBudget": -1, "includeThoughts": true}});
    let r = gw
        .send(&call(
            Gemini,
            &gemini_path("kimi/lean-kimi", GeminiMode::Whole),
            &g,
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        adjusted(&r).starts_with(
            "generationConfig.maxOutputTokens=8192 (was 65536); dropped=generationConfig.thinkingConfig"
        ),
        "{}",
        adjusted(&r)
    );
    let body = mock.last_request().unwrap().json().unwrap();
    assert_eq!(body["max_tokens"], 8192, "{body}");
    assert!(body.get("thinking").is_none(), "{body}");
}

#[tokio::test]
async fn sdk_caps_are_lowered_in_every_family() {
    let (mock, gw) = start(None).await;
    // Vercel AI SDK's Anthropic provider: max_tokens 128000.
    let mut b = anthropic_body("claude-sonnet-4.7", "sdk", None, false);
    b["max_tokens"] = json!(128000);
    let r = gw.send(&call(Anthropic, MESSAGES, &b)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(adjusted(&r), "max_tokens=8192 (was 128000)");
    assert_eq!(
        mock.last_request().unwrap().json().unwrap()["max_tokens"],
        8192
    );
    // A thinking budget the lowered cap leaves too large is scaled down with it
    // (Anthropic wants budget_tokens below max_tokens).
    b["max_tokens"] = json!(32000);
    b["thinking"] = json!({"type": "enabled", "budget_tokens": 31999});
    let r = gw.send(&call(Anthropic, MESSAGES, &b)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        adjusted(&r),
        "max_tokens=8192 (was 32000); thinking.budget_tokens=8191 (was 31999)"
    );
    let body = mock.last_request().unwrap().json().unwrap();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8191})
    );
    // Family A, both cap fields, and knobs the model lacks, same protocol.
    let mut a = openai_body("openai/lean-gpt", "sdk", None, true);
    a["max_completion_tokens"] = json!(100000);
    a["reasoning_effort"] = json!("high");
    a["seed"] = json!(7);
    a["user"] = json!("end-user-1");
    a["parallel_tool_calls"] = json!(false);
    a["frequency_penalty"] = json!(0.5);
    a["x_vendor"] = json!({"z": 1});
    let r = gw.send(&call(OpenAi, CHAT, &a)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        adjusted(&r),
        "max_completion_tokens=8192 (was 100000); dropped=seed,reasoning_effort,frequency_penalty,user,parallel_tool_calls"
    );
    let body = mock.last_request().unwrap().json().unwrap();
    assert_eq!(body["max_completion_tokens"], 8192);
    assert_eq!(body["x_vendor"], json!({"z": 1}));
    for gone in [
        "reasoning_effort",
        "seed",
        "user",
        "parallel_tool_calls",
        "frequency_penalty",
    ] {
        assert!(
            body.get(gone).is_none(),
            "{gone} reached the upstream: {body}"
        );
    }
    // Family C, same protocol, streamed.
    let mut g = gemini_body("cli", None);
    g["generationConfig"] =
        json!({"maxOutputTokens": 65536, "thinkingConfig": {"thinkingBudget": 1024}});
    let r = gw
        .send(&call(
            Gemini,
            &gemini_path("google/lean-gemini", GeminiMode::StreamSse),
            &g,
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        adjusted(&r),
        "generationConfig.maxOutputTokens=8192 (was 65536); dropped=generationConfig.thinkingConfig"
    );
    let body = mock.last_request().unwrap().json().unwrap();
    assert_eq!(body["generationConfig"], json!({"maxOutputTokens": 8192}));
}

#[tokio::test]
async fn output_cap_is_lowered_to_what_the_context_leaves() {
    let (mock, gw) = start(None).await;
    // tiny: 1000 tokens of context, 100 of output. About 950 tokens of input.
    let text = ["the", "quick", "brown", "fox", "jumps"]
        .iter()
        .cycle()
        .take(950)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let mut b = openai_body("openai/tiny", &text, None, false);
    b["max_tokens"] = json!(100);
    let r = gw.send(&call(OpenAi, CHAT, &b)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let header = adjusted(&r).to_string();
    let now: u64 = header
        .strip_prefix("max_tokens=")
        .and_then(|s| s.strip_suffix(" (was 100)"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{header}"));
    assert!((1..100).contains(&now), "{header}");
    assert_eq!(
        mock.last_request().unwrap().json().unwrap()["max_tokens"],
        now
    );
    // Input that alone exceeds the context is a 400 under adapt too.
    mock.clear();
    let long = format!("{text} {text}");
    let r = gw
        .send(&call(
            OpenAi,
            CHAT,
            &openai_body("openai/tiny", &long, None, false),
        ))
        .await;
    let e = assert_error(OpenAi, &r, 400);
    assert_eq!(e["code"], "context_length_exceeded", "{e}");
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn what_would_change_the_answer_is_refused_under_adapt() {
    let (mock, gw) = start(None).await;
    let a = |extra: Value| {
        let mut b = openai_body("openai/plain", "hi", None, false);
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let tool =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    let image = json!([{"role": "user", "content": [
        {"type": "text", "text": "what is this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]);
    let cases: Vec<(Protocol, String, Value, &str)> = vec![
        (OpenAi, CHAT.into(), a(json!({"tools": tool})), "tools"),
        (
            OpenAi,
            CHAT.into(),
            a(json!({"tool_choice": "auto"})),
            "tool_choice",
        ),
        (
            OpenAi,
            CHAT.into(),
            a(json!({"response_format": {"type": "json_object"}})),
            "response_format",
        ),
        (OpenAi, CHAT.into(), a(json!({"n": 2})), "n"),
        (
            OpenAi,
            CHAT.into(),
            a(json!({"logprobs": true})),
            "logprobs",
        ),
        (
            OpenAi,
            CHAT.into(),
            a(json!({"messages": image})),
            "messages",
        ),
        (
            Anthropic,
            MESSAGES.into(),
            {
                let mut b = anthropic_body("plain", "hi", None, false);
                b["tools"] = json!([{"name": "f", "input_schema": {"type": "object"}}]);
                b
            },
            "tools",
        ),
        (
            Gemini,
            gemini_path("google/plain-gemini", GeminiMode::Whole),
            json!({"contents": [{"parts": [{"text": "hi"}]}],
                "generationConfig": {"responseMimeType": "application/json"}}),
            "responseMimeType",
        ),
        (
            Gemini,
            gemini_path("google/plain-gemini", GeminiMode::Whole),
            json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]}]}),
            "contents",
        ),
    ];
    for (p, path, body, param) in &cases {
        let r = gw.send(&call(*p, path, body)).await;
        let e = assert_error(*p, &r, 400);
        assert_names_param(*p, &e, param);
        assert!(
            mock.requests().is_empty(),
            "{p:?} {body} reached the upstream"
        );
    }
}

#[tokio::test]
async fn a_strict_key_still_gets_the_first_release_400s() {
    let (mock, gw) = start(None).await;
    let cc = claude_code("lean-claude", false);
    let r = gw.send(&messages_call(STRICT_KEY, &cc)).await;
    let e = assert_error(Anthropic, &r, 400);
    assert_names_param(Anthropic, &e, "max_tokens");
    assert_eq!(r.header(ADJUSTED), None);
    let mut fits = cc.clone();
    fits["max_tokens"] = json!(4096);
    let r = gw.send(&messages_call(STRICT_KEY, &fits)).await;
    let e = assert_error(Anthropic, &r, 400);
    assert_names_param(Anthropic, &e, "thinking");
    // Gemini CLI's thinkingConfig, and family A knobs.
    let mut g = gemini_body("hi", None);
    g["generationConfig"] = json!({"thinkingConfig": {"thinkingBudget": 1024}});
    let r = gw
        .send(&authed(
            "gemini",
            &gemini_path("google/lean-gemini", GeminiMode::Whole),
            STRICT_KEY,
            &g,
        ))
        .await;
    let e = assert_error(Gemini, &r, 400);
    assert_names_param(Gemini, &e, "generationConfig.thinkingConfig");
    let mut a = openai_body("openai/lean-gpt", "hi", None, false);
    a["seed"] = json!(1);
    let r = gw.send(&authed("openai", CHAT, STRICT_KEY, &a)).await;
    assert_names_param(OpenAi, &assert_error(OpenAi, &r, 400), "seed");
    assert!(mock.requests().is_empty());
    // The same request with the default key (catalog default: adapt) succeeds.
    let r = gw.send(&messages_call(KEY, &fits)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(adjusted(&r), CLAUDE_CODE_DROPS);
}

#[tokio::test]
async fn catalog_level_strict_and_a_key_that_overrides_it() {
    let (mock, gw) = start(Some("strict")).await;
    let mut b = anthropic_body("claude-sonnet-4.7", "hi", None, false);
    b["max_tokens"] = json!(128000);
    let r = gw.send(&call(Anthropic, MESSAGES, &b)).await;
    assert_names_param(Anthropic, &assert_error(Anthropic, &r, 400), "max_tokens");
    let r = gw
        .send(&messages_call(KEY, &claude_code("lean-claude", true)))
        .await;
    assert_names_param(Anthropic, &assert_error(Anthropic, &r, 400), "max_tokens");
    assert!(mock.requests().is_empty());
    // A key with `policy: adapt` wins over the catalog.
    let r = gw.send(&authed("anthropic", MESSAGES, ADAPT_KEY, &b)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(adjusted(&r), "max_tokens=8192 (was 128000)");
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn adaptations_are_counted_by_model_and_parameter() {
    let (_mock, gw) = start(None).await;
    for _ in 0..2 {
        let r = gw
            .send(&messages_call(KEY, &claude_code("lean-claude", false)))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let mut g = gemini_body("hi", None);
    g["generationConfig"] = json!({"thinkingConfig": {"thinkingBudget": 1024}});
    let r = gw
        .send(&call(
            Gemini,
            &gemini_path("google/lean-gemini", GeminiMode::Whole),
            &g,
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A refused request is not an adaptation.
    let r = gw
        .send(&messages_call(
            STRICT_KEY,
            &claude_code("lean-claude", false),
        ))
        .await;
    assert_eq!(r.status, 400);
    // Metrics are recorded after the answer went out: wait for the last one.
    let text = eventually(Duration::from_secs(20), "the gemini adaptation", || async {
        let text = metrics_text(gw.metrics).await;
        text.contains("model=\"lean-gemini\"").then_some(text)
    })
    .await;
    let count = |model: &str, param: &str| {
        metric_value(
            &text,
            "switchboard_adaptations_total",
            &[
                &format!("model=\"{model}\""),
                &format!("parameter=\"{param}\""),
            ],
        )
    };
    for p in [
        "max_tokens",
        "thinking",
        "output_config.effort",
        "metadata",
        "context_management",
        "cache_control",
    ] {
        assert_eq!(count("lean-claude", p), Some(2.0), "{p}:\n{text}");
    }
    assert_eq!(
        count("lean-gemini", "generationConfig.thinkingConfig"),
        Some(1.0),
        "{text}"
    );
    assert!(text.contains("# TYPE switchboard_adaptations_total counter"));
}

/// The shipped catalog (`conf/catalog.json`, its model shapes as they are)
/// with every upstream pointed at the mock.
fn shipped_catalog(mock: &MockUpstream) -> Value {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/conf/catalog.json")).unwrap();
    let mut c: Value = serde_json::from_str(&text).unwrap();
    for p in c["providers"].as_array_mut().unwrap() {
        for u in p["upstreams"].as_array_mut().unwrap() {
            let proto = Protocol::from_name(u["protocol"].as_str().unwrap()).unwrap();
            u["base_url"] = json!(mock.base_url(proto));
            u["api_key_env"] = json!(format!("SB_TEST_KEY_{}", proto.name().to_uppercase()));
        }
    }
    c
}

#[tokio::test]
async fn real_client_shapes_succeed_on_every_shipped_model_under_adapt() {
    let mock = MockUpstream::start().await;
    let cat = shipped_catalog(&mock);
    let gw = Gateway::start_with(&cat, &policy_keys(), &[]).await;
    let mut failures = Vec::new();
    for m in cat["models"].as_array().unwrap() {
        let (id, provider) = (m["id"].as_str().unwrap(), m["provider"].as_str().unwrap());
        let max_out = m["max_output_tokens"].as_u64().unwrap();
        // Claude Code 2.1 (family B), streamed as it does.
        let r = gw.send(&messages_call(KEY, &claude_code(id, true))).await;
        if r.status != 200 {
            failures.push(format!("claude code -> {id}: {} {}", r.status, r.text()));
        } else if max_out < 32000 {
            assert!(
                adjusted(&r).starts_with(&format!("max_tokens={max_out} (was 32000)")),
                "{id}: {}",
                adjusted(&r)
            );
        }
        // The Vercel AI SDK's Anthropic provider: max_tokens 128000.
        let mut b = anthropic_body(id, "ai sdk", None, false);
        b["max_tokens"] = json!(128000);
        let r = gw.send(&call(Anthropic, MESSAGES, &b)).await;
        if r.status != 200 {
            failures.push(format!("ai sdk -> {id}: {} {}", r.status, r.text()));
        } else if max_out < 128000 {
            assert_eq!(adjusted(&r), format!("max_tokens={max_out} (was 128000)"));
        } else {
            assert_eq!(r.header(ADJUSTED), None, "{id}");
        }
        // Gemini CLI (family C) where the provider is reachable from family C.
        let families = cat["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == provider)
            .unwrap()["families"]
            .clone();
        if families.as_array().unwrap().contains(&json!("gemini")) {
            let mut g = gemini_body("gemini cli", None);
            g["generationConfig"] = json!({"temperature": 0, "topP": 0.95,
                "thinkingConfig": {"includeThoughts": true, "thinkingBudget": -1}});
            let r = gw
                .send(&call(
                    Gemini,
                    &gemini_path(&format!("{provider}/{id}"), GeminiMode::StreamSse),
                    &g,
                ))
                .await;
            if r.status != 200 {
                failures.push(format!("gemini cli -> {id}: {} {}", r.status, r.text()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // A strict key gets the first release's 400 where a model lacks a knob.
    let r = gw
        .send(&messages_call(
            STRICT_KEY,
            &claude_code("deepseek-v4-flash", false),
        ))
        .await;
    assert_error(Anthropic, &r, 400);
    // The shipped Claude model lists every knob Claude Code sends: strict passes it untouched.
    mock.clear();
    let cc = claude_code("claude-sonnet-4.7", false);
    let r = gw.send(&messages_call(STRICT_KEY, &cc)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header(ADJUSTED), None);
    let mut sent = cc.clone();
    sent["model"] = json!("claude-sonnet-4-7");
    assert_eq!(mock.last_request().unwrap().json().unwrap(), sent);
}

#[tokio::test]
async fn a_20_mib_body_is_edited_in_place() {
    let (mock, gw) = start(None).await;
    // base64-looking image data, about 20 MiB
    let data: String = "iVBORw0KGgoAAAANSUhEUgAA"
        .chars()
        .cycle()
        .take(20 << 20)
        .collect();
    let mut body = claude_code("lean-claude", false);
    body["messages"][0]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data},
            "cache_control": {"type": "ephemeral"}}));
    let r = gw.send(&messages_call(KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        adjusted(&r),
        format!("max_tokens=8192 (was 32000); {CLAUDE_CODE_DROPS}")
    );
    let up = mock.last_request().unwrap().json().unwrap();
    assert_eq!(up["max_tokens"], 8192);
    assert_eq!(cache_hints(&up), 0);
    assert_eq!(
        up["messages"][0]["content"][2]["source"]["data"],
        json!(data)
    );
    // The same image to a model without vision: a 400 under adapt, nothing sent.
    mock.clear();
    body["model"] = json!("plain");
    body.as_object_mut().unwrap().remove("tools");
    let r = gw.send(&messages_call(KEY, &body)).await;
    assert_names_param(Anthropic, &assert_error(Anthropic, &r, 400), "messages");
    assert!(mock.requests().is_empty());
}
