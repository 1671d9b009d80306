//! End-to-end: traffic management (docs/resilience.md) against a fault-injecting
//! mock. One mock serves several upstreams side by side, told apart by their
//! base URL's path; a `~MARKERS` path segment makes one of them fail (429
//! with a retry-after, a stall before the first token, a stall mid-stream, a
//! cut). Checked: cool-downs honour retry-after and keep traffic away,
//! weights split traffic, first-token and connect failures move on, idle and
//! total deadlines end a stream with the family's error event, fallbacks
//! answer (and name themselves) when a provider is down and are skipped when
//! the request does not fit them, and nothing is retried after the first
//! byte. Every attempt shows in the access log, the metrics and
//! `GET /admin/upstreams`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{free_port, keys, model, Gateway};
use crate::common::http_client::{self, parse_sse, Request, Response};
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol};
use serde_json::{json, Value};
use std::time::Duration;

use Protocol::{Anthropic, Gemini, OpenAi, Responses};

const ADMIN: &str = "adm-resilience";

/// An OpenAI-protocol upstream of `mock` named `id`, on its own path, failing
/// as `faults` says (mock markers without brackets, comma-separated).
fn up(mock: &MockUpstream, id: &str, faults: &str, weight: u32) -> Value {
    up_in(mock, OpenAi, id, faults, weight)
}

/// As [`up`], speaking `protocol`.
fn up_in(mock: &MockUpstream, protocol: Protocol, id: &str, faults: &str, weight: u32) -> Value {
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
        "weight": weight,
    })
}

/// An upstream where nothing listens.
fn dead(id: &str) -> Value {
    json!({
        "id": id,
        "protocol": "openai",
        "base_url": format!("http://127.0.0.1:{}/v1", free_port()),
        "api_key_env": "SB_TEST_KEY_OPENAI",
    })
}

fn provider(id: &str, upstreams: Vec<Value>, extra: Value) -> Value {
    let mut p = json!({"id": id, "families": ["openai", "gemini"], "upstreams": upstreams});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

fn catalog(providers: Vec<Value>, models: Vec<Value>) -> Value {
    json!({"providers": providers, "models": models})
}

/// Requests the mock's upstream `id` received.
fn hits(mock: &MockUpstream, id: &str) -> usize {
    let prefix = format!("/{id}/");
    mock.requests()
        .iter()
        .filter(|r| r.path.starts_with(&prefix))
        .count()
}

async fn start(cat: &Value) -> Gateway {
    Gateway::start_with(cat, &keys(), &["--admin-key", ADMIN]).await
}

/// The access log's lines, parsed.
fn access(gw: &Gateway) -> Vec<Value> {
    gw.access_log()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The access-log line of the request answered by `r`.
async fn line_of(gw: &Gateway, r: &Response) -> Value {
    let id = r.header("x-request-id").unwrap().to_string();
    eventually(Duration::from_secs(20), "the access-log line", || {
        let lines = access(gw);
        let id = id.clone();
        async move { lines.into_iter().find(|l| l["request_id"] == id.as_str()) }
    })
    .await
}

async fn admin_upstreams(gw: &Gateway) -> Value {
    let r = http_client::send(
        gw.metrics,
        &Request::get("/admin/upstreams").header("authorization", &format!("Bearer {ADMIN}")),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn upstream_view<'a>(v: &'a Value, provider: &str, id: &str) -> &'a Value {
    v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == provider)
        .and_then(|p| {
            p["upstreams"]
                .as_array()
                .unwrap()
                .iter()
                .find(|u| u["id"] == id)
        })
        .unwrap_or_else(|| panic!("no upstream {provider}/{id} in {v}"))
}

/// A request of family `p` for `model` (family A and D qualified, B and C
/// bare), whole or streamed: (path, request).
fn ask(p: Protocol, qualified: &str, prompt: &str, stream: bool) -> (String, Request) {
    let bare = qualified.split_once('/').map_or(qualified, |(_, m)| m);
    let (path, body) = match p {
        OpenAi => (
            CHAT.to_string(),
            openai_body(qualified, prompt, None, stream),
        ),
        Anthropic => (
            MESSAGES.to_string(),
            anthropic_body(bare, prompt, None, stream),
        ),
        Gemini => (
            gemini_path(
                bare,
                if stream {
                    GeminiMode::StreamSse
                } else {
                    GeminiMode::Whole
                },
            ),
            gemini_body(prompt, None),
        ),
        Responses => (
            "/v1/responses".to_string(),
            json!({"model": qualified, "input": prompt, "stream": stream}),
        ),
    };
    let r = call(p, &path, &body);
    (path, r)
}

/// The reply text of a whole or streamed answer of family `p`.
fn text_of(p: Protocol, r: &Response, stream: bool) -> String {
    assert_eq!(r.status, 200, "{p:?}: {}", r.text());
    if !stream {
        return reply_text(p, &r.json());
    }
    let events = parse_sse(&r.body);
    stream_text(p, &event_json(&events))
}

/// The model name a family puts in its answer.
fn answer_model(p: Protocol, r: &Response, stream: bool) -> String {
    let v = if stream {
        let events = parse_sse(&r.body);
        event_json(&events).into_iter().next().unwrap()
    } else {
        r.json()
    };
    let m = match p {
        OpenAi => &v["model"],
        Anthropic if stream => &v["message"]["model"],
        Anthropic => &v["model"],
        Gemini => &v["modelVersion"],
        Responses if stream => &v["response"]["model"],
        Responses => &v["model"],
    };
    m.as_str()
        .unwrap_or_else(|| panic!("{p:?}: no model in {v}"))
        .to_string()
}

#[tokio::test]
async fn a_429_with_retry_after_cools_that_upstream_and_traffic_goes_elsewhere() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![provider(
            "pool",
            vec![
                up(&mock, "limited", "status:429,retry-after:7", 1),
                up(&mock, "spare", "", 1),
            ],
            // Round-robin: the first pick is the first upstream.
            json!({"affinity": "off"}),
        )],
        vec![model("m", "pool", json!({}))],
    );
    let gw = start(&cat).await;
    // The first pick is the rate-limited upstream; the client never sees its 429.
    let (_, req) = ask(OpenAi, "pool/m", "first", false);
    let r = gw.send(&req).await;
    assert_eq!(text_of(OpenAi, &r, false), expected_reply(OpenAi, "first"));
    assert_eq!((hits(&mock, "limited"), hits(&mock, "spare")), (1, 1));
    let line = line_of(&gw, &r).await;
    assert_eq!(line["attempts"], 2, "{line}");
    let tried = line["tried"].as_array().unwrap();
    assert_eq!(tried[0]["upstream"], "limited");
    assert_eq!(tried[0]["status"], 429);
    assert_eq!(tried[0]["failure"], "rate_limited");
    assert_eq!(tried[0]["cooled_ms"], 7000, "retry-after: 7 is honoured");
    assert_eq!(tried[1]["upstream"], "spare");
    assert_eq!(tried[1]["status"], 200);
    assert!(tried[1]["failure"].is_null());

    // While it cools, every family's requests go to the spare without touching it.
    for p in [OpenAi, Anthropic, Gemini, Responses] {
        for stream in [false, true] {
            let (_, req) = ask(p, "pool/m", "next", stream);
            let r = gw.send(&req).await;
            assert_eq!(
                text_of(p, &r, stream),
                expected_reply(OpenAi, "next"),
                "{p:?}"
            );
        }
    }
    assert_eq!(hits(&mock, "limited"), 1, "a cooling upstream was called");
    assert_eq!(hits(&mock, "spare"), 9);

    let view = admin_upstreams(&gw).await;
    let limited = upstream_view(&view, "pool", "limited");
    assert_eq!(limited["healthy"], false, "{limited}");
    let left = limited["cooldown_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 7000, "{limited}");
    assert_eq!(limited["last_failure"]["reason"], "rate_limited");
    assert_eq!(limited["failures"], 1);
    assert_eq!(upstream_view(&view, "pool", "spare")["healthy"], true);
    let m = metrics_text(gw.metrics).await;
    let labels = |u: &'static str| ["provider=\"pool\"", u];
    assert_eq!(
        metric_value(
            &m,
            "switchboard_upstream_healthy",
            &labels("upstream=\"limited\"")
        ),
        Some(0.0),
        "{m}"
    );
    assert_eq!(
        metric_value(
            &m,
            "switchboard_upstream_healthy",
            &labels("upstream=\"spare\"")
        ),
        Some(1.0)
    );
    assert_eq!(
        metric_value(
            &m,
            "switchboard_upstream_cooldowns_total",
            &["upstream=\"limited\"", "reason=\"rate_limited\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        metric_value(
            &m,
            "switchboard_upstream_attempts_total",
            &["upstream=\"spare\"", "outcome=\"ok\""]
        ),
        Some(9.0)
    );
    // Without the admin key the view is refused.
    let r = http_client::send(gw.metrics, &Request::get("/admin/upstreams"))
        .await
        .unwrap();
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn weights_split_traffic_by_their_shares() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![provider(
            "pool",
            vec![
                up(&mock, "five", "", 5),
                up(&mock, "three", "", 3),
                up(&mock, "two", "", 2),
            ],
            json!({}),
        )],
        vec![model("m", "pool", json!({}))],
    );
    let gw = start(&cat).await;
    const N: usize = 300;
    let mut tasks = tokio::task::JoinSet::new();
    let addr = gw.addr;
    for worker in 0..6 {
        tasks.spawn(async move {
            for i in 0..N / 6 {
                let (_, req) = ask(OpenAi, "pool/m", &format!("w{worker} r{i}"), false);
                let r = http_client::send(addr, &req).await.unwrap();
                assert_eq!(r.status, 200, "{}", r.text());
            }
        });
    }
    while let Some(t) = tasks.join_next().await {
        t.unwrap();
    }
    for (id, share) in [("five", 0.5), ("three", 0.3), ("two", 0.2)] {
        let got = hits(&mock, id) as f64 / N as f64;
        assert!(
            (got - share).abs() <= 0.03,
            "{id}: {got:.3} of the traffic, weight share {share}"
        );
    }
    let m = metrics_text(gw.metrics).await;
    assert_eq!(
        metric_value(&m, "switchboard_upstream_weight", &["upstream=\"five\""]),
        Some(5.0)
    );
}

