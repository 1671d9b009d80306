//! What goes to one upstream: the body (the client's bytes with the model
//! spliced in for the same protocol, a translation through the IR for
//! another; under `adapt`, what only the client's protocol can serve cut
//! first) and the request head (path, host, the provider's key, protocol
//! headers, the trace).

use super::Call;
use crate::adjust::Adjustments;
use crate::config::{Cloud, Scheme, Upstream};
use crate::error::{ErrorKind, GatewayError};
use crate::protocol::cloud::{self, Credential};
use crate::protocol::common::framing::UpstreamFraming;
use crate::protocol::common::http::{SetHeader, UpstreamTarget};
use crate::protocol::registry::embed;
use crate::protocol::spoke;
use crate::translate::body::translate_request;
use crate::translate::passthrough;
use crate::upstream::credentials::aws::sigv4::{self, Signable};
use crate::upstream::credentials::Secret;
use crate::upstream::h1::RequestHead;
use bytes::Bytes;
use std::time::SystemTime;

/// Bodies above this are translated off the reactor.
const BLOCKING_TRANSLATE_BYTES: usize = 1 << 20;

/// The body for `up` (passthrough splice or translation, D's hosted tools
/// cut under adapt), what translation dropped, and whether stream usage was
/// asked for on the client's behalf.
pub(super) async fn request_for(
    c: &Call<'_, '_>,
    up: &Upstream,
) -> Result<(Bytes, Adjustments, bool), GatewayError> {
    if let Some(e) = &c.plan.embed {
        return embed_body(e, c, up).map(|(b, adjusted)| (b, adjusted, false));
    }
    if up.rerank_only() {
        return Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            format!(
                "upstream {} of provider {} is a cohere upstream, which serves rerank alone",
                up.id, c.provider.id
            ),
        ));
    }
    let translated = up.protocol != c.client.family;
    let stream = c.plan.req.stream;
    let usage_injected = !translated
        && spoke(c.client.family).stream_usage_opt_in
        && stream
        && !c.plan.req.include_usage
        && !c.plan.req.has_stream_options;
    let mut cut = Adjustments::default();
    let cut_body = match spoke(c.client.family).drop_untranslatable {
        Some(drop) if translated && c.plan.adapt && c.plan.req.params.contains(&"tools") => {
            drop(&c.plan.body).map(|(b, names)| {
                for n in names {
                    cut.drop_field(n);
                }
                Bytes::from(b)
            })
        }
        _ => None,
    };
    let client_body = cut_body.as_ref().unwrap_or(&c.plan.body);
    let (body, mut adjusted) = if !translated {
        (passthrough_body(c, usage_injected), Adjustments::default())
    } else if client_body.len() > BLOCKING_TRANSLATE_BYTES {
        let (owned, m, pm, family, target) = (
            client_body.clone(),
            c.model.clone(),
            c.client.path_model.map(str::to_string),
            c.client.family,
            up.protocol,
        );
        tokio::task::spawn_blocking(move || {
            translate_request(family, target, &owned, pm.as_deref(), stream, &m)
        })
        .await
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("translation failed: {e}")))??
    } else {
        translate_request(
            c.client.family,
            up.protocol,
            client_body,
            c.client.path_model,
            stream,
            c.model,
        )?
    };
    adjusted.merge(cut);
    // A cloud's own body (Vertex's Anthropic Messages: no `model`, its
    // `anthropic_version`).
    let body = match &up.cloud {
        Some(cloud) => {
            let beta = c
                .client
                .anthropic_beta
                .filter(|_| up.protocol == c.client.family);
            cloud::upstream_body(cloud, up.protocol, &body, beta).map_or(body, Bytes::from)
        }
        None => body,
    };
    // A continuation's prefill, marked the way this OpenAI-compatible
    // upstream wants it (the model's catalog `prefill`).
    let body = match (c.plan.continues, spoke(up.protocol).mark_prefill) {
        (true, Some(mark)) => match c.model.prefill.openai_member() {
            Some(member) => mark(&body, member).map_or(body, Bytes::from),
            None => body,
        },
        _ => body,
    };
    Ok((body, adjusted, usage_injected))
}

/// The body of an `embed` or `rerank` request for `up`, encoded for its
/// protocol (`protocol::registry::embed`), with what it could not carry.
fn embed_body(
    e: &crate::ir::embed::Retrieval,
    c: &Call<'_, '_>,
    up: &Upstream,
) -> Result<(Bytes, Adjustments), GatewayError> {
    embed::upstream_body(up, &c.provider.id, e, &c.model.upstream_model)
        .map(|(b, adjusted)| (Bytes::from(b), adjusted))
}

