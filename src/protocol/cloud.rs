//! The clouds around the wire protocols (docs/clouds.md): where Azure
//! OpenAI, Vertex AI and Amazon Bedrock put a call of the OpenAI chat,
//! Responses, Gemini and Anthropic Messages wires, the header their
//! credential goes in, the Messages body Vertex and Bedrock take
//! (`anthropic_version` in the body, no `model`; on Bedrock no `stream`
//! either, and the beta flags in the body), and how an upstream frames its
//! stream (SSE, or AWS's event stream on Bedrock). The bodies are otherwise
//! the spokes' own: a cloud is addressing, not a protocol. SigV4 signing is
//! not here: it is done over the request's exact bytes where it is sent
//! (`upstream::credentials`).

use super::common::framing::UpstreamFraming;
use super::common::http::{SetHeader, UpstreamTarget};
use crate::config::{Cloud, Deployment};
use crate::family::Family;
use crate::util::jsonedit::{self, Edit};

/// The `anthropic_version` Anthropic models on Vertex AI take in the body.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The `anthropic_version` Anthropic models on Bedrock take in the body.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The SigV4 service name of Bedrock's runtime API.
pub const BEDROCK_SERVICE: &str = "bedrock";

/// Appends `id` as one URL path segment: every byte but the unreserved
/// ones (RFC 3986: letters, digits, `-._~`) percent-encoded, as AWS's SDKs
/// write a model id or ARN into the path (`:` → `%3A`, `/` → `%2F`).
pub fn push_segment(id: &str, out: &mut String) {
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
}

/// The message of an AWS error body (Bedrock's `{"message": …}`, the
/// exception named apart in `x-amzn-errortype`), for an upstream whose wire
/// protocol's own error shape is not there.
pub fn aws_error_message(body: &serde_json::Value) -> Option<String> {
    body.get("message")
        .or_else(|| body.get("Message"))?
        .as_str()
        .map(str::to_string)
}

/// A context overflow in Bedrock's words (InvokeModel's "Input is too long
/// for requested model.", or the model's own "prompt is too long" that
/// Converse relays), as the one overflow code.
pub fn aws_error_code(body: &serde_json::Value) -> Option<String> {
    let message = aws_error_message(body)?;
    (message.contains("Input is too long") || message.contains("prompt is too long"))
        .then(|| super::common::spoke::CONTEXT_OVERFLOW.to_string())
}

/// How an upstream of `family` through `cloud` frames its stream.
pub fn upstream_framing(cloud: Option<&Cloud>, family: Family) -> UpstreamFraming {
    match (cloud, family) {
        (Some(Cloud::Bedrock { .. }), Family::Anthropic) => UpstreamFraming::EventStreamChunks,
        (Some(Cloud::Bedrock { .. }), _) => UpstreamFraming::EventStream,
        _ => UpstreamFraming::Sse,
    }
}

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
        (Cloud::Bedrock { .. }, _) => {
            // InvokeModel carries the Anthropic Messages body; Converse its own.
            let method = match (family, t.stream) {
                (Family::Anthropic, false) => "invoke",
                (Family::Anthropic, true) => "invoke-with-response-stream",
                (_, false) => "converse",
                (_, true) => "converse-stream",
            };
            let mut path = String::with_capacity(base.len() + t.upstream_model.len() + 40);
            path.push_str(base);
            path.push_str("/model/");
            push_segment(t.upstream_model, &mut path);
            path.push('/');
            path.push_str(method);
            Some(path)
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
        // An embedding model's InvokeModel (protocol::bedrock_embed).
        (Cloud::Bedrock { .. }, _) => {
            let mut path = String::with_capacity(base.len() + model.len() + 16);
            path.push_str(base);
            path.push_str("/model/");
            push_segment(model, &mut path);
            path.push_str("/invoke");
            Some(path)
        }
        _ => None,
    }
}

/// Sets the headers of a call through `cloud` carrying `key` (Azure's
/// `api-key`, Bedrock's API key as a Bearer) or an access token
/// (`Authorization: Bearer`), and the client's `anthropic-beta` where the
/// spoke would forward it (Bedrock takes it in the body instead). A SigV4
/// call's `authorization` is the signature, set where it is sent.
pub fn upstream_auth(
    cloud: &Cloud,
    credential: Credential<'_>,
    t: &UpstreamTarget<'_>,
    set: &mut SetHeader<'_>,
) {
    match (credential, cloud) {
        (Credential::Key(key), Cloud::Bedrock { .. }) | (Credential::Bearer(key), _) => {
            set("authorization", &format!("Bearer {key}"))
        }
        (Credential::Key(key), _) => set("api-key", key),
        (Credential::Signed, _) => {}
    }
    match (t.anthropic_beta, cloud) {
        (_, Cloud::Bedrock { .. }) | (None, _) => {}
        (Some(beta), _) => set("anthropic-beta", beta),
    }
}

