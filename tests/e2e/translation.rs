//! End-to-end: every cross-protocol pair (client family → upstream protocol),
//! non-streaming, through the real binary and the mock upstream: text, system
//! prompt, images, tools and tool calls, usage, stop reasons, model names.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::gateway::{authed, provider_key, Gateway, KEY};
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol, TOOL_ARGS};
use serde_json::{json, Value};

/// (client family, upstream protocol, model as the client names it).
const PAIRS: &[(&str, Protocol, &str)] = &[
    ("openai", Protocol::Anthropic, "anthropic/claude-sonnet-4.7"),
    ("openai", Protocol::Gemini, "google/gemini-3.1-pro"),
    ("anthropic", Protocol::OpenAi, "gpt-5-any"),
    ("anthropic", Protocol::Gemini, "gemini-any"),
    ("gemini", Protocol::OpenAi, "deepseek/deepseek-v4-pro"),
    ("gemini", Protocol::Anthropic, "kimi/kimi-2.6"),
];

const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn bare(model: &str) -> &str {
    model.rsplit('/').next().unwrap()
}

/// A request in the client's protocol: system prompt, one earlier turn, an image, a tool.
fn request(family: &str, model: &str, text: &str, with_tool: bool) -> (String, Value) {
    match family {
        "openai" => {
            let mut body = json!({
                "model": model,
                "max_tokens": 200,
                "messages": [
                    {"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "earlier question"},
                    {"role": "assistant", "content": "earlier answer"},
                    {"role": "user", "content": [
                        {"type": "text", "text": text},
                        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_B64}")}}
                    ]}
                ]
            });
            if with_tool {
                body["tools"] = json!([{"type": "function", "function": {"name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string"}}, "required": ["location"]}}}]);
            }
            ("/v1/chat/completions".into(), body)
        }
        "anthropic" => {
            let mut body = json!({
                "model": model,
                "max_tokens": 200,
                "system": "You are terse.",
                "messages": [
                    {"role": "user", "content": "earlier question"},
                    {"role": "assistant", "content": "earlier answer"},
                    {"role": "user", "content": [
                        {"type": "text", "text": text},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
                    ]}
                ]
            });
            if with_tool {
                body["tools"] = json!([{"name": "get_weather", "description": "Weather for a city",
                    "input_schema": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string"}}, "required": ["location"]}}]);
            }
            ("/anthropic/v1/messages".into(), body)
        }
        _ => {
            let mut body = json!({
                "systemInstruction": {"parts": [{"text": "You are terse."}]},
                "contents": [
                    {"role": "user", "parts": [{"text": "earlier question"}]},
                    {"role": "model", "parts": [{"text": "earlier answer"}]},
                    {"role": "user", "parts": [{"text": text}, {"inlineData": {"mimeType": "image/png", "data": PNG_B64}}]}
                ],
                "generationConfig": {"maxOutputTokens": 200}
            });
            if with_tool {
                body["tools"] = json!([{"functionDeclarations": [{"name": "get_weather", "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string"}}, "required": ["location"]}}]}]);
            }
            (
                format!("/google/v1beta/models/{model}:generateContent"),
                body,
            )
        }
    }
}

