//! End-to-end: cost that matches the provider's bill (docs/pricing.md), on
//! the real binary with the mock upstream. For every client family × upstream
//! protocol, whole and streamed, an answer whose usage carries cache reads
//! and cache writes (5-minute and one-hour, where the upstream protocol can
//! say so) is logged with every prompt token counted once, the cache figures
//! apart, and the cost exactly (to 1e-9 USD) what the formula says; the
//! client gets the usage in its own shape, without double counting; a
//! long-context tier applies above its boundary and not at it; a budget
//! settles to that cost and reserves the worst case at the dearest rate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::{eventually, metric_value, metrics_text};
use crate::common::gateway::{authed, model, Gateway, KEY};
use crate::common::mock_upstream::{MockUpstream, Protocol};
use serde_json::{json, Value};
use std::time::Duration;

/// The rates every test model has, in pico-USD (1e-12 USD) per token:
/// Claude Sonnet's published rates, its long-context tier above 200,000
/// input tokens, and a request price.
#[derive(Clone, Copy)]
struct Rates {
    prompt: i128,
    completion: i128,
    cache_read: i128,
    cache_write: i128,
    cache_write_1h: i128,
    request: i128,
}

const BASE: Rates = Rates {
    prompt: 3_000_000,
    completion: 15_000_000,
    cache_read: 300_000,
    cache_write: 3_750_000,
    cache_write_1h: 6_000_000,
    request: 100_000_000,
};
const LONG: Rates = Rates {
    prompt: 6_000_000,
    completion: 22_500_000,
    cache_read: 600_000,
    cache_write: 7_500_000,
    cache_write_1h: 12_000_000,
    request: 100_000_000,
};
const TIER_ABOVE: u64 = 200_000;

fn pricing() -> Value {
    json!({
        "prompt": "0.000003", "completion": "0.000015",
        "cache_read": "0.0000003", "cache_write": "0.00000375", "cache_write_1h": "0.000006",
        "request": "0.0001",
        "tiers": [{"above_input_tokens": TIER_ABOVE, "prompt": "0.000006", "completion": "0.0000225",
            "cache_read": "0.0000006", "cache_write": "0.0000075", "cache_write_1h": "0.000012"}]
    })
}

/// Usage as the gateway should account it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Counted {
    input: u64,
    cached: u64,
    write: u64,
    write_1h: u64,
}

/// The formula, written out again: nano-USD, rounded up once.
fn expected_nanos(c: Counted, output: u64) -> i64 {
    let r = if c.input > TIER_ABOVE { LONG } else { BASE };
    let uncached = c.input - c.cached - c.write;
    let pico = i128::from(uncached) * r.prompt
        + i128::from(c.cached) * r.cache_read
        + i128::from(c.write - c.write_1h) * r.cache_write
        + i128::from(c.write_1h) * r.cache_write_1h
        + i128::from(output) * r.completion
        + r.request;
    i64::try_from((pico + 999) / 1000).unwrap()
}

/// One provider per upstream protocol, each with one model at [`pricing`].
fn catalog(mock: &MockUpstream) -> Value {
    let up = |p: Protocol| json!({"protocol": p.name(), "base_url": mock.base_url(p), "api_key_env": format!("SB_TEST_KEY_{}", p.name().to_uppercase())});
    let all = json!(["openai", "anthropic", "gemini"]);
    let m = |id: &str, provider: &str| {
        model(
            id,
            provider,
            json!({"pricing": pricing(), "context_length": 1_000_000, "max_output_tokens": 1000}),
        )
    };
    json!({
        "providers": [
            {"id": "oa", "families": all, "upstreams": [up(Protocol::OpenAi)]},
            {"id": "an", "families": all, "upstreams": [up(Protocol::Anthropic)]},
            {"id": "gg", "families": all, "upstreams": [up(Protocol::Gemini)]},
            {"id": "rs", "families": all, "upstreams": [up(Protocol::Responses)]}
        ],
        "models": [m("p-oa", "oa"), m("p-an", "an"), m("p-gg", "gg"), m("p-rs", "rs")]
    })
}

const BUDGET_KEY: &str = "sk-pricing-budget";
const TIGHT_KEY: &str = "sk-pricing-tight";

fn keys() -> Value {
    json!({"keys": [{"id": "test", "key": KEY}]})
}

const UPSTREAMS: [(Protocol, &str); 4] = [
    (Protocol::OpenAi, "p-oa"),
    (Protocol::Anthropic, "p-an"),
    (Protocol::Gemini, "p-gg"),
    (Protocol::Responses, "p-rs"),
];

/// The client families: OpenAI chat, Anthropic Messages, Gemini, Responses.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Client {
    Chat,
    Messages,
    Gemini,
    Responses,
}

