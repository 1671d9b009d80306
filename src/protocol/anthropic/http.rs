//! Anthropic Messages over HTTP: `{base_url}/messages` with `x-api-key` and
//! `anthropic-version`; clients send `x-api-key` or a Bearer token.

use crate::protocol::common::http::{bearer, header, SetHeader, UpstreamTarget};
use http::HeaderMap;

/// The `anthropic-version` sent upstream.
pub const VERSION: &str = "2023-06-01";

/// The upstream path (and query) for a call: `?beta=true` is kept when an
/// Anthropic client sent it to an Anthropic upstream (Claude Code does).
pub fn upstream_path(t: &UpstreamTarget<'_>) -> String {
    if t.beta_query {
        [t.base_path, "/messages?beta=true"].concat()
    } else {
        [t.base_path, "/messages"].concat()
    }
}

/// The headers that carry the provider key and protocol version (and the
/// client's `anthropic-beta`, same protocol only).
pub fn upstream_auth(key: &str, t: &UpstreamTarget<'_>, set: &mut SetHeader<'_>) {
    set("x-api-key", key);
    set("anthropic-version", VERSION);
    if let Some(beta) = t.anthropic_beta {
        set("anthropic-beta", beta);
    }
}

/// The key a client presented: `x-api-key`, or `Authorization: Bearer`.
pub fn client_key<'a>(headers: &'a HeaderMap, _query: Option<&'a str>) -> Option<&'a str> {
    header(headers, "x-api-key").or_else(|| bearer(headers))
}

/// A count_tokens answer.
pub fn count_tokens_body(n: u64) -> String {
    format!("{{\"input_tokens\":{n}}}")
}