/// The reply text of a client-family response.
fn reply_text(family: &str, v: &Value) -> String {
    match family {
        "openai" => v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        "anthropic" => v["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "text")
            .map(|b| b["text"].as_str().unwrap())
            .collect(),
        _ => v["candidates"][0]["content"]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect(),
    }
}

/// What the upstream received, checked in the upstream's own shape.
fn assert_upstream_request(upstream: Protocol, body: &Value, text: &str) {
    match upstream {
        Protocol::OpenAi => {
            let msgs = body["messages"].as_array().unwrap();
            assert_eq!(msgs[0]["role"], "system");
            assert!(msgs[0]["content"].to_string().contains("You are terse."));
            assert_eq!(msgs[1]["role"], "user");
            assert_eq!(msgs[2]["role"], "assistant");
            let last = msgs.last().unwrap().to_string();
            assert!(
                last.contains(text) && last.contains("image_url") && last.contains(PNG_B64),
                "{last}"
            );
        }
        Protocol::Anthropic => {
            assert!(body["system"].to_string().contains("You are terse."));
            assert!(body["max_tokens"].as_u64().unwrap() > 0);
            let msgs = body["messages"].as_array().unwrap();
            assert_eq!(msgs.len(), 3);
            let last = msgs[2].to_string();
            assert!(
                last.contains(text) && last.contains("\"base64\"") && last.contains(PNG_B64),
                "{last}"
            );
        }
        Protocol::Gemini => {
            assert!(body["systemInstruction"]
                .to_string()
                .contains("You are terse."));
            let contents = body["contents"].as_array().unwrap();
            assert_eq!(contents[1]["role"], "model");
            let last = contents[2].to_string();
            assert!(
                last.contains(text) && last.contains("inlineData") && last.contains(PNG_B64),
                "{last}"
            );
        }
        Protocol::Responses => {
            let input = body["input"].as_array().unwrap();
            let system = input
                .iter()
                .filter(|i| i["role"] == "system" || i["role"] == "developer")
                .map(Value::to_string)
                .chain(body.get("instructions").map(Value::to_string))
                .collect::<String>();
            assert!(system.contains("You are terse."), "{body}");
            let last = input.last().unwrap();
            assert_eq!(last["role"], "user");
            let last = last.to_string();
            assert!(
                last.contains(text) && last.contains("input_image") && last.contains(PNG_B64),
                "{last}"
            );
        }
    }
}

#[tokio::test]
async fn text_system_image_and_usage_for_every_pair() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    for (family, upstream, model) in PAIRS {
        mock.clear();
        let text = format!("Bonjour from {family} to {} ✓", upstream.name());
        let (path, body) = request(family, model, &text, false);
        let r = gw.send(&authed(family, &path, KEY, &body)).await;
        assert_eq!(r.status, 200, "{family}→{}: {}", upstream.name(), r.text());
        let v = r.json();
        assert_eq!(
            reply_text(family, &v),
            expected_reply(*upstream, &text),
            "{family}→{}",
            upstream.name()
        );
        match *family {
            "openai" => {
                assert_eq!(v["object"], "chat.completion");
                assert_eq!(v["model"], *model);
                assert_eq!(v["choices"][0]["finish_reason"], "stop");
                assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
                assert!(v["usage"]["completion_tokens"].as_u64().unwrap() > 0);
            }
            "anthropic" => {
                assert_eq!(v["type"], "message");
                assert_eq!(v["role"], "assistant");
                assert_eq!(v["model"], bare(model));
                assert_eq!(v["stop_reason"], "end_turn");
                assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);
            }
            _ => {
                assert_eq!(v["modelVersion"], bare(model));
                assert_eq!(v["candidates"][0]["finishReason"], "STOP");
                assert_eq!(v["candidates"][0]["content"]["role"], "model");
                assert!(v["usageMetadata"]["promptTokenCount"].as_u64().unwrap() > 0);
            }
        }
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 1, "{family}→{}", upstream.name());
        let got = &reqs[0];
        let got_body = got.json().unwrap();
        assert_upstream_request(*upstream, &got_body, &text);
        // the client's key never reaches the upstream; the provider's key does
        let raw = format!("{:?}{}", got.headers, got.body_text());
        assert!(!raw.contains(KEY), "client key leaked upstream");
        let pk = provider_key(upstream.name());
        let key_header = match upstream {
            Protocol::OpenAi | Protocol::Responses => got
                .header("authorization")
                .map(|h| h.trim_start_matches("Bearer ").to_string()),
            Protocol::Anthropic => got.header("x-api-key").map(str::to_string),
            Protocol::Gemini => got.header("x-goog-api-key").map(str::to_string),
        };
        assert_eq!(key_header.as_deref(), Some(pk.as_str()));
        if *upstream == Protocol::Anthropic {
            assert_eq!(got.header("anthropic-version"), Some("2023-06-01"));
        }
        if *upstream == Protocol::Gemini {
            assert!(
                got.path_only()
                    .ends_with(&format!("/models/{}:generateContent", bare(model))),
                "{}",
                got.path
            );
        } else {
            let upstream_name = if *model == "anthropic/claude-sonnet-4.7" {
                "claude-sonnet-4-7"
            } else {
                bare(model)
            };
            assert_eq!(
                got_body["model"], upstream_name,
                "catalog upstream_model is sent"
            );
        }
    }
}