/// A same-family body: the `model` value replaced by the upstream model name
/// (Gemini carries it in the path), and for an OpenAI stream whose client
/// did not ask for usage, `stream_options.include_usage` added so the request
/// can be metered (the usage chunk is then withheld from the client).
fn passthrough_body(c: &Call<'_, '_>, inject_usage: bool) -> Bytes {
    let body = &c.plan.body;
    let span = match &c.plan.req.model_span {
        Some(span)
            if spoke(c.client.family).model_in_body
                && c.plan.req.model.as_deref() != Some(c.model.upstream_model.as_str()) =>
        {
            Some(span.clone())
        }
        _ => None,
    };
    if span.is_none() && !inject_usage {
        return body.clone();
    }
    let name = passthrough::model_json(&c.model.upstream_model);
    let mut out = Vec::with_capacity(body.len() + name.len() + 48);
    let mut rest = 0;
    if inject_usage {
        if let Some(open) = body.iter().position(|&b| b == b'{') {
            out.extend_from_slice(&body[..=open]);
            out.extend_from_slice(br#""stream_options":{"include_usage":true},"#);
            rest = open + 1;
        }
    }
    match span {
        Some(span) if span.start >= rest => {
            out.extend_from_slice(&body[rest..span.start]);
            out.extend_from_slice(&name);
            out.extend_from_slice(&body[span.end..]);
        }
        _ => out.extend_from_slice(&body[rest..]),
    }
    Bytes::from(out)
}

/// The upstream request head for `up`: path, host, credential (the
/// provider key, a cloud's access token, or a SigV4 signature over the
/// head's signed headers and `body` with AWS keys), protocol headers.
pub(super) fn upstream_header(
    up: &Upstream,
    c: &Call<'_, '_>,
    body: &[u8],
    traceparent: Option<&str>,
    secret: Option<&Secret>,
) -> Result<RequestHead, GatewayError> {
    let body_len = body.len();
    let key = match secret {
        Some(_) => "",
        None => provider_key(up, c)?,
    };
    let stream = c.plan.req.stream;
    let target = UpstreamTarget {
        base_path: &up.url.path,
        upstream_model: &c.model.upstream_model,
        stream,
        beta_query: up.protocol == c.client.family && c.client.beta_query,
        // Anthropic to Anthropic only (docs/api.md "Inference behaviour"): a translated
        // request is the gateway's own, and a beta flag could change what the upstream
        // answers in ways the translation does not know.
        anthropic_beta: c
            .client
            .anthropic_beta
            .filter(|_| up.protocol == c.client.family),
    };
    let internal = |e: crate::upstream::h1::WireError| {
        GatewayError::new(
            ErrorKind::Internal,
            format!("cannot build the upstream request: {e}"),
        )
    };
    let path = match &up.cloud {
        _ if c.plan.embed.is_some() => c
            .plan
            .embed
            .as_deref()
            .and_then(|e| embed::upstream_path(up, e, &c.model.upstream_model))
            .ok_or_else(|| internal(crate::upstream::h1::WireError("no embeddings path")))?,
        None => (spoke(up.protocol).upstream_path)(&target),
        Some(cl) => cloud::upstream_path(cl, up.protocol, &target)
            .ok_or_else(|| internal(crate::upstream::h1::WireError("no path for this cloud")))?,
    };
    // The head, and the body when it shares the head's write.
    let capacity = 512
        + path.len()
        + if body_len <= crate::upstream::client::JOINED_BODY {
            body_len
        } else {
            0
        };
    let mut h = RequestHead::post(&path, capacity).map_err(internal)?;
    let mut set = |k: &str, v: &str| h.header(k, v).map_err(internal);
    let accept = match (stream, &up.cloud) {
        (true, Some(cl))
            if cloud::upstream_framing(Some(cl), up.protocol) != UpstreamFraming::Sse =>
        {
            "application/vnd.amazon.eventstream"
        }
        (true, _) => "text/event-stream",
        (false, _) => "application/json",
    };
    set("host", &up.url.authority)?;
    set("content-type", "application/json")?;
    set("accept", accept)?;
    if let (Some(Secret::Aws(keys)), Some(Cloud::Bedrock { region })) = (secret, &up.cloud) {
        // Signed over what is sent: host, these headers, the path, the body.
        let signable = Signable {
            method: "POST",
            https: up.url.scheme == Scheme::Https,
            authority: &up.url.authority,
            path: &path,
            headers: &[("content-type", "application/json"), ("accept", accept)],
            body,
        };
        let signed = sigv4::sign(
            keys,
            region,
            cloud::BEDROCK_SERVICE,
            &signable,
            SystemTime::now(),
        )
        .map_err(|m| GatewayError::new(ErrorKind::Internal, m))?;
        for (k, v) in &signed {
            set(k, v)?;
        }
    }
    set(
        "user-agent",
        concat!("switchboard/", env!("CARGO_PKG_VERSION")),
    )?;
    set("x-request-id", c.client.request_id)?;
    if let Some(tp) = traceparent {
        set("traceparent", tp)?;
    }
    let mut failed = None;
    credential_headers(up, key, secret, &target, &mut |k, v| {
        if failed.is_none() {
            failed = set(k, v).err();
        }
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(h),
    }
}

/// The catalog key of `up` (an upstream without an access token), or the
/// 503 naming the variable it is read from.
fn provider_key<'u>(up: &'u Upstream, c: &Call<'_, '_>) -> Result<&'u str, GatewayError> {
    up.api_key.as_deref().ok_or_else(|| {
        GatewayError::new(
            ErrorKind::Unavailable,
            format!(
                "provider {} has no API key configured{}",
                c.model.provider,
                up.api_key_env
                    .as_deref()
                    .map(|v| format!(" (set the {v} environment variable)"))
                    .unwrap_or_default()
            ),
        )
        .with_code("provider_key_missing")
    })
}

