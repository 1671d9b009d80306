//! The route table: method + path (+ the query's `alt`) to an endpoint of one family.
//!
//! `ROUTES` lists every route as data (a short label, the method, the path
//! pattern). The router is the `match` in [`route`]; a unit test routes every
//! row of the table and the end-to-end route test calls every row, so a route
//! cannot ship untested.

use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use std::borrow::Cow;

/// How a generateContent-family call streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeminiStream {
    /// `:generateContent` without `alt=sse`: one JSON response.
    None,
    /// `alt=sse`: server-sent events.
    Sse,
    /// `:streamGenerateContent` without `alt=sse`: a JSON array streamed incrementally.
    JsonArray,
}

/// Which Bedrock runtime operation a `/bedrock/model/{model}/…` route names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BedrockOp {
    /// E20 `converse`: a Converse body, a Converse answer.
    Converse,
    /// E21 `converse-stream`: a Converse body, an event stream of Converse events.
    ConverseStream,
    /// E22 `invoke`: an Anthropic Messages body (`anthropic_version`, no
    /// `model`), an Anthropic Messages answer.
    Invoke,
    /// E23 `invoke-with-response-stream`: as E22, the Anthropic stream
    /// events each in an event-stream `chunk` message.
    InvokeStream,
}

impl BedrockOp {
    /// The operation a path's last segment names.
    fn from_segment(op: &str) -> Option<BedrockOp> {
        match op {
            "converse" => Some(BedrockOp::Converse),
            "converse-stream" => Some(BedrockOp::ConverseStream),
            "invoke" => Some(BedrockOp::Invoke),
            "invoke-with-response-stream" => Some(BedrockOp::InvokeStream),
            _ => None,
        }
    }

    /// The answer is streamed.
    pub fn streams(self) -> bool {
        matches!(self, BedrockOp::ConverseStream | BedrockOp::InvokeStream)
    }