#[tokio::test]
async fn tool_calls_for_every_pair() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let want_args: Value = serde_json::from_str(TOOL_ARGS).unwrap();
    for (family, upstream, model) in PAIRS {
        let (path, body) = request(family, model, "weather please [[tool]]", true);
        let r = gw.send(&authed(family, &path, KEY, &body)).await;
        assert_eq!(r.status, 200, "{family}→{}: {}", upstream.name(), r.text());
        let v = r.json();
        match *family {
            "openai" => {
                let call = &v["choices"][0]["message"]["tool_calls"][0];
                assert_eq!(call["type"], "function");
                assert_eq!(call["function"]["name"], "get_weather");
                assert!(call["id"].as_str().is_some_and(|s| !s.is_empty()));
                let args: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                assert_eq!(args, want_args);
                assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
            }
            "anthropic" => {
                let call = v["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|b| b["type"] == "tool_use")
                    .unwrap();
                assert_eq!(call["name"], "get_weather");
                assert_eq!(call["input"], want_args);
                assert!(call["id"].as_str().is_some_and(|s| !s.is_empty()));
                assert_eq!(v["stop_reason"], "tool_use");
            }
            _ => {
                let parts = v["candidates"][0]["content"]["parts"].as_array().unwrap();
                let call = parts.iter().find_map(|p| p.get("functionCall")).unwrap();
                assert_eq!(call["name"], "get_weather");
                assert_eq!(call["args"], want_args);
            }
        }
    }
}