#[tokio::test]
async fn a_stalled_first_token_fails_over_within_the_deadline_in_every_family() {
    let mock = MockUpstream::start().await;
    // One provider per case (round-robin), so each case's first pick is the stalled upstream:
    // (client family, stream, upstream protocol, faults).
    let cases: Vec<(Protocol, bool, Protocol, &str)> = vec![
        // The head, then nothing.
        (OpenAi, true, OpenAi, "hold:600000"),
        (Anthropic, true, OpenAi, "hold:600000"),
        (Gemini, true, OpenAi, "hold:600000"),
        (Responses, true, OpenAi, "hold:600000"),
        // The preamble (a role chunk, `message_start`, `response.created`),
        // then nothing: no token yet.
        (OpenAi, true, OpenAi, "stall:600000"),
        (OpenAi, true, Anthropic, "stall:600000"),
        (Anthropic, true, Anthropic, "stall:600000"),
        (Responses, true, Responses, "stall:600000"),
        // A whole answer whose head never comes.
        (OpenAi, false, OpenAi, "slow:600000"),
    ];
    let mut providers = Vec::new();
    let mut models = Vec::new();
    for (i, (_, _, protocol, faults)) in cases.iter().enumerate() {
        providers.push(provider(
            &format!("p{i}"),
            vec![
                up_in(&mock, *protocol, &format!("stuck{i}"), faults, 1),
                up_in(&mock, *protocol, &format!("ok{i}"), "", 1),
            ],
            json!({"timeouts": {"first_token": 400}, "affinity": "off"}),
        ));
        models.push(model(&format!("m{i}"), &format!("p{i}"), json!({})));
    }
    let gw = start(&catalog(providers, models)).await;
    for (i, (p, stream, protocol, _)) in cases.iter().enumerate() {
        let (_, req) = ask(*p, &format!("p{i}/m{i}"), "are you there", *stream);
        let r = gw.send(&req).await;
        assert_eq!(
            text_of(*p, &r, *stream),
            expected_reply(*protocol, "are you there"),
            "{p:?} stream={stream} from {protocol:?}"
        );
        let line = line_of(&gw, &r).await;
        let tried = line["tried"].as_array().unwrap();
        assert_eq!(tried.len(), 2, "{line}");
        assert_eq!(tried[0]["upstream"], format!("stuck{i}"));
        assert_eq!(tried[0]["failure"], "timeout");
        assert_eq!(tried[1]["upstream"], format!("ok{i}"));
        assert_eq!(line["status"], 200);
    }
    // The held streams were dropped by the gateway, not waited out.
    eventually(
        Duration::from_secs(20),
        "the stalled streams closed",
        || {
            let n = mock.aborted_streams();
            async move { (n >= 8).then_some(()) }
        },
    )
    .await;
    let m = metrics_text(gw.metrics).await;
    assert_eq!(
        metric_value(
            &m,
            "switchboard_upstream_attempts_total",
            &["outcome=\"timeout\""]
        ),
        Some(cases.len() as f64),
        "{m}"
    );
    // Without a first_token deadline a preamble starts the answer as before:
    // the inference_failures module has a stream stalled after its first frame
    // end with the family's error event (nothing retried).
}

/// With `continuation: off`, a stream that goes silent past `idle` ends
/// with the family's error event and nothing is asked again.
#[tokio::test]
async fn an_idle_stream_ends_with_the_family_error_event() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![provider(
            "slowpoke",
            vec![up(&mock, "idler", "stall:600000", 1)],
            json!({"timeouts": {"idle": 300}, "continuation": "off"}),
        )],
        vec![model("m", "slowpoke", json!({}))],
    );
    let gw = start(&cat).await;
    for p in [OpenAi, Anthropic, Gemini, Responses] {
        mock.clear();
        let (path, req) = ask(p, "slowpoke/m", "then silence", true);
        let r = gw.send(&req).await;
        let e = stream_error(p, &path, &r);
        assert!(e.to_string().contains("idle timeout"), "{p:?}: {e}");
        // The first frame had reached the client: nothing is retried.
        assert_eq!(mock.requests().len(), 1, "{p:?}");
        let line = line_of(&gw, &r).await;
        assert_eq!(line["attempts"], 1);
        assert_eq!(line["error_type"], "timeout", "{line}");
    }
    let m = metrics_text(gw.metrics).await;
    assert_eq!(
        metric_value(
            &m,
            "switchboard_upstream_cooldowns_total",
            &["upstream=\"idler\"", "reason=\"timeout\""]
        ),
        Some(4.0),
        "{m}"
    );
}

