//! End-to-end: what real coding agents and SDKs send (Claude Code's system
//! messages inside `messages`, adaptive thinking with `output_config.effort`,
//! `context_management`, `metadata`, cache marks; google-genai's snake_case
//! `parameters_json_schema` and `thinking_config`; OpenAI `reasoning_effort`
//! and `user`) reaches upstreams of the other protocols mapped, through the
//! real binary and the mock upstream. The mock's `[[echo-request]]` marker
//! answers with the upstream request body, so the client sees it too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::gateway::{authed, Gateway, KEY};
use crate::common::mock_upstream::MockUpstream;
use serde_json::{json, Value};

/// A Claude Code 2.1 request (trimmed to three tools).
fn claude_code(model: &str, prompt: &str) -> Value {
    let schema = |props: Value, required: Value| {
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
               "properties": props, "required": required, "additionalProperties": false})
    };
    json!({
        "model": model,
        "max_tokens": 4096,
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
            {"type": "text", "text": "Be concise.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List the files", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "system", "content": "The working directory changed."},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "Cargo.toml\nsrc"}]},
            {"role": "system", "content": [{"type": "text", "text": "Plan mode is off."}]},
            {"role": "user", "content": prompt}
        ],
        "tools": [
            {"name": "Bash", "description": "Runs a command", "input_schema": schema(json!({"command": {"type": "string"}}), json!(["command"]))},
            {"name": "Read", "description": "Reads a file", "input_schema": schema(json!({"file_path": {"type": "string"}}), json!(["file_path"]))},
            {"name": "Edit", "description": "Edits a file", "input_schema": schema(json!({"file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}}), json!(["file_path", "old_string", "new_string"])),
             "cache_control": {"type": "ephemeral"}}
        ],
        "metadata": {"user_id": "user_5e1f_account_2b6c_session_8d1f"},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    })
}

/// The upstream request body the mock recorded last.
fn upstream_body(mock: &MockUpstream) -> Value {
    mock.last_request()
        .and_then(|r| r.json())
        .expect("the upstream got a JSON body")
}

#[tokio::test]
async fn claude_code_to_openai_upstream() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let body = claude_code("gpt-5-any", "Now read Cargo.toml [[echo-request]]");
    let r = gw
        .send(&authed("anthropic", "/anthropic/v1/messages", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let up = upstream_body(&mock);
    let roles: Vec<&str> = up["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    // System messages stay in place; the one between the tool call and its
    // result follows the result (OpenAI wants tool results right after the call).
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "system",
            "system",
            "user"
        ]
    );
    assert_eq!(
        up["messages"][4]["content"],
        "The working directory changed."
    );
    assert_eq!(up["messages"][5]["content"], "Plan mode is off.");
    assert_eq!(up["reasoning_effort"], "high");
    assert_eq!(up["user"], "user_5e1f_account_2b6c_session_8d1f");
    assert_eq!(up["tools"].as_array().unwrap().len(), 3);
    assert_eq!(
        up["tools"][2]["function"]["parameters"]["required"],
        json!(["file_path", "old_string", "new_string"])
    );
    let text = up.to_string();
    for gone in [
        "context_management",
        "cache_control",
        "output_config",
        "thinking\"",
    ] {
        assert!(
            !text.contains(gone),
            "{gone} reached the OpenAI upstream: {text}"
        );
    }
    // The client sees the upstream body echoed in its own protocol.
    let v = r.json();
    let echoed = v["content"][0]["text"].as_str().unwrap();
    assert!(echoed.contains("\"reasoning_effort\":\"high\""), "{echoed}");
}

