//! End-to-end: family D (the OpenAI Responses API) through the real binary and
//! the mock upstream. Every upstream protocol behind `POST /v1/responses`
//! (whole and streamed, text and a function-call round trip), every client
//! family in front of a `responses` upstream, `input_tokens`, the refusals
//! (an unknown `previous_response_id`, `conversation`, built-in tools off a
//! Responses upstream), unknown stored responses answered 404, and failures
//! mid-stream on both paths. Stored responses: module responses_store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::gateway::{authed, model, Gateway, KEY};
use crate::common::http_client::SseEvent;
use crate::common::mock_upstream::{
    agent_tool_reply, expected_reply, MockUpstream, Protocol, REASONING_ENCRYPTED_CONTENT,
    THINKING_SIGNATURE, THINKING_TEXT,
};
use serde_json::{json, Value};

/// One provider per upstream protocol, plus `openai` with both OpenAI
/// protocols (a Responses client must get the `responses` upstream).
fn catalog(mock: &MockUpstream) -> Value {
    let up = |p: Protocol| json!({"protocol": p.name(), "base_url": mock.base_url(p), "api_key_env": format!("SB_TEST_KEY_{}", p.name().to_uppercase())});
    let all = json!(["openai", "anthropic", "gemini"]);
    json!({
        "providers": [
            {"id": "oa", "families": all, "upstreams": [up(Protocol::OpenAi)]},
            {"id": "an", "families": all, "upstreams": [up(Protocol::Anthropic)]},
            {"id": "gg", "families": all, "upstreams": [up(Protocol::Gemini)]},
            {"id": "rs", "families": all, "upstreams": [up(Protocol::Responses)]},
            {"id": "openai", "families": all, "upstreams": [up(Protocol::OpenAi), up(Protocol::Responses)]}
        ],
        "models": [
            model("m-oa", "oa", json!({"upstream_model": "up-oa"})),
            model("m-an", "an", json!({"upstream_model": "up-an"})),
            model("m-gg", "gg", json!({"upstream_model": "up-gg"})),
            model("m-rs", "rs", json!({"upstream_model": "up-rs"})),
            model("gpt-both", "openai", json!({})),
            model("plain-rs", "rs", json!({"supported_parameters": ["max_tokens", "stream", "tools", "tool_choice"]})),
            model("plain-an", "an", json!({"supported_parameters": ["max_tokens", "stream", "tools", "tool_choice"]}))
        ]
    })
}

const STRICT: &str = "sk-strict-responses";

fn keys() -> Value {
    json!({"keys": [{"id": "test", "key": KEY}, {"id": "strict", "key": STRICT, "policy": "strict"}]})
}

/// (upstream protocol, model as a Responses client names it).
const CELLS: [(Protocol, &str); 4] = [
    (Protocol::OpenAi, "oa/m-oa"),
    (Protocol::Anthropic, "an/m-an"),
    (Protocol::Gemini, "gg/m-gg"),
    (Protocol::Responses, "rs/m-rs"),
];

fn upstream_path(p: Protocol, upstream_model: &str, stream: bool) -> String {
    let base = p.base_path();
    match p {
        Protocol::OpenAi => format!("{base}/chat/completions"),
        Protocol::Anthropic => format!("{base}/messages"),
        Protocol::Gemini if stream => {
            format!("{base}/models/{upstream_model}:streamGenerateContent?alt=sse")
        }
        Protocol::Gemini => format!("{base}/models/{upstream_model}:generateContent"),
        Protocol::Responses => format!("{base}/responses"),
    }
}

async fn start() -> (MockUpstream, Gateway) {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    (mock, gw)
}