/// What a cloud call is authenticated with.
#[derive(Clone, Copy)]
pub enum Credential<'a> {
    /// The catalog key: Azure OpenAI's `api-key`, a Bedrock API key as a Bearer.
    Key(&'a str),
    /// An access token (Entra ID, Google OAuth2).
    Bearer(&'a str),
    /// AWS credentials: the request is signed (SigV4) once its head is whole.
    Signed,
}

impl std::fmt::Debug for Credential<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        f.write_str(match self {
            Credential::Key(_) => "Key(..)",
            Credential::Bearer(_) => "Bearer(..)",
            Credential::Signed => "Signed",
        })
    }
}

/// The body a call of `family` through `cloud` takes, when it differs from
/// the spoke's: an Anthropic Messages body on Vertex AI or Bedrock loses
/// `model` (it is in the path) and carries the cloud's `anthropic_version`;
/// on Bedrock it loses `stream` too (the path says it) and carries the
/// client's beta flags (`anthropic_beta`: the `anthropic-beta` header's
/// comma-separated list, as an array). `None`: the body as it is.
pub fn upstream_body(
    cloud: &Cloud,
    family: Family,
    body: &[u8],
    anthropic_beta: Option<&str>,
) -> Option<Vec<u8>> {
    if family != Family::Anthropic {
        return None;
    }
    let (version, bedrock) = match cloud {
        Cloud::Vertex { .. } => (VERTEX_ANTHROPIC_VERSION, false),
        Cloud::Bedrock { .. } => (BEDROCK_ANTHROPIC_VERSION, true),
        Cloud::Azure { .. } => return None,
    };
    let mut edits = vec![Edit::remove("model"), Edit::remove("anthropic_version")];
    if bedrock {
        edits.push(Edit::remove("stream"));
        edits.push(Edit::remove("anthropic_beta"));
    }
    let edited = jsonedit::apply(body, &edits);
    let doc: &[u8] = edited.as_deref().unwrap_or(body);
    // The members the cloud wants, first in the object.
    let mut members = Vec::with_capacity(64);
    members.extend_from_slice(b"\"anthropic_version\":\"");
    members.extend_from_slice(version.as_bytes());
    members.push(b'"');
    if let Some(flags) = anthropic_beta.filter(|_| bedrock) {
        let flags: Vec<&str> = flags
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .collect();
        if !flags.is_empty() {
            members.extend_from_slice(b",\"anthropic_beta\":");
            members.extend_from_slice(&serde_json::to_vec(&flags).unwrap_or_default());
        }
    }
    let open = doc.iter().position(|&b| b == b'{')?;
    let mut out = Vec::with_capacity(doc.len() + members.len() + 2);
    out.extend_from_slice(&doc[..=open]);
    out.extend_from_slice(&members);
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
            Some("x"),
        )
        .unwrap();
        let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(j["anthropic_version"], VERTEX_ANTHROPIC_VERSION);
        assert!(j.get("model").is_none());
        assert_eq!(j["max_tokens"], 5);
        // a version the client sent is replaced, a bare object still parses
        let out =
            upstream_body(&v, Family::Anthropic, br#"{"anthropic_version":"x"}"#, None).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"anthropic_version":"vertex-2023-10-16"}"#
        );
        let out = upstream_body(&v, Family::Anthropic, b"{ }", None).unwrap();
        assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());
        // other wires and clouds keep their body
        assert!(upstream_body(&v, Family::Gemini, b"{}", None).is_none());
        let az = Cloud::Azure { deployment: None };
        assert!(upstream_body(&az, Family::Anthropic, b"{}", None).is_none());
    }

    fn bedrock() -> Cloud {
        Cloud::Bedrock {
            region: "us-east-1".into(),
        }
    }

    #[test]
    fn bedrock_paths_encode_the_model_id_as_one_segment() {
        let b = bedrock();
        let mut t = target(false);
        t.upstream_model = "anthropic.claude-3-5-sonnet-20241022-v2:0";
        assert_eq!(
            upstream_path(&b, Family::Anthropic, &t).unwrap(),
            "/base/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/invoke"
        );
        t.stream = true;
        assert_eq!(
            upstream_path(&b, Family::Anthropic, &t).unwrap(),
            "/base/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/invoke-with-response-stream"
        );
        t.upstream_model = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.x y";
        assert_eq!(
            upstream_path(&b, Family::Gemini, &t).unwrap(),
            "/base/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.x%20y/converse-stream"
        );
        t.stream = false;
        assert!(upstream_path(&b, Family::OpenAi, &t)
            .unwrap()
            .ends_with("/converse"));
        assert_eq!(
            upstream_framing(Some(&b), Family::Anthropic),
            UpstreamFraming::EventStreamChunks
        );
        assert_eq!(
            upstream_framing(None, Family::Anthropic),
            UpstreamFraming::Sse
        );
    }

    #[test]
    fn bedrock_anthropic_body_has_the_version_and_neither_model_nor_stream() {
        let out = upstream_body(
            &bedrock(),
            Family::Anthropic,
            br#"{"model":"c","stream":true,"anthropic_version":"2023-06-01","max_tokens":5}"#,
            Some("computer-use-2024-10-22, token-efficient-tools-2025-02-19"),
        )
        .unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["computer-use-2024-10-22","token-efficient-tools-2025-02-19"],"max_tokens":5}"#
        );
        let out =
            upstream_body(&bedrock(), Family::Anthropic, br#"{"max_tokens":1}"#, None).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":1}"#
        );
    }
}
