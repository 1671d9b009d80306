//! Bedrock's InvokeModel envelope around Anthropic Messages (E22, E23): the
//! body a Bedrock client sends for a Claude model is a Messages body with
//! `anthropic_version: "bedrock-2023-05-31"`, betas in `anthropic_beta`, and
//! neither `model` nor `stream` (the path names both). [`unwrap_body`]
//! turns it into the plain Messages body the rest of the gateway serves as
//! an Anthropic request. The stream answer (InvokeModelWithResponseStream)
//! carries each Anthropic stream event's JSON, base64-encoded, in an
//! event-stream `chunk` message: [`Chunks`] writes them from the Anthropic
//! SSE the gateway produces, an `error` event as an exception message.

use crate::error::{ErrorKind, GatewayError};
use crate::eventstream::encode;
use crate::sse::{SseDecoder, SseItem};
use crate::util::jsonedit::{self, Edit};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The `anthropic_version` Bedrock's Messages bodies carry.
pub const VERSION: &str = "bedrock-2023-05-31";

#[derive(Deserialize)]
struct EnvelopePeek<'a> {
    #[serde(borrow)]
    anthropic_version: Option<&'a RawValue>,
    #[serde(borrow)]
    anthropic_beta: Option<&'a RawValue>,
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    stream: Option<&'a RawValue>,
}

fn invalid(param: &str, message: impl Into<String>) -> GatewayError {
    GatewayError::invalid_param(param, message)
}

/// The Messages body inside an InvokeModel body, with `model` (the path's,
/// as a JSON string) and `stream` set; and the betas it asked for (the
/// value of an `anthropic-beta` header).
pub fn unwrap_body(
    body: &[u8],
    model: &str,
    stream: bool,
) -> Result<(Vec<u8>, Option<String>), GatewayError> {
    let p: EnvelopePeek<'_> = crate::protocol::common::peek::parse_request(body)?;
    match p.anthropic_version.map(RawValue::get) {
        Some(v) if v == format!("\"{VERSION}\"") => {}
        Some(_) => {
            return Err(invalid(
                "anthropic_version",
                format!("anthropic_version must be \"{VERSION}\""),
            ))
        }
        None => {
            return Err(invalid(
                "anthropic_version",
                "anthropic_version: required key [anthropic_version] not found",
            ))
        }
    }
    for (raw, name) in [(p.model, "model"), (p.stream, "stream")] {
        if raw.is_some() {
            return Err(invalid(
                name,
                format!("extraneous key [{name}] is not permitted: the path names the model and whether the answer streams"),
            ));
        }
    }
    let betas = match p.anthropic_beta {
        None => None,
        Some(raw) => {
            let list: Vec<String> = serde_json::from_str(raw.get()).map_err(|_| {
                invalid("anthropic_beta", "anthropic_beta must be a list of strings")
            })?;
            (!list.is_empty()).then(|| list.join(","))
        }
    };
    let edits = [
        Edit::remove("anthropic_version"),
        Edit::remove("anthropic_beta"),
    ];
    let rest = jsonedit::apply(body, &edits).unwrap_or_else(|| body.to_vec());
    let start = rest.iter().position(|b| *b == b'{').ok_or_else(|| {
        GatewayError::new(
            ErrorKind::InvalidRequest,
            "the request body must be a JSON object",
        )
    })?;
    let after = &rest[start + 1..];
    let empty = after.trim_ascii_start().starts_with(b"}");
    let mut out = Vec::with_capacity(rest.len() + model.len() + 32);
    out.extend_from_slice(b"{\"model\":");
    crate::protocol::common::support::json_str(&mut out, model);
    out.extend_from_slice(if stream {
        b",\"stream\":true"
    } else {
        b",\"stream\":false"
    });
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(after);
    Ok((out, betas))
}

#[derive(Deserialize)]
struct ErrorPeek<'a> {
    #[serde(borrow)]
    error: Option<ErrorInner<'a>>,
}

#[derive(Deserialize)]
struct ErrorInner<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "crate::util::serde_str::opt_str")]
    message: Option<std::borrow::Cow<'a, str>>,
}

/// The exception an Anthropic stream `error` event becomes.
fn exception_type(anthropic_type: &str) -> &'static str {
    match anthropic_type {
        "rate_limit_error" => "throttlingException",
        "overloaded_error" => "serviceUnavailableException",
        "invalid_request_error"
        | "authentication_error"
        | "permission_error"
        | "not_found_error"
        | "request_too_large" => "validationException",
        "api_error" => "internalServerException",
        _ => "modelStreamErrorException",
    }
}

