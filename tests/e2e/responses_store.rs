//! End-to-end: stored responses (docs/api.md "Stored responses") through the real binary and
//! the mock upstream. `previous_response_id` continues a stored conversation
//! on every upstream protocol (the upstream sees the earlier turns), whole
//! and streamed; `store: false` is not kept; a key sees only its own; D3
//! reads, lists and deletes; a restart keeps them (embedded store); they
//! expire; two instances on one Redis share them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::eventually;
use crate::common::gateway::{authed, model, Gateway, TempDir, KEY};
use crate::common::http_client::{Request, Response};
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol};
use serde_json::{json, Value};
use std::time::Duration;

const OTHER: &str = "sk-other-responses";

fn catalog(mock: &MockUpstream) -> Value {
    let up = |p: Protocol| json!({"protocol": p.name(), "base_url": mock.base_url(p), "api_key_env": format!("SB_TEST_KEY_{}", p.name().to_uppercase())});
    let all = json!(["openai", "anthropic", "gemini"]);
    json!({
        "providers": [
            {"id": "oa", "families": all, "upstreams": [up(Protocol::OpenAi)]},
            {"id": "an", "families": all, "upstreams": [up(Protocol::Anthropic)]},
            {"id": "gg", "families": all, "upstreams": [up(Protocol::Gemini)]},
            {"id": "rs", "families": all, "upstreams": [up(Protocol::Responses)]}
        ],
        "models": [
            model("m-oa", "oa", json!({"upstream_model": "up-oa"})),
            model("m-an", "an", json!({"upstream_model": "up-an"})),
            model("m-gg", "gg", json!({"upstream_model": "up-gg"})),
            model("m-rs", "rs", json!({"upstream_model": "up-rs"}))
        ]
    })
}

fn keys() -> Value {
    json!({"keys": [{"id": "test", "key": KEY}, {"id": "other", "key": OTHER}]})
}

const CELLS: [(Protocol, &str); 4] = [
    (Protocol::OpenAi, "oa/m-oa"),
    (Protocol::Anthropic, "an/m-an"),
    (Protocol::Gemini, "gg/m-gg"),
    (Protocol::Responses, "rs/m-rs"),
];

async fn start_with(mock: &MockUpstream, args: &[&str]) -> Gateway {
    Gateway::start_with(&catalog(mock), &keys(), args).await
}

fn post(key: &str, body: &Value) -> Request {
    authed("openai", "/v1/responses", key, body)
}

