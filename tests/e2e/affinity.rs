//! End-to-end: session affinity in a pool (docs/resilience.md "Session
//! affinity"). One mock serves three upstreams of a provider side by side,
//! told apart by their base URL's path. Checked: a session key (Claude
//! Code's `x-claude-code-session-id`, Codex's `session_id`, the body's
//! `prompt_cache_key` or Anthropic `metadata.user_id`) keeps its requests on
//! one upstream whatever the turns say, and different keys spread; without a
//! key a conversation's requests (same system prompt and first turn, growing
//! turns after it, a cache mark that moves) stick together; when the
//! session's upstream fails the request is answered by the next one and the
//! session stays there while it cools, then comes back, and no other session
//! moves; `affinity: "off"` spreads one conversation by weight; the cached
//! tokens of each upstream are in the metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{keys, model, Gateway};
use crate::common::http_client::Request;
use crate::common::mock_upstream::{MockUpstream, Protocol};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use Protocol::{Anthropic, OpenAi, Responses};

/// An upstream of `mock` speaking `protocol`, named `id`, on its own path
/// (`faults`: mock markers for every request on it).
fn up(mock: &MockUpstream, protocol: Protocol, id: &str, faults: &str) -> Value {
    let faults = if faults.is_empty() {
        String::new()
    } else {
        format!("/~{faults}")
    };
    json!({
        "id": id,
        "protocol": protocol.name(),
        "base_url": format!("http://127.0.0.1:{}/{id}{faults}{}", mock.port(), protocol.base_path()),
        "api_key_env": format!("SB_TEST_KEY_{}", protocol.name().to_uppercase()),
    })
}

/// A catalog with provider `pool` of `protocol` upstreams `a`, `b`, `c`
/// (`b` failing as `b_faults` says), its model `m`, and `marker` as a second
/// model (to see a reload land).
fn pool_catalog(mock: &MockUpstream, protocol: Protocol, b_faults: &str, extra: Value) -> Value {
    let mut p = json!({
        "id": "pool",
        "families": ["openai", "anthropic", "gemini"],
        "upstreams": [up(mock, protocol, "a", ""), up(mock, protocol, "b", b_faults), up(mock, protocol, "c", "")],
    });
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    json!({"providers": [p], "models": [model("m", "pool", json!({}))]})
}

async fn start(cat: &Value) -> Gateway {
    Gateway::start_with(cat, &keys(), &[]).await
}

/// The upstream (`a`, `b` or `c`) that answered the mock's last request.
fn last_upstream(mock: &MockUpstream) -> String {
    let path = mock.last_request().unwrap().path;
    path.trim_start_matches('/')
        .split('/')
        .next()
        .unwrap()
        .to_string()
}

/// Sends `req`, checks it was answered, and returns which upstream answered.
async fn answered_by(gw: &Gateway, mock: &MockUpstream, req: &Request) -> String {
    let r = gw.send(req).await;
    assert_eq!(r.status, 200, "{}", r.text());
    last_upstream(mock)
}

/// An OpenAI chat conversation of `turns` user turns (assistant turns
/// between), with a system prompt.
fn chat(system: &str, first: &str, turns: usize) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": system}),
        json!({"role": "user", "content": first}),
    ];
    for t in 1..turns {
        messages.push(json!({"role": "assistant", "content": format!("answer {t}")}));
        messages.push(json!({"role": "user", "content": format!("follow-up {t}")}));
    }
    json!({"model": "pool/m", "messages": messages})
}

/// An Anthropic conversation of `turns` user turns whose cache mark sits on
/// the newest turn (as clients place it), so the first turn carries it in
/// the first request only.
fn messages(system: &str, first: &str, turns: usize) -> Value {
    let block = |text: String, last: bool| {
        let mut b = json!({"type": "text", "text": text});
        if last {
            b["cache_control"] = json!({"type": "ephemeral"});
        }
        json!([b])
    };
    let mut msgs = vec![json!({"role": "user", "content": block(first.to_string(), turns == 1)})];
    for t in 1..turns {
        msgs.push(json!({"role": "assistant", "content": format!("answer {t}")}));
        msgs.push(
            json!({"role": "user", "content": block(format!("follow-up {t}"), t + 1 == turns)}),
        );
    }
    json!({
        "model": "m", "max_tokens": 100,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": msgs,
    })
}