    /// The body is an Anthropic Messages body in Bedrock's envelope (E22, E23).
    pub fn invokes(self) -> bool {
        matches!(self, BedrockOp::Invoke | BedrockOp::InvokeStream)
    }
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /healthz`.
    Health,
    /// `GET /readyz`.
    Ready,
    /// `GET`/`HEAD` on a family root (`/v1`, `/anthropic`, `/google`) or
    /// an SDK base URL (`/anthropic/v1`, `/google/v1beta`): clients probe it.
    Root,
    /// `GET {root}/models`.
    ListModels,
    /// `GET {root}/models/{segment}`: a provider's models, or (when the segment is a model id)
    /// one model without its provider.
    ProviderOrModel(String),
    /// `GET {root}/models/{provider}/{model_id}`.
    GetModel { provider: String, model: String },
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /anthropic/v1/messages`.
    Messages,
    /// `POST /anthropic/v1/messages/count_tokens`.
    AnthropicCountTokens,
    /// `POST /google/v1beta/models/{model}:generateContent` or
    /// `:streamGenerateContent` (SSE or a JSON array); `model` is `provider/model_id` or a bare id.
    GenerateContent { model: String, stream: GeminiStream },
    /// `POST /google/v1beta/models/{model}:countTokens`; `model` as above.
    GeminiCountTokens { model: String },
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/responses/input_tokens`.
    ResponsesInputTokens,
    /// `GET`/`DELETE /v1/responses/{id}` and `GET .../{id}/input_items`
    /// (`input_items`): stored responses (docs/api.md "Stored responses").
    StoredResponse { id: String, input_items: bool },
    /// `POST /v1/embeddings` (X1).
    Embeddings,
    /// `POST /google/v1beta/models/{model}:embedContent` or `:batchEmbedContents`
    /// (`batch`) (X2); `model` as for generateContent.
    EmbedContent { model: String, batch: bool },
    /// `POST /v1/rerank` (X3).
    Rerank,
    /// `POST /bedrock/model/{model}/{op}` (E20-E23); `model` is
    /// `provider/model_id` (one escaped segment or two), a bare id or an alias.
    Bedrock { model: String, op: BedrockOp },
}

impl Endpoint {
    /// A Gemini route's model from its path and the stream form it asks for
    /// (none elsewhere).
    pub fn gemini_model(&self) -> (Option<&str>, GeminiStream) {
        match self {
            Endpoint::GenerateContent { model, stream } => (Some(model.as_str()), *stream),
            Endpoint::GeminiCountTokens { model } | Endpoint::EmbedContent { model, .. } => {
                (Some(model.as_str()), GeminiStream::None)
            }
            _ => (None, GeminiStream::None),
        }
    }

    /// The model a route names in its path (Gemini and Bedrock routes).
    pub fn path_model(&self) -> Option<&str> {
        match self {
            Endpoint::Bedrock { model, .. } => Some(model.as_str()),
            _ => self.gemini_model().0,
        }
    }

    /// Whether the path asks for a stream (the body's `stream` aside).
    pub fn path_stream(&self) -> bool {
        match self {
            Endpoint::Bedrock { op, .. } => op.streams(),
            _ => self.gemini_model().1 != GeminiStream::None,
        }
    }

    /// The family of the request body: the route's, except Bedrock's
    /// InvokeModel routes (E22, E23), whose body is Anthropic Messages.
    pub fn body_family(&self, family: Family) -> Family {
        match self {
            Endpoint::Bedrock { op, .. } if op.invokes() => Family::Anthropic,
            _ => family,
        }
    }

    /// Whether the endpoint counts the request's tokens (answered locally).
    pub fn counts_tokens(&self) -> bool {
        matches!(
            self,
            Endpoint::AnthropicCountTokens
                | Endpoint::GeminiCountTokens { .. }
                | Endpoint::ResponsesInputTokens
        )
    }

    /// Whether the endpoint needs a client key.
    pub fn is_inference(&self) -> bool {
        matches!(
            self,
            Endpoint::ChatCompletions
                | Endpoint::Messages
                | Endpoint::AnthropicCountTokens
                | Endpoint::GenerateContent { .. }
                | Endpoint::GeminiCountTokens { .. }
                | Endpoint::Responses
                | Endpoint::ResponsesInputTokens
                | Endpoint::Embeddings
                | Endpoint::EmbedContent { .. }
                | Endpoint::Rerank
                | Endpoint::Bedrock { .. }
        )
    }

    /// Whether the endpoint asks for embeddings (the `embed` action).
    pub fn embeds(&self) -> bool {
        matches!(self, Endpoint::Embeddings | Endpoint::EmbedContent { .. })
    }
}

/// A routed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub family: Family,
    pub endpoint: Endpoint,
}

/// The route table, as (label, method, path pattern) rows, for tests: the label names the
/// route in test output (`E`: the chat protocols' routes, `D`: the Responses API's, `R`: roots).
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("E1", "GET", "/v1/models"),
    ("E2", "GET", "/v1/models/{provider}"),
    ("E3", "GET", "/v1/models/{provider}/{model_id}"),
    ("E4", "POST", "/v1/chat/completions"),
    ("E5", "GET", "/anthropic/v1/models"),
    ("E6", "GET", "/anthropic/v1/models/{provider}"),
    ("E7", "GET", "/anthropic/v1/models/{provider}/{model_id}"),
    ("E8", "POST", "/anthropic/v1/messages"),
    ("E8c", "POST", "/anthropic/v1/messages/count_tokens"),
    ("E9", "GET", "/google/v1beta/models"),
    ("E10", "GET", "/google/v1beta/models/{provider}"),
    ("E11", "GET", "/google/v1beta/models/{provider}/{model_id}"),
    (
        "E12",
        "POST",
        "/google/v1beta/models/{provider}/{model_id}:generateContent",
    ),
    (
        "E13",
        "POST",
        "/google/v1beta/models/{provider}/{model_id}:streamGenerateContent?alt=sse",
    ),
    (
        "E13j",
        "POST",
        "/google/v1beta/models/{provider}/{model_id}:streamGenerateContent",
    ),
    (
        "E14",
        "POST",
        "/google/v1beta/models/{provider}/{model_id}:countTokens",
    ),
    (
        "E12a",
        "POST",
        "/google/v1beta/{provider}/{model_id}:generateContent",
    ),
    (
        "E13a",
        "POST",
        "/google/v1beta/{provider}/{model_id}:streamGenerateContent?alt=sse",
    ),
    (
        "E13ja",
        "POST",
        "/google/v1beta/{provider}/{model_id}:streamGenerateContent",
    ),
    (
        "E14a",
        "POST",
        "/google/v1beta/{provider}/{model_id}:countTokens",
    ),
    ("X1", "POST", "/v1/embeddings"),
    ("X3", "POST", "/v1/rerank"),
    (
        "X2",
        "POST",
        "/google/v1beta/models/{provider}/{model_id}:embedContent",
    ),
    (
        "X2b",
        "POST",
        "/google/v1beta/models/{provider}/{model_id}:batchEmbedContents",
    ),
    (
        "E20",
        "POST",
        "/bedrock/model/{provider}%2F{model_id}/converse",
    ),
    (
        "E21",
        "POST",
        "/bedrock/model/{provider}%2F{model_id}/converse-stream",
    ),
    (
        "E22",
        "POST",
        "/bedrock/model/{provider}%2F{model_id}/invoke",
    ),
    (
        "E23",
        "POST",
        "/bedrock/model/{provider}%2F{model_id}/invoke-with-response-stream",
    ),
    ("D1", "POST", "/v1/responses"),
    ("D2", "POST", "/v1/responses/input_tokens"),
    ("D3", "GET", "/v1/responses/{id}"),
    ("D3", "DELETE", "/v1/responses/{id}"),
    ("D3", "GET", "/v1/responses/{id}/input_items"),
    ("H", "GET", "/healthz"),
    ("H", "GET", "/readyz"),
    ("R", "GET", "/v1"),
    ("R", "HEAD", "/v1"),
    ("R", "GET", "/anthropic"),
    ("R", "HEAD", "/anthropic"),
    ("R", "GET", "/anthropic/v1"),
    ("R", "HEAD", "/anthropic/v1"),
    ("R", "GET", "/google"),
    ("R", "HEAD", "/google"),
    ("R", "GET", "/google/v1beta"),
    ("R", "HEAD", "/google/v1beta"),
    ("R", "GET", "/bedrock"),
    ("R", "HEAD", "/bedrock"),
];

/// The family whose error shape a path uses (OpenAI's for anything unknown).
pub fn family_of_path(path: &str) -> Family {
    if path == "/anthropic" || path.starts_with("/anthropic/") {
        Family::Anthropic
    } else if path == "/google" || path.starts_with("/google/") {
        Family::Gemini
    } else if path == "/bedrock" || path.starts_with("/bedrock/") {
        Family::Bedrock
    } else {
        Family::OpenAi
    }
}

fn not_found(path: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!("no route for {}", crate::error::quote(path)),
    )
}

fn method_not_allowed(method: &str, path: &str, allowed: &'static str) -> GatewayError {
    let mut e = GatewayError::new(
        ErrorKind::MethodNotAllowed,
        format!(
            "method {} is not allowed on {}; use {allowed}",
            crate::error::quote(method),
            crate::error::quote(path)
        ),
    );
    e.allow = Some(if allowed == "GET" {
        "GET, HEAD"
    } else {
        allowed
    });
    e
}

/// Decodes `%XX` escapes in one path segment (SDKs escape `/` in ids as `%2F`);
/// malformed escapes are kept as they are, and a segment that does not decode
/// to UTF-8 is kept as it came.
/// A segment as it is when it has no `%` (no copy), else decoded.
fn percent_decode(seg: &str) -> Cow<'_, str> {
    if !seg.contains('%') {
        return Cow::Borrowed(seg);
    }
    let bytes = crate::util::percent::decode_lenient(seg, crate::util::percent::Component::Path);
    String::from_utf8(bytes).map_or(Cow::Borrowed(seg), Cow::Owned)
}

fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

/// Gemini's `{provider}/{model_id}:{method}` or `{model_id}:{method}` (the
/// path segments after `models/`, or after the prefix for the alias form):
/// the endpoint, or `None` for an unknown method or a malformed name.
fn gemini_method(segs: &[&str], query: Option<&str>) -> Option<Endpoint> {
    let (last, provider) = segs.split_last()?;
    let (model_last, action) = last.rsplit_once(':')?;
    let model = match provider {
        [] if !model_last.is_empty() => model_last.to_string(),
        [p] if !model_last.is_empty() => format!("{p}/{model_last}"),
        _ => return None,
    };
    let sse = query_param(query, "alt") == Some("sse");
    let stream = match (action, sse) {
        ("countTokens", _) => return Some(Endpoint::GeminiCountTokens { model }),
        ("embedContent" | "batchEmbedContents", _) => {
            let batch = action == "batchEmbedContents";
            return Some(Endpoint::EmbedContent { model, batch });
        }
        ("generateContent" | "streamGenerateContent", true) => GeminiStream::Sse,
        ("generateContent", false) => GeminiStream::None,
        ("streamGenerateContent", false) => GeminiStream::JsonArray,
        _ => return None,
    };
    Some(Endpoint::GenerateContent { model, stream })
}

/// The percent-decoded segments of the path after a family's root (`""`:
/// none), or `None` when it does not start with `/` or holds an empty one.
/// Where a family's routes live: the Responses API under `/v1`, as OpenAI chat.
fn family_prefix(family: Family) -> &'static str {
    match family {
        Family::OpenAi | Family::Responses => "/v1",
        Family::Anthropic => "/anthropic/v1",
        Family::Gemini => "/google/v1beta",
        Family::Bedrock => "/bedrock",
    }
}

/// A Responses API route (under `/v1` beside OpenAI chat): answered as family
/// Responses when `method` is one of `allowed`, else 405 in the path's family.
fn responses_route(
    method: &str,
    path: &str,
    family: Family,
    allowed: &'static [&'static str],
    endpoint: Endpoint,
) -> Result<Route, (Family, GatewayError)> {
    if allowed.contains(&method) {
        return Ok(Route {
            family: Family::Responses,
            endpoint,
        });
    }
    let allow = if allowed.len() > 1 {
        "GET, DELETE"
    } else {
        allowed[0]
    };
    Err((family, method_not_allowed(method, path, allow)))
}

fn segments(rest: &str) -> Option<Vec<Cow<'_, str>>> {
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let decoded: Vec<Cow<'_, str>> = rest
        .strip_prefix('/')?
        .split('/')
        .map(percent_decode)
        .collect();
    (!decoded.iter().any(|s| s.is_empty())).then_some(decoded)
}

/// Routes a request. On error, the family tells the error shape.
pub fn route(
    method: &str,
    path: &str,
    query: Option<&str>,
) -> Result<Route, (Family, GatewayError)> {
    let family = family_of_path(path);
    let trimmed = if path.len() > 1 {
        path.strip_suffix('/').unwrap_or(path)
    } else {
        path
    };
    let fail = |e| Err((family, e));
    let expect = |want: &'static str, endpoint: Endpoint| {
        if method == want || (want == "GET" && method == "HEAD") {
            Ok(Route { family, endpoint })
        } else {
            Err((family, method_not_allowed(method, path, want)))
        }
    };
    let Some(rest) = trimmed.strip_prefix(family_prefix(family)) else {
        return match trimmed {
            "/healthz" => expect("GET", Endpoint::Health),
            "/readyz" => expect("GET", Endpoint::Ready),
            "/anthropic" | "/google" => expect("GET", Endpoint::Root),
            _ => fail(not_found(path)),
        };
    };
    let Some(decoded) = segments(rest) else {
        return fail(not_found(path));
    };
    let segs: Vec<&str> = decoded.iter().map(|s| &**s).collect();
    let responses = |allowed, endpoint| responses_route(method, path, family, allowed, endpoint);
    match (family, segs.as_slice()) {
        (Family::OpenAi, ["chat", "completions"]) => expect("POST", Endpoint::ChatCompletions),
        (Family::OpenAi, ["embeddings"]) => expect("POST", Endpoint::Embeddings),
        (Family::OpenAi, ["rerank"]) => expect("POST", Endpoint::Rerank),
        (Family::OpenAi, ["responses"]) => responses(&["POST"], Endpoint::Responses),
        (Family::OpenAi, ["responses", "input_tokens"]) => {
            responses(&["POST"], Endpoint::ResponsesInputTokens)
        }
        (Family::OpenAi, ["responses", id]) => responses(
            &["GET", "DELETE"],
            Endpoint::StoredResponse {
                id: (*id).to_string(),
                input_items: false,
            },
        ),
        (Family::OpenAi, ["responses", id, "input_items"]) => responses(
            &["GET"],
            Endpoint::StoredResponse {
                id: (*id).to_string(),
                input_items: true,
            },
        ),
        (Family::Anthropic, ["messages"]) => expect("POST", Endpoint::Messages),
        (Family::Anthropic, ["messages", "count_tokens"]) => {
            expect("POST", Endpoint::AnthropicCountTokens)
        }
        (Family::Gemini, ["models", .., last]) if last.contains(':') => {
            match gemini_method(&segs[1..], query) {
                Some(ep) => expect("POST", ep),
                None => fail(not_found(path)),
            }
        }
        // The Vercel AI SDK's form for ids with a slash: `/{provider}/{model_id}:{method}`.
        (Family::Gemini, [_, last]) if last.contains(':') => match gemini_method(&segs, query) {
            Some(ep) => expect("POST", ep),
            None => fail(not_found(path)),
        },
        (Family::Bedrock, ["model", names @ .., op]) if (1..=2).contains(&names.len()) => {
            match BedrockOp::from_segment(op) {
                Some(op) => expect(
                    "POST",
                    Endpoint::Bedrock {
                        model: names.join("/"),
                        op,
                    },
                ),
                None => fail(not_found(path)),
            }
        }
        (_, []) => expect("GET", Endpoint::Root),
        // Bedrock clients name models in the path: no listings.
        (Family::Bedrock, _) => fail(not_found(path)),
        (_, ["models"]) => expect("GET", Endpoint::ListModels),
        (_, ["models", x]) => expect("GET", Endpoint::ProviderOrModel((*x).to_string())),
        (_, ["models", p, m]) => expect(
            "GET",
            Endpoint::GetModel {
                provider: (*p).to_string(),
                model: (*m).to_string(),
            },
        ),
        _ => fail(not_found(path)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ok(m: &str, p: &str, q: Option<&str>) -> Route {
        route(m, p, q).unwrap()
    }

    #[test]
    fn routes_every_row_of_the_table() {
        for (id, method, pattern) in ROUTES {
            let (p, q) = pattern.split_once('?').unwrap_or((pattern, ""));
            let p = p
                .replace("{provider}", "google")
                .replace("{model_id}", "gemini-3.1-pro");
            let r = route(method, &p, Some(q)).unwrap_or_else(|e| panic!("{id}: {e:?}"));
            // The Responses API lives under OpenAI's `/v1`.
            let want = if id.starts_with('D') {
                Family::Responses
            } else {
                family_of_path(&p)
            };
            assert_eq!(r.family, want, "{id}");
            let again = route(method, &format!("{p}/"), Some(q)).unwrap();
            assert_eq!(again, r, "{id} with trailing slash");
        }
    }

    #[test]
    fn gemini_model_paths() {
        let r = ok(
            "POST",
            "/google/v1beta/models/google/gemini-3.1-pro:streamGenerateContent",
            Some("alt=sse"),
        );
        assert_eq!(
            r.endpoint,
            Endpoint::GenerateContent {
                model: "google/gemini-3.1-pro".into(),
                stream: GeminiStream::Sse
            }
        );
        let r = ok(
            "POST",
            "/google/v1beta/models/gemini-3.1-pro:streamGenerateContent",
            None,
        );
        assert_eq!(
            r.endpoint,
            Endpoint::GenerateContent {
                model: "gemini-3.1-pro".into(),
                stream: GeminiStream::JsonArray
            }
        );
        let r = ok(
            "POST",
            "/google/v1beta/models/gemini-3.1-pro:generateContent",
            Some("key=x&alt=sse"),
        );
        assert!(matches!(
            r.endpoint,
            Endpoint::GenerateContent {
                stream: GeminiStream::Sse,
                ..
            }
        ));
        assert!(route("POST", "/google/v1beta/models/a/b/c:generateContent", None).is_err());
        assert!(route("POST", "/google/v1beta/models/x:embed", None).is_err());
    }

    #[test]
    fn gemini_alias_without_models_segment() {
        let r = ok("POST", "/google/v1beta/qwen/qwen-3.6:generateContent", None);
        assert_eq!(r.family, Family::Gemini);
        assert_eq!(
            r.endpoint,
            Endpoint::GenerateContent {
                model: "qwen/qwen-3.6".into(),
                stream: GeminiStream::None
            }
        );
        let r = ok(
            "POST",
            "/google/v1beta/qwen/qwen-3.6:streamGenerateContent",
            Some("alt=sse"),
        );
        assert!(matches!(
            r.endpoint,
            Endpoint::GenerateContent {
                stream: GeminiStream::Sse,
                ..
            }
        ));
        assert_eq!(
            ok("POST", "/google/v1beta/qwen/qwen-3.6:countTokens", None).endpoint,
            Endpoint::GeminiCountTokens {
                model: "qwen/qwen-3.6".into()
            }
        );
        let (_, e) =
            route("GET", "/google/v1beta/qwen/qwen-3.6:generateContent", None).unwrap_err();
        assert_eq!(e.status, 405);
        for bad in [
            "/google/v1beta/qwen/qwen-3.6:predict",
            "/google/v1beta/qwen/:generateContent",
            "/google/v1beta/qwen-3.6:generateContent",
            "/google/v1beta/a/b/c:generateContent",
            "/google/v1beta/qwen/qwen-3.6",
        ] {
            let (f, e) = route("POST", bad, None).unwrap_err();
            assert_eq!((f, e.status), (Family::Gemini, 404), "{bad}");
        }
    }

    #[test]
    fn embedding_routes() {
        assert_eq!(
            ok("POST", "/v1/embeddings", None).endpoint,
            Endpoint::Embeddings
        );
        let r = ok(
            "POST",
            "/google/v1beta/models/google/gemini-embedding-001:batchEmbedContents",
            None,
        );
        assert_eq!(
            r.endpoint,
            Endpoint::EmbedContent {
                model: "google/gemini-embedding-001".into(),
                batch: true
            }
        );
        assert!(r.endpoint.embeds() && r.endpoint.is_inference());
        let r = ok("POST", "/google/v1beta/models/e:embedContent", None);
        assert_eq!(
            r.endpoint,
            Endpoint::EmbedContent {
                model: "e".into(),
                batch: false
            }
        );
        assert_eq!(
            route("GET", "/v1/embeddings", None).unwrap_err().1.status,
            405
        );
        let r = ok("POST", "/v1/rerank", None);
        assert_eq!(r.endpoint, Endpoint::Rerank);
        assert!(!r.endpoint.embeds() && r.endpoint.is_inference());
        assert_eq!(route("GET", "/v1/rerank", None).unwrap_err().1.status, 405);
    }

    #[test]
    fn family_roots() {
        for (p, f) in [
            ("/v1", Family::OpenAi),
            ("/anthropic", Family::Anthropic),
            ("/anthropic/v1", Family::Anthropic),
            ("/google", Family::Gemini),
            ("/google/v1beta", Family::Gemini),
            ("/bedrock", Family::Bedrock),
        ] {
            for m in ["GET", "HEAD"] {
                for path in [p.to_string(), format!("{p}/")] {
                    let r = ok(m, &path, None);
                    assert_eq!((r.family, r.endpoint), (f, Endpoint::Root), "{m} {path}");
                }
            }
            let (fam, e) = route("POST", p, None).unwrap_err();
            assert_eq!((fam, e.status), (f, 405), "POST {p}");
        }
        assert!(route("GET", "/anthropicx", None).is_err());
        assert!(route("GET", "/v1x", None).is_err());
        assert!(route("GET", "/google/v1", None).is_err());
    }

    #[test]
    fn claude_code_beta_query_routes() {
        assert_eq!(
            ok("POST", "/anthropic/v1/messages", Some("beta=true")).endpoint,
            Endpoint::Messages
        );
        assert_eq!(
            ok(
                "POST",
                "/anthropic/v1/messages/count_tokens",
                Some("beta=true")
            )
            .endpoint,
            Endpoint::AnthropicCountTokens
        );
    }

    #[test]
    fn bedrock_routes() {
        let r = ok(
            "POST",
            "/bedrock/model/openai%2Fgpt-4o/converse-stream",
            None,
        );
        assert_eq!(r.family, Family::Bedrock);
        assert_eq!(
            r.endpoint,
            Endpoint::Bedrock {
                model: "openai/gpt-4o".into(),
                op: BedrockOp::ConverseStream
            }
        );
        assert_eq!(r.endpoint.path_model(), Some("openai/gpt-4o"));
        assert!(r.endpoint.path_stream());
        assert_eq!(r.endpoint.body_family(r.family), Family::Bedrock);
        let r = ok("POST", "/bedrock/model/openai/gpt-4o/invoke", None);
        assert_eq!(r.endpoint.path_model(), Some("openai/gpt-4o"));
        assert!(!r.endpoint.path_stream());
        assert_eq!(r.endpoint.body_family(r.family), Family::Anthropic);
        let r = ok(
            "POST",
            "/bedrock/model/claude/invoke-with-response-stream",
            None,
        );
        assert!(r.endpoint.path_stream() && r.endpoint.is_inference());
        for bad in [
            "/bedrock/model/m/predict",
            "/bedrock/model/converse",
            "/bedrock/model/a/b/c/converse",
            "/bedrock/models",
            "/bedrock/v1/models",
        ] {
            let (f, e) = route("POST", bad, None).unwrap_err();
            assert_eq!((f, e.status), (Family::Bedrock, 404), "{bad}");
        }
        let (f, e) = route("GET", "/bedrock/model/m/converse", None).unwrap_err();
        assert_eq!((f, e.status), (Family::Bedrock, 405));
    }

    #[test]
    fn escaped_segments_are_decoded() {
        assert_eq!(percent_decode("openai%2Fgpt-5"), "openai/gpt-5");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(
            ok("GET", "/v1/models/openai%2Fgpt-5", None).endpoint,
            Endpoint::ProviderOrModel("openai/gpt-5".into())
        );
    }

    #[test]
    fn errors_carry_family_and_status() {
        let (f, e) = route("GET", "/anthropic/v1/messages", None).unwrap_err();
        assert_eq!((f, e.status), (Family::Anthropic, 405));
        let (f, e) = route("POST", "/v1/models", None).unwrap_err();
        assert_eq!((f, e.status), (Family::OpenAi, 405));
        let (f, e) = route("GET", "/google/v1beta/nope", None).unwrap_err();
        assert_eq!((f, e.status), (Family::Gemini, 404));
        let (f, e) = route("GET", "/elsewhere", None).unwrap_err();
        assert_eq!((f, e.status), (Family::OpenAi, 404));
        assert!(route("GET", "/v1//models", None).is_err());
    }
}