#[tokio::test]
async fn the_total_deadline_bounds_a_silent_upstream() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![
            provider(
                "mid",
                vec![up(&mock, "trickle", "stall:600000", 1)],
                json!({"timeouts": {"total": 800}}),
            ),
            provider(
                "mute",
                vec![up(&mock, "silent", "slow:600000", 1)],
                json!({"timeouts": {"total": 800}}),
            ),
        ],
        vec![
            model("streamy", "mid", json!({})),
            model("quiet", "mute", json!({})),
        ],
    );
    let gw = start(&cat).await;
    for p in [OpenAi, Anthropic, Gemini, Responses] {
        let (path, req) = ask(p, "mid/streamy", "go on", true);
        let e = stream_error(p, &path, &gw.send(&req).await);
        assert!(e.to_string().contains("total deadline"), "{p:?}: {e}");
        let (_, req) = ask(p, "mute/quiet", "anyone", false);
        let e = assert_error(p, &gw.send(&req).await, 504);
        assert!(e.to_string().contains("total deadline"), "{p:?}: {e}");
    }
}

#[tokio::test]
async fn a_fallback_answers_when_the_provider_is_down_and_only_when_the_request_fits() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![
            provider("dead", vec![dead("d1"), dead("d2")], json!({})),
            provider("small", vec![up(&mock, "small", "", 1)], json!({})),
            provider("backup", vec![up(&mock, "backup", "", 1)], json!({})),
        ],
        vec![
            model(
                "main",
                "dead",
                json!({"fallbacks": ["small/tiny-fb", "backup/big-fb"]}),
            ),
            model(
                "tiny-fb",
                "small",
                json!({"context_length": 1000, "max_output_tokens": 100}),
            ),
            model("big-fb", "backup", json!({})),
        ],
    );
    let gw = start(&cat).await;
    // A short request: the first fallback answers, and says so in every family.
    for p in [OpenAi, Anthropic, Gemini, Responses] {
        for stream in [false, true] {
            let (_, req) = ask(p, "dead/main", "short one", stream);
            let r = gw.send(&req).await;
            assert_eq!(text_of(p, &r, stream), expected_reply(OpenAi, "short one"));
            assert_eq!(r.header("x-switchboard-model"), Some("small/tiny-fb"));
            let want = match p {
                OpenAi | Responses => "small/tiny-fb",
                Anthropic | Gemini => "tiny-fb",
            };
            assert_eq!(answer_model(p, &r, stream), want, "{p:?} stream={stream}");
        }
    }
    let first = access(&gw).into_iter().find(|l| l["path"] == CHAT).unwrap();
    assert_eq!(first["fallback_from"], "dead/main", "{first}");
    assert_eq!(first["provider"], "small");
    assert_eq!(first["model"], "tiny-fb");
    let tried = first["tried"].as_array().unwrap();
    assert_eq!(tried.len(), 3, "{first}");
    assert_eq!(tried[0]["failure"], "unreachable");
    assert_eq!(tried[1]["failure"], "unreachable");
    assert_eq!(tried[2]["model"], "tiny-fb");
    assert_eq!(hits(&mock, "small"), 8);

    // A request too long for the small fallback's context goes to the next one.
    let long = "the quick brown fox jumps over the lazy dog ".repeat(300);
    let (_, req) = ask(OpenAi, "dead/main", &long, false);
    let r = gw.send(&req).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-switchboard-model"), Some("backup/big-fb"));
    assert_eq!(r.json()["model"], "backup/big-fb");
    assert_eq!(
        hits(&mock, "small"),
        8,
        "the small fallback was sent a request it cannot fit"
    );
    assert_eq!(hits(&mock, "backup"), 1);
    let m = metrics_text(gw.metrics).await;
    assert_eq!(
        metric_value(
            &m,
            "switchboard_fallbacks_total",
            &["model=\"dead/main\"", "fallback=\"small/tiny-fb\""]
        ),
        Some(8.0),
        "{m}"
    );
    assert_eq!(
        metric_value(
            &m,
            "switchboard_fallbacks_total",
            &["fallback=\"backup/big-fb\""]
        ),
        Some(1.0)
    );
}

/// With `continuation: off`, nothing is asked again once the client has a
/// byte of the answer (the default continues a cut stream: see the tests
/// after `a_cut_stream_is_continued_with_a_prefill_on_every_route`).
#[tokio::test]
async fn nothing_is_retried_after_the_first_byte() {
    let mock = MockUpstream::start().await;
    let mut providers = Vec::new();
    let mut models = Vec::new();
    for (i, faults) in ["cut", "stream-error", "malformed"].iter().enumerate() {
        providers.push(provider(
            &format!("p{i}"),
            vec![
                up(&mock, &format!("bad{i}"), faults, 1),
                up(&mock, &format!("good{i}"), "", 1),
            ],
            // Round-robin: the first pick is the failing upstream.
            json!({"continuation": "off", "affinity": "off"}),
        ));
        models.push(model(&format!("m{i}"), &format!("p{i}"), json!({})));
    }
    providers.push(provider(
        "whole",
        vec![
            up(&mock, "halfbody", "cut", 1),
            up(&mock, "fullbody", "", 1),
        ],
        json!({"affinity": "off"}),
    ));
    models.push(model("w", "whole", json!({})));
    let gw = start(&catalog(providers, models)).await;
    for i in 0..3 {
        let (path, req) = ask(OpenAi, &format!("p{i}/m{i}"), "break mid-way", true);
        let r = gw.send(&req).await;
        if i == 2 {
            // One unreadable frame is skipped: the stream goes on to its end.
            assert_eq!(
                text_of(OpenAi, &r, true),
                expected_reply(OpenAi, "break mid-way")
            );
            assert_eq!(line_of(&gw, &r).await["skipped_frames"], 1);
        } else {
            stream_error(OpenAi, &path, &r);
        }
        assert_eq!(hits(&mock, &format!("bad{i}")), 1);
        assert_eq!(
            hits(&mock, &format!("good{i}")),
            0,
            "a stream was retried after bytes reached the client"
        );
        assert_eq!(line_of(&gw, &r).await["attempts"], 1);
    }
    // A whole answer cut short never reached the client: it is retried.
    let (_, req) = ask(OpenAi, "whole/w", "whole please", false);
    let r = gw.send(&req).await;
    assert_eq!(
        text_of(OpenAi, &r, false),
        expected_reply(OpenAi, "whole please")
    );
    assert_eq!((hits(&mock, "halfbody"), hits(&mock, "fullbody")), (1, 1));
}