const CLIENTS: [Client; 4] = [
    Client::Chat,
    Client::Messages,
    Client::Gemini,
    Client::Responses,
];

/// A request of `client` for `model` with `text`, whole or streamed:
/// (family, path, body).
fn request(client: Client, model: &str, text: &str, stream: bool) -> (&'static str, String, Value) {
    let (family, path, mut body) = match client {
        Client::Chat => (
            "openai",
            "/v1/chat/completions".to_string(),
            json!({"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": text}]}),
        ),
        Client::Messages => (
            "anthropic",
            "/anthropic/v1/messages".to_string(),
            json!({"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": text}]}),
        ),
        Client::Gemini => {
            let how = if stream {
                "streamGenerateContent?alt=sse"
            } else {
                "generateContent"
            };
            (
                "gemini",
                format!("/google/v1beta/models/{model}:{how}"),
                json!({"contents": [{"role": "user", "parts": [{"text": text}]}],
                    "generationConfig": {"maxOutputTokens": 100}}),
            )
        }
        Client::Responses => (
            "openai",
            "/v1/responses".to_string(),
            json!({"model": model, "max_output_tokens": 100, "input": text}),
        ),
    };
    if stream && client != Client::Gemini {
        body["stream"] = json!(true);
    }
    (family, path, body)
}

/// Sends `client`'s request with `id` as its request id; returns the response.
async fn send(
    gw: &Gateway,
    client: Client,
    model: &str,
    text: &str,
    stream: bool,
    key: &str,
    id: &str,
) -> crate::common::http_client::Response {
    let (family, path, body) = request(client, model, text, stream);
    gw.send(&authed(family, &path, key, &body).header("x-request-id", id))
        .await
}

/// The usage a whole answer gives the client, read in the client's shape as
/// (every prompt token, cache reads, cache writes).
fn client_usage(client: Client, v: &Value) -> (u64, u64, u64) {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    match client {
        Client::Chat => {
            let u = &v["usage"];
            (
                n(&u["prompt_tokens"]),
                n(&u["prompt_tokens_details"]["cached_tokens"]),
                n(&u["prompt_tokens_details"]["cache_write_tokens"]),
            )
        }
        Client::Messages => {
            // Anthropic's input_tokens leaves the cache reads and writes out.
            let u = &v["usage"];
            let (read, write) = (
                n(&u["cache_read_input_tokens"]),
                n(&u["cache_creation_input_tokens"]),
            );
            (n(&u["input_tokens"]) + read + write, read, write)
        }
        Client::Gemini => {
            let u = &v["usageMetadata"];
            (
                n(&u["promptTokenCount"]),
                n(&u["cachedContentTokenCount"]),
                0,
            )
        }
        Client::Responses => {
            let u = &v["usage"];
            (
                n(&u["input_tokens"]),
                n(&u["input_tokens_details"]["cached_tokens"]),
                n(&u["input_tokens_details"]["cache_write_tokens"]),
            )
        }
    }
}

/// What the upstream protocol can report of `[[cached:6000]]
/// [[cache-write:2000]] [[cache-write-1h:500]]` on 10,000 prompt tokens:
/// Gemini reports no writes; only Anthropic splits them by lifetime.
fn counted(upstream: Protocol, input: u64, cached: u64, write: u64, write_1h: u64) -> Counted {
    let (write, write_1h) = match upstream {
        Protocol::Gemini => (0, 0),
        Protocol::Anthropic => (write, write_1h),
        Protocol::OpenAi | Protocol::Responses => (write, 0),
    };
    Counted {
        input,
        cached,
        write,
        write_1h,
    }
}