fn output_text(resp: &Value) -> String {
    resp["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap().iter())
        .filter(|c| c["type"] == "output_text")
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect()
}

/// Checks the Responses event grammar: `sequence_number` 0, 1, 2, … on every
/// event, `response.created` then `response.in_progress` first, one terminal
/// event last, `type` equal to the SSE event name. Returns the joined text deltas.
fn check_grammar(events: &[SseEvent], terminal: &str) -> (String, Vec<Value>) {
    let datas: Vec<Value> = events
        .iter()
        .map(|e| serde_json::from_str(&e.data).expect("event data is JSON"))
        .collect();
    for (i, (e, d)) in events.iter().zip(&datas).enumerate() {
        assert_eq!(d["sequence_number"], json!(i), "event {i}: {d}");
        assert_eq!(e.event.as_deref(), d["type"].as_str(), "event {i}");
    }
    assert_eq!(datas[0]["type"], "response.created");
    assert_eq!(datas[1]["type"], "response.in_progress");
    assert_eq!(datas.last().unwrap()["type"], terminal);
    let text = datas
        .iter()
        .filter(|d| d["type"] == "response.output_text.delta")
        .map(|d| d["delta"].as_str().unwrap().to_string())
        .collect();
    (text, datas)
}

#[tokio::test]
async fn every_upstream_answers_a_responses_client_whole_and_streamed() {
    let (mock, gw) = start().await;
    for (proto, name) in CELLS {
        let upstream_model = format!("up-{}", &name[..2]);
        let text = format!("hello D via {}", proto.name());
        let body = json!({
            "model": name,
            "instructions": "Be terse.",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}],
            "max_output_tokens": 300,
            "store": true
        });
        mock.clear();
        let r = gw
            .send(&authed("openai", "/v1/responses", KEY, &body))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        let v = r.json();
        assert_eq!(v["object"], "response", "{name}");
        assert!(v["id"].as_str().unwrap().starts_with("resp"), "{name}: {v}");
        assert_eq!(v["status"], "completed", "{name}");
        assert_eq!(v["model"], name, "{name}");
        assert_eq!(output_text(&v), expected_reply(proto, &text), "{name}");
        assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0, "{name}");
        assert!(v["usage"]["output_tokens"].as_u64().unwrap() > 0, "{name}");
        let sent = mock.last_request().unwrap();
        assert_eq!(
            sent.path,
            upstream_path(proto, &upstream_model, false),
            "{name}"
        );
        let sent_body = sent.json().unwrap();
        if proto == Protocol::Responses {
            // Same protocol: passed through, model renamed, nothing else touched.
            assert_eq!(sent_body["model"], upstream_model);
            assert_eq!(sent_body["store"], true);
            assert_eq!(sent_body["instructions"], "Be terse.");
        }

        let mut sbody = body.clone();
        sbody["stream"] = json!(true);
        let r = gw
            .send(&authed("openai", "/v1/responses", KEY, &sbody))
            .await;
        assert_eq!(r.status, 200, "{name} stream");
        assert!(r
            .header("content-type")
            .unwrap()
            .starts_with("text/event-stream"));
        let (joined, datas) = check_grammar(&r.sse(), "response.completed");
        assert_eq!(joined, expected_reply(proto, &text), "{name} stream");
        let done = &datas.last().unwrap()["response"];
        assert_eq!(done["status"], "completed", "{name}");
        assert_eq!(done["model"], name, "{name}");
        assert_eq!(output_text(done), joined, "{name}");
        assert!(
            done["usage"]["output_tokens"].as_u64().unwrap() > 0,
            "{name}"
        );
        let sent = mock.last_request().unwrap();
        assert_eq!(
            sent.path,
            upstream_path(proto, &upstream_model, true),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_function_call_round_trip_works_on_every_upstream() {
    let (mock, gw) = start().await;
    let tools = json!([{"type": "function", "name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string"}}, "required": ["location"]}}]);
    for (proto, name) in CELLS {
        for stream in [false, true] {
            let ask = "weather please [[agent-tool:get_weather:{\"location\":\"Paris\"}]]";
            let first = json!({"model": name, "input": ask, "tools": tools, "stream": stream});
            let r = gw
                .send(&authed("openai", "/v1/responses", KEY, &first))
                .await;
            assert_eq!(r.status, 200, "{name}: {}", r.text());
            let out = if stream {
                let (_, datas) = check_grammar(&r.sse(), "response.completed");
                let args: Vec<&Value> = datas
                    .iter()
                    .filter(|d| d["type"] == "response.function_call_arguments.done")
                    .collect();
                assert_eq!(args.len(), 1, "{name}");
                datas.last().unwrap()["response"]["output"].clone()
            } else {
                r.json()["output"].clone()
            };
            let call = out
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["type"] == "function_call")
                .unwrap_or_else(|| panic!("{name}: no function_call in {out}"))
                .clone();
            assert_eq!(call["name"], "get_weather", "{name}");
            let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(args, json!({"location": "Paris"}), "{name}");
            let call_id = call["call_id"].as_str().unwrap().to_string();
            assert!(!call_id.is_empty());

            let mut input = vec![json!({"role": "user", "content": ask})];
            input.extend(out.as_array().unwrap().iter().cloned());
            input.push(
                json!({"type": "function_call_output", "call_id": call_id, "output": "sunny, 21C"}),
            );
            let second = json!({"model": name, "input": input, "tools": tools, "stream": stream});
            mock.clear();
            let r = gw
                .send(&authed("openai", "/v1/responses", KEY, &second))
                .await;
            assert_eq!(r.status, 200, "{name}: {}", r.text());
            let answer = if stream {
                check_grammar(&r.sse(), "response.completed").0
            } else {
                output_text(&r.json())
            };
            assert_eq!(
                answer,
                agent_tool_reply(proto, "sunny, 21C"),
                "{name} stream={stream}"
            );
            // The call id reached the upstream with the result (Gemini
            // pairs calls and results by name and order, without ids).
            if proto != Protocol::Gemini {
                assert!(
                    mock.last_request().unwrap().body_text().contains(&call_id),
                    "{name}"
                );
            }
        }
    }
}