fn d3(method: &str, path: &str, key: &str) -> Request {
    Request::new(method, path).header("authorization", &format!("Bearer {key}"))
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

/// The `response` of a stream's last event, checked to be `response.completed`.
fn completed(r: &Response) -> Value {
    let events = r.sse();
    let last: Value = serde_json::from_str(&events.last().unwrap().data).unwrap();
    assert_eq!(last["type"], "response.completed", "{last}");
    let created: Value = serde_json::from_str(&events[0].data).unwrap();
    assert_eq!(
        created["response"]["id"], last["response"]["id"],
        "every event names the one response"
    );
    last["response"].clone()
}

fn is_gateway_id(id: &str) -> bool {
    id.len() == 53 && id.starts_with("resp_") && id[5..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// GET /v1/responses/{id} until the stored response is there (writes are off the response path).
async fn stored(gw: &Gateway, key: &str, id: &str) -> Value {
    let path = format!("/v1/responses/{id}");
    eventually(Duration::from_secs(5), "the stored response", || async {
        let r = gw.send(&d3("GET", &path, key)).await;
        (r.status == 200).then(|| r.json())
    })
    .await
}

#[tokio::test]
async fn previous_response_id_continues_on_every_upstream_whole_and_streamed() {
    let mock = MockUpstream::start().await;
    let gw = start_with(&mock, &[]).await;
    for (proto, name) in CELLS {
        let word = format!("pelican-{}", proto.name());
        // Turn 1: whole.
        let first = format!("my word is {word}");
        let r = gw
            .send(&post(
                KEY,
                &json!({"model": name, "instructions": "Be terse.", "input": first}),
            ))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        let v1 = r.json();
        let id1 = v1["id"].as_str().unwrap().to_string();
        assert!(is_gateway_id(&id1), "{name}: {id1}");
        assert_eq!(v1["store"], true, "{name}");
        assert_eq!(v1["previous_response_id"], Value::Null, "{name}");
        assert_eq!(v1["instructions"], "Be terse.", "{name}");
        let reply1 = expected_reply(proto, &first);
        assert_eq!(output_text(&v1), reply1, "{name}");
        // What GET returns is what the client received.
        assert_eq!(stored(&gw, KEY, &id1).await, v1, "{name}");

        // Turn 2: whole, continuing turn 1; the upstream sees turn 1.
        mock.clear();
        let second = "what was my word? [[echo-request]]";
        let r = gw
            .send(&post(
                KEY,
                &json!({"model": name, "previous_response_id": id1, "input": second}),
            ))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        let v2 = r.json();
        let id2 = v2["id"].as_str().unwrap().to_string();
        assert!(is_gateway_id(&id2) && id2 != id1, "{name}");
        assert_eq!(v2["previous_response_id"], id1.as_str(), "{name}");
        // Instructions are not inherited (OpenAI's rule).
        assert_eq!(v2["instructions"], Value::Null, "{name}");
        let sent = mock.last_request().unwrap();
        let sent_text = String::from_utf8_lossy(&sent.body).into_owned();
        assert!(sent_text.contains(&word), "{name}: {sent_text}");
        assert!(
            sent_text.contains("Hello from"),
            "{name}: turn 1's answer is sent: {sent_text}"
        );
        assert!(sent_text.contains("what was my word?"), "{name}");
        assert!(!sent_text.contains("Be terse."), "{name}: {sent_text}");
        assert!(!sent_text.contains("previous_response_id"), "{name}");
        assert!(!sent_text.contains(&id1), "{name}");
        if proto == Protocol::Responses {
            let sent = sent.json().unwrap();
            let input = sent["input"].as_array().unwrap();
            assert_eq!(input.len(), 3, "{name}: {sent}");
            assert_eq!(input[0]["role"], "user");
            assert_eq!(input[0]["content"][0]["text"], first.as_str());
            assert_eq!(input[1]["role"], "assistant");
            assert_eq!(input[1]["content"][0]["text"], reply1.as_str());
            assert_eq!(input[2]["content"][0]["text"], second);
        }
        // The echoed request shows the model saw the conversation.
        assert!(output_text(&v2).contains(&word), "{name}");

        // Turn 3: streamed, continuing turn 2 (so turns 1 and 2).
        mock.clear();
        let r = gw
            .send(&post(
                KEY,
                &json!({"model": name, "previous_response_id": id2, "input": "and now?", "stream": true}),
            ))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        let v3 = completed(&r);
        let id3 = v3["id"].as_str().unwrap().to_string();
        assert!(is_gateway_id(&id3), "{name}: {id3}");
        assert_eq!(v3["previous_response_id"], id2.as_str(), "{name}");
        assert_eq!(v3["store"], true, "{name}");
        let sent_text = String::from_utf8_lossy(&mock.last_request().unwrap().body).into_owned();
        assert!(sent_text.contains(&word), "{name}");
        assert!(sent_text.contains("what was my word?"), "{name}");
        assert!(sent_text.contains("and now?"), "{name}");
        // A streamed response is stored as its final object.
        assert_eq!(stored(&gw, KEY, &id3).await, v3, "{name}");
        // input_tokens counts the continued conversation, not just the new input.
        let count = |body: Value| {
            let gw = &gw;
            async move {
                let r = gw
                    .send(&authed("openai", "/v1/responses/input_tokens", KEY, &body))
                    .await;
                assert_eq!(r.status, 200, "{}", r.text());
                r.json()["input_tokens"].as_u64().unwrap()
            }
        };
        let alone = count(json!({"model": name, "input": "and now?"})).await;
        let continued =
            count(json!({"model": name, "input": "and now?", "previous_response_id": id2})).await;
        assert!(continued > alone + 10, "{name}: {continued} vs {alone}");
        // Its input items are its own (the new input), in item form.
        let r = gw
            .send(&d3("GET", &format!("/v1/responses/{id3}/input_items"), KEY))
            .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        let page = r.json();
        assert_eq!(page["data"].as_array().unwrap().len(), 1, "{page}");
        assert_eq!(page["data"][0]["type"], "message");
        assert_eq!(page["data"][0]["content"][0]["text"], "and now?");
    }
}

#[tokio::test]
async fn store_false_is_not_kept_and_a_key_sees_only_its_own() {
    let mock = MockUpstream::start().await;
    let gw = start_with(&mock, &[]).await;
    for (_, name) in CELLS {
        for stream in [false, true] {
            let r = gw
                .send(&post(
                    KEY,
                    &json!({"model": name, "input": "forget me", "store": false, "stream": stream}),
                ))
                .await;
            assert_eq!(r.status, 200, "{name}: {}", r.text());
            let v = if stream { completed(&r) } else { r.json() };
            let id = v["id"].as_str().unwrap().to_string();
            assert_eq!(v["store"], false, "{name}: {v}");
            tokio::time::sleep(Duration::from_millis(100)).await;
            let r = gw
                .send(&d3("GET", &format!("/v1/responses/{id}"), KEY))
                .await;
            assert_eq!(r.status, 404, "{name}: {}", r.text());
            let calls = mock.requests().len();
            let r = gw
                .send(&post(
                    KEY,
                    &json!({"model": name, "input": "again", "previous_response_id": id}),
                ))
                .await;
            assert_eq!(r.status, 400, "{name}: {}", r.text());
            let e = r.json();
            assert_eq!(e["error"]["type"], "invalid_request_error");
            assert_eq!(e["error"]["param"], "previous_response_id");
            assert_eq!(
                e["error"]["message"],
                format!("Previous response with id '{id}' not found.")
            );
            assert_eq!(mock.requests().len(), calls, "no upstream call");
        }
    }

    // Stored by one key: another key cannot read, list, delete or continue it.
    let r = gw
        .send(&post(KEY, &json!({"model": "rs/m-rs", "input": "mine"})))
        .await;
    let id = r.json()["id"].as_str().unwrap().to_string();
    stored(&gw, KEY, &id).await;
    for (method, path) in [
        ("GET", format!("/v1/responses/{id}")),
        ("GET", format!("/v1/responses/{id}/input_items")),
        ("DELETE", format!("/v1/responses/{id}")),
    ] {
        let r = gw.send(&d3(method, &path, OTHER)).await;
        assert_eq!(r.status, 404, "{method} {path}: {}", r.text());
        let e = r.json();
        assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
        assert_eq!(
            e["error"]["message"],
            format!("Response with id '{id}' not found.")
        );
    }
    let r = gw
        .send(&post(
            OTHER,
            &json!({"model": "rs/m-rs", "input": "yours?", "previous_response_id": id}),
        ))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], "previous_response_id");
    // Still there for its owner; unknown ids are 404 / 400 too; no key is 401.
    assert_eq!(
        gw.send(&d3("GET", &format!("/v1/responses/{id}"), KEY))
            .await
            .status,
        200
    );
    let r = gw.send(&d3("GET", "/v1/responses/resp_nope", KEY)).await;
    assert_eq!(r.status, 404);
    let r = gw.send(&Request::get(&format!("/v1/responses/{id}"))).await;
    assert_eq!(r.status, 401);
    let r = gw
        .send(&post(
            KEY,
            &json!({"model": "rs/m-rs", "input": "x", "previous_response_id": 7}),
        ))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["param"], "previous_response_id");
}