#[tokio::test]
async fn when_every_upstream_cools_the_soonest_is_still_tried() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![provider(
            "solo",
            vec![up(&mock, "only", "status:429,retry-after:7", 1)],
            json!({}),
        )],
        vec![model("m", "solo", json!({}))],
    );
    let gw = start(&cat).await;
    for n in 1..=2 {
        let (_, req) = ask(Anthropic, "solo/m", "hello", false);
        let r = gw.send(&req).await;
        let e = assert_error(Anthropic, &r, 429);
        assert_eq!(e["type"], "rate_limit_error");
        assert_eq!(r.header("retry-after"), Some("7"));
        assert_eq!(
            hits(&mock, "only"),
            n,
            "the only upstream is tried even while cooling"
        );
    }
}

#[tokio::test]
async fn pool_settings_are_validated_at_load() {
    let bad = [
        (json!({"weight": 0}), "$.providers[0].upstreams[0].weight"),
        (json!({"id": "a b"}), "$.providers[0].upstreams[0].id"),
    ];
    for (extra, path) in bad {
        let mut u = json!({"protocol": "openai", "base_url": "http://127.0.0.1:9/v1"});
        for (k, v) in extra.as_object().unwrap() {
            u[k] = v.clone();
        }
        let cat = catalog(
            vec![provider("p", vec![u], json!({}))],
            vec![model("m", "p", json!({}))],
        );
        check_refused(&cat, path).await;
    }
    for (extra, path) in [
        (
            json!({"timeouts": {"idle": 0}}),
            "$.providers[0].timeouts.idle",
        ),
        (
            json!({"timeouts": {"first_tok": 5}}),
            "$.providers[0].timeouts",
        ),
        (json!({"retries": 11}), "$.providers[0].retries"),
        (json!({"affinity": "sticky"}), "$.providers[0].affinity"),
    ] {
        let cat = catalog(
            vec![provider("p", vec![dead("x")], extra)],
            vec![model("m", "p", json!({}))],
        );
        check_refused(&cat, path).await;
    }
    for fallbacks in [json!(["p/nope"]), json!(["m"]), json!(["p/m"])] {
        let cat = catalog(
            vec![provider("p", vec![dead("x")], json!({}))],
            vec![model("m", "p", json!({"fallbacks": fallbacks}))],
        );
        check_refused(&cat, "$.models[0].fallbacks[0]").await;
    }
}

/// The binary's `--check` refuses `cat`, naming `path`.
async fn check_refused(cat: &Value, path: &str) {
    let dir = crate::common::gateway::TempDir::new();
    std::fs::write(dir.file("catalog.json"), cat.to_string()).unwrap();
    std::fs::write(dir.file("keys.json"), keys().to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--check")
        .arg("--catalog")
        .arg(dir.file("catalog.json"))
        .arg("--keys")
        .arg(dir.file("keys.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {cat}");
    assert!(err.contains(path), "{path} not named: {err}");
}

/// A stream that reached its finish reason and then ended without its
/// terminator (OpenAI `[DONE]`, Anthropic `message_stop`) is complete: the
/// client gets the whole answer and its terminator, no error event, whether
/// the stream was passed through or translated.
#[tokio::test]
async fn a_stream_past_its_finish_reason_is_complete_without_its_terminator() {
    for prompt in ["end it [[no-terminator]]", "end it [[cut-end]]"] {
        past_its_finish_reason(prompt).await;
    }
}

/// `prompt`'s stream ends after its finish reason without its terminator,
/// cleanly (`[[no-terminator]]`) or with the connection cut (`[[cut-end]]`).
async fn past_its_finish_reason(prompt: &str) {
    let (mock, gw) = crate::common::families::start().await;
    let cases = [
        (
            OpenAi,
            CHAT,
            openai_body("openai/gpt-5", prompt, None, true),
            OpenAi,
        ),
        (
            Anthropic,
            MESSAGES,
            anthropic_body("claude-sonnet-4.7", prompt, None, true),
            Anthropic,
        ),
        (
            OpenAi,
            CHAT,
            openai_body("anthropic/claude-sonnet-4.7", prompt, None, true),
            Anthropic,
        ),
    ];
    for (p, path, body, upstream) in cases {
        let r = gw.send(&call(p, path, &body)).await;
        assert_eq!(r.status, 200, "{p:?} via {upstream:?}: {}", r.text());
        let events = parse_sse(&r.body);
        assert!(
            !r.text().contains("\"error\""),
            "{p:?} via {upstream:?}: {}",
            r.text()
        );
        assert_eq!(
            stream_text(p, &event_json(&events)),
            expected_reply(upstream, prompt),
            "{p:?} via {upstream:?}"
        );
        let last = events.last().unwrap();
        match p {
            OpenAi => assert_eq!(last.data, "[DONE]", "{p:?} via {upstream:?}"),
            _ => assert_eq!(last.name(), "message_stop", "{p:?} via {upstream:?}"),
        }
        let line = line_of(&gw, &r).await;
        assert_eq!(line["error"], Value::Null, "{line}");
        assert!(line["output_tokens"].as_u64().unwrap() > 0, "{line}");
    }
    // Each answer came from one upstream call: nothing was resent.
    assert_eq!(mock.requests().len(), 3);
}

/// An upstream's "longer than the context" (each provider's own words)
/// keeps its code for the client and sends the request on to the first
/// fallback whose context is larger, never to one no larger and never
/// unchanged to the same model; with no such fallback the client gets the
/// upstream's error, code included.
#[tokio::test]
async fn a_context_overflow_keeps_its_code_and_goes_to_a_larger_context() {
    for upstream in [OpenAi, Anthropic, Gemini, Responses] {
        let mock = MockUpstream::start().await;
        let cat = catalog(
            vec![
                provider(
                    "main",
                    vec![
                        up_in(&mock, upstream, "main", "context-overflow", 1),
                        up_in(&mock, upstream, "main2", "context-overflow", 1),
                    ],
                    json!({}),
                ),
                provider("same", vec![up(&mock, "same", "", 1)], json!({})),
                provider("big", vec![up(&mock, "big", "", 1)], json!({})),
            ],
            vec![
                model(
                    "m",
                    "main",
                    json!({"context_length": 128000, "fallbacks": ["same/same-fb", "big/big-fb"]}),
                ),
                model("alone", "main", json!({"context_length": 128000})),
                model("same-fb", "same", json!({"context_length": 128000})),
                model("big-fb", "big", json!({"context_length": 1000000})),
            ],
        );
        let gw = start(&cat).await;
        let (_, req) = ask(OpenAi, "main/m", "a long one", false);
        let r = gw.send(&req).await;
        assert_eq!(r.status, 200, "{upstream:?}: {}", r.text());
        assert_eq!(r.header("x-switchboard-model"), Some("big/big-fb"));
        assert_eq!(
            (hits(&mock, "main") + hits(&mock, "main2"), hits(&mock, "same"), hits(&mock, "big")),
            (1, 0, 1),
            "{upstream:?}: the same model on another upstream, or a fallback no larger, was sent it"
        );
        let line = line_of(&gw, &r).await;
        let tried = line["tried"].as_array().unwrap();
        assert_eq!(tried[0]["failure"], "context_overflow", "{line}");
        assert_eq!(tried[0]["status"], 400, "{line}");
        // The overflowing upstream is alive: it is not cooled.
        let view = admin_upstreams(&gw).await;
        let main = [
            upstream_view(&view, "main", "main"),
            upstream_view(&view, "main", "main2"),
        ];
        assert!(main.iter().all(|u| u["healthy"] == true), "{view}");

        // No larger model to go to: the client hears the upstream's 400 with
        // its code, in its own shape.
        let (_, req) = ask(OpenAi, "main/alone", "a long one", false);
        let r = gw.send(&req).await;
        let e = assert_error(OpenAi, &r, 400);
        assert_eq!(e["code"], "context_length_exceeded", "{upstream:?}: {e}");
        assert_eq!(e["type"], "invalid_request_error", "{e}");
        let (_, req) = ask(Gemini, "main/alone", "a long one", false);
        let e = assert_error(Gemini, &gw.send(&req).await, 400);
        assert_eq!(e["status"], "INVALID_ARGUMENT", "{upstream:?}: {e}");
    }
}

/// A lone 5xx is often transient: when the provider has no other upstream
/// to go to, the same one gets one more try after a jittered pause before it
/// is blamed; one that keeps failing is cooled after its second 5xx and the
/// request moves on. With another upstream open, that one is tried at once.
#[tokio::test]
async fn a_lone_5xx_is_retried_once_on_the_same_upstream() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![
            provider(
                "flaky",
                vec![up(&mock, "flaky", "every:2,status:500", 1)],
                json!({}),
            ),
            provider(
                "solo",
                vec![up(&mock, "broken", "status:502", 1)],
                json!({}),
            ),
            provider("good", vec![up(&mock, "spare", "", 1)], json!({})),
            provider(
                "pair",
                vec![
                    up(&mock, "worse", "status:503", 1),
                    up(&mock, "fine", "", 1),
                ],
                json!({}),
            ),
        ],
        vec![
            model("m", "flaky", json!({})),
            model("s", "solo", json!({"fallbacks": ["good/g"]})),
            model("g", "good", json!({})),
            model("p", "pair", json!({})),
        ],
    );
    let gw = start(&cat).await;
    // The path's first request passes, its second fails once with a 500.
    let mut last = None;
    for prompt in ["one", "two"] {
        let (_, req) = ask(OpenAi, "flaky/m", prompt, false);
        let r = gw.send(&req).await;
        assert_eq!(text_of(OpenAi, &r, false), expected_reply(OpenAi, prompt));
        last = Some(r);
    }
    assert_eq!(
        hits(&mock, "flaky"),
        3,
        "the 500 was retried once, on the same upstream"
    );
    let second = &line_of(&gw, &last.unwrap()).await;
    assert_eq!(second["attempts"], 2, "{second}");
    assert_eq!(second["tried"][0]["failure"], "status_5xx", "{second}");
    assert_eq!(second["tried"][0]["status"], 500, "{second}");
    assert_eq!(second["tried"][0]["cooled_ms"], Value::Null, "{second}");
    assert_eq!(second["tried"][1]["failure"], Value::Null, "{second}");
    let view = admin_upstreams(&gw).await;
    assert_eq!(
        upstream_view(&view, "flaky", "flaky")["healthy"],
        true,
        "{view}"
    );

    // One that keeps failing, alone in its provider: twice, then cooled,
    // then the model's fallback.
    let (_, req) = ask(OpenAi, "solo/s", "three", false);
    let r = gw.send(&req).await;
    assert_eq!(text_of(OpenAi, &r, false), expected_reply(OpenAi, "three"));
    assert_eq!(r.header("x-switchboard-model"), Some("good/g"));
    let line = line_of(&gw, &r).await;
    assert_eq!(hits(&mock, "broken"), 2, "{line}");
    assert_eq!(line["tried"][0]["cooled_ms"], Value::Null, "{line}");
    assert!(line["tried"][1]["cooled_ms"].as_u64().is_some(), "{line}");
    assert_eq!(line["attempts"], 3, "{line}");

    // With another upstream open in the provider, a 5xx moves on to it at
    // once (the failing one cooled), as before: no pause on the same one.
    let (_, req) = ask(OpenAi, "pair/p", "four", false);
    let r = gw.send(&req).await;
    assert_eq!(text_of(OpenAi, &r, false), expected_reply(OpenAi, "four"));
    let line = line_of(&gw, &r).await;
    assert_eq!(hits(&mock, "worse"), 1, "{line}");
    assert_eq!(line["tried"][0]["upstream"], "worse", "{line}");
    assert!(line["tried"][0]["cooled_ms"].as_u64().is_some(), "{line}");
    assert_eq!(line["tried"][1]["upstream"], "fine", "{line}");
}