/// A session's request for one turn: (session key, turn) → request.
type Turn = fn(&str, usize) -> Request;

#[tokio::test]
async fn a_session_key_keeps_its_requests_on_one_upstream_and_keys_spread() {
    let mock = MockUpstream::start().await;
    let gw = start(&pool_catalog(&mock, OpenAi, "", json!({}))).await;
    // Each source of a key, in each client's shape; the turns differ from
    // request to request (a new user text each time, a growing history).
    let sources: [(&str, Turn); 5] = [
        ("x-claude-code-session-id", |key, turn| {
            call(
                Anthropic,
                MESSAGES,
                &messages(&format!("sys {turn}"), &format!("q {turn}"), 1),
            )
            .header("x-claude-code-session-id", key)
        }),
        ("session_id", |key, turn| {
            call(
                Responses,
                "/v1/responses",
                &json!({"model": "pool/m", "input": format!("q {turn}")}),
            )
            .header("session_id", key)
        }),
        ("prompt_cache_key (chat)", |key, turn| {
            let mut b = chat(&format!("sys {turn}"), &format!("q {turn}"), 1 + turn % 3);
            b["prompt_cache_key"] = json!(key);
            call(OpenAi, CHAT, &b)
        }),
        ("prompt_cache_key (responses)", |key, turn| {
            call(
                Responses,
                "/v1/responses",
                &json!({"model": "pool/m", "input": format!("q {turn}"), "prompt_cache_key": key}),
            )
        }),
        ("metadata.user_id", |key, turn| {
            let mut b = messages(&format!("sys {turn}"), &format!("q {turn}"), 1 + turn % 3);
            b["metadata"] = json!({"user_id": key});
            call(Anthropic, MESSAGES, &b)
        }),
    ];
    for (source, request) in sources {
        let mut homes = BTreeSet::new();
        for s in 0..12 {
            let key = format!("{source}-session-{s}");
            let home = answered_by(&gw, &mock, &request(&key, 0)).await;
            for turn in 1..5 {
                assert_eq!(
                    answered_by(&gw, &mock, &request(&key, turn)).await,
                    home,
                    "{source}: turn {turn} of {key} moved"
                );
            }
            homes.insert(home);
        }
        assert!(homes.len() >= 2, "{source}: 12 sessions all on {homes:?}");
    }
}

#[tokio::test]
async fn without_a_key_a_conversation_sticks_by_its_system_prompt_and_first_turn() {
    let mock = MockUpstream::start().await;
    let gw = start(&pool_catalog(&mock, OpenAi, "", json!({}))).await;
    let mut homes = BTreeSet::new();
    for conv in 0..12 {
        let first = format!("conversation {conv}: let us begin");
        // OpenAI chat: the history grows, the prefix stays.
        let home = answered_by(
            &gw,
            &mock,
            &call(OpenAi, CHAT, &chat("be brief", &first, 1)),
        )
        .await;
        for turns in 2..5 {
            let req = call(OpenAi, CHAT, &chat("be brief", &first, turns));
            assert_eq!(
                answered_by(&gw, &mock, &req).await,
                home,
                "chat {conv}, {turns} turns"
            );
        }
        // The same single prompt again: the same upstream (its cache too).
        let again = call(OpenAi, CHAT, &chat("be brief", &first, 1));
        assert_eq!(answered_by(&gw, &mock, &again).await, home);
        homes.insert(home);
        // Anthropic: the cache mark moves from the first turn to the newest.
        let home = answered_by(
            &gw,
            &mock,
            &call(Anthropic, MESSAGES, &messages("be brief", &first, 1)),
        )
        .await;
        for turns in 2..5 {
            let req = call(Anthropic, MESSAGES, &messages("be brief", &first, turns));
            assert_eq!(
                answered_by(&gw, &mock, &req).await,
                home,
                "messages {conv}, {turns} turns"
            );
        }
    }
    assert!(homes.len() >= 2, "12 conversations all on {homes:?}");
}

