//! Invalid UTF-8 inside an upstream's JSON (item 12). JSON must be UTF-8
//! (RFC 8259 §8.1), so an upstream answer carrying other bytes is broken: on
//! every route, passed through or translated, a stream ends with the client
//! family's error event (no clean end, no raw byte relayed) and a whole
//! answer is a 502 in the family's shape; the upstream is cooled like any
//! other broken answer. Scripted raw-socket upstreams, one per protocol,
//! answer with a frame whose JSON string holds invalid bytes.

use super::support::{read_request, UpstreamRequest};
use crate::common::families::{
    assert_error, eventually, gemini_path, metric_value, metrics_text, stream_error, GeminiMode,
    CHAT, MESSAGES,
};
use crate::common::gateway::{authed, keys, model, Gateway, KEY};
use crate::common::http_client::Response;
use crate::common::mock_upstream::Protocol;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// Bytes that are not UTF-8: a lone continuation byte, a truncated
/// two-byte sequence, and 0xFF (never valid).
const BAD: &[u8] = b"\x80\xc3(\xff";

/// `text` with [`BAD`] spliced in where `@` stands.
fn with_bad(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, part) in text.split('@').enumerate() {
        if i > 0 {
            out.extend_from_slice(BAD);
        }
        out.extend_from_slice(part.as_bytes());
    }
    out
}

/// An upstream stream in protocol `p` whose second text delta holds [`BAD`]
/// inside its JSON string, then a clean end.
fn bad_stream(p: Protocol) -> Vec<u8> {
    let text = match p {
        Protocol::OpenAi => concat!(
            "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo @\"},\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n",
            "data: [DONE]\n\n"
        ),
        Protocol::Anthropic => concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"up\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo @\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        ),
        Protocol::Gemini => concat!(
            "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]},\"index\":0}],\"modelVersion\":\"up\"}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"lo @\"}]},\"index\":0}],\"modelVersion\":\"up\"}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"!\"}]},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2,\"totalTokenCount\":5},\"modelVersion\":\"up\"}\r\n\r\n"
        ),
        Protocol::Responses => concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_up\",\"object\":\"response\",\"created_at\":1,\"status\":\"in_progress\",\"model\":\"up\",\"output\":[]}}\n\n",
            "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n",
            "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hel\"}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"lo @\"}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":5,\"response\":{\"id\":\"resp_up\",\"object\":\"response\",\"created_at\":1,\"status\":\"completed\",\"model\":\"up\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hello\",\"annotations\":[]}]}],\"usage\":{\"input_tokens\":3,\"output_tokens\":2,\"total_tokens\":5}}}\n\n"
        ),
    };
    with_bad(text)
}

/// A whole upstream answer in protocol `p` whose text holds [`BAD`].
fn bad_whole(p: Protocol) -> Vec<u8> {
    let v = match p {
        Protocol::OpenAi => {
            json!({"id": "c1", "object": "chat.completion", "created": 1, "model": "up",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello @"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
        }
        Protocol::Anthropic => {
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "up",
            "content": [{"type": "text", "text": "Hello @"}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 2}})
        }
        Protocol::Gemini => {
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello @"}]},
            "finishReason": "STOP", "index": 0}], "modelVersion": "up",
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}})
        }
        Protocol::Responses => {
            json!({"id": "resp_up", "object": "response", "created_at": 1, "status": "completed",
            "model": "up", "output": [{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello @", "annotations": []}]}],
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}})
        }
    };
    with_bad(&v.to_string())
}

/// A raw-socket upstream speaking `p`: a stream request gets
/// [`bad_stream`], a whole one [`bad_whole`], each on a closed connection.
async fn scripted(p: Protocol) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let Some(UpstreamRequest { head, body }) = read_request(&mut s).await else {
                    return;
                };
                let body = String::from_utf8_lossy(&body);
                let stream = head.contains("streamGenerateContent")
                    || body.contains("\"stream\":true")
                    || body.contains("\"stream\": true");
                let (ct, payload) = if stream {
                    ("text/event-stream", bad_stream(p))
                } else {
                    ("application/json", bad_whole(p))
                };
                let mut out = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {ct}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    payload.len()
                )
                .into_bytes();
                out.extend_from_slice(&payload);
                let _ = s.write_all(&out).await;
                let _ = s.shutdown().await;
            });
        }
    });
    port
}

/// The base URL a provider of protocol `p` on `port` is configured with.
fn base_url(p: Protocol, port: u16) -> String {
    match p {
        Protocol::Gemini => format!("http://127.0.0.1:{port}/v1beta"),
        _ => format!("http://127.0.0.1:{port}/v1"),
    }
}