/// A rate limit with a short `retry-after` and nowhere else to go is waited
/// out once (never sooner), then the same upstream answers; a long one is
/// the client's 429 at once, with the header.
#[tokio::test]
async fn a_short_retry_after_is_waited_out_when_nothing_else_can_answer() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![
            provider(
                "solo",
                vec![up(&mock, "once", "every:2,status:429,retry-after:1", 1)],
                json!({}),
            ),
            provider(
                "long",
                vec![up(&mock, "long", "status:429,retry-after:30", 1)],
                json!({}),
            ),
        ],
        vec![model("m", "solo", json!({})), model("l", "long", json!({}))],
    );
    let gw = start(&cat).await;
    let mut last = None;
    for prompt in ["one", "two"] {
        let (_, req) = ask(Gemini, "solo/m", prompt, false);
        let r = gw.send(&req).await;
        assert_eq!(text_of(Gemini, &r, false), expected_reply(OpenAi, prompt));
        last = Some(r);
    }
    assert_eq!(hits(&mock, "once"), 3);
    let line = line_of(&gw, &last.unwrap()).await;
    assert_eq!(line["attempts"], 2, "{line}");
    assert_eq!(line["tried"][0]["failure"], "rate_limited", "{line}");
    assert_eq!(line["tried"][0]["cooled_ms"], 1000, "{line}");
    // The wait was the upstream's own: at least its retry-after.
    assert!(line["latency_ms"].as_f64().unwrap() >= 1000.0, "{line}");

    let (_, req) = ask(OpenAi, "long/l", "three", false);
    let r = gw.send(&req).await;
    assert_error(OpenAi, &r, 429);
    assert_eq!(r.header("retry-after"), Some("30"));
    assert_eq!(
        hits(&mock, "long"),
        1,
        "a long retry-after is not waited out"
    );
}

