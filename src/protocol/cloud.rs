//! The clouds around the wire protocols (docs/clouds.md): where Azure
//! OpenAI and Vertex AI put a call of the OpenAI chat, Responses, Gemini and
//! Anthropic Messages wires, the header their credential goes in, and the
//! Messages body Vertex takes (`anthropic_version` in the body, no `model`).
//! The bodies are otherwise the spokes' own: a cloud is addressing, not a
//! protocol.

use super::common::http::{SetHeader, UpstreamTarget};
use crate::config::{Cloud, Deployment};
use crate::family::Family;
use crate::util::jsonedit::{self, Edit};

/// The `anthropic_version` Anthropic models on Vertex AI take in the body.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The upstream path (and query) of a call of `family` through `cloud`;
/// `None` when the cloud does not carry that wire (refused at load).
pub fn upstream_path(cloud: &Cloud, family: Family, t: &UpstreamTarget<'_>) -> Option<String> {
    let base = t.base_path;
    match (cloud, family) {
        (Cloud::Azure { deployment: None }, Family::OpenAi) => {
            Some(format!("{base}/chat/completions"))
        }
        (Cloud::Azure { deployment: None }, Family::Responses) => Some(format!("{base}/responses")),
        (
            Cloud::Azure {
                deployment: Some(Deployment { name, api_version }),
            },
            Family::OpenAi,
        ) => Some(format!(
            "{base}/openai/deployments/{name}/chat/completions?api-version={api_version}"
        )),
        (Cloud::Vertex { project, location }, Family::Gemini | Family::Anthropic) => {
            let (publisher, method) = match (family, t.stream) {
                (Family::Gemini, false) => ("google", "generateContent"),
                (Family::Gemini, true) => ("google", "streamGenerateContent?alt=sse"),
                (_, false) => ("anthropic", "rawPredict"),
                (_, true) => ("anthropic", "streamRawPredict"),
            };
            Some(format!(
                "{base}/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{}:{method}",
                t.upstream_model
            ))
        }
        _ => None,
    }
}

/// The path of an embeddings call through `cloud`: Azure's OpenAI
/// `/embeddings` (v1 or a deployment's), Vertex's `:predict` for a
/// text-embedding model; `None` for another wire.
pub fn embed_path(cloud: &Cloud, family: Family, base: &str, model: &str) -> Option<String> {
    match (cloud, family) {
        (Cloud::Azure { deployment: None }, Family::OpenAi) => Some(format!("{base}/embeddings")),
        (
            Cloud::Azure {
                deployment: Some(Deployment { name, api_version }),
            },
            Family::OpenAi,
        ) => Some(format!(
            "{base}/openai/deployments/{name}/embeddings?api-version={api_version}"
        )),
        (Cloud::Vertex { project, location }, Family::Gemini) => Some(format!(
            "{base}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:predict"
        )),
        _ => None,
    }
}

/// Sets the headers of a call through `cloud` carrying `key` (Azure's
/// `api-key`) or an access token (`Authorization: Bearer`), and the
/// client's `anthropic-beta` where the spoke would forward it.
pub fn upstream_auth(credential: Credential<'_>, t: &UpstreamTarget<'_>, set: &mut SetHeader<'_>) {
    match credential {
        Credential::AzureKey(key) => set("api-key", key),
        Credential::Bearer(token) => set("authorization", &format!("Bearer {token}")),
    }
    if let Some(beta) = t.anthropic_beta {
        set("anthropic-beta", beta);
    }
}

/// What a cloud call is authenticated with.
#[derive(Clone, Copy)]
pub enum Credential<'a> {
    /// An Azure OpenAI key, sent as `api-key`.
    AzureKey(&'a str),
    /// An access token (Entra ID, Google OAuth2).
    Bearer(&'a str),
}

impl std::fmt::Debug for Credential<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        f.write_str(match self {
            Credential::AzureKey(_) => "AzureKey(..)",
            Credential::Bearer(_) => "Bearer(..)",
        })
    }
}