/// A gateway with one provider per upstream protocol, each on its own
/// scripted upstream (`p-openai/m-openai`, `p-anthropic/m-anthropic`, …),
/// and `x-anthropic/m-x`: an Anthropic upstream serving family A and D
/// clients (translated).
async fn gateway() -> Gateway {
    let all = json!(["openai", "anthropic", "gemini"]);
    let mut providers = Vec::new();
    let mut models = Vec::new();
    for p in Protocol::ALL {
        let port = scripted(p).await;
        let id = format!("p-{}", p.name());
        providers.push(json!({"id": id, "families": all, "upstreams": [
            {"protocol": p.name(), "base_url": base_url(p, port), "api_key_env": format!("SB_TEST_KEY_{}", p.name().to_uppercase())}]}));
        models.push(model(
            &format!("m-{}", p.name()),
            &id,
            json!({"upstream_model": "up"}),
        ));
    }
    let port = scripted(Protocol::Anthropic).await;
    providers.push(json!({"id": "x-anthropic", "families": all, "upstreams": [
        {"protocol": "anthropic", "base_url": base_url(Protocol::Anthropic, port), "api_key_env": "SB_TEST_KEY_ANTHROPIC"}]}));
    models.push(model("m-x", "x-anthropic", json!({"upstream_model": "up"})));
    let cat = json!({"providers": providers, "models": models});
    Gateway::start_with(&cat, &keys(), &[]).await
}

/// The model `provider` serves.
fn model_of(provider: &str) -> String {
    match provider.strip_prefix("p-") {
        Some(p) => format!("{provider}/m-{p}"),
        None => format!("{provider}/m-x"),
    }
}

/// Family `client`'s request for `provider`'s model, streamed or whole: (path, response).
async fn ask(gw: &Gateway, client: Protocol, provider: &str, stream: bool) -> (String, Response) {
    let model = model_of(provider);
    let (path, body) = match client {
        Protocol::OpenAi => (
            CHAT.to_string(),
            json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}),
        ),
        Protocol::Anthropic => (
            MESSAGES.to_string(),
            json!({"model": model, "stream": stream, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}),
        ),
        Protocol::Gemini => (
            gemini_path(
                &model,
                if stream {
                    GeminiMode::StreamSse
                } else {
                    GeminiMode::Whole
                },
            ),
            json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        ),
        Protocol::Responses => (
            "/v1/responses".to_string(),
            json!({"model": model, "stream": stream, "store": false, "input": "hi"}),
        ),
    };
    let r = gw.send(&authed(client.name(), &path, KEY, &body)).await;
    (path, r)
}

/// The body holds none of the upstream's invalid bytes: it is UTF-8 throughout.
fn assert_no_raw_bytes(what: &str, r: &Response) {
    assert!(
        std::str::from_utf8(&r.body).is_ok(),
        "{what}: invalid UTF-8 reached the client: {}",
        r.text()
    );
}

/// Waits for the upstream of `provider` to be cooled as invalid.
async fn cooled(gw: &Gateway, provider: &str) {
    let label = format!("provider=\"{provider}\"");
    eventually(Duration::from_secs(5), "the upstream cooled", || async {
        let text = metrics_text(gw.metrics).await;
        metric_value(
            &text,
            "switchboard_upstream_cooldowns_total",
            &[&label, "reason=\"invalid\""],
        )
        .filter(|n| *n >= 1.0)
    })
    .await;
}

#[tokio::test]
async fn invalid_utf8_in_a_stream_ends_it_with_the_family_error_on_every_route() {
    let gw = gateway().await;
    // Pass-through (the upstream speaks the client's protocol), then two
    // translated routes from the same kind of upstream.
    let mut cells: Vec<(Protocol, String)> = [
        Protocol::Anthropic,
        Protocol::Gemini,
        Protocol::Responses,
        Protocol::OpenAi,
    ]
    .iter()
    .map(|p| (*p, format!("p-{}", p.name())))
    .collect();
    cells.push((Protocol::OpenAi, "x-anthropic".into()));
    cells.push((Protocol::Responses, "x-anthropic".into()));
    for (client, provider) in cells {
        let what = format!("{} client, provider {provider}", client.name());
        let (path, r) = ask(&gw, client, &provider, true).await;
        assert_no_raw_bytes(&what, &r);
        let e = stream_error(client, &path, &r);
        let message = e["message"].as_str().unwrap_or_default();
        assert!(message.contains("UTF-8"), "{what}: {e}");
        // What came before the broken frame was relayed.
        assert!(r.text().contains("Hel"), "{what}: {}", r.text());
        cooled(&gw, &provider).await;
    }
}

#[tokio::test]
async fn invalid_utf8_in_a_whole_answer_is_a_502_on_every_route() {
    let gw = gateway().await;
    let mut cells: Vec<(Protocol, String)> = Protocol::ALL
        .iter()
        .map(|p| (*p, format!("p-{}", p.name())))
        .collect();
    cells.push((Protocol::OpenAi, "x-anthropic".into()));
    for (client, provider) in cells {
        let what = format!("{} client, provider {provider}", client.name());
        let (_, r) = ask(&gw, client, &provider, false).await;
        assert_no_raw_bytes(&what, &r);
        let e: Value = assert_error(client, &r, 502);
        assert!(
            e["message"].as_str().unwrap_or_default().contains("JSON"),
            "{what}: {e}"
        );
        cooled(&gw, &provider).await;
    }
}