/// An upstream that was down comes back into use soon after it recovers:
/// when its cool-down ends it is half-open (one trial request at a time, the
/// others go elsewhere), the back-off is capped, and the first trial that
/// succeeds makes it healthy again. No client request fails meanwhile.
#[tokio::test]
async fn a_recovered_upstream_is_back_in_use_soon_after_it_recovers() {
    let spare = MockUpstream::start().await;
    let port = free_port();
    let cat = catalog(
        vec![provider(
            "pool",
            vec![
                json!({
                    "id": "primary",
                    "protocol": "openai",
                    "base_url": format!("http://127.0.0.1:{port}/primary/v1"),
                    "api_key_env": "SB_TEST_KEY_OPENAI",
                }),
                up(&spare, "spare", "", 1),
            ],
            json!({}),
        )],
        vec![model("m", "pool", json!({}))],
    );
    let gw = start(&cat).await;
    let send = || async {
        let (_, req) = ask(OpenAi, "pool/m", "hi", false);
        let r = gw.send(&req).await;
        assert_eq!(text_of(OpenAi, &r, false), expected_reply(OpenAi, "hi"));
    };
    // Down: the primary fails (and is probed again when its cool-downs end)
    // until it has failed twice in a row.
    eventually(
        Duration::from_secs(30),
        "two failures of the primary",
        || async {
            send().await;
            let view = admin_upstreams(&gw).await;
            let streak = upstream_view(&view, "pool", "primary")["failure_streak"].as_u64();
            (streak >= Some(2)).then_some(())
        },
    )
    .await;
    // Back: the primary's next trial finds it and it takes traffic again.
    let primary = MockUpstream::bind(format!("127.0.0.1:{port}").parse().unwrap())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "traffic back on the primary",
        || async {
            send().await;
            (hits(&primary, "primary") > 0).then_some(())
        },
    )
    .await;
    let view = admin_upstreams(&gw).await;
    assert_eq!(
        upstream_view(&view, "pool", "primary")["healthy"],
        true,
        "{view}"
    );
    for _ in 0..4 {
        send().await;
    }
    assert!(
        hits(&primary, "primary") >= 2,
        "the recovered primary shares the load again"
    );
}

/// No error event of any protocol in a stream (Responses objects carry
/// `"error": null`, which is no error).
fn assert_no_error_event(r: &Response, what: &str) {
    let text = r.text();
    assert!(
        !text.contains("\"error\":{") && !text.contains("\"type\":\"error\""),
        "{what}: {text}"
    );
}

/// The mock requests of upstream `id`, as JSON bodies.
fn bodies(mock: &MockUpstream, id: &str) -> Vec<Value> {
    let prefix = format!("/{id}/");
    mock.requests()
        .iter()
        .filter(|r| r.path.starts_with(&prefix))
        .map(|r| r.json().unwrap())
        .collect()
}

/// The text of the assistant turn that ends a request body of protocol
/// `p`, if one does (the continuation's prefill).
fn prefill_of(p: Protocol, body: &Value) -> Option<(String, Value)> {
    let last = match p {
        OpenAi | Anthropic => body["messages"].as_array()?.last()?.clone(),
        Gemini => body["contents"].as_array()?.last()?.clone(),
        Responses => body["input"].as_array()?.last()?.clone(),
    };
    let role_ok = match p {
        Gemini => last["role"] == "model",
        _ => last["role"] == "assistant",
    };
    if !role_ok {
        return None;
    }
    let content = match p {
        Gemini => &last["parts"],
        _ => &last["content"],
    };
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => return None,
    };
    Some((text, last))
}

/// A stream the upstream cuts mid-answer is continued: the answer's text so
/// far goes back up as an assistant prefill (in each upstream protocol's own
/// form; OpenAI-compatible `prefix: true` where the catalog says so), and
/// the client, of every protocol, gets one whole answer in one stream:
/// every word once, its terminator, no error event; the access log says the
/// stream was continued and sums the usage.
#[tokio::test]
async fn a_cut_stream_is_continued_with_a_prefill_on_every_route() {
    let mock = MockUpstream::start().await;
    let ups = [OpenAi, Anthropic, Gemini, Responses];
    let providers = ups
        .iter()
        .map(|u| {
            let id = format!("p-{}", u.name());
            let mut p = provider(&id, vec![up_in(&mock, *u, &id, "", 1)], json!({}));
            p["families"] = json!(["openai", "anthropic", "gemini"]);
            p
        })
        .collect();
    let models = ups
        .iter()
        .map(|u| {
            let prefill = if *u == OpenAi { "prefix" } else { "native" };
            model(
                &format!("m-{}", u.name()),
                &format!("p-{}", u.name()),
                json!({"prefill": prefill, "protocols": ["openai", "anthropic", "gemini"]}),
            )
        })
        .collect();
    let gw = start(&catalog(providers, models)).await;
    let prompt = "please go on [[cut]]";
    for u in ups {
        for client in [OpenAi, Anthropic, Gemini, Responses] {
            mock.clear();
            let qualified = format!("p-{0}/m-{0}", u.name());
            let (_, req) = ask(client, &qualified, prompt, true);
            let r = gw.send(&req).await;
            let what = format!("{client:?} client, {u:?} upstream");
            assert_eq!(r.status, 200, "{what}: {}", r.text());
            assert_no_error_event(&r, &what);
            assert_eq!(
                text_of(client, &r, true),
                expected_reply(u, prompt),
                "{what}"
            );
            let events = parse_sse(&r.body);
            let last = events.last().unwrap();
            match client {
                OpenAi => assert_eq!(last.data, "[DONE]", "{what}"),
                Anthropic => assert_eq!(last.name(), "message_stop", "{what}"),
                Responses => assert_eq!(last.name(), "response.completed", "{what}"),
                Gemini => assert!(last.data.contains("finishReason"), "{what}: {}", last.data),
            }
            // One message: one id, one start.
            if client == Anthropic {
                let starts = events
                    .iter()
                    .filter(|e| e.name() == "message_start")
                    .count();
                assert_eq!(starts, 1, "{what}");
            }
            if client == OpenAi {
                let ids: std::collections::BTreeSet<String> = event_json(&events)
                    .iter()
                    .map(|c| c["id"].as_str().unwrap().to_string())
                    .collect();
                assert_eq!(ids.len(), 1, "{what}: {ids:?}");
            }
            let sent = bodies(&mock, &format!("p-{}", u.name()));
            assert_eq!(
                sent.len(),
                2,
                "{what}: the first request, then one continuation"
            );
            assert!(prefill_of(u, &sent[0]).is_none(), "{what}");
            let (prefill, turn) = prefill_of(u, &sent[1]).unwrap_or_else(|| {
                panic!("{what}: the continuation carries no prefill: {}", sent[1])
            });
            assert!(
                !prefill.is_empty() && prefill.trim_end() == prefill,
                "{what}: {prefill:?}"
            );
            assert!(
                expected_reply(u, prompt).starts_with(&prefill),
                "{what}: {prefill:?}"
            );
            if u == OpenAi {
                assert_eq!(turn["prefix"], true, "{what}: {turn}");
            }
            let line = line_of(&gw, &r).await;
            assert_eq!(line["error"], Value::Null, "{what}: {line}");
            assert_eq!(line["continued"], 1, "{what}: {line}");
            assert!(
                line["output_tokens"].as_u64().unwrap() > 0,
                "{what}: {line}"
            );
        }
    }
    let m = metrics_text(gw.metrics).await;
    assert_eq!(
        metric_value(
            &m,
            "switchboard_stream_continuations_total",
            &["provider=\"p-anthropic\"", "outcome=\"continued\""]
        ),
        Some(4.0),
        "{m}"
    );
}

