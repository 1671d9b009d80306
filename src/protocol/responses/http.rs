//! Responses over HTTP: `{base_url}/responses`, Bearer keys both ways, and the
//! local answer of `POST /v1/responses/input_tokens`.

use crate::protocol::common::http::{bearer, SetHeader, UpstreamTarget};
use http::HeaderMap;

/// The upstream path for a call.
pub fn upstream_path(t: &UpstreamTarget<'_>) -> String {
    [t.base_path, "/responses"].concat()
}

/// The header that carries the provider key.
pub fn upstream_auth(key: &str, _t: &UpstreamTarget<'_>, set: &mut SetHeader<'_>) {
    set("authorization", &["Bearer ", key].concat());
}

/// The key a client presented: `Authorization: Bearer`.
pub fn client_key<'a>(headers: &'a HeaderMap, _query: Option<&'a str>) -> Option<&'a str> {
    bearer(headers)
}

/// An input_tokens answer, as OpenAI's API gives it.
pub fn count_tokens_body(n: u64) -> String {
    format!("{{\"object\":\"response.input_tokens\",\"input_tokens\":{n}}}")
}
