//! OpenAI chat over HTTP: `{base_url}/chat/completions`, Bearer keys both ways.

use crate::protocol::common::http::{bearer, SetHeader, UpstreamTarget};
use http::HeaderMap;

/// The upstream path (and query) for a call.
pub fn upstream_path(t: &UpstreamTarget<'_>) -> String {
    [t.base_path, "/chat/completions"].concat()
}

/// The headers that carry the provider key.
pub fn upstream_auth(key: &str, _t: &UpstreamTarget<'_>, set: &mut SetHeader<'_>) {
    set("authorization", &["Bearer ", key].concat());
}

/// The key a client presented: `Authorization: Bearer`.
pub fn client_key<'a>(headers: &'a HeaderMap, _query: Option<&'a str>) -> Option<&'a str> {
    bearer(headers)
}