#[tokio::test]
async fn affinity_off_spreads_one_conversation_by_weight() {
    let mock = MockUpstream::start().await;
    let gw = start(&pool_catalog(&mock, OpenAi, "", json!({"affinity": "off"}))).await;
    let mut n: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..9 {
        let req = call(OpenAi, CHAT, &chat("be brief", "the same", 1))
            .header("x-claude-code-session-id", "one-session");
        *n.entry(answered_by(&gw, &mock, &req).await).or_default() += 1;
    }
    // Round-robin: three each.
    assert_eq!(n.values().copied().collect::<Vec<_>>(), [3, 3, 3], "{n:?}");
}

/// Sends session `key`'s request and returns the upstreams it tried, from
/// the access log (the last one answered).
async fn tried(gw: &Gateway, key: &str) -> Vec<String> {
    let req = call(OpenAi, CHAT, &chat("be brief", key, 1)).header("x-claude-code-session-id", key);
    let r = gw.send(&req).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.header("x-request-id").unwrap().to_string();
    let line = eventually(Duration::from_secs(20), "the access-log line", || {
        let log = gw.access_log();
        let id = id.clone();
        async move {
            log.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .find(|l| l["request_id"] == id.as_str())
        }
    })
    .await;
    line["tried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["upstream"].as_str().unwrap().to_string())
        .collect()
}

/// Writes `cat` with a marker model `marker` and waits until the gateway serves it.
async fn reload(gw: &Gateway, mut cat: Value, marker: &str) {
    cat["models"]
        .as_array_mut()
        .unwrap()
        .push(model(marker, "pool", json!({})));
    gw.write_catalog(&cat);
    eventually(Duration::from_secs(10), "the reloaded catalog", || async {
        (gw.get(&format!("/v1/models/{marker}")).await.status == 200).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_failed_upstreams_sessions_move_and_come_back_and_no_other_session_moves() {
    let mock = MockUpstream::start().await;
    let healthy = pool_catalog(&mock, OpenAi, "", json!({}));
    let gw = start(&healthy).await;
    let sessions: Vec<String> = (0..24).map(|s| format!("agent-session-{s}")).collect();
    let mut home = Vec::new();
    for s in &sessions {
        let t = tried(&gw, s).await;
        assert_eq!(t.len(), 1, "{s}: {t:?}");
        home.push(t[0].clone());
    }
    let on_b = home.iter().filter(|h| *h == "b").count();
    assert!((2..24).contains(&on_b), "{home:?}");

    // Upstream `b` now answers 503 with a long retry-after (same id: the
    // same place in every session's order).
    reload(
        &gw,
        pool_catalog(&mock, OpenAi, "status:503,retry-after:60", json!({})),
        "down",
    )
    .await;
    let mut moved_to = BTreeMap::new();
    let mut failed_once = 0;
    for (s, h) in sessions.iter().zip(&home) {
        let t = tried(&gw, s).await;
        if h == "b" {
            // Answered by another upstream; `b` tried only by the first
            // request to meet it (then it cools).
            let last = t.last().unwrap().clone();
            assert_ne!(last, "b", "{s}: {t:?}");
            if t.len() == 2 {
                assert_eq!(t[0], "b");
                failed_once += 1;
            } else {
                assert_eq!(t.len(), 1, "{s}: {t:?}");
            }
            // The session stays on its new upstream while `b` cools.
            assert_eq!(tried(&gw, s).await, [last.as_str()], "{s}");
            moved_to.insert(s.clone(), last);
        } else {
            assert_eq!(
                t,
                [h.as_str()],
                "{s}: a session of a healthy upstream moved"
            );
        }
    }
    assert_eq!(failed_once, 1, "a cooling upstream was tried again");

    // `b` healthy again: its sessions come back, the others never moved.
    reload(&gw, healthy, "up").await;
    for (s, h) in sessions.iter().zip(&home) {
        assert_eq!(tried(&gw, s).await, [h.as_str()], "{s}");
    }
    assert_eq!(moved_to.len(), on_b);
}

/// The metrics once `n` requests of the pool are recorded (a request is
/// recorded after its answer went out).
async fn metrics_after(gw: &Gateway, n: usize) -> String {
    eventually(
        Duration::from_secs(20),
        "the requests in the metrics",
        || async {
            let m = metrics_text(gw.metrics).await;
            let done = metric_value(&m, "switchboard_requests_total", &["provider=\"pool\""]);
            (done == Some(n as f64)).then_some(m)
        },
    )
    .await
}

#[tokio::test]
async fn the_metrics_count_each_upstreams_input_and_cached_tokens() {
    let mock = MockUpstream::start().await;
    let gw = start(&pool_catalog(&mock, Anthropic, "", json!({}))).await;
    // Anthropic clients (passed through: Anthropic counts cache reads apart
    // from input_tokens) and OpenAI clients (translated).
    let mut want: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for s in 0..6 {
        let cached = 10 * (s + 1);
        let prompt = format!(
            "[[cached:{cached}]] session {s} {}",
            "long context ".repeat(40)
        );
        for (p, req) in [
            (
                Anthropic,
                call(Anthropic, MESSAGES, &messages("be brief", &prompt, 1)),
            ),
            (OpenAi, call(OpenAi, CHAT, &chat("be brief", &prompt, 1))),
        ] {
            let r = gw.send(&req).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let v = r.json();
            let (input, read) = match p {
                Anthropic => (
                    v["usage"]["input_tokens"].as_u64().unwrap()
                        + v["usage"]["cache_read_input_tokens"].as_u64().unwrap(),
                    v["usage"]["cache_read_input_tokens"].as_u64().unwrap(),
                ),
                _ => (
                    v["usage"]["prompt_tokens"].as_u64().unwrap(),
                    v["usage"]["prompt_tokens_details"]["cached_tokens"]
                        .as_u64()
                        .unwrap(),
                ),
            };
            assert_eq!(read, cached, "{p:?}: {v}");
            let t = want.entry(last_upstream(&mock)).or_default();
            t.0 += input;
            t.1 += read;
        }
    }
    assert!(want.len() >= 2, "{want:?}");
    let m = metrics_after(&gw, 12).await;
    for (u, (input, cached)) in &want {
        let upstream = format!("upstream=\"{u}\"");
        let labels = ["provider=\"pool\"", upstream.as_str()];
        assert_eq!(
            metric_value(&m, "switchboard_upstream_input_tokens_total", &labels),
            Some(*input as f64),
            "{u}: {m}"
        );
        assert_eq!(
            metric_value(&m, "switchboard_upstream_cached_tokens_total", &labels),
            Some(*cached as f64),
            "{u}"
        );
    }
}

/// Codex CLI 0.169.0's captured first turn (`tests/clients/fixtures`) as
/// session `id` asking `text`, with Codex's headers (`session-id`,
/// `thread-id`, ... all the session's id) when `headers`, and its
/// `prompt_cache_key` (the same id) when `body_key`.
fn codex_turn(id: &str, text: &str, headers: bool, body_key: bool) -> Request {
    let captured: Value = serde_json::from_str(include_str!(
        "../clients/fixtures/codex-0.169.0-first-turn.json"
    ))
    .unwrap();
    let session = captured["headers"]["session-id"].as_str().unwrap();
    let mut body = captured["body"].clone();
    body["model"] = json!("pool/m");
    let last = body["input"].as_array_mut().unwrap().last_mut().unwrap();
    last["content"] = json!([{"type": "input_text", "text": text}]);
    if body_key {
        body["prompt_cache_key"] = json!(id);
    } else {
        body.as_object_mut().unwrap().remove("prompt_cache_key");
    }
    let mut req = call(Responses, "/v1/responses", &body);
    if headers {
        for (name, value) in captured["headers"].as_object().unwrap() {
            if !["authorization", "content-type"].contains(&name.as_str()) {
                let value = value.as_str().unwrap().replace(session, id);
                req = req.header(name, &value);
            }
        }
    }
    req
}

#[tokio::test]
async fn codex_sessions_stick_by_their_session_header_or_prompt_cache_key() {
    let mock = MockUpstream::start().await;
    let gw = start(&pool_catalog(&mock, Responses, "", json!({}))).await;
    let mut homes = BTreeSet::new();
    for s in 0..10 {
        let id = format!("01a20a21-acea-7012-9f2b-21fbcd82{s:04}");
        // As Codex sends it: the header and the body's key, the same id.
        let home = answered_by(&gw, &mock, &codex_turn(&id, "first", true, true)).await;
        // Either alone picks the same upstream: both hash the id's text.
        let header = codex_turn(&id, "second", true, false);
        assert_eq!(
            answered_by(&gw, &mock, &header).await,
            home,
            "{id}: header only"
        );
        let key = codex_turn(&id, "third", false, true);
        assert_eq!(
            answered_by(&gw, &mock, &key).await,
            home,
            "{id}: prompt_cache_key only"
        );
        // Older Codex: `session_id`.
        let old = codex_turn(&id, "fourth", false, false).header("session_id", &id);
        assert_eq!(
            answered_by(&gw, &mock, &old).await,
            home,
            "{id}: session_id"
        );
        homes.insert(home);
    }
    assert!(homes.len() >= 2, "10 sessions all on {homes:?}");
}

/// Four agent conversations of five turns each (the whole history sent every
/// turn, as agents do) over a pool of three upstreams that cache prompts:
/// the cached tokens of each turn after a conversation's first, and the
/// pool's hit ratio from the metrics.
async fn conversations_over_caching_upstreams(affinity: &str) -> (Vec<u64>, f64) {
    let mock = MockUpstream::start().await;
    let mut cat = pool_catalog(&mock, OpenAi, "prompt-cache", json!({"affinity": affinity}));
    for u in cat["providers"][0]["upstreams"].as_array_mut().unwrap() {
        let url = u["base_url"].as_str().unwrap().to_string();
        if !url.contains("/~") {
            u["base_url"] = json!(url.replace("/openai/v1", "/~prompt-cache/openai/v1"));
        }
    }
    let gw = start(&cat).await;
    let mut later_turns = Vec::new();
    for conv in 0..4 {
        for turns in 1..=5 {
            let body = chat("you are a coding agent", &format!("task {conv}"), turns);
            let r = gw.send(&call(OpenAi, CHAT, &body)).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let cached = r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0);
            if turns > 1 {
                later_turns.push(cached);
            }
        }
    }
    let m = metrics_after(&gw, 20).await;
    let cached = metric_value(&m, "switchboard_upstream_cached_tokens_total", &[]).unwrap();
    let input = metric_value(&m, "switchboard_upstream_input_tokens_total", &[]).unwrap();
    (later_turns, cached / input)
}

#[tokio::test]
async fn an_agents_later_turns_hit_the_prompt_cache_only_with_affinity() {
    let (sticky, sticky_ratio) = conversations_over_caching_upstreams("session").await;
    let (spread, spread_ratio) = conversations_over_caching_upstreams("off").await;
    // With affinity every later turn finds the conversation so far cached.
    assert!(sticky.iter().all(|&c| c > 0), "{sticky:?}");
    // Spread round-robin over three upstreams, some turns land where the
    // conversation never was.
    assert!(spread.contains(&0), "{spread:?}");
    assert!(
        sticky_ratio > spread_ratio,
        "hit ratio with affinity {sticky_ratio:.3}, without {spread_ratio:.3}"
    );
}