#[tokio::test]
async fn stored_responses_are_read_listed_and_deleted() {
    let mock = MockUpstream::start().await;
    let gw = start_with(&mock, &[]).await;
    let body = json!({
        "model": "an/m-an",
        "instructions": "Answer in French.",
        "input": [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "three"}]},
        ]
    });
    let r = gw.send(&post(KEY, &body)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(stored(&gw, KEY, &id).await, v);

    let list = |q: &str| {
        let path = format!("/v1/responses/{id}/input_items{q}");
        let gw = &gw;
        async move {
            let r = gw.send(&d3("GET", &path, KEY)).await;
            assert_eq!(r.status, 200, "{path}: {}", r.text());
            r.json()
        }
    };
    let texts = |page: &Value| -> Vec<String> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["content"][0]["text"].as_str().unwrap().to_string())
            .collect()
    };
    // Default order is newest first, as the API's.
    let all = list("").await;
    assert_eq!(all["object"], "list");
    assert_eq!(texts(&all), ["three", "two", "one"]);
    assert_eq!(all["has_more"], false);
    for item in all["data"].as_array().unwrap() {
        assert_eq!(item["type"], "message", "{item}");
        assert!(item["id"].as_str().is_some(), "{item}");
    }
    assert_eq!(all["data"][1]["content"][0]["type"], "output_text");
    assert_eq!(all["data"][2]["content"][0]["type"], "input_text");
    assert_eq!(all["first_id"], all["data"][0]["id"]);
    assert_eq!(all["last_id"], all["data"][2]["id"]);
    let page = list("?order=asc&limit=2").await;
    assert_eq!(texts(&page), ["one", "two"]);
    assert_eq!(page["has_more"], true);
    let rest = list(&format!(
        "?order=asc&limit=2&after={}",
        page["last_id"].as_str().unwrap()
    ))
    .await;
    assert_eq!(texts(&rest), ["three"]);
    assert_eq!(rest["has_more"], false);
    // Ids are stable across reads.
    assert_eq!(list("").await, all);
    let r = gw
        .send(&d3(
            "GET",
            &format!("/v1/responses/{id}/input_items?limit=0"),
            KEY,
        ))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["param"], "limit");

    // Delete: OpenAI's shape, then gone everywhere.
    let r = gw
        .send(&d3("DELETE", &format!("/v1/responses/{id}"), KEY))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"id": id, "object": "response", "deleted": true})
    );
    for (method, path) in [
        ("GET", format!("/v1/responses/{id}")),
        ("GET", format!("/v1/responses/{id}/input_items")),
        ("DELETE", format!("/v1/responses/{id}")),
    ] {
        let r = gw.send(&d3(method, &path, KEY)).await;
        assert_eq!(r.status, 404, "{method} {path}");
    }
    let r = gw
        .send(&post(
            KEY,
            &json!({"model": "an/m-an", "input": "more", "previous_response_id": id}),
        ))
        .await;
    assert_eq!(r.status, 400);
    // Wrong method on a D3 path: 405.
    let r = gw
        .send(&d3("POST", &format!("/v1/responses/{id}/input_items"), KEY))
        .await;
    assert_eq!(r.status, 405);
}

