//! The embeddings and rerank codecs by family: the OpenAI and Gemini
//! spokes' `embeddings.rs` for the client's side and the upstream's,
//! Vertex's `:predict` (`gemini/predict.rs`), the rerank wire
//! (`protocol/rerank.rs`) toward `cohere` and `openai` upstreams.

use super::super::{bedrock_embed, gemini, openai, rerank};
use crate::adjust::Adjustments;
use crate::config::{Cloud, Upstream};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::ir::embed::{EmbedRequest, EmbedResponse, Retrieval};

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

/// Why `up` cannot carry `job`: its protocol has no such endpoint.
fn cannot(up: &Upstream, provider: &str, action: &str, takes: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::InvalidRequest,
        format!(
            "upstream {} of provider {provider} ({}) has no {action} endpoint; {action} goes to {takes} upstreams",
            up.id, up.protocol_name
        ),
    )
}

const EMBED_UPSTREAMS: &str = "openai, gemini, azure, vertex or bedrock";
const RERANK_UPSTREAMS: &str = "cohere or openai";

/// The body for upstream `up` (of `provider`) of a request of the `embed`
/// or `rerank` action, with what it could not carry (reported in
/// `x-switchboard-adjusted`). An upstream whose protocol cannot carry the
/// request is an error (the request moves on to the provider's next).
pub fn upstream_body(
    up: &Upstream,
    provider: &str,
    job: &Retrieval,
    upstream_model: &str,
) -> Result<(Vec<u8>, Adjustments), GatewayError> {
    match (job, up.protocol, &up.cloud, up.rerank_only()) {
        (Retrieval::Embed(_), _, _, true) => {
            Err(cannot(up, provider, "embeddings", EMBED_UPSTREAMS))
        }
        (Retrieval::Embed(r), Family::OpenAi, None | Some(Cloud::Azure { .. }), _) => Ok((
            openai::embeddings::encode_request(r, upstream_model),
            Adjustments::default(),
        )),
        (Retrieval::Embed(r), Family::Gemini, None, _) => {
            gemini::embeddings::encode_request(r, upstream_model)
                .map(|b| (b, Adjustments::default()))
        }
        (Retrieval::Embed(r), Family::Gemini, Some(Cloud::Vertex { .. }), _) => {
            gemini::predict::encode_request(r).map(|b| (b, Adjustments::default()))
        }
        // The embedding model's own body through InvokeModel (Titan, Cohere).
        (Retrieval::Embed(r), _, Some(Cloud::Bedrock { .. }), _) => {
            bedrock_embed::encode_request(r, upstream_model).map(|b| (b, Adjustments::default()))
        }
        (Retrieval::Embed(_), ..) => Err(cannot(up, provider, "embeddings", EMBED_UPSTREAMS)),
        (Retrieval::Rerank(r), Family::OpenAi, None, cohere) => {
            Ok(rerank::encode_request(r, upstream_model, cohere))
        }
        (Retrieval::Rerank(_), ..) => Err(cannot(up, provider, "rerank", RERANK_UPSTREAMS)),
    }
}

/// The upstream path of a `job` call to `up` (`{base}/embeddings`,
/// `{base}/models/{m}:batchEmbedContents`, a cloud's, `{base}/rerank`).
pub fn upstream_path(up: &Upstream, job: &Retrieval, upstream_model: &str) -> Option<String> {
    let base = &up.url.path;
    match (job, &up.cloud) {
        (Retrieval::Rerank(_), None) => Some(format!("{base}/rerank")),
        (Retrieval::Rerank(_), Some(_)) => None,
        (Retrieval::Embed(_), Some(cloud)) => {
            super::super::cloud::embed_path(cloud, up.protocol, base, upstream_model)
        }
        (Retrieval::Embed(_), None) => match up.protocol {
            Family::OpenAi => Some(format!("{base}/embeddings")),
            Family::Gemini => Some(format!("{base}/models/{upstream_model}:batchEmbedContents")),
            _ => None,
        },
    }
}

/// The most inputs one embeddings call to `up` takes: OpenAI's 2048,
/// Gemini's 100 requests, Vertex's instances for `upstream_model`.
pub fn max_inputs(up: &Upstream, upstream_model: &str) -> usize {
    match (up.protocol, &up.cloud) {
        (_, Some(Cloud::Bedrock { .. })) => bedrock_embed::batch_limit(upstream_model),
        (Family::Gemini, Some(Cloud::Vertex { .. })) => {
            gemini::predict::max_instances(upstream_model)
        }
        (Family::Gemini, _) => gemini::embeddings::MAX_BATCH,
        _ => openai::embeddings::MAX_INPUTS,
    }
}

/// An upstream's embeddings answer.
pub fn decode_upstream(up: &Upstream, body: &[u8]) -> Result<EmbedResponse, GatewayError> {
    match (up.protocol, &up.cloud) {
        (_, Some(Cloud::Bedrock { .. })) => bedrock_embed::decode_response(body),
        (Family::OpenAi, _) => openai::embeddings::decode_response(body),
        (Family::Gemini, Some(Cloud::Vertex { .. })) => gemini::predict::decode_response(body),
        (Family::Gemini, _) => gemini::embeddings::decode_response(body),
        (f, _) => Err(no_embeddings(f)),
    }
}