/// The headers of the credential: an access token as a Bearer, a cloud's
/// key (Azure's `api-key`, Bedrock's Bearer), nothing more for a signed
/// request, else the protocol's own key headers (and version).
fn credential_headers(
    up: &Upstream,
    key: &str,
    secret: Option<&Secret>,
    target: &UpstreamTarget<'_>,
    set: &mut SetHeader<'_>,
) {
    let Some(cl) = &up.cloud else {
        return (spoke(up.protocol).upstream_auth)(key, target, set);
    };
    let credential = match secret {
        Some(Secret::Token(token)) => Credential::Bearer(token),
        Some(Secret::Aws(_)) => Credential::Signed,
        None => Credential::Key(key),
    };
    cloud::upstream_auth(cl, credential, target, set);
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Catalog;
    use crate::family::Family;

    fn catalog() -> Catalog {
        Catalog::from_str(
            "c.json",
            r#"{"providers":[{"id":"p","families":["openai"],"upstreams":[
                {"protocol":"anthropic","base_url":"http://127.0.0.1:1/a"},
                {"protocol":"openai","base_url":"http://127.0.0.1:1/o"}]}],
              "models":[{"id":"m","provider":"p","upstream_model":"up-m","context_length":100,"max_output_tokens":10,
                "pricing":{"prompt":"0","completion":"0"},"protocols":["openai"]}]}"#,
            &|_| None,
        )
        .unwrap()
    }

    #[test]
    fn passthrough_body_splices_model_and_usage_request() {
        let c = catalog();
        let body = Bytes::from_static(br#"{"model":"p/m","stream":true,"messages":[]}"#);
        let req = crate::admit::validate::inspect(Family::OpenAi, &body, false).unwrap();
        let pools = crate::upstream::pool::Registry::default().pools(&c);
        let client = super::super::Client {
            family: Family::OpenAi,
            path_model: None,
            anthropic_beta: None,
            beta_query: false,
            request_id: "r",
            trace: None,
            traceparent: None,
            affinity: super::super::SessionKey::known(0),
        };
        let plan = super::super::Planned {
            body: body.clone(),
            req,
            adjusted: Adjustments::default(),
            adapt: true,
            continues: false,
            embed: None,
        };
        let call = Call {
            client: &client,
            plan: &plan,
            pool: &pools[0],
            deadline: None,
            model: c.model("m").unwrap(),
            provider: c.provider("p").unwrap(),
        };
        let out = passthrough_body(&call, true);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"stream_options":{"include_usage":true},"model":"up-m","stream":true,"messages":[]}"#
        );
        assert_eq!(
            std::str::from_utf8(&passthrough_body(&call, false)).unwrap(),
            r#"{"model":"up-m","stream":true,"messages":[]}"#
        );
    }
}
