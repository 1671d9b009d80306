//! The registry: the one place that knows all five spokes. [`spoke`] finds a
//! family's [`Spoke`] table, and [`decode_request`] / [`encode_request`] /
//! [`decode_response`] / [`encode_response`] pick the family's codec with a
//! `match` (hub and spoke: every cross-family translation is "decode with the
//! source spoke, encode with the target spoke"; there are no pairwise
//! converters). [`stream_codec`] does the same for stream parsers and encoders.
//!
//! Pieces: [`spoke`], [`error_body`], the body codecs below, [`stream_codec`].

pub mod embed;
pub mod stream_codec;

#[cfg(test)]
mod reasoning_tests;
#[cfg(test)]
mod tool_result_tests;

use super::common::report;
use super::common::spoke::Spoke;
use super::common::{DecodeContext, EncodeOptions, TranslateError};
use super::{anthropic, bedrock, gemini, openai, responses};
use crate::adjust::Adjustments;
use crate::family::Family;
use crate::ir::{ChatRequest, ChatResponse};
use serde_json::Value;

/// The spoke of `family`.
pub fn spoke(family: Family) -> &'static Spoke {
    match family {
        Family::OpenAi => &openai::SPOKE,
        Family::Anthropic => &anthropic::SPOKE,
        Family::Gemini => &gemini::SPOKE,
        Family::Responses => &responses::SPOKE,
        Family::Bedrock => &bedrock::SPOKE,
    }
}

/// Renders `e` in `family`'s error shape: the one place error bodies are made.
pub fn error_body(family: Family, e: &crate::error::GatewayError) -> Vec<u8> {
    (spoke(family).error_body)(e)
}

/// Decodes a client request body of `family` into the canonical request.
/// Errors are client errors (400).
pub fn decode_request(
    family: Family,
    body: &[u8],
    ctx: &DecodeContext<'_>,
) -> Result<ChatRequest, TranslateError> {
    match family {
        Family::OpenAi => openai::request::decode(body, ctx),
        Family::Anthropic => anthropic::request::decode(body, ctx),
        Family::Gemini => gemini::request::decode(body, ctx),
        Family::Responses => responses::request::decode(body, ctx),
        Family::Bedrock => bedrock::request::decode(body, ctx),
    }
}

/// Encodes a canonical request as an upstream request body of `family`.
/// Errors say what the target protocol cannot express (400). Everything the
/// target cannot carry and that is dropped instead is recorded in `adjusted`,
/// by the client's own name for it (docs/api.md "Adapt or refuse").
pub fn encode_request(
    family: Family,
    req: &ChatRequest,
    opts: &EncodeOptions<'_>,
    adjusted: &mut Adjustments,
) -> Result<Vec<u8>, TranslateError> {
    let value = encode_request_value(family, req, opts, adjusted)?;
    to_bytes(&value)
}

/// [`encode_request`], as a JSON value.
pub fn encode_request_value(
    family: Family,
    req: &ChatRequest,
    opts: &EncodeOptions<'_>,
    adjusted: &mut Adjustments,
) -> Result<Value, TranslateError> {
    let value = match family {
        Family::OpenAi => openai::request::encode(req, opts, adjusted),
        Family::Anthropic => anthropic::request::encode(req, opts, adjusted),
        Family::Gemini => gemini::request::encode(req, opts, adjusted),
        Family::Responses => responses::request::encode(req, opts, adjusted),
        Family::Bedrock => bedrock::request::encode(req, opts, adjusted),
    }?;
    report::foreign_extras(req, family, adjusted);
    Ok(value)
}

/// Decodes a non-streaming upstream response body of `family`. Errors are
/// upstream errors (502) and name the upstream protocol.
pub fn decode_response(family: Family, body: &[u8]) -> Result<ChatResponse, TranslateError> {
    match family {
        Family::OpenAi => openai::response::decode(body),
        Family::Anthropic => anthropic::response::decode(body),
        Family::Gemini => gemini::response::decode(body),
        Family::Responses => responses::response::decode(body),
        Family::Bedrock => bedrock::response::decode(body),
    }
}

/// Encodes a canonical response as a client response body of `family`.
/// `client_model` is what the client sees as the model (OpenAI and Responses
/// `provider/model_id`, Anthropic the bare id, Gemini `modelVersion` the bare id).
pub fn encode_response(
    family: Family,
    resp: &ChatResponse,
    client_model: &str,
) -> Result<Vec<u8>, TranslateError> {
    let value = encode_response_value(family, resp, client_model)?;
    to_bytes(&value)
}

/// [`encode_response`], as a JSON value.
pub fn encode_response_value(
    family: Family,
    resp: &ChatResponse,
    client_model: &str,
) -> Result<Value, TranslateError> {
    match family {
        Family::OpenAi => openai::response::encode(resp, client_model),
        Family::Anthropic => anthropic::response::encode(resp, client_model),
        Family::Gemini => gemini::response::encode(resp, client_model),
        Family::Responses => responses::response::encode(resp, client_model),
        Family::Bedrock => bedrock::response::encode(resp, client_model),
    }
}

fn to_bytes(value: &Value) -> Result<Vec<u8>, TranslateError> {
    serde_json::to_vec(value)
        .map_err(|e| TranslateError::upstream(format!("could not serialize JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::spoke;
    use crate::family::Family;

    #[test]
    fn a_preamble_is_not_a_first_token() {
        let cases: [(Family, &[u8], &[u8]); 4] = [
            (
                Family::OpenAi,
                b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
                b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            ),
            (
                Family::Anthropic,
                b"event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n",
                b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
            ),
            (
                Family::Responses,
                b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"error\":null}}\n\nevent: response.output_item.added\ndata: {\"type\":\"response.output_item.added\"}\n\n",
                b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
            ),
            (Family::Gemini, b"", b"data: {\"candidates\":[]}\n\n"),
        ];
        for (family, preamble, token) in cases {
            let started = spoke(family).stream_started;
            assert!(!started(preamble), "{family}: preamble taken for a token");
            let mut both = preamble.to_vec();
            both.extend_from_slice(token);
            assert!(started(&both), "{family}: token missed");
        }
        // The end of an answer with no token at all still starts it.
        assert!((spoke(Family::OpenAi).stream_started)(b"data: [DONE]\n\n"));
        assert!((spoke(Family::OpenAi).stream_started)(
            b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        ));
    }
}