/// Checks the access line of `id` against `want`: the token figures, and
/// the cost to the nano-USD. Returns the cost in nano-USD.
async fn check_line(gw: &Gateway, id: &str, want: Counted, cell: &str) -> i64 {
    let line = gw.access_line(id).await;
    assert_eq!(line["status"], 200, "{cell}: {line}");
    let n = |k: &str| {
        line[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{cell}: {k}: {line}"))
    };
    assert_eq!(n("input_tokens"), want.input, "{cell}: {line}");
    assert_eq!(n("cached_tokens"), want.cached, "{cell}: {line}");
    assert_eq!(n("cache_write_tokens"), want.write, "{cell}: {line}");
    assert_eq!(
        line["cache_write_1h_tokens"].as_u64().unwrap_or(0),
        want.write_1h,
        "{cell}: {line}"
    );
    let output = n("output_tokens");
    assert!(output > 0, "{cell}: {line}");
    let cost = line["cost_usd"].as_f64().unwrap();
    let want_nanos = expected_nanos(want, output);
    assert_eq!(
        (cost * 1e9).round() as i64,
        want_nanos,
        "{cell}: cost {cost} for {want:?} + {output} out: {line}"
    );
    want_nanos
}

#[tokio::test]
async fn every_pair_prices_cache_reads_and_writes_exactly() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let text = "price me [[prompt-tokens:10000]] [[cached:6000]] [[cache-write:2000]] [[cache-write-1h:500]]";
    let mut per_model = std::collections::BTreeMap::<&str, i64>::new();
    for client in CLIENTS {
        for (upstream, model) in UPSTREAMS {
            for stream in [false, true] {
                let cell = format!("{client:?} → {} (stream: {stream})", upstream.name());
                let id = format!("price-{client:?}-{}-{stream}", upstream.name());
                let r = send(&gw, client, model, text, stream, KEY, &id).await;
                assert_eq!(r.status, 200, "{cell}: {}", r.text());
                let want = counted(upstream, 10_000, 6_000, 2_000, 500);
                *per_model.entry(model).or_default() += check_line(&gw, &id, want, &cell).await;
                if !stream {
                    // The client's own usage: every prompt token once, the
                    // cache figures beside (Gemini has no field for writes).
                    let (input, read, write) = client_usage(client, &r.json());
                    let client_write = if client == Client::Gemini {
                        0
                    } else {
                        want.write
                    };
                    assert_eq!(
                        (input, read, write),
                        (want.input, want.cached, client_write),
                        "{cell}: {}",
                        r.text()
                    );
                }
            }
        }
    }
    // The cost metric is the sum of the logged costs, to the nano-USD.
    let text = metrics_text(gw.metrics).await;
    for (model, nanos) in per_model {
        let label = format!("model=\"{model}\"");
        let usd = metric_value(&text, "switchboard_cost_usd_total", &[&label]).unwrap();
        assert_eq!((usd * 1e9).round() as i64, nanos, "{model}");
    }
}

#[tokio::test]
async fn deepseek_cache_hits_are_cache_reads() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let text = "deepseek [[prompt-tokens:4000]] [[cached:3000]] [[deepseek-cache]]";
    for client in CLIENTS {
        for stream in [false, true] {
            let id = format!("ds-{client:?}-{stream}");
            let r = send(&gw, client, "p-oa", text, stream, KEY, &id).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let want = counted(Protocol::OpenAi, 4_000, 3_000, 0, 0);
            check_line(&gw, &id, want, &format!("{client:?} (stream: {stream})")).await;
        }
    }
}

#[tokio::test]
async fn a_long_context_tier_prices_the_whole_request_above_its_boundary() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    // At the boundary: base rates; one token over: the tier's, for every token.
    for (input, tiered) in [(TIER_ABOVE, false), (TIER_ABOVE + 1, true)] {
        for (client, upstream, model) in [
            (Client::Messages, Protocol::Anthropic, "p-an"),
            (Client::Chat, Protocol::Gemini, "p-gg"),
        ] {
            let text = format!(
                "long [[prompt-tokens:{input}]] [[cached:150000]] [[cache-write:10000]] [[cache-write-1h:4000]]"
            );
            let id = format!("tier-{input}-{client:?}");
            let r = send(&gw, client, model, &text, false, KEY, &id).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let want = counted(upstream, input, 150_000, 10_000, 4_000);
            let cost = check_line(&gw, &id, want, &id).await;
            let line = gw.access_line(&id).await;
            let output = line["output_tokens"].as_u64().unwrap();
            // The tier's figure differs from the base's: the boundary matters.
            let base = {
                let r = BASE;
                let uncached = want.input - want.cached - want.write;
                let pico = i128::from(uncached) * r.prompt
                    + i128::from(want.cached) * r.cache_read
                    + i128::from(want.write - want.write_1h) * r.cache_write
                    + i128::from(want.write_1h) * r.cache_write_1h
                    + i128::from(output) * r.completion
                    + r.request;
                i64::try_from((pico + 999) / 1000).unwrap()
            };
            assert_eq!(cost == base, !tiered, "{id}: {cost} vs base {base}");
        }
    }
}

/// `n` nano-USD as the budget header writes it (at least two decimals).
fn usd(n: i64) -> String {
    let mut f = format!("{:09}", n % 1_000_000_000);
    while f.len() > 2 && f.ends_with('0') {
        f.pop();
    }
    format!("{}.{f}", n / 1_000_000_000)
}

