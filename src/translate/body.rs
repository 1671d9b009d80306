//! Body translation through the IR: a client request re-encoded for an
//! upstream of another protocol, an upstream's whole answer re-encoded for
//! the client, and a translation failure in the client's terms.

use crate::adjust::Adjustments;
use crate::config::Model;
use crate::error::GatewayError;
use crate::family::Family;
use crate::protocol::responses::{self, namespace::Namespaces};
use crate::protocol::{self, DecodeContext, EncodeOptions, TranslateError};
use crate::translate::passthrough::Usage;
use bytes::Bytes;

/// A translation failure in the client's terms (400 for the request, 502 for the upstream's answer).
pub fn translate_error(e: TranslateError) -> GatewayError {
    let status = e.status();
    let mut g =
        GatewayError::new(GatewayError::kind_for_status(status), e.message).with_status(status);
    g.param = e.param;
    g
}

/// Re-encodes a client request of `family` for an upstream speaking `target`.
pub fn translate_request(
    family: Family,
    target: Family,
    body: &[u8],
    path_model: Option<&str>,
    stream: bool,
    model: &Model,
) -> Result<(Bytes, Adjustments), GatewayError> {
    let ir = protocol::decode_request(
        family,
        body,
        &DecodeContext {
            model: path_model,
            stream,
        },
    )
    .map_err(translate_error)?;
    let mut adjusted = Adjustments::default();
    let out = protocol::encode_request(
        target,
        &ir,
        &EncodeOptions {
            upstream_model: &model.upstream_model,
            default_max_tokens: model.max_output_tokens,
            stream,
            native_structured_output: model.supports("response_format"),
        },
        &mut adjusted,
    )
    .map_err(translate_error)?;
    Ok((Bytes::from(out), adjusted))
}

/// Re-encodes an upstream response of `upstream` for a client of `family`;
/// `names`: the namespaced tools a Responses client declared (their calls
/// go back with their `namespace`).
pub fn translate_response(
    upstream: Family,
    family: Family,
    raw: &[u8],
    client_model: &str,
    names: &Namespaces,
) -> Result<(Vec<u8>, Usage), GatewayError> {
    let resp = protocol::decode_response(upstream, raw).map_err(translate_error)?;
    let usage = resp
        .usage
        .as_ref()
        .map(Usage::from_canonical)
        .unwrap_or_default();
    let out = if family == Family::Responses && !names.is_empty() {
        responses::response::encode_named(&resp, client_model, names)
            .map(|v| v.to_string().into_bytes())
            .map_err(translate_error)?
    } else {
        protocol::encode_response(family, &resp, client_model).map_err(translate_error)?
    };
    Ok((out, usage))
}