#[tokio::test]
async fn tool_results_round_trip_to_every_upstream() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    for (family, upstream, model) in PAIRS {
        mock.clear();
        let (path, mut body) = request(family, model, "thanks", true);
        // append an assistant tool call and its result before the final user turn
        match *family {
            "openai" => {
                let msgs = body["messages"].as_array_mut().unwrap();
                let last = msgs.pop().unwrap();
                msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": TOOL_ARGS}}]}));
                msgs.push(
                    json!({"role": "tool", "tool_call_id": "call_1", "content": "18 degrees"}),
                );
                msgs.push(last);
            }
            "anthropic" => {
                let msgs = body["messages"].as_array_mut().unwrap();
                let last = msgs.pop().unwrap();
                msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris", "unit": "c"}}]}));
                msgs.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 degrees"}]}));
                msgs.push(json!({"role": "assistant", "content": "noted"}));
                msgs.push(last);
            }
            _ => {
                let contents = body["contents"].as_array_mut().unwrap();
                let last = contents.pop().unwrap();
                contents.push(json!({"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"location": "Paris", "unit": "c"}}}]}));
                contents.push(json!({"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"result": "18 degrees"}}}]}));
                contents.push(json!({"role": "model", "parts": [{"text": "noted"}]}));
                contents.push(last);
            }
        }
        let r = gw.send(&authed(family, &path, KEY, &body)).await;
        assert_eq!(r.status, 200, "{family}→{}: {}", upstream.name(), r.text());
        let sent = mock.last_request().unwrap().json().unwrap();
        let s = sent.to_string();
        assert!(
            s.contains("18 degrees"),
            "{family}→{}: tool result lost: {s}",
            upstream.name()
        );
        match upstream {
            Protocol::OpenAi => {
                let msgs = sent["messages"].as_array().unwrap();
                let call = msgs.iter().find(|m| m.get("tool_calls").is_some()).unwrap();
                let id = call["tool_calls"][0]["id"].as_str().unwrap();
                let result = msgs.iter().find(|m| m["role"] == "tool").unwrap();
                assert_eq!(
                    result["tool_call_id"], id,
                    "tool call id and result id must match"
                );
                // The bare result, whichever family sent it (a Gemini
                // client's `{"result": …}` unwrapped).
                assert_eq!(result["content"], "18 degrees", "{family}");
            }
            Protocol::Anthropic => {
                let blocks: Vec<&Value> = sent["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|m| m["content"].as_array())
                    .flatten()
                    .collect();
                let call = blocks.iter().find(|b| b["type"] == "tool_use").unwrap();
                let result = blocks.iter().find(|b| b["type"] == "tool_result").unwrap();
                assert_eq!(result["tool_use_id"], call["id"]);
                assert_eq!(result["content"], "18 degrees", "{family}");
            }
            Protocol::Gemini => {
                let parts: Vec<&Value> = sent["contents"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|c| c["parts"].as_array())
                    .flatten()
                    .collect();
                assert!(parts
                    .iter()
                    .any(|p| p["functionCall"]["name"] == "get_weather"));
                let fr = parts
                    .iter()
                    .find_map(|p| p.get("functionResponse"))
                    .unwrap();
                assert_eq!(fr["name"], "get_weather");
                // Text wrapped as Gemini documents it.
                assert_eq!(fr["response"], json!({"output": "18 degrees"}), "{family}");
            }
            Protocol::Responses => {
                let items = sent["input"].as_array().unwrap();
                let call = items.iter().find(|i| i["type"] == "function_call").unwrap();
                let result = items
                    .iter()
                    .find(|i| i["type"] == "function_call_output")
                    .unwrap();
                assert_eq!(result["call_id"], call["call_id"]);
            }
        }
    }
}

/// Tool results that are not plain text keep their shape across families:
/// an Anthropic client's JSON object result reaches a Gemini upstream as that
/// object and its error result as `{"error": …}`; a Gemini client's
/// `{"error": …}` reaches an Anthropic upstream as an error result, and any
/// other response object as its JSON text.
#[tokio::test]
async fn structured_and_error_tool_results_keep_their_shape() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let (path, mut body) = request("anthropic", "gemini-any", "thanks", true);
    let msgs = body["messages"].as_array_mut().unwrap();
    let last = msgs.pop().unwrap();
    msgs.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"location": "Nowhere"}}]}));
    msgs.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"sky\":\"clear\",\"temp\":18}"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "unknown city", "is_error": true}]}));
    msgs.push(json!({"role": "assistant", "content": "noted"}));
    msgs.push(last);
    let r = gw.send(&authed("anthropic", &path, KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = mock.last_request().unwrap().json().unwrap();
    let responses: Vec<Value> = sent["contents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter_map(|p| p.pointer("/functionResponse/response").cloned())
        .collect();
    assert_eq!(
        responses,
        [
            json!({"sky": "clear", "temp": 18}),
            json!({"error": "unknown city"})
        ]
    );

    let (path, mut body) = request("gemini", "kimi/kimi-2.6", "thanks", true);
    let contents = body["contents"].as_array_mut().unwrap();
    let last = contents.pop().unwrap();
    contents.push(json!({"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}}},
        {"functionCall": {"name": "get_weather", "args": {"location": "Nowhere"}}}]}));
    contents.push(json!({"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"sky": "clear", "temp": 18}}},
        {"functionResponse": {"name": "get_weather", "response": {"error": "unknown city"}}}]}));
    contents.push(json!({"role": "model", "parts": [{"text": "noted"}]}));
    contents.push(last);
    let r = gw.send(&authed("gemini", &path, KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = mock.last_request().unwrap().json().unwrap();
    let results: Vec<(Value, Value)> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            (
                b["content"].clone(),
                b.get("is_error").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            (json!("{\"sky\":\"clear\",\"temp\":18}"), Value::Null),
            (json!("unknown city"), json!(true))
        ]
    );
}

#[tokio::test]
async fn upstream_errors_come_back_in_the_client_shape() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    for (family, upstream, model) in PAIRS {
        let (path, body) = request(family, model, "boom [[status:503]]", false);
        let r = gw.send(&authed(family, &path, KEY, &body)).await;
        assert_eq!(r.status, 503, "{family}→{}", upstream.name());
        let v = r.json();
        match *family {
            "openai" => assert!(v["error"]["message"].as_str().unwrap().contains("503")),
            "anthropic" => assert_eq!(v["type"], "error"),
            _ => assert_eq!(v["error"]["status"], "UNAVAILABLE"),
        }
    }
}

