//! The embeddings codecs by family: the OpenAI and Gemini spokes'
//! `embeddings.rs`, for the client's side and the upstream's.

use super::super::{gemini, openai};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::ir::embed::{EmbedRequest, EmbedResponse};

fn no_embeddings(family: Family) -> GatewayError {
    GatewayError::new(
        ErrorKind::InvalidRequest,
        format!("the {family} protocol has no embeddings endpoint"),
    )
}

/// A client's request: the body's `model` (OpenAI; Gemini names it in the
/// path) and the request. `batch`: Gemini's `:batchEmbedContents`.
pub fn decode_client(
    family: Family,
    body: &[u8],
    batch: bool,
) -> Result<(Option<String>, EmbedRequest), GatewayError> {
    match family {
        Family::OpenAi => openai::embeddings::decode_request(body).map(|(m, r)| (Some(m), r)),
        Family::Gemini => gemini::embeddings::decode_request(body, batch).map(|r| (None, r)),
        f => Err(no_embeddings(f)),
    }
}

/// The answer for a client of `family`: `model` as the client sees it, the
/// input tokens the gateway counts for the request.
pub fn encode_client(
    family: Family,
    r: &EmbedResponse,
    model: &str,
    req: &EmbedRequest,
    batch: bool,
    prompt_tokens: u64,
) -> Vec<u8> {
    match family {
        Family::Gemini => gemini::embeddings::encode_response(r, batch),
        _ => openai::embeddings::encode_response(r, model, req.base64, prompt_tokens),
    }
}

/// The upstream body for an upstream of protocol `family`.
pub fn upstream_body(
    family: Family,
    r: &EmbedRequest,
    upstream_model: &str,
) -> Result<Vec<u8>, GatewayError> {
    match family {
        Family::OpenAi => Ok(openai::embeddings::encode_request(r, upstream_model)),
        Family::Gemini => gemini::embeddings::encode_request(r, upstream_model),
        f => Err(no_embeddings(f)),
    }
}

/// The upstream path (`{base}/embeddings`, `{base}/models/{m}:batchEmbedContents`).
pub fn upstream_path(family: Family, base_path: &str, upstream_model: &str) -> Option<String> {
    match family {
        Family::OpenAi => Some(format!("{base_path}/embeddings")),
        Family::Gemini => Some(format!(
            "{base_path}/models/{upstream_model}:batchEmbedContents"
        )),
        _ => None,
    }
}

/// An upstream's answer.
pub fn decode_upstream(family: Family, body: &[u8]) -> Result<EmbedResponse, GatewayError> {
    match family {
        Family::OpenAi => openai::embeddings::decode_response(body),
        Family::Gemini => gemini::embeddings::decode_response(body),
        f => Err(no_embeddings(f)),
    }
}
