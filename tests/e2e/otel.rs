//! End-to-end: OpenTelemetry traces (docs/operations.md "Traces (OpenTelemetry)") sent to a real
//! OTLP/HTTP receiver started by the test (HTTP/1.1, protobuf bodies decoded with the OTLP wire
//! types): the request span continues the client's `traceparent` and carries the GenAI attributes,
//! each upstream attempt is a child span, and the upstream receives a `traceparent` naming its
//! attempt. Without an endpoint, the client's `traceparent` goes upstream unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{free_port, keys, model, Gateway};
use crate::common::mock_upstream::MockUpstream;
use crate::common::mock_upstream::Protocol::OpenAi as OpenAiP;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// An OTLP/HTTP receiver: every span of every `POST /v1/traces`.
struct Receiver {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    content_types: Arc<Mutex<Vec<String>>>,
}

async fn receiver() -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let spans = Arc::new(Mutex::new(Vec::new()));
    let content_types = Arc::new(Mutex::new(Vec::new()));
    let (s, c) = (spans.clone(), content_types.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut io, _)) = listener.accept().await else {
                return;
            };
            let (s, c) = (s.clone(), c.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // One request: the head, then content-length bytes.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0u8; 8192];
                        match io.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let header = |name: &str| {
                        head.lines()
                            .find_map(|l| l.strip_prefix(&format!("{name}:")))
                            .map(|v| v.trim().to_string())
                    };
                    let len: usize = header("content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        let mut chunk = [0u8; 8192];
                        match io.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body: Vec<u8> = buf.drain(..head_end + len).skip(head_end).collect();
                    let ok = head.starts_with("post /v1/traces ");
                    if ok {
                        c.lock()
                            .unwrap()
                            .push(header("content-type").unwrap_or_default());
                        let req = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
                        let mut all = s.lock().unwrap();
                        for rs in req.resource_spans {
                            for ss in rs.scope_spans {
                                all.extend(ss.spans);
                            }
                        }
                    }
                    let status = if ok { "200 OK" } else { "404 Not Found" };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
                    );
                    if io.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Receiver {
        url,
        spans,
        content_types,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn attr(s: &Span, key: &str) -> Option<Any> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

fn str_attr(s: &Span, key: &str) -> String {
    match attr(s, key) {
        Some(Any::StringValue(v)) => v,
        other => panic!("{key}: {other:?} in {s:?}"),
    }
}

fn int_attr(s: &Span, key: &str) -> i64 {
    match attr(s, key) {
        Some(Any::IntValue(v)) => v,
        other => panic!("{key}: {other:?} in {s:?}"),
    }
}

/// A provider `pool` whose first upstream refuses connections and whose
/// second is the mock (round-robin: the first pick is the dead one), and its
/// model `m`.
fn catalog(mock: &MockUpstream) -> Value {
    json!({
        "providers": [{"id": "pool", "families": ["openai"], "affinity": "off", "upstreams": [
            {"id": "dead", "protocol": "openai", "base_url": format!("http://127.0.0.1:{}/v1", free_port()),
             "api_key_env": "SB_TEST_KEY_OPENAI"},
            {"id": "live", "protocol": "openai", "base_url": format!("http://127.0.0.1:{}/live/openai/v1", mock.port()),
             "api_key_env": "SB_TEST_KEY_OPENAI"}]}],
        "models": [model("m", "pool", json!({}))]
    })
}

#[tokio::test]
async fn a_request_span_continues_the_client_trace_with_a_child_per_attempt() {
    let mock = MockUpstream::start().await;
    let rx = receiver().await;
    let gw = Gateway::start_with_env(
        &catalog(&mock),
        &keys(),
        &["--otlp-endpoint", &rx.url],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    let body = openai_body("pool/m", "trace me", None, false);
    let r = gw
        .send(&call(OpenAiP, CHAT, &body).header("traceparent", &format!("00-{TRACE}-{PARENT}-01")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    let spans = eventually(Duration::from_secs(30), "three exported spans", || {
        let spans = rx.spans.lock().unwrap().clone();
        async move { (spans.len() >= 3).then_some(spans) }
    })
    .await;
    assert!(
        rx.content_types
            .lock()
            .unwrap()
            .iter()
            .all(|c| c == "application/x-protobuf"),
        "OTLP/HTTP protobuf"
    );
    let request = spans
        .iter()
        .find(|s| s.kind == 2)
        .unwrap_or_else(|| panic!("no server span in {spans:?}"));
    assert_eq!(hex(&request.trace_id), TRACE);
    assert_eq!(
        hex(&request.parent_span_id),
        PARENT,
        "the client's span is the parent"
    );
    assert_eq!(request.name, "chat pool/m");
    assert_eq!(str_attr(request, "gen_ai.operation.name"), "chat");
    assert_eq!(str_attr(request, "gen_ai.provider.name"), "pool");
    assert_eq!(str_attr(request, "gen_ai.request.model"), "pool/m");
    assert_eq!(str_attr(request, "gen_ai.response.model"), "pool/m");
    assert!(int_attr(request, "gen_ai.usage.input_tokens") > 0);
    assert!(int_attr(request, "gen_ai.usage.output_tokens") > 0);
    assert_eq!(int_attr(request, "http.response.status_code"), 200);
    assert_eq!(int_attr(request, "switchboard.attempts"), 2);

    let mut attempts: Vec<&Span> = spans.iter().filter(|s| s.kind == 3).collect();
    attempts.sort_by_key(|s| int_attr(s, "switchboard.attempt"));
    assert_eq!(attempts.len(), 2, "{spans:?}");
    for a in &attempts {
        assert_eq!(hex(&a.trace_id), TRACE);
        assert_eq!(
            a.parent_span_id, request.span_id,
            "an attempt is the request's child"
        );
    }
    assert_eq!(str_attr(attempts[0], "switchboard.upstream"), "dead");
    assert_eq!(str_attr(attempts[0], "error.type"), "unreachable");
    assert_eq!(str_attr(attempts[1], "switchboard.upstream"), "live");
    assert_eq!(int_attr(attempts[1], "http.response.status_code"), 200);

    // The upstream was told it runs inside the second attempt's span.
    let got = mock.last_request().unwrap();
    assert_eq!(
        got.header("traceparent"),
        Some(format!("00-{TRACE}-{}-01", hex(&attempts[1].span_id)).as_str())
    );
}

#[tokio::test]
async fn a_new_trace_when_the_client_sends_none_or_a_broken_one() {
    let mock = MockUpstream::start().await;
    let rx = receiver().await;
    let gw = Gateway::start_with_env(
        &catalog(&mock),
        &keys(),
        &["--otlp-endpoint", &format!("{}/v1/traces", rx.url)],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    let body = openai_body("pool/m", "no trace", None, true);
    let r = gw
        .send(&call(OpenAiP, CHAT, &body).header("traceparent", "00-zz-not-a-trace"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let spans = eventually(Duration::from_secs(30), "the request span", || {
        let spans = rx.spans.lock().unwrap().clone();
        async move { spans.into_iter().find(|s| s.kind == 2) }
    })
    .await;
    assert!(spans.parent_span_id.is_empty(), "a root span: {spans:?}");
    assert_ne!(hex(&spans.trace_id), "0".repeat(32));
}

#[tokio::test]
async fn without_an_endpoint_the_client_traceparent_goes_upstream_unchanged() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start_with(&catalog(&mock), &keys(), &[]).await;
    let tp = format!("00-{TRACE}-{PARENT}-01");
    let body = openai_body("pool/m", "pass it on", None, false);
    let r = gw
        .send(&call(OpenAiP, CHAT, &body).header("traceparent", &tp))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        mock.last_request().unwrap().header("traceparent"),
        Some(tp.as_str())
    );
}