#[tokio::test]
async fn fails_over_to_the_next_upstream_before_the_first_byte() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let (path, body) = request("openai", "flaky/flaky-model", "are you there", false);
    let r = gw.send(&authed("openai", &path, KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        reply_text("openai", &v),
        expected_reply(Protocol::Anthropic, "are you there")
    );
    assert_eq!(v["model"], "flaky/flaky-model");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert!(
        reqs[0].path_only().ends_with("/messages"),
        "answered by the anthropic upstream"
    );
    // a 400 from the upstream is the client's problem: no failover
    let (path, body) = request("openai", "flaky/flaky-model", "bad [[status:400]]", false);
    assert_eq!(
        gw.send(&authed("openai", &path, KEY, &body)).await.status,
        400
    );
}

/// Makes a request of `request()` a streaming one.
fn streaming(family: &str, path: String, mut body: Value, json_array: bool) -> (String, Value) {
    match family {
        "gemini" => {
            let p = path.replace(":generateContent", ":streamGenerateContent");
            (
                if json_array {
                    p
                } else {
                    format!("{p}?alt=sse")
                },
                body,
            )
        }
        _ => {
            body["stream"] = json!(true);
            (path, body)
        }
    }
}

/// Text, tool calls and the end marker a client stream carries, in the client's terms.
#[derive(Debug, Default)]
struct Streamed {
    text: String,
    tool_name: Option<String>,
    tool_args: String,
    finished: bool,
    errored: bool,
    usage_seen: bool,
}

fn read_stream(family: &str, r: &crate::common::http_client::Response) -> Streamed {
    let mut s = Streamed::default();
    match family {
        "openai" => {
            for ev in r.sse() {
                if ev.data == "[DONE]" {
                    s.finished = true;
                    continue;
                }
                let v = ev.json().unwrap();
                if v.get("error").is_some() {
                    s.errored = true;
                    continue;
                }
                assert_eq!(v["object"], "chat.completion.chunk");
                if v.get("usage").is_some_and(|u| !u.is_null()) {
                    s.usage_seen = true;
                }
                let Some(choice) = v["choices"].get(0) else {
                    continue;
                };
                if let Some(t) = choice["delta"]["content"].as_str() {
                    s.text.push_str(t);
                }
                if let Some(calls) = choice["delta"]["tool_calls"].as_array() {
                    for c in calls {
                        if let Some(n) = c["function"]["name"].as_str() {
                            s.tool_name = Some(n.to_string());
                        }
                        if let Some(a) = c["function"]["arguments"].as_str() {
                            s.tool_args.push_str(a);
                        }
                    }
                }
            }
        }
        "anthropic" => {
            let events = r.sse();
            assert_eq!(
                events.first().and_then(|e| e.event.as_deref()),
                Some("message_start"),
                "{}",
                r.text()
            );
            for ev in events {
                let v = ev.json().unwrap();
                match ev.event.as_deref().unwrap_or("") {
                    "content_block_start" if v["content_block"]["type"] == "tool_use" => {
                        s.tool_name = v["content_block"]["name"].as_str().map(str::to_string);
                    }
                    "content_block_delta" => match v["delta"]["type"].as_str().unwrap() {
                        "text_delta" => s.text.push_str(v["delta"]["text"].as_str().unwrap()),
                        "input_json_delta" => s
                            .tool_args
                            .push_str(v["delta"]["partial_json"].as_str().unwrap()),
                        _ => {}
                    },
                    "message_delta" => s.usage_seen = v["usage"]["output_tokens"].is_u64(),
                    "message_stop" => s.finished = true,
                    "error" => s.errored = true,
                    _ => {}
                }
            }
        }
        _ => {
            let docs: Vec<Value> = if r.header("content-type") == Some("application/json") {
                r.json().as_array().unwrap().clone()
            } else {
                r.sse().iter().map(|e| e.json().unwrap()).collect()
            };
            for v in docs {
                if v.get("error").is_some() {
                    s.errored = true;
                    continue;
                }
                let cand = &v["candidates"][0];
                for p in cand["content"]["parts"].as_array().into_iter().flatten() {
                    if let Some(t) = p["text"].as_str() {
                        if p["thought"] != json!(true) {
                            s.text.push_str(t);
                        }
                    }
                    if let Some(fc) = p.get("functionCall") {
                        s.tool_name = fc["name"].as_str().map(str::to_string);
                        s.tool_args = fc["args"].to_string();
                    }
                }
                if cand.get("finishReason").is_some() {
                    s.finished = true;
                }
                if v.get("usageMetadata").is_some() {
                    s.usage_seen = true;
                }
            }
        }
    }
    s
}