#[tokio::test]
async fn claude_code_to_gemini_upstream() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let body = claude_code("gemini-any", "Now read Cargo.toml");
    let r = gw
        .send(&authed("anthropic", "/anthropic/v1/messages", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let up = upstream_body(&mock);
    let system: Vec<&str> = up["systemInstruction"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    // Gemini has no system role inside contents: every system prompt, in order.
    assert_eq!(
        system,
        [
            "You are Claude Code, Anthropic's official CLI for Claude.",
            "Be concise.",
            "The working directory changed.",
            "Plan mode is off."
        ]
    );
    let roles: Vec<&str> = up["contents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user"]);
    assert_eq!(
        up["generationConfig"]["thinkingConfig"],
        // `high` is 16384, at most half of max_tokens 4096.
        json!({"includeThoughts": true, "thinkingBudget": 2048})
    );
    assert_eq!(
        up["tools"][0]["functionDeclarations"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let text = up.to_string();
    for gone in ["context_management", "cache_control", "metadata", "user_id"] {
        assert!(
            !text.contains(gone),
            "{gone} reached the Gemini upstream: {text}"
        );
    }
    // Gemini cannot carry a cache mark on a part (its caches are objects of
    // their own): the drop is reported as every other one is.
    let adjusted = r.header("x-switchboard-adjusted").unwrap_or_default();
    assert!(adjusted.contains("cache_control"), "{adjusted}");
}

/// A google-genai request: snake_case throughout, the tool schema as
/// `parameters_json_schema` (plain JSON Schema).
fn genai_request(prompt: &str) -> Value {
    json!({
        "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        "system_instruction": {"parts": [{"text": "You are terse."}]},
        "tools": [{"function_declarations": [{
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters_json_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}
        }]}],
        "generation_config": {"max_output_tokens": 1024, "thinking_config": {"thinking_level": "LOW", "include_thoughts": true}}
    })
}

#[tokio::test]
async fn genai_tool_schema_and_thinking_reach_openai_and_anthropic_upstreams() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let want = json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]});

    let path = "/google/v1beta/models/deepseek/deepseek-v4-pro:generateContent";
    let r = gw
        .send(&authed("gemini", path, KEY, &genai_request("weather?")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let up = upstream_body(&mock);
    assert_eq!(up["tools"][0]["function"]["parameters"], want);
    assert_eq!(up["reasoning_effort"], "low");
    assert_eq!(
        up["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );

    let path = "/google/v1beta/models/kimi/kimi-2.6:generateContent";
    let r = gw
        .send(&authed("gemini", path, KEY, &genai_request("weather?")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let up = upstream_body(&mock);
    assert_eq!(up["tools"][0]["input_schema"], want);
    assert_eq!(up["thinking"], json!({"type": "adaptive"}));
    assert_eq!(up["output_config"], json!({"effort": "low"}));
}

#[tokio::test]
async fn openai_reasoning_and_user_reach_anthropic_and_gemini_upstreams() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let body = |model: &str| {
        json!({"model": model, "max_tokens": 2000, "reasoning_effort": "medium", "user": "u-7",
               "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]})
    };
    let r = gw
        .send(&authed(
            "openai",
            "/v1/chat/completions",
            KEY,
            &body("anthropic/claude-sonnet-4.7"),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let up = upstream_body(&mock);
    assert_eq!(up["thinking"], json!({"type": "adaptive"}));
    assert_eq!(up["output_config"], json!({"effort": "medium"}));
    assert_eq!(up["metadata"], json!({"user_id": "u-7"}));
    assert_eq!(up["system"], "Be brief.");

    let r = gw
        .send(&authed(
            "openai",
            "/v1/chat/completions",
            KEY,
            &body("google/gemini-3.1-pro"),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let up = upstream_body(&mock);
    assert_eq!(
        up["generationConfig"]["thinkingConfig"],
        // `medium` is 8192, at most half of max_tokens 2000.
        json!({"thinkingBudget": 1000})
    );
    assert!(up.get("user").is_none());
}

#[tokio::test]
async fn claude_code_streams_through_openai_and_gemini_upstreams() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    for model in ["gpt-5-any", "gemini-any"] {
        let mut body = claude_code(model, "Now read Cargo.toml");
        body["stream"] = json!(true);
        let r = gw
            .send(&authed("anthropic", "/anthropic/v1/messages", KEY, &body))
            .await;
        assert_eq!(r.status, 200, "{model}: {}", r.text());
        let text = r.text();
        assert!(text.contains("event: message_start"), "{model}: {text}");
        assert!(text.contains("event: message_stop"), "{model}: {text}");
        let up = mock.last_request().unwrap();
        let upb = up.json().unwrap();
        if model == "gpt-5-any" {
            assert_eq!(upb["stream"], true);
            assert_eq!(upb["messages"][4]["role"], "system");
            assert_eq!(upb["reasoning_effort"], "high");
        } else {
            assert!(up.path.contains(":streamGenerateContent"), "{}", up.path);
            assert_eq!(
                upb["systemInstruction"]["parts"].as_array().unwrap().len(),
                4
            );
        }
    }
}