/// Anthropic SSE → InvokeModelWithResponseStream messages.
#[derive(Debug)]
pub struct Chunks {
    decoder: SseDecoder,
    payload: Vec<u8>,
    text: String,
}

impl Default for Chunks {
    fn default() -> Self {
        Chunks::new()
    }
}

impl Chunks {
    /// A framer (the SSE it reads is the gateway's own encoders', whole
    /// events far below the decoder's default bound).
    pub fn new() -> Self {
        Chunks {
            decoder: SseDecoder::new(crate::sse::DEFAULT_MAX_FRAME_BYTES),
            payload: Vec::new(),
            text: String::new(),
        }
    }

    /// Writes the messages for the SSE bytes `sse` (whole events; a partial
    /// one waits for its end) to `out`: each event's data as a `chunk`
    /// (`{"bytes": <base64>}`), an `error` event as an exception, pings and
    /// comments left out (Bedrock sends neither).
    pub fn push(&mut self, sse: &[u8], out: &mut Vec<u8>) {
        let Chunks {
            decoder,
            payload,
            text,
        } = self;
        let r = decoder.push(sse, |item| {
            let SseItem::Event(ev) = item else { return };
            match ev.event_str() {
                Some("ping") => {}
                Some("error") => {
                    let p: Option<ErrorPeek<'_>> = serde_json::from_slice(ev.data).ok();
                    let inner = p.and_then(|p| p.error);
                    let kind = inner.as_ref().and_then(|e| e.kind).unwrap_or_default();
                    let message = inner
                        .and_then(|e| e.message)
                        .unwrap_or_else(|| String::from_utf8_lossy(ev.data));
                    payload.clear();
                    payload.extend_from_slice(b"{\"message\":");
                    crate::protocol::common::support::json_str(payload, &message);
                    payload.push(b'}');
                    encode::exception(out, exception_type(kind), payload);
                }
                _ => {
                    text.clear();
                    crate::util::base64::encode(ev.data, text);
                    payload.clear();
                    payload.extend_from_slice(b"{\"bytes\":\"");
                    payload.extend_from_slice(text.as_bytes());
                    payload.extend_from_slice(b"\"}");
                    encode::event(out, "chunk", payload);
                }
            }
        });
        if let Err(e) = r {
            // Our own encoders' frames: never over the bound in practice.
            log::error!("could not frame a stream event for a Bedrock client: {e}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn the_envelope_comes_off() {
        let body = br#"{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["a","b"],"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#;
        let (out, betas) = unwrap_body(body, "anthropic/claude", true).unwrap();
        assert_eq!(betas.as_deref(), Some("a,b"));
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"model":"anthropic/claude","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]})
        );
        let (out, betas) =
            unwrap_body(br#"{"anthropic_version":"bedrock-2023-05-31"}"#, "m", false).unwrap();
        assert_eq!(betas, None);
        assert_eq!(out, br#"{"model":"m","stream":false}"#);
        for bad in [
            &br#"{"max_tokens":5}"#[..],
            br#"{"anthropic_version":"2023-06-01"}"#,
            br#"{"anthropic_version":"bedrock-2023-05-31","model":"x"}"#,
            br#"{"anthropic_version":"bedrock-2023-05-31","stream":true}"#,
            br#"{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":"x"}"#,
            b"[1]",
            b"nope",
        ] {
            let e = unwrap_body(bad, "m", false).unwrap_err();
            assert_eq!(e.status, 400, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn events_become_chunks_and_errors_exceptions() {
        let mut c = Chunks::new();
        let mut out = Vec::new();
        c.push(b"event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n", &mut out);
        let mut rest = &out[..];
        let mut seen = Vec::new();
        while !rest.is_empty() {
            let len = u32::from_be_bytes(rest[0..4].try_into().unwrap()) as usize;
            let m = aws_smithy_eventstream::frame::read_message_from(&rest[..len]).unwrap();
            let h = |n: &str| {
                m.headers()
                    .iter()
                    .find(|h| h.name().as_str() == n)
                    .map(|h| h.value().as_string().unwrap().as_str().to_string())
            };
            seen.push((
                h(":event-type").or(h(":exception-type")).unwrap(),
                m.payload().to_vec(),
            ));
            rest = &rest[len..];
        }
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].0, "chunk");
        let v: Value = serde_json::from_slice(&seen[0].1).unwrap();
        let bytes = crate::util::base64::decode(v["bytes"].as_str().unwrap()).unwrap();
        assert_eq!(bytes, br#"{"type":"message_start"}"#);
        assert_eq!(seen[1].0, "serviceUnavailableException");
        assert_eq!(seen[1].1, br#"{"message":"busy"}"#);
    }
}