/// An upstream that goes silent mid-answer past the provider's `idle`
/// timeout is cut and the answer continued, as a broken connection is.
#[tokio::test]
async fn a_stream_stalled_mid_answer_is_continued() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![provider(
            "slow",
            vec![up_in(&mock, Anthropic, "slow", "", 1)],
            json!({"timeouts": {"idle": 300}}),
        )],
        vec![model("m", "slow", json!({"prefill": "native"}))],
    );
    let gw = start(&cat).await;
    let prompt = "a long answer [[stall-mid:600000]]";
    let (_, req) = ask(OpenAi, "slow/m", prompt, true);
    let r = gw.send(&req).await;
    assert_eq!(text_of(OpenAi, &r, true), expected_reply(Anthropic, prompt));
    assert_eq!(parse_sse(&r.body).last().unwrap().data, "[DONE]");
    let line = line_of(&gw, &r).await;
    assert_eq!(line["continued"], 1, "{line}");
    assert_eq!(line["error"], Value::Null, "{line}");
    assert_eq!(hits(&mock, "slow"), 2);
}

/// Without a prefill (a model that takes none), the continuation asks a
/// fallback for the whole answer again and passes on only what follows what
/// the client has, when the fallback's answer begins with it; a fallback
/// whose answer differs ends the stream with the error event instead of
/// mixing two answers.
#[tokio::test]
async fn a_restarted_answer_continues_only_when_it_begins_with_what_the_client_has() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![
            provider(
                "cuts",
                vec![up_in(&mock, OpenAi, "cuts", "cut", 1)],
                json!({}),
            ),
            provider(
                "cuts2",
                vec![up_in(&mock, OpenAi, "cuts2", "cut", 1)],
                json!({}),
            ),
            provider("same", vec![up_in(&mock, OpenAi, "same", "", 1)], json!({})),
            provider(
                "other",
                vec![up_in(&mock, Anthropic, "other", "", 1)],
                json!({}),
            ),
        ],
        vec![
            model("m", "cuts", json!({"fallbacks": ["same/m2"]})),
            model("m2", "same", json!({})),
            model("d", "cuts2", json!({"fallbacks": ["other/d2"]})),
            model("d2", "other", json!({})),
        ],
    );
    let gw = start(&cat).await;
    let prompt = "say it again";
    let (_, req) = ask(Anthropic, "cuts/m", prompt, true);
    let r = gw.send(&req).await;
    assert_eq!(text_of(Anthropic, &r, true), expected_reply(OpenAi, prompt));
    assert_eq!(parse_sse(&r.body).last().unwrap().name(), "message_stop");
    let again = bodies(&mock, "same");
    assert_eq!(again.len(), 1);
    assert!(prefill_of(OpenAi, &again[0]).is_none(), "{}", again[0]);
    let line = line_of(&gw, &r).await;
    assert_eq!(
        (line["continued"].clone(), line["error"].clone()),
        (json!(1), Value::Null),
        "{line}"
    );

    // The fallback speaks another protocol: the mock's answer differs.
    let (_, req) = ask(Anthropic, "cuts2/d", prompt, true);
    let r = gw.send(&req).await;
    let e = stream_error(Anthropic, MESSAGES, &r);
    assert!(e.to_string().contains("continuation"), "{e}");
    let text = text_of(Anthropic, &r, true);
    assert!(
        expected_reply(OpenAi, prompt).starts_with(&text) && !text.is_empty(),
        "{text:?}"
    );
    let m = metrics_text(gw.metrics).await;
    assert_eq!(
        metric_value(
            &m,
            "switchboard_stream_continuations_total",
            &["provider=\"other\"", "outcome=\"diverged\""]
        ),
        Some(1.0),
        "{m}"
    );
}

/// A model the catalog says takes a prefill but whose upstream refuses it
/// (a 400) is asked again without one; the refusal never reaches the client.
#[tokio::test]
async fn a_refused_prefill_is_asked_again_without_it() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![
            provider(
                "cuts",
                vec![up_in(&mock, OpenAi, "cuts", "cut", 1)],
                json!({}),
            ),
            provider(
                "picky",
                vec![up_in(&mock, OpenAi, "picky", "no-prefill", 1)],
                json!({}),
            ),
        ],
        vec![
            model("m", "cuts", json!({"fallbacks": ["picky/m2"]})),
            model("m2", "picky", json!({"prefill": "native"})),
        ],
    );
    let gw = start(&cat).await;
    let prompt = "no prefill here";
    let (_, req) = ask(OpenAi, "cuts/m", prompt, true);
    let r = gw.send(&req).await;
    assert_no_error_event(&r, "refused prefill");
    assert_eq!(text_of(OpenAi, &r, true), expected_reply(OpenAi, prompt));
    let sent = bodies(&mock, "picky");
    assert_eq!(sent.len(), 2, "with the prefill (refused), then without");
    assert!(prefill_of(OpenAi, &sent[0]).is_some(), "{}", sent[0]);
    assert!(prefill_of(OpenAi, &sent[1]).is_none(), "{}", sent[1]);
}

/// A cut in an answer with a tool call: the text goes up as the prefill and
/// the call the continuation makes is matched against the arguments the
/// client has; the client gets the text and the call whole, once.
#[tokio::test]
async fn a_cut_answer_with_a_tool_call_is_continued_whole() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![provider(
            "p",
            vec![up_in(&mock, Anthropic, "p", "", 1)],
            json!({}),
        )],
        vec![model("m", "p", json!({"prefill": "native"}))],
    );
    let gw = start(&cat).await;
    let prompt = "weather please [[text+tool]] [[cut]] [[chunk:0]]";
    let mut body = anthropic_body("m", prompt, None, true);
    body["tools"] = json!([{"name": "get_weather", "input_schema": {"type": "object"}}]);
    let r = gw.send(&call(Anthropic, MESSAGES, &body)).await;
    assert_no_error_event(&r, "tool call");
    let events = event_json(&parse_sse(&r.body));
    assert_eq!(
        stream_text(Anthropic, &events),
        expected_reply(Anthropic, prompt)
    );
    let args: String = events
        .iter()
        .filter(|e| e["delta"]["type"] == "input_json_delta")
        .map(|e| e["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        serde_json::from_str::<Value>(crate::common::mock_upstream::TOOL_ARGS).unwrap()
    );
    let starts: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "content_block_start")
        .collect();
    assert_eq!(starts.len(), 2, "one text block, one tool call: {starts:?}");
    assert_eq!(starts[1]["index"], 1);
    assert_eq!(hits(&mock, "p"), 2);
}