/// The body a call of `family` through `cloud` takes, when it differs from
/// the spoke's: an Anthropic Messages body on Vertex AI loses `model` (it is
/// in the path) and carries `anthropic_version`. `None`: the body as it is.
pub fn upstream_body(cloud: &Cloud, family: Family, body: &[u8]) -> Option<Vec<u8>> {
    if !matches!(cloud, Cloud::Vertex { .. }) || family != Family::Anthropic {
        return None;
    }
    let version = format!("\"{VERTEX_ANTHROPIC_VERSION}\"").into_bytes();
    let had_version = jsonedit::has_path(body, "anthropic_version");
    let mut edits = vec![Edit::remove("model")];
    if had_version {
        edits.push(Edit::set("anthropic_version", version.clone()));
    }
    let edited = jsonedit::apply(body, &edits);
    let doc: &[u8] = edited.as_deref().unwrap_or(body);
    if had_version {
        return Some(doc.to_vec());
    }
    let open = doc.iter().position(|&b| b == b'{')?;
    let mut out = Vec::with_capacity(doc.len() + 48);
    out.extend_from_slice(&doc[..=open]);
    out.extend_from_slice(b"\"anthropic_version\":");
    out.extend_from_slice(&version);
    let rest = &doc[open + 1..];
    if rest.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn target(stream: bool) -> UpstreamTarget<'static> {
        UpstreamTarget {
            base_path: "/base",
            upstream_model: "m-1",
            stream,
            beta_query: false,
            anthropic_beta: None,
        }
    }

    #[test]
    fn azure_paths() {
        let v1 = Cloud::Azure { deployment: None };
        assert_eq!(
            upstream_path(&v1, Family::OpenAi, &target(true)).unwrap(),
            "/base/chat/completions"
        );
        assert_eq!(
            upstream_path(&v1, Family::Responses, &target(false)).unwrap(),
            "/base/responses"
        );
        let dep = Cloud::Azure {
            deployment: Some(Deployment {
                name: "gpt4o-east".into(),
                api_version: "2024-10-21".into(),
            }),
        };
        assert_eq!(
            upstream_path(&dep, Family::OpenAi, &target(false)).unwrap(),
            "/base/openai/deployments/gpt4o-east/chat/completions?api-version=2024-10-21"
        );
        assert!(upstream_path(&dep, Family::Gemini, &target(false)).is_none());
        assert_eq!(
            embed_path(&dep, Family::OpenAi, "/base", "m").unwrap(),
            "/base/openai/deployments/gpt4o-east/embeddings?api-version=2024-10-21"
        );
        assert_eq!(
            embed_path(&v1, Family::OpenAi, "/base", "m").unwrap(),
            "/base/embeddings"
        );
        assert!(embed_path(&v1, Family::Responses, "/base", "m").is_none());
    }

    #[test]
    fn vertex_paths() {
        let v = Cloud::Vertex {
            project: "proj".into(),
            location: "us-east5".into(),
        };
        let p = |f, s| upstream_path(&v, f, &target(s)).unwrap();
        let root = "/base/v1/projects/proj/locations/us-east5/publishers";
        assert_eq!(
            p(Family::Gemini, false),
            format!("{root}/google/models/m-1:generateContent")
        );
        assert_eq!(
            p(Family::Gemini, true),
            format!("{root}/google/models/m-1:streamGenerateContent?alt=sse")
        );
        assert_eq!(
            p(Family::Anthropic, false),
            format!("{root}/anthropic/models/m-1:rawPredict")
        );
        assert_eq!(
            p(Family::Anthropic, true),
            format!("{root}/anthropic/models/m-1:streamRawPredict")
        );
        assert_eq!(
            embed_path(&v, Family::Gemini, "/base", "text-embedding-005").unwrap(),
            format!("{root}/google/models/text-embedding-005:predict")
        );
        assert!(embed_path(&v, Family::Anthropic, "/base", "m").is_none());
    }

    #[test]
    fn vertex_anthropic_body_has_the_version_and_no_model() {
        let v = Cloud::Vertex {
            project: "p".into(),
            location: "l".into(),
        };
        let out = upstream_body(
            &v,
            Family::Anthropic,
            br#"{"model":"claude","max_tokens":5,"messages":[]}"#,
        )
        .unwrap();
        let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(j["anthropic_version"], VERTEX_ANTHROPIC_VERSION);
        assert!(j.get("model").is_none());
        assert_eq!(j["max_tokens"], 5);
        // a version the client sent is replaced, a bare object still parses
        let out = upstream_body(&v, Family::Anthropic, br#"{"anthropic_version":"x"}"#).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"anthropic_version":"vertex-2023-10-16"}"#
        );
        let out = upstream_body(&v, Family::Anthropic, b"{ }").unwrap();
        assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
        // other wires and clouds keep their body
        assert!(upstream_body(&v, Family::Gemini, b"{}").is_none());
        let az = Cloud::Azure { deployment: None };
        assert!(upstream_body(&az, Family::Anthropic, b"{}").is_none());
    }
}
