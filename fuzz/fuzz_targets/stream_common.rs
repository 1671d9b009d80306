//! Shared body of the `stream_*` fuzz targets: one upstream family's stream,
//! translated for a client family and framing picked by the first input byte,
//! whole and split at a point picked by the second byte.
//!
//! Checked: no panic; the same client bytes and outcome however the input is
//! split (ids invented for id-less upstreams aside); the client's stream is
//! well formed (SSE whose every data is JSON or `[DONE]`, or one JSON array);
//! and it ends either normally or with the client family's error event.

use switchboard::error::{ErrorKind, GatewayError};
use switchboard::family::Family;
use switchboard::proxy::respond::error_body;
use switchboard::sse::{SseDecoder, SseItem};
use switchboard::translate::passthrough::{Framing, StreamFault};
use switchboard::translate::stream::StreamTranslator;

fn run(
    upstream: Family,
    client: Family,
    framing: Framing,
    pieces: &[&[u8]],
) -> (Vec<u8>, Result<(), StreamFault>) {
    let mut t = StreamTranslator::new(upstream, client, framing, "m", true, 4096).with_created(1);
    let mut out = Vec::new();
    let fail = |t: &mut StreamTranslator, out: &mut Vec<u8>, f: &StreamFault| {
        let e = GatewayError::new(ErrorKind::BadGateway, f.to_string());
        t.fail(&error_body(client, &e), out);
    };
    for piece in pieces {
        if let Err(f) = t.push(piece, &mut out) {
            fail(&mut t, &mut out, &f);
            return (out, Err(f));
        }
    }
    let r = t.finish(&mut out);
    if let Err(f) = &r {
        fail(&mut t, &mut out, f);
    }
    (out, r)
}

/// Blanks ids invented for upstreams that sent none (they differ per run).
fn without_fresh_ids(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for prefix in [
        &b"\"chatcmpl-"[..],
        b"\"msg_",
        b"\"toolu_",
        b"\"resp_",
        b"\"rs_",
        b"\"fc_",
        b"\"ctc_",
    ] {
        let mut i = 0;
        while let Some(p) = out[i..].windows(prefix.len()).position(|w| w == prefix) {
            let start = i + p + prefix.len();
            let end = start + 16;
            if end < out.len()
                && out[start..end].iter().all(u8::is_ascii_hexdigit)
                && out[end] == b'"'
            {
                out[start..end].fill(b'x');
            }
            i = start;
        }
    }
    out
}

/// The last JSON document of the client's stream.
fn last_document(framing: Framing, out: &[u8]) -> Option<serde_json::Value> {
    match framing {
        Framing::JsonArray => {
            let v: serde_json::Value = serde_json::from_slice(out).expect("client JSON array");
            v.as_array().expect("an array").last().cloned()
        }
        // (The Bedrock framings are not among the clients this checks.)
        Framing::Sse | Framing::EventStream | Framing::BedrockChunks => {
            let mut d = SseDecoder::new(usize::MAX);
            let mut last = None;
            d.push(out, |item| {
                if let SseItem::Event(e) = item {
                    last = Some(if e.data == b"[DONE]" {
                        serde_json::Value::String("[DONE]".into())
                    } else {
                        serde_json::from_slice(e.data).expect("client data is JSON")
                    });
                }
            })
            .expect("client SSE decodes");
            assert!(d.finish().is_ok(), "client stream ends inside a frame");
            last
        }
    }
}

pub fn check(upstream: Family, input: &[u8]) {
    let (control, stream) = input.split_at(input.len().min(2));
    let (client, framing) = match control.first().map_or(0, |b| b % 5) {
        0 => (Family::OpenAi, Framing::Sse),
        1 => (Family::Anthropic, Framing::Sse),
        2 => (Family::Gemini, Framing::Sse),
        3 => (Family::Gemini, Framing::JsonArray),
        _ => (Family::Responses, Framing::Sse),
    };
    let split = control
        .get(1)
        .map_or(0, |&b| usize::from(b) * stream.len() / 255);
    let (whole, r) = run(upstream, client, framing, &[stream]);
    let (head, tail) = stream.split_at(split.min(stream.len()));
    let (cut, r2) = run(upstream, client, framing, &[head, tail]);
    assert_eq!(r, r2);
    assert_eq!(without_fresh_ids(&whole), without_fresh_ids(&cut));

    let Some(last) = last_document(framing, &whole) else {
        // Nothing written: only possible for an empty upstream body, which is a truncation.
        assert!(r.is_err());
        return;
    };
    let is_error = match client {
        Family::Anthropic => last["type"] == "error",
        Family::Responses => last["type"] == "response.failed",
        _ => last.get("error").is_some(),
    };
    let is_end = match client {
        // Not among the clients above (its stream is event-stream messages).
        Family::Bedrock => last.get("usage").is_some(),
        Family::OpenAi => last == "[DONE]",
        Family::Anthropic => last["type"] == "message_stop",
        Family::Gemini => last["candidates"][0]["finishReason"].is_string(),
        Family::Responses => {
            last["type"] == "response.completed" || last["type"] == "response.incomplete"
        }
    };
    if r.is_err() {
        assert!(is_error, "a failed stream must end with the error event");
    } else {
        assert!(
            is_error || is_end,
            "a stream must end with its end or error event"
        );
    }
}