/// Gemini's JSON-array stream (`:streamGenerateContent` without `alt=sse`)
/// is continued too, passed through or translated: the client parses one
/// well-formed array holding the whole answer.
#[tokio::test]
async fn a_cut_json_array_stream_is_continued() {
    let mock = MockUpstream::start().await;
    let mut providers = Vec::new();
    let mut models = Vec::new();
    for u in [Gemini, Anthropic] {
        let id = format!("p-{}", u.name());
        providers.push(provider(&id, vec![up_in(&mock, u, &id, "", 1)], json!({})));
        models.push(model(
            &format!("m-{}", u.name()),
            &id,
            json!({"prefill": "native"}),
        ));
    }
    let gw = start(&catalog(providers, models)).await;
    let prompt = "an array please [[cut]]";
    for u in [Gemini, Anthropic] {
        let path = gemini_path(&format!("p-{0}/m-{0}", u.name()), GeminiMode::JsonArray);
        let r = gw
            .send(&call(Gemini, &path, &gemini_body(prompt, None)))
            .await;
        assert_eq!(r.status, 200, "{u:?}: {}", r.text());
        let items: Vec<Value> = serde_json::from_slice(&r.body)
            .unwrap_or_else(|e| panic!("{u:?}: not one JSON array ({e}): {}", r.text()));
        assert!(
            items.iter().all(|i| i.get("error").is_none()),
            "{u:?}: {}",
            r.text()
        );
        assert_eq!(
            stream_text(Gemini, &items),
            expected_reply(u, prompt),
            "{u:?}"
        );
        assert_eq!(hits(&mock, &format!("p-{}", u.name())), 2, "{u:?}");
    }
}

/// A stream cut inside a tool call's arguments, on a model that takes no
/// prefill: the answer is asked for again, the call it makes is matched
/// against the arguments the client has, and only the rest goes on, into
/// the same call (same index, same id): the client's call is whole, once,
/// passed through (OpenAI) and translated (Anthropic).
#[tokio::test]
async fn a_stream_cut_inside_a_tool_call_is_continued_in_the_same_call() {
    for client in [OpenAi, Anthropic] {
        let mock = MockUpstream::start().await;
        let cat = catalog(
            vec![provider(
                "p",
                vec![up_in(&mock, OpenAi, "p", "once,cut", 1)],
                json!({}),
            )],
            vec![model("m", "p", json!({}))],
        );
        let gw = start(&cat).await;
        let prompt = "weather in Paris [[tool]] [[chunk:0]]";
        let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
        let (path, mut body) = match client {
            OpenAi => (CHAT, openai_body("p/m", prompt, None, true)),
            _ => (MESSAGES, anthropic_body("m", prompt, None, true)),
        };
        body["tools"] = match client {
            OpenAi => tools,
            _ => json!([{"name": "get_weather", "input_schema": {"type": "object"}}]),
        };
        let r = gw.send(&call(client, path, &body)).await;
        assert_no_error_event(&r, &format!("{client:?}"));
        let events = event_json(&parse_sse(&r.body));
        let (ids, args): (Vec<String>, String) = match client {
            OpenAi => {
                let calls: Vec<&Value> = events
                    .iter()
                    .filter_map(|c| {
                        c["choices"][0]["delta"]["tool_calls"][0]
                            .as_object()
                            .map(|_| &c["choices"][0]["delta"]["tool_calls"][0])
                    })
                    .collect();
                assert!(calls.iter().all(|c| c["index"] == 0), "{calls:?}");
                (
                    calls
                        .iter()
                        .filter_map(|c| c["id"].as_str().map(str::to_string))
                        .collect(),
                    calls
                        .iter()
                        .filter_map(|c| c["function"]["arguments"].as_str())
                        .collect(),
                )
            }
            _ => (
                events
                    .iter()
                    .filter(|e| e["type"] == "content_block_start")
                    .map(|e| e["content_block"]["id"].as_str().unwrap().to_string())
                    .collect(),
                events
                    .iter()
                    .filter(|e| e["delta"]["type"] == "input_json_delta")
                    .map(|e| e["delta"]["partial_json"].as_str().unwrap())
                    .collect(),
            ),
        };
        assert_eq!(ids.len(), 1, "{client:?}: one call: {ids:?}");
        assert_eq!(args, crate::common::mock_upstream::TOOL_ARGS, "{client:?}");
        let sent = bodies(&mock, "p");
        assert_eq!(sent.len(), 2, "{client:?}");
        assert!(
            prefill_of(OpenAi, &sent[1]).is_none(),
            "{client:?}: {}",
            sent[1]
        );
        let line = line_of(&gw, &r).await;
        assert_eq!(line["continued"], 1, "{client:?}: {line}");
    }
}

/// The upstream's own error event mid-stream, of a kind another attempt may
/// not meet (Anthropic's `overloaded_error`, OpenAI's and Gemini's server
/// errors), is held back and the answer continued like a cut one; the
/// client, passed through or translated, reads one whole answer and never
/// the error.
#[tokio::test]
async fn an_overloaded_error_mid_stream_is_continued() {
    let mock = MockUpstream::start().await;
    let mut providers = Vec::new();
    let mut models = Vec::new();
    for u in [Anthropic, OpenAi, Gemini] {
        let id = format!("p-{}", u.name());
        let mut p = provider(&id, vec![up_in(&mock, u, &id, "", 1)], json!({}));
        p["families"] = json!(["openai", "anthropic", "gemini"]);
        providers.push(p);
        let prefill = if u == OpenAi { "prefix" } else { "native" };
        models.push(model(
            &format!("m-{}", u.name()),
            &id,
            json!({"prefill": prefill}),
        ));
    }
    let gw = start(&catalog(providers, models)).await;
    let prompt = "keep going [[stream-error]]";
    for u in [Anthropic, OpenAi, Gemini] {
        for client in [u, if u == OpenAi { Anthropic } else { OpenAi }] {
            mock.clear();
            let (_, req) = ask(client, &format!("p-{0}/m-{0}", u.name()), prompt, true);
            let r = gw.send(&req).await;
            let what = format!("{client:?} client, {u:?} upstream");
            assert_no_error_event(&r, &what);
            assert_eq!(
                text_of(client, &r, true),
                expected_reply(u, prompt),
                "{what}"
            );
            assert_eq!(hits(&mock, &format!("p-{}", u.name())), 2, "{what}");
            let line = line_of(&gw, &r).await;
            assert_eq!(line["continued"], 1, "{what}: {line}");
        }
    }
}

/// A prefilled continuation drops the request's reasoning settings (a
/// prefill cannot be combined with them): the drop is reported in the
/// access log's `adjusted`, as every drop is (the answer's head, with its
/// `x-switchboard-adjusted`, went out before the cut).
#[tokio::test]
async fn a_continuation_reports_the_reasoning_settings_it_drops() {
    let mock = MockUpstream::start().await;
    let cat = catalog(
        vec![provider(
            "p",
            vec![up_in(&mock, Anthropic, "p", "", 1)],
            json!({}),
        )],
        vec![model("m", "p", json!({"prefill": "native"}))],
    );
    let gw = start(&cat).await;
    let prompt = "think then answer [[cut]]";
    let mut body = anthropic_body("m", prompt, None, true);
    body["max_tokens"] = json!(4096);
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let r = gw.send(&call(Anthropic, MESSAGES, &body)).await;
    assert_no_error_event(&r, "thinking");
    assert_eq!(
        text_of(Anthropic, &r, true),
        expected_reply(Anthropic, prompt)
    );
    let sent = bodies(&mock, "p");
    assert_eq!(sent.len(), 2);
    assert!(sent[0].get("thinking").is_some(), "{}", sent[0]);
    assert!(sent[1].get("thinking").is_none(), "{}", sent[1]);
    let line = line_of(&gw, &r).await;
    assert!(line["adjusted"].to_string().contains("thinking"), "{line}");
}
