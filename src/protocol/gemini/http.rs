//! Gemini over HTTP: the model is in the path
//! (`{base_url}/models/{model}:generateContent`, streams
//! `:streamGenerateContent?alt=sse`); keys in `x-goog-api-key` (clients may
//! also use the `key` query parameter).

use crate::protocol::common::http::{header, query_param, SetHeader, UpstreamTarget};
use http::HeaderMap;

/// The upstream path (and query) for a call.
pub fn upstream_path(t: &UpstreamTarget<'_>) -> String {
    let method = if t.stream {
        ":streamGenerateContent?alt=sse"
    } else {
        ":generateContent"
    };
    [t.base_path, "/models/", t.upstream_model, method].concat()
}

/// The header that carries the provider key.
pub fn upstream_auth(key: &str, _t: &UpstreamTarget<'_>, set: &mut SetHeader<'_>) {
    set("x-goog-api-key", key);
}

/// The key a client presented: `x-goog-api-key`, or the `key` query parameter.
pub fn client_key<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Option<&'a str> {
    header(headers, "x-goog-api-key").or_else(|| query_param(query, "key"))
}

/// A countTokens answer.
pub fn count_tokens_body(n: u64) -> String {
    format!("{{\"totalTokens\":{n}}}")
}
