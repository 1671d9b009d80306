//! Bedrock Converse over HTTP: the model is in the path
//! (`{base_url}/model/{modelId}/converse`, streams `/converse-stream`), the
//! model id percent-encoded as one path segment (ARNs and inference-profile
//! ids carry `:` and `/`). Clients of the gateway put their key in
//! `Authorization: Bearer` (as boto3 does with a Bedrock API key).
//! Upstream credentials (SigV4 or a Bedrock API key) are set by the cloud
//! layer (`protocol/cloud.rs`); `upstream_auth` here sets a plain bearer.

use crate::protocol::common::http::{bearer, SetHeader, UpstreamTarget};
use http::HeaderMap;

/// The upstream path for a call.
pub fn upstream_path(t: &UpstreamTarget<'_>) -> String {
    let model = segment(t.upstream_model);
    if t.stream {
        format!("{}/model/{model}/converse-stream", t.base_path)
    } else {
        format!("{}/model/{model}/converse", t.base_path)
    }
}

/// `s` as one path segment: RFC 3986 unreserved bytes kept, the rest `%XX`.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A Bedrock API key as a bearer token.
pub fn upstream_auth(key: &str, _t: &UpstreamTarget<'_>, set: &mut SetHeader<'_>) {
    set("authorization", &["Bearer ", key].concat());
}

/// The key a client presented: `Authorization: Bearer`.
pub fn client_key<'a>(headers: &'a HeaderMap, _query: Option<&'a str>) -> Option<&'a str> {
    bearer(headers)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_escape_the_model() {
        let t = UpstreamTarget {
            base_path: "",
            upstream_model: "us.anthropic.claude-sonnet-4-5-v1:0",
            stream: false,
            beta_query: false,
            anthropic_beta: None,
        };
        assert_eq!(
            upstream_path(&t),
            "/model/us.anthropic.claude-sonnet-4-5-v1%3A0/converse"
        );
        let t = UpstreamTarget { stream: true, ..t };
        assert!(upstream_path(&t).ends_with("/converse-stream"));
    }
}