#[tokio::test]
async fn streams_for_every_pair() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let want_args: Value = serde_json::from_str(TOOL_ARGS).unwrap();
    for (family, upstream, model) in PAIRS {
        for json_array in [false, true] {
            if json_array && *family != "gemini" {
                continue;
            }
            let cell = format!("{family}→{} (json array: {json_array})", upstream.name());
            let text = format!("stream me ✓ {family}");
            let (path, body) = request(family, model, &text, false);
            let (path, mut body) = streaming(family, path, body, json_array);
            if *family == "openai" {
                body["stream_options"] = json!({"include_usage": true});
            }
            let r = gw.send(&authed(family, &path, KEY, &body)).await;
            assert_eq!(r.status, 200, "{cell}: {}", r.text());
            assert!(r.header("content-length").is_none(), "{cell}");
            let s = read_stream(family, &r);
            assert_eq!(s.text, expected_reply(*upstream, &text), "{cell}");
            assert!(s.finished && !s.errored, "{cell}: {s:?}\n{}", r.text());
            assert!(s.usage_seen, "{cell}: usage missing");
            // the upstream was asked for a stream in its own protocol
            let got = mock.last_request().unwrap();
            match upstream {
                Protocol::Gemini => assert!(
                    got.path.contains(":streamGenerateContent") && got.path.contains("alt=sse"),
                    "{}",
                    got.path
                ),
                _ => assert_eq!(got.json().unwrap()["stream"], true),
            }

            let (path, body) = request(family, model, "weather [[tool]]", true);
            let (path, body) = streaming(family, path, body, json_array);
            let r = gw.send(&authed(family, &path, KEY, &body)).await;
            assert_eq!(r.status, 200, "{cell}: {}", r.text());
            let s = read_stream(family, &r);
            assert_eq!(
                s.tool_name.as_deref(),
                Some("get_weather"),
                "{cell}: {}",
                r.text()
            );
            let args: Value = serde_json::from_str(&s.tool_args).unwrap_or(Value::Null);
            assert_eq!(args, want_args, "{cell}: {}", s.tool_args);
            assert!(s.finished, "{cell}");
        }
    }
}

#[tokio::test]
async fn a_cut_translated_stream_ends_with_the_client_error_event() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    for (family, upstream, model) in PAIRS {
        let (path, body) = request(family, model, "cut me [[cut]]", false);
        let (path, body) = streaming(family, path, body, false);
        let r = gw.send(&authed(family, &path, KEY, &body)).await;
        let s = read_stream(family, &r);
        assert!(
            s.errored,
            "{family}→{}: no error event: {}",
            upstream.name(),
            r.text()
        );
        if *family == "openai" {
            assert!(
                !r.text().contains("[DONE]"),
                "a cut stream must not look finished"
            );
        }
        if *family == "anthropic" {
            assert!(!r.text().contains("message_stop"));
        }
    }
}