#[tokio::test]
async fn a_restart_keeps_stored_responses() {
    let mock = MockUpstream::start().await;
    let data = TempDir::new();
    let dir = data.file("store");
    let dir = dir.to_str().unwrap();
    let gw = start_with(&mock, &["--data", dir]).await;
    let r = gw
        .send(&post(
            KEY,
            &json!({"model": "gg/m-gg", "input": "remember kiwi"}),
        ))
        .await;
    let v = r.json();
    let id = v["id"].as_str().unwrap().to_string();
    stored(&gw, KEY, &id).await;
    // The write lands off the response path (a millisecond); the process is
    // then killed outright, not shut down.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(gw);
    assert!(data.file("store/responses.sqlite").exists());
    let gw = start_with(&mock, &["--data", dir]).await;
    let r = gw
        .send(&d3("GET", &format!("/v1/responses/{id}"), KEY))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), v);
    mock.clear();
    let r = gw
        .send(&post(
            KEY,
            &json!({"model": "gg/m-gg", "input": "which fruit?", "previous_response_id": id}),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = String::from_utf8_lossy(&mock.last_request().unwrap().body).into_owned();
    assert!(sent.contains("remember kiwi"), "{sent}");
}

#[tokio::test]
async fn a_graceful_shutdown_writes_the_responses_it_holds() {
    // The writer is told to gather records for an hour before it commits:
    // what it holds is written at shutdown, SIGTERM (the drain) or SIGINT.
    let mock = MockUpstream::start().await;
    for signal in ["TERM", "INT"] {
        let data = TempDir::new();
        let dir = data.file("store");
        let dir = dir.to_str().unwrap();
        let args = ["--data", dir, "--responses-flush-ms", "3600000"];
        let mut gw = start_with(&mock, &args).await;
        let mut answers = Vec::new();
        for i in 0..20 {
            let r = gw
                .send(&post(
                    KEY,
                    &json!({"model": "oa/m-oa", "input": format!("note {i}")}),
                ))
                .await;
            assert_eq!(r.status, 200, "{}", r.text());
            answers.push(r.json());
        }
        // Served from memory while the writer holds them.
        let id = answers[19]["id"].as_str().unwrap();
        let r = gw
            .send(&d3("GET", &format!("/v1/responses/{id}"), KEY))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        gw.stop(signal);
        assert!(
            !gw.log().contains("may not all have been written"),
            "{}",
            gw.log()
        );
        let gw = start_with(&mock, &["--data", dir]).await;
        for v in &answers {
            let id = v["id"].as_str().unwrap();
            let r = gw
                .send(&d3("GET", &format!("/v1/responses/{id}"), KEY))
                .await;
            assert_eq!(r.status, 200, "{signal} {id}: {}", r.text());
            assert_eq!(&r.json(), v);
        }
    }
}

#[tokio::test]
async fn stored_responses_expire() {
    let mock = MockUpstream::start().await;
    let gw = start_with(&mock, &["--responses-ttl-secs", "1"]).await;
    let r = gw
        .send(&post(
            KEY,
            &json!({"model": "oa/m-oa", "input": "short-lived"}),
        ))
        .await;
    let id = r.json()["id"].as_str().unwrap().to_string();
    stored(&gw, KEY, &id).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = gw
        .send(&d3("GET", &format!("/v1/responses/{id}"), KEY))
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    let r = gw
        .send(&post(
            KEY,
            &json!({"model": "oa/m-oa", "input": "x", "previous_response_id": id}),
        ))
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn a_store_that_cannot_be_written_never_fails_the_response() {
    // A Redis that is not there: the response is answered, the failure counted.
    let mock = MockUpstream::start().await;
    let dead = format!("redis://127.0.0.1:{}", crate::common::gateway::free_port());
    let gw = start_with(&mock, &["--redis", &dead]).await;
    let r = gw
        .send(&post(KEY, &json!({"model": "oa/m-oa", "input": "hello"})))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw
        .send(&post(
            KEY,
            &json!({"model": "oa/m-oa", "input": "hello", "stream": true}),
        ))
        .await;
    assert_eq!(r.status, 200);
    completed(&r);
    let text = eventually(Duration::from_secs(10), "the failure metric", || async {
        let t = crate::common::families::metrics_text(gw.metrics).await;
        crate::common::families::metric_value(&t, "switchboard_responses_store_failures_total", &[])
            .filter(|n| *n >= 2.0)
            .map(|_| t)
    })
    .await;
    assert!(text.contains("switchboard_responses_store_failures_total"));
    // Reads say the store is unavailable, in OpenAI's shape.
    let r = gw.send(&d3("GET", "/v1/responses/resp_x", KEY)).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["type"], "server_error");
}

/// Needs a Redis: ignored by a plain `cargo test`, run by tests/run.sh.
mod needs_redis {
    use super::*;

    #[tokio::test]
    #[ignore = "needs Redis on 127.0.0.1:6379 (tests/run.sh starts one and runs these)"]
    async fn two_instances_share_stored_responses_through_redis() {
        let url = crate::common::servers::redis_url();
        let prefix = format!(
            "sbtest:{}:{}:",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let mock = MockUpstream::start().await;
        // A short TTL: nothing this test leaves behind outlives it for long.
        let args = [
            "--redis",
            url.as_str(),
            "--redis-prefix",
            prefix.as_str(),
            "--responses-ttl-secs",
            "60",
        ];
        let a = start_with(&mock, &args).await;
        let b = start_with(&mock, &args).await;
        // Written by A, read and continued on B, streamed.
        let r = a
            .send(&post(
                KEY,
                &json!({"model": "an/m-an", "input": "the colour is teal", "stream": true}),
            ))
            .await;
        let v1 = completed(&r);
        let id1 = v1["id"].as_str().unwrap().to_string();
        assert_eq!(stored(&b, KEY, &id1).await, v1);
        assert_eq!(
            b.send(&d3("GET", &format!("/v1/responses/{id1}"), OTHER))
                .await
                .status,
            404
        );
        mock.clear();
        let r = b
            .send(&post(
                KEY,
                &json!({"model": "rs/m-rs", "input": "which colour?", "previous_response_id": id1}),
            ))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let sent = mock.last_request().unwrap().json().unwrap();
        assert_eq!(sent["input"][0]["content"][0]["text"], "the colour is teal");
        assert!(sent.get("previous_response_id").is_none());
        let id2 = r.json()["id"].as_str().unwrap().to_string();
        stored(&a, KEY, &id2).await;
        // Deleted on A: gone on B.
        let r = a
            .send(&d3("DELETE", &format!("/v1/responses/{id1}"), KEY))
            .await;
        assert_eq!(r.status, 200);
        let r = b
            .send(&d3("GET", &format!("/v1/responses/{id1}"), KEY))
            .await;
        assert_eq!(r.status, 404);
        drop((a, b));

        // Redis expires them after the TTL.
        let args = [
            "--redis",
            url.as_str(),
            "--redis-prefix",
            prefix.as_str(),
            "--responses-ttl-secs",
            "1",
        ];
        let c = start_with(&mock, &args).await;
        let r = c
            .send(&post(KEY, &json!({"model": "oa/m-oa", "input": "brief"})))
            .await;
        let id = r.json()["id"].as_str().unwrap().to_string();
        stored(&c, KEY, &id).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let r = c
            .send(&d3("GET", &format!("/v1/responses/{id}"), KEY))
            .await;
        assert_eq!(r.status, 404);
    }
}