#[tokio::test]
async fn every_client_family_reaches_a_responses_upstream() {
    let (mock, gw) = start().await;
    let text = "hello from another family";
    let expected = expected_reply(Protocol::Responses, text);
    // A
    let body = json!({"model": "rs/m-rs", "messages": [{"role": "user", "content": text}], "max_tokens": 100});
    let r = gw
        .send(&authed("openai", "/v1/chat/completions", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["choices"][0]["message"]["content"],
        expected.as_str()
    );
    let sent = mock.last_request().unwrap();
    assert_eq!(sent.path, "/responses-api/v1/responses");
    assert_eq!(
        sent.header("authorization"),
        Some(
            format!(
                "Bearer {}",
                crate::common::gateway::provider_key("responses")
            )
            .as_str()
        )
    );
    assert_eq!(sent.json().unwrap()["store"], false);
    let mut sbody = body.clone();
    sbody["stream"] = json!(true);
    let r = gw
        .send(&authed("openai", "/v1/chat/completions", KEY, &sbody))
        .await;
    let joined: String = r
        .sse()
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter_map(|e| {
            let v: Value = serde_json::from_str(&e.data).unwrap();
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(joined, expected);
    assert_eq!(r.sse().last().unwrap().data, "[DONE]");
    // B
    let body = json!({"model": "m-rs", "max_tokens": 100, "messages": [{"role": "user", "content": text}]});
    let r = gw
        .send(&authed("anthropic", "/anthropic/v1/messages", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["content"][0]["text"], expected.as_str());
    let mut sbody = body.clone();
    sbody["stream"] = json!(true);
    let r = gw
        .send(&authed("anthropic", "/anthropic/v1/messages", KEY, &sbody))
        .await;
    let events = r.sse();
    assert_eq!(
        events.last().unwrap().event.as_deref(),
        Some("message_stop")
    );
    let joined: String = events
        .iter()
        .filter(|e| e.event.as_deref() == Some("content_block_delta"))
        .filter_map(|e| {
            let v: Value = serde_json::from_str(&e.data).unwrap();
            v["delta"]["text"].as_str().map(str::to_string)
        })
        .collect();
    assert_eq!(joined, expected);
    // C
    let body = json!({"contents": [{"role": "user", "parts": [{"text": text}]}]});
    let r = gw
        .send(&authed(
            "gemini",
            "/google/v1beta/models/rs/m-rs:generateContent",
            KEY,
            &body,
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["candidates"][0]["content"]["parts"][0]["text"],
        expected.as_str()
    );
    let r = gw
        .send(&authed(
            "gemini",
            "/google/v1beta/models/rs/m-rs:streamGenerateContent?alt=sse",
            KEY,
            &body,
        ))
        .await;
    let joined: String = r
        .sse()
        .iter()
        .filter_map(|e| {
            let v: Value = serde_json::from_str(&e.data).unwrap();
            v["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(joined, expected);
}

#[tokio::test]
async fn a_provider_with_both_openai_protocols_serves_each_family_its_own() {
    let (mock, gw) = start().await;
    let r = gw
        .send(&authed(
            "openai",
            "/v1/responses",
            KEY,
            &json!({"model": "openai/gpt-both", "input": "x"}),
        ))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        mock.last_request().unwrap().path,
        "/responses-api/v1/responses"
    );
    let r = gw
        .send(&authed(
            "openai",
            "/v1/chat/completions",
            KEY,
            &json!({"model": "openai/gpt-both", "messages": [{"role": "user", "content": "x"}]}),
        ))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        mock.last_request().unwrap().path,
        "/openai/v1/chat/completions"
    );
}

#[tokio::test]
async fn reasoning_survives_a_round_trip_through_a_responses_client() {
    let (mock, gw) = start().await;
    // Anthropic thinking (with its signature) → a reasoning item → back.
    let first = json!({"model": "an/m-an", "input": "think [[thinking]]", "max_output_tokens": 4000,
        "reasoning": {"effort": "medium", "summary": "auto"}});
    let r = gw
        .send(&authed("openai", "/v1/responses", KEY, &first))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let out = r.json()["output"].clone();
    let reasoning = out
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "reasoning")
        .unwrap_or_else(|| panic!("no reasoning item in {out}"))
        .clone();
    assert_eq!(reasoning["summary"][0]["text"], THINKING_TEXT);
    assert!(reasoning["encrypted_content"].as_str().is_some());
    let mut input = vec![json!({"role": "user", "content": "think [[thinking]]"})];
    input.extend(out.as_array().unwrap().iter().cloned());
    input.push(json!({"role": "user", "content": "and again"}));
    mock.clear();
    let r = gw
        .send(&authed(
            "openai",
            "/v1/responses",
            KEY,
            &json!({"model": "an/m-an", "input": input, "max_output_tokens": 4000}),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = mock.last_request().unwrap().json().unwrap();
    let thinking = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "thinking")
        .unwrap_or_else(|| panic!("no thinking block upstream: {sent}"))
        .clone();
    assert_eq!(thinking["signature"], THINKING_SIGNATURE);
    assert_eq!(thinking["thinking"], THINKING_TEXT);

    // A Responses upstream's encrypted reasoning → an Anthropic client's
    // thinking signature → back to the Responses upstream unchanged.
    let r = gw
        .send(&authed(
            "anthropic",
            "/anthropic/v1/messages",
            KEY,
            &json!({"model": "m-rs", "max_tokens": 4000, "messages": [{"role": "user", "content": "think [[thinking]]"}]}),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let content = r.json()["content"].clone();
    assert!(content
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["type"] == "thinking"));
    mock.clear();
    let r = gw
        .send(&authed(
            "anthropic",
            "/anthropic/v1/messages",
            KEY,
            &json!({"model": "m-rs", "max_tokens": 4000, "messages": [
                {"role": "user", "content": "think [[thinking]]"},
                {"role": "assistant", "content": content},
                {"role": "user", "content": "and again"}
            ]}),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = mock.last_request().unwrap().json().unwrap();
    let item = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "reasoning")
        .unwrap_or_else(|| panic!("no reasoning item upstream: {sent}"))
        .clone();
    assert_eq!(item["encrypted_content"], REASONING_ENCRYPTED_CONTENT);
}

#[tokio::test]
async fn input_tokens_are_counted_locally() {
    let (mock, gw) = start().await;
    let body = json!({"model": "an/m-an", "instructions": "Be terse.", "input": "Count these words, please."});
    let r = gw
        .send(&authed("openai", "/v1/responses/input_tokens", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "response.input_tokens");
    let n = v["input_tokens"].as_u64().unwrap();
    // The same text through family B's count route gives the same count.
    let b = json!({"model": "m-an", "system": "Be terse.", "messages": [{"role": "user", "content": "Count these words, please."}]});
    let rb = gw
        .send(&authed(
            "anthropic",
            "/anthropic/v1/messages/count_tokens",
            KEY,
            &b,
        ))
        .await;
    assert_eq!(rb.status, 200, "{}", rb.text());
    assert!(n > 0);
    assert!(
        n.abs_diff(rb.json()["input_tokens"].as_u64().unwrap()) <= 2,
        "{n} vs {}",
        rb.text()
    );
    assert!(mock.requests().is_empty(), "counted locally");
}

#[tokio::test]
async fn refusals_say_why_and_call_no_upstream() {
    let (mock, gw) = start().await;
    let cases = [
        (
            json!({"model": "rs/m-rs", "input": "x", "previous_response_id": "resp_123"}),
            "previous_response_id",
            "Previous response with id 'resp_123' not found.",
        ),
        (
            json!({"model": "rs/m-rs", "input": "x", "conversation": "conv_1"}),
            "conversation",
            "stored conversations",
        ),
        (
            json!({"model": "an/m-an", "input": "x", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}}),
            "tool_choice",
            "web_search",
        ),
        (json!({"model": "an/m-an"}), "input", "input is required"),
        (
            json!({"model": "an/m-an", "input": "x", "temperature": 3}),
            "temperature",
            "temperature",
        ),
    ];
    for (body, param, says) in cases {
        let r = gw
            .send(&authed("openai", "/v1/responses", KEY, &body))
            .await;
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        let e = r.json();
        assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
        assert_eq!(e["error"]["param"], param, "{e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(says),
            "{e}"
        );
    }
    assert!(mock.requests().is_empty());
    // A strict key: a built-in tool off a Responses upstream is refused.
    let body = json!({"model": "an/m-an", "input": "x", "tools": [{"type": "web_search"}]});
    let r = gw
        .send(&authed("openai", "/v1/responses", STRICT, &body))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], "tools[0]");
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("responses upstream"));
    assert!(mock.requests().is_empty());
    // Under adapt it is cut, and said.
    let r = gw
        .send(&authed("openai", "/v1/responses", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("x-switchboard-adjusted"),
        Some("dropped=tools.web_search")
    );
    let sent = mock.last_request().unwrap().json().unwrap();
    assert!(sent.get("tools").is_none(), "{sent}");
    // Built-in tools pass through to a Responses upstream.
    let body = json!({"model": "rs/m-rs", "input": "search", "tools": [{"type": "web_search"}]});
    let r = gw
        .send(&authed("openai", "/v1/responses", KEY, &body))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        mock.last_request().unwrap().json().unwrap()["tools"][0]["type"],
        "web_search"
    );
    // No key: 401 in OpenAI's shape.
    let r = gw
        .send(&crate::common::http_client::Request::post("/v1/responses").json(&body))
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["type"], "authentication_error");
    // No stored response of that id (module responses_store has the store).
    for (method, path) in [
        ("GET", "/v1/responses/resp_1"),
        ("DELETE", "/v1/responses/resp_1"),
        ("GET", "/v1/responses/resp_1/input_items"),
    ] {
        let r = gw
            .send(
                &crate::common::http_client::Request::new(method, path)
                    .header("authorization", &format!("Bearer {KEY}")),
            )
            .await;
        assert_eq!(r.status, 404, "{method} {path}");
        assert_eq!(
            r.json()["error"]["message"],
            "Response with id 'resp_1' not found."
        );
    }
    let r = gw
        .send(&crate::common::http_client::Request::get("/v1/responses"))
        .await;
    assert_eq!(r.status, 405);
}

#[tokio::test]
async fn a_failure_mid_stream_ends_with_error_then_response_failed() {
    let (_mock, gw) = start().await;
    for (proto, name) in CELLS {
        for marker in ["[[stream-error]]", "[[cut]]"] {
            let body = json!({"model": name, "input": format!("a b c d e f g h {marker}"), "stream": true});
            let r = gw
                .send(&authed("openai", "/v1/responses", KEY, &body))
                .await;
            assert_eq!(r.status, 200, "{name} {marker}");
            let events = r.sse();
            let n = events.len();
            assert!(n >= 2, "{name} {marker}: {events:?}");
            assert_eq!(
                events[n - 2].event.as_deref(),
                Some("error"),
                "{} {name} {marker}: {events:?}",
                proto.name()
            );
            let failed: Value = serde_json::from_str(&events[n - 1].data).unwrap();
            assert_eq!(failed["type"], "response.failed", "{name} {marker}");
            assert_eq!(failed["response"]["status"], "failed", "{name} {marker}");
            let created: Value = serde_json::from_str(&events[0].data).unwrap();
            assert_eq!(
                failed["response"]["id"], created["response"]["id"],
                "{name} {marker}: the failed response is the one created"
            );
            let err: Value = serde_json::from_str(&events[n - 2].data).unwrap();
            assert!(err["message"].as_str().is_some(), "{err}");
            // Sequence numbers stay consecutive through the failure.
            let seqs: Vec<u64> = events
                .iter()
                .map(|e| {
                    serde_json::from_str::<Value>(&e.data).unwrap()["sequence_number"]
                        .as_u64()
                        .unwrap()
                })
                .collect();
            assert!(
                seqs.windows(2).all(|w| w[1] == w[0] + 1),
                "{name} {marker}: {seqs:?}"
            );
        }
    }
}

/// The body Codex CLI 0.169.0 sends on its first turn, as captured by the
/// real-clients suite (`tests/clients/fixtures`): developer messages, item
/// ids, `client_metadata`, a `namespace` tool and a `web_search` built-in.
fn codex_first_turn(model: &str, text: &str) -> Value {
    let captured: Value = serde_json::from_str(include_str!(
        "../clients/fixtures/codex-0.169.0-first-turn.json"
    ))
    .unwrap();
    let mut body = captured["body"].clone();
    body["model"] = json!(model);
    let input = body["input"].as_array_mut().unwrap();
    let last = input.last_mut().unwrap();
    last["content"] = json!([{"type": "input_text", "text": text}]);
    body
}

#[tokio::test]
async fn codex_cli_first_turn_is_answered_on_every_upstream() {
    let (mock, gw) = start().await;
    for (proto, name) in CELLS {
        let text = format!("codex says hi to {}", proto.name());
        let body = codex_first_turn(name, &text);
        mock.clear();
        let r = gw
            .send(&authed("openai", "/v1/responses", KEY, &body))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        let (joined, _) = check_grammar(&r.sse(), "response.completed");
        // Anthropic merges Codex's consecutive user messages (the
        // environment context, then the prompt) into one turn.
        let want = expected_reply(proto, &text);
        assert!(
            joined.ends_with(&want[want.find(&text).unwrap()..]),
            "{name}: {joined}"
        );
        assert!(
            joined.starts_with(&want[..want.find(&text).unwrap()]),
            "{name}: {joined}"
        );
        let sent = mock.last_request().unwrap().json().unwrap();
        if proto == Protocol::Responses {
            // Passed through: the built-in tool goes with it.
            assert!(sent["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["type"] == "web_search"));
        } else {
            // Translated: what the target cannot carry is dropped and said.
            let adjusted = r.header("x-switchboard-adjusted").unwrap_or_default();
            assert!(adjusted.contains("web_search"), "{name}: {adjusted}");
            assert!(
                sent.to_string().contains("exec_command"),
                "{name}: function tools kept"
            );
        }
    }
}

/// The function names a translated upstream body declares (OpenAI chat
/// `tools[].function.name`, Anthropic `tools[].name`, Gemini
/// `functionDeclarations[].name`).
fn declared_names(proto: Protocol, sent: &Value) -> Vec<String> {
    let tools = sent["tools"].as_array().cloned().unwrap_or_default();
    let names: Vec<&Value> = match proto {
        Protocol::OpenAi => tools.iter().map(|t| &t["function"]["name"]).collect(),
        Protocol::Anthropic => tools.iter().map(|t| &t["name"]).collect(),
        _ => tools
            .iter()
            .filter_map(|t| t["functionDeclarations"].as_array())
            .flatten()
            .map(|d| &d["name"])
            .collect(),
    };
    names
        .into_iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect()
}

/// The upstream body's call of `name` in the history, and the text of the
/// tool result the upstream model reads (Gemini: its `response` object).
fn history_call_and_result(proto: Protocol, sent: &Value) -> (Vec<String>, Value) {
    let s = |v: &Value| v.as_str().map(str::to_string);
    match proto {
        Protocol::OpenAi => {
            let msgs = sent["messages"].as_array().unwrap();
            let calls = msgs
                .iter()
                .filter_map(|m| m["tool_calls"].as_array())
                .flatten()
                .filter_map(|c| s(&c["function"]["name"]))
                .collect();
            let result = msgs.iter().find(|m| m["role"] == "tool").unwrap();
            (calls, result["content"].clone())
        }
        Protocol::Anthropic => {
            let blocks: Vec<&Value> = sent["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|m| m["content"].as_array())
                .flatten()
                .collect();
            let calls = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .filter_map(|b| s(&b["name"]))
                .collect();
            let result = blocks.iter().find(|b| b["type"] == "tool_result").unwrap();
            (calls, result["content"].clone())
        }
        _ => {
            let parts: Vec<&Value> = sent["contents"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["parts"].as_array())
                .flatten()
                .collect();
            let calls = parts
                .iter()
                .filter_map(|p| s(&p["functionCall"]["name"]))
                .collect();
            let result = parts
                .iter()
                .find_map(|p| p.get("functionResponse"))
                .unwrap();
            (calls, result["response"].clone())
        }
    }
}

/// Codex's `multi_agent_v1` namespace on every translated upstream: each
/// member reaches the upstream as `multi_agent_v1__<tool>`, the model's call
/// of one comes back as a `function_call` with `namespace` and the tool's own
/// name (whole and streamed), and the next turn's history and tool result
/// reach the upstream flattened the same way.
#[tokio::test]
async fn codex_namespace_tools_are_flattened_and_restored_on_every_upstream() {
    let (mock, gw) = start().await;
    let marker = r#"[[agent-tool:multi_agent_v1__spawn_agent:{"message":"review the patch"}]]"#;
    for (proto, name) in CELLS {
        if proto == Protocol::Responses {
            continue;
        }
        for stream in [false, true] {
            let tag = format!("{name} stream={stream}");
            let mut body = codex_first_turn(name, &format!("delegate it {marker}"));
            body["stream"] = json!(stream);
            mock.clear();
            let r = gw
                .send(&authed("openai", "/v1/responses", KEY, &body))
                .await;
            assert_eq!(r.status, 200, "{tag}: {}", r.text());
            let adjusted = r.header("x-switchboard-adjusted").unwrap_or_default();
            assert!(!adjusted.contains("namespace"), "{tag}: {adjusted}");
            let sent = mock.last_request().unwrap().json().unwrap();
            let declared = declared_names(proto, &sent);
            for member in ["spawn_agent", "wait_agent", "close_agent"] {
                assert!(
                    declared.contains(&format!("multi_agent_v1__{member}")),
                    "{tag}: {declared:?}"
                );
            }
            assert!(declared.contains(&"exec_command".to_string()), "{tag}");
            let out = if stream {
                let (_, datas) = check_grammar(&r.sse(), "response.completed");
                let added: Vec<&Value> = datas
                    .iter()
                    .filter(|d| d["type"] == "response.output_item.added")
                    .map(|d| &d["item"])
                    .filter(|i| i["type"] == "function_call")
                    .collect();
                assert_eq!(added.len(), 1, "{tag}");
                assert_eq!(added[0]["namespace"], "multi_agent_v1", "{tag}");
                assert_eq!(added[0]["name"], "spawn_agent", "{tag}");
                let done: Vec<&Value> = datas
                    .iter()
                    .filter(|d| d["type"] == "response.function_call_arguments.done")
                    .collect();
                assert_eq!(done[0]["name"], "spawn_agent", "{tag}");
                datas.last().unwrap()["response"]["output"].clone()
            } else {
                r.json()["output"].clone()
            };
            let call = out
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["type"] == "function_call")
                .unwrap_or_else(|| panic!("{tag}: no function_call in {out}"))
                .clone();
            assert_eq!(call["namespace"], "multi_agent_v1", "{tag}: {call}");
            assert_eq!(call["name"], "spawn_agent", "{tag}: {call}");
            let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(args, json!({"message": "review the patch"}), "{tag}");

            // Codex's next turn: the call (with its namespace) and its output.
            let call_id = call["call_id"].as_str().unwrap().to_string();
            let mut next = body.clone();
            let input = next["input"].as_array_mut().unwrap();
            input.extend(out.as_array().unwrap().iter().cloned());
            input.push(json!({"type": "function_call_output", "call_id": call_id,
                "output": "agent_7 started"}));
            mock.clear();
            let r = gw
                .send(&authed("openai", "/v1/responses", KEY, &next))
                .await;
            assert_eq!(r.status, 200, "{tag}: {}", r.text());
            let answer = if stream {
                check_grammar(&r.sse(), "response.completed").0
            } else {
                output_text(&r.json())
            };
            assert_eq!(answer, agent_tool_reply(proto, "agent_7 started"), "{tag}");
            let sent = mock.last_request().unwrap().json().unwrap();
            let (calls, result) = history_call_and_result(proto, &sent);
            assert_eq!(calls, ["multi_agent_v1__spawn_agent"], "{tag}");
            let want = if proto == Protocol::Gemini {
                json!({"output": "agent_7 started"})
            } else {
                json!("agent_7 started")
            };
            assert_eq!(result, want, "{tag}");
        }
    }
}

#[tokio::test]
async fn the_policy_adapts_or_refuses_responses_requests() {
    let (mock, gw) = start().await;
    // Codex-like knobs on models that take none of them.
    let body = json!({"model": "rs/plain-rs", "input": "x", "max_output_tokens": 100000,
        "reasoning": {"effort": "high", "summary": "auto"}, "prompt_cache_key": "k",
        "parallel_tool_calls": true, "metadata": {"a": "b"}});
    for (name, upstream_cap) in [
        ("rs/plain-rs", "max_output_tokens"),
        ("an/plain-an", "max_tokens"),
    ] {
        let mut b = body.clone();
        b["model"] = json!(name);
        let r = gw.send(&authed("openai", "/v1/responses", KEY, &b)).await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        let adjusted = r.header("x-switchboard-adjusted").unwrap().to_string();
        assert!(
            adjusted.contains("max_output_tokens=8192 (was 100000)"),
            "{name}: {adjusted}"
        );
        for dropped in [
            "reasoning",
            "prompt_cache_key",
            "parallel_tool_calls",
            "metadata",
        ] {
            assert!(
                adjusted.contains(dropped),
                "{name}: {adjusted} lacks {dropped}"
            );
        }
        let sent = mock.last_request().unwrap().json().unwrap();
        assert_eq!(sent[upstream_cap], 8192, "{name}: {sent}");
        for gone in ["reasoning", "prompt_cache_key", "metadata"] {
            assert!(
                sent.get(gone).is_none(),
                "{name}: {gone} reached the upstream: {sent}"
            );
        }
        let r = gw
            .send(&authed("openai", "/v1/responses", STRICT, &b))
            .await;
        assert_eq!(r.status, 400, "{name} strict");
        assert_eq!(r.json()["error"]["param"], "max_output_tokens", "{name}");
    }
}
