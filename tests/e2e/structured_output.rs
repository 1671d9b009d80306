//! End-to-end: structured output reaches every upstream in the strongest form
//! it takes (docs/protocol-mapping.md "Structured output"). Toward Anthropic a
//! JSON Schema becomes the native `output_config.format`, fitted to what
//! Anthropic enforces, and strict tools `strict: true`; a bare JSON-object
//! request, or a schema that cannot be fitted, stays a system instruction.
//! `x-switchboard-adjusted` says which. From Anthropic, an enforced schema
//! reaches OpenAI strict where it meets OpenAI's rules. The mock upstream
//! refuses what Anthropic refuses and answers `[[json-answer]]` with a value
//! conforming to the schema it was asked to enforce.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::gateway::{authed, Gateway, KEY};
use crate::common::mock_upstream::MockUpstream;
use serde_json::{json, Value};

const ADJUSTED: &str = "x-switchboard-adjusted";

/// A schema as pydantic writes one: open objects, numeric bounds, an
/// optional member, a `$defs` reference.
fn person_schema() -> Value {
    json!({
        "type": "object",
        "title": "Person",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "age": {"type": "integer", "minimum": 0, "maximum": 150, "description": "Age in years"},
            "address": {"$ref": "#/$defs/Address"},
            "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
        },
        "required": ["name", "age", "address"],
        "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    })
}

fn upstream_body(mock: &MockUpstream) -> Value {
    mock.last_request()
        .and_then(|r| r.json())
        .expect("the upstream got a JSON body")
}

fn system_text(anthropic_body: &Value) -> String {
    match &anthropic_body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The schema as it must reach Anthropic: closed objects, refused bounds in
/// the descriptions.
fn fitted_person_schema() -> Value {
    json!({
        "type": "object",
        "title": "Person",
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string", "description": "{\"minLength\":1}"},
            "age": {"type": "integer", "description": "Age in years\n{\"maximum\":150,\"minimum\":0}"},
            "address": {"$ref": "#/$defs/Address"},
            "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
        },
        "required": ["name", "age", "address"],
        "$defs": {"Address": {"type": "object", "additionalProperties": false, "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    })
}

#[tokio::test]
async fn a_json_schema_reaches_anthropic_as_output_config_format_from_every_family() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let schema = person_schema();
    let prompt = "Extract: Ada, 36, London [[json-answer]]";
    let cases = [
        (
            "openai",
            "/v1/chat/completions".to_string(),
            json!({"model": "anthropic/claude-sonnet-4.7", "messages": [{"role": "user", "content": prompt}],
                   "response_format": {"type": "json_schema", "json_schema": {"name": "Person", "schema": schema, "strict": false}}}),
            "response_format=output_config.format",
        ),
        (
            "openai",
            "/v1/responses".to_string(),
            json!({"model": "anthropic/claude-sonnet-4.7", "input": prompt,
                   "text": {"format": {"type": "json_schema", "name": "Person", "schema": schema}}}),
            "text.format=output_config.format",
        ),
        (
            "gemini",
            "/google/v1beta/models/kimi/kimi-2.6:generateContent".to_string(),
            json!({"contents": [{"role": "user", "parts": [{"text": prompt}]}],
                   "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema}}),
            "generationConfig.responseJsonSchema=output_config.format",
        ),
    ];
    for (family, path, body, report) in cases {
        let r = gw.send(&authed(family, &path, KEY, &body)).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        let up = upstream_body(&mock);
        assert_eq!(
            up["output_config"]["format"],
            json!({"type": "json_schema", "schema": fitted_person_schema()}),
            "{path}"
        );
        assert!(
            !system_text(&up).contains("Respond with a single valid JSON"),
            "{path}: the instruction went up too: {up}"
        );
        assert!(
            r.header(ADJUSTED).unwrap_or_default().contains(report),
            "{path}: {:?}",
            r.header(ADJUSTED)
        );
        // The answer is the JSON the upstream produced under that schema.
        let v = r.json();
        let text = match family {
            "gemini" => v["candidates"][0]["content"]["parts"][0]["text"].clone(),
            _ if path.ends_with("responses") => v["output"][0]["content"][0]["text"].clone(),
            _ => v["choices"][0]["message"]["content"].clone(),
        };
        let answer: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
        assert_eq!(answer["address"]["city"], "mock", "{path}: {answer}");
        assert_eq!(answer["age"], 7, "{path}: {answer}");
    }
}

#[tokio::test]
async fn json_object_and_unfittable_schemas_stay_instructions() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let map_schema = json!({"type": "object", "additionalProperties": {"type": "integer"}});
    for (format, in_system) in [
        (json!({"type": "json_object"}), "single valid JSON object"),
        (
            json!({"type": "json_schema", "json_schema": {"name": "scores", "schema": map_schema}}),
            "\"additionalProperties\":{\"type\":\"integer\"}",
        ),
    ] {
        let body = json!({"model": "anthropic/claude-sonnet-4.7",
            "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Scores?"}],
            "response_format": format});
        let r = gw
            .send(&authed("openai", "/v1/chat/completions", KEY, &body))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let up = upstream_body(&mock);
        assert!(up.get("output_config").is_none(), "{up}");
        let system = system_text(&up);
        assert!(system.starts_with("Be terse."), "{system}");
        assert!(system.contains(in_system), "{system}");
        assert_eq!(
            r.header(ADJUSTED),
            Some("response_format=instruction"),
            "{format}"
        );
    }
}

#[tokio::test]
async fn strict_tools_reach_anthropic_strict_and_fitted() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let params = json!({"type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z]"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false});
    let body = json!({"model": "anthropic/claude-sonnet-4.7",
    "messages": [{"role": "user", "content": "Weather in Paris? [[tool]]"}],
    "tools": [
        {"type": "function", "function": {"name": "get_weather", "parameters": params, "strict": true}},
        {"type": "function", "function": {"name": "lax", "parameters": {"type": "object", "properties": {}}}}
    ]});
    let r = gw
        .send(&authed("openai", "/v1/chat/completions", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let up = upstream_body(&mock);
    assert_eq!(up["tools"][0]["strict"], true);
    assert_eq!(
        up["tools"][0]["input_schema"]["properties"]["city"],
        json!({"type": "string", "description": "{\"pattern\":\"^[A-Z]\"}"})
    );
    // A tool the client did not mark strict is left as it was.
    assert!(up["tools"][1].get("strict").is_none(), "{up}");
    assert_eq!(
        up["tools"][1]["input_schema"],
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(r.header(ADJUSTED), None, "nothing was lost");
    assert_eq!(
        r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
}

#[tokio::test]
async fn an_anthropic_schema_reaches_openai_strict_where_openai_allows_it() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let closed = json!({"type": "object", "properties": {"answer": {"type": "string"}},
        "required": ["answer"], "additionalProperties": false});
    let optional = json!({"type": "object", "properties": {"answer": {"type": "string"}, "note": {"type": "string"}},
        "required": ["answer"], "additionalProperties": false});
    for (schema, strict) in [(closed, json!(true)), (optional, json!(false))] {
        let body = json!({"model": "gpt-5-any", "max_tokens": 512,
            "messages": [{"role": "user", "content": "Answer [[json-answer]]"}],
            "output_config": {"format": {"type": "json_schema", "schema": schema}},
            "tools": [{"name": "lookup", "input_schema": schema, "strict": true}]});
        let r = gw
            .send(&authed("anthropic", "/anthropic/v1/messages", KEY, &body))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let up = upstream_body(&mock);
        let rf = &up["response_format"];
        assert_eq!(rf["type"], "json_schema");
        assert_eq!(rf["json_schema"]["schema"], schema);
        assert_eq!(
            rf["json_schema"].get("strict"),
            (strict == true).then_some(&strict),
            "{rf}"
        );
        assert_eq!(up["tools"][0]["function"]["strict"], strict);
        let adjusted = r.header(ADJUSTED).unwrap_or_default();
        assert_eq!(
            adjusted.contains("dropped=tools[].strict"),
            strict == false,
            "{adjusted}"
        );
        let answer: Value =
            serde_json::from_str(r.json()["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(answer["answer"], "mock");
    }
}