#[tokio::test]
async fn a_budget_settles_to_the_cost_and_reserves_at_the_dearest_rate() {
    // A request whose worst case fits a budget at the prompt rate but not at
    // the dearest rate an input token can be billed at (the one-hour cache
    // write, twice the prompt rate): the input is bounded by the body's
    // bytes, the output by max_tokens (100), plus the request price.
    let (_, _, wide) = request(Client::Messages, "p-an", &"x".repeat(4000), false);
    let len = i64::try_from(serde_json::to_vec(&wide).unwrap().len()).unwrap();
    let rest = 100 * 15_000 + 100_000;
    let at_prompt = len * 3_000 + rest;
    let at_dearest = len * 6_000 + rest;
    // Halfway: a few percent of difference between the client's body and the
    // one sent upstream cannot cross it.
    let tight = (at_prompt + at_dearest) / 2;
    let mock = MockUpstream::start().await;
    let keys = json!({"keys": [
        {"id": "budgeted", "key": BUDGET_KEY, "budget": {"usd": "1", "period": "total"}},
        {"id": "tight", "key": TIGHT_KEY, "budget": {"usd": usd(tight), "period": "total"}}
    ]});
    let gw = Gateway::start_with(&catalog(&mock), &keys, &[]).await;

    // Settled to the exact cost: mostly cache reads, a tenth of the prompt price.
    let text = "budget [[prompt-tokens:50000]] [[cached:45000]] [[cache-write:1000]]";
    let r = send(
        &gw,
        Client::Messages,
        "p-an",
        text,
        false,
        BUDGET_KEY,
        "bud-1",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let want = counted(Protocol::Anthropic, 50_000, 45_000, 1_000, 0);
    let cost = check_line(&gw, "bud-1", want, "bud-1").await;
    assert_eq!(
        r.header("x-switchboard-budget-remaining"),
        Some(usd(1_000_000_000 - cost).as_str())
    );

    let r = gw
        .send(&authed(
            "anthropic",
            "/anthropic/v1/messages",
            TIGHT_KEY,
            &wide,
        ))
        .await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.text().contains("budget"), "{}", r.text());
    // A smaller request fits, and settles to its real cost.
    let r = send(
        &gw,
        Client::Messages,
        "p-an",
        "small [[cached:10]]",
        false,
        TIGHT_KEY,
        "bud-2",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let line = gw.access_line("bud-2").await;
    let cost = (line["cost_usd"].as_f64().unwrap() * 1e9).round() as i64;
    assert_eq!(
        r.header("x-switchboard-budget-remaining"),
        Some(usd(tight - cost).as_str())
    );
}

#[tokio::test]
async fn new_prices_apply_on_reload_and_an_invalid_tier_is_refused() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let text = "reload [[prompt-tokens:1000]] [[cached:800]]";
    let cost_of = |id: String| {
        let gw = &gw;
        async move {
            let r = send(gw, Client::Chat, "p-oa", text, false, KEY, &id).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let line = gw.access_line(&id).await;
            let output = line["output_tokens"].as_u64().unwrap();
            let cost = (line["cost_usd"].as_f64().unwrap() * 1e9).round() as i64;
            (cost, output)
        }
    };
    let (before, output) = cost_of("reload-0".into()).await;
    let want = counted(Protocol::OpenAi, 1_000, 800, 0, 0);
    assert_eq!(before, expected_nanos(want, output));

    // Cache reads made free and the request price dropped: the next requests
    // cost 200 × prompt + output × completion.
    let mut cheaper = catalog(&mock);
    for m in cheaper["models"].as_array_mut().unwrap() {
        m["pricing"]["cache_read"] = json!("0");
        m["pricing"]["request"] = json!("0");
    }
    gw.write_catalog(&cheaper);
    let after = eventually(Duration::from_secs(10), "the new prices", || {
        let id = format!("reload-{}", rand_id());
        async move {
            let (cost, output) = cost_of(id).await;
            let want = i64::try_from(
                (200 * BASE.prompt + i128::from(output) * BASE.completion + 999) / 1000,
            )
            .unwrap();
            (cost == want).then_some(cost)
        }
    })
    .await;
    assert!(after < before);

    // Tiers out of order: refused with their path, the prices stay.
    let mut bad = cheaper.clone();
    bad["models"][0]["pricing"]["tiers"] = json!([
        {"above_input_tokens": 500, "prompt": "1"},
        {"above_input_tokens": 100, "prompt": "2"}
    ]);
    gw.write_catalog(&bad);
    eventually(Duration::from_secs(10), "the reload failure", || async {
        let log = gw.log();
        (log.contains("reload failed")
            && log.contains("$.models[0].pricing.tiers[1].above_input_tokens"))
        .then_some(())
    })
    .await;
    let (cost, _) = cost_of("reload-last".into()).await;
    assert_eq!(cost, after);
}

/// A fresh suffix for a request id.
fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::SeqCst)
}
