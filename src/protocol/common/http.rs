//! HTTP details shared by the spokes: what an upstream request needs to know
//! ([`UpstreamTarget`]) and where clients put their keys. Each spoke's own
//! `http.rs` says which path, headers and key location its protocol uses.

use http::HeaderMap;

/// What the upstream request of one call needs to know to be addressed.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamTarget<'a> {
    /// The path of the upstream's `base_url` (no trailing slash).
    pub base_path: &'a str,
    /// The model name the upstream knows (catalog `upstream_model`).
    pub upstream_model: &'a str,
    /// Whether a stream is asked for.
    pub stream: bool,
    /// Anthropic Messages to Anthropic Messages only: the client's `?beta=true`, forwarded.
    pub beta_query: bool,
    /// Anthropic Messages to Anthropic Messages only: the client's `anthropic-beta` header, forwarded.
    pub anthropic_beta: Option<&'a str>,
}

/// Sets one request header (the caller records a failure).
pub type SetHeader<'a> = dyn FnMut(&'static str, &str) + 'a;

/// The token of an `Authorization: Bearer` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// A header's value, trimmed.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// The value of `name=` in a query string.
pub fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?.split('&').find_map(|kv| {
        kv.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
    })
}
