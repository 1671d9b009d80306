//! Choosing and calling the upstream: the provider's upstreams in preference
//! order (the one speaking the client's protocol first), the request body for
//! each (passthrough splice or translation), its URL and headers with the
//! provider key, and failover to the next upstream on a connect failure, 429 or
//! 5xx before anything reached the client.

use super::upstream::{transport_error, Exchange};
use super::Gateway;
use crate::adjust::Adjustments;
use crate::config::{Model, Provider, Upstream};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::passthrough;
use crate::protocol::http::UpstreamTarget;
use crate::protocol::{self, spoke, DecodeContext, EncodeOptions, TranslateError};
use crate::validate::Inspected;
use bytes::Bytes;
use pingora_http::RequestHeader;

/// The most of an upstream error body that is read.
const MAX_ERROR_BODY: usize = 1 << 20;
/// Bodies above this are translated off the reactor.
const BLOCKING_TRANSLATE_BYTES: usize = 1 << 20;

/// A translation failure in the client's terms (400 for the request, 502 for the upstream's answer).
pub fn translate_error(e: TranslateError) -> GatewayError {
    let status = e.status();
    let mut g =
        GatewayError::new(GatewayError::kind_for_status(status), e.message).with_status(status);
    g.param = e.param;
    g
}

/// Everything about the client's request that shapes the upstream call.
pub struct Call<'a> {
    pub family: Family,
    pub body: &'a Bytes,
    pub req: &'a Inspected,
    /// Family C's model from the path.
    pub path_model: Option<&'a str>,
    pub model: &'a Model,
    pub provider: &'a Provider,
    /// The client's `anthropic-beta` header, forwarded to Anthropic upstreams.
    pub anthropic_beta: Option<String>,
    /// The client asked for Anthropic's beta surface with `?beta=true` (Claude
    /// Code does); forwarded to Anthropic upstreams of family B requests.
    pub beta_query: bool,
    /// The request runs under the `adapt` policy: what only the client's own
    /// protocol can serve is cut before translation (and reported) instead
    /// of refused.
    pub adapt: bool,
    pub request_id: &'a str,
}

/// A successful upstream answer (status below 400), its response header read.
pub struct Answer<'s> {
    pub up: &'s Upstream,
    /// Whether the upstream speaks another protocol than the client.
    pub translated: bool,
    pub ex: Exchange,
    pub status: u16,
    /// Whether the gateway asked an OpenAI upstream for stream usage the client did not ask for.
    pub usage_injected: bool,
    /// What translation for this upstream dropped (empty when not translated).
    pub adjusted: Adjustments,
}

/// What `call` tried, for the access log: the number of upstream calls made and the last upstream.
#[derive(Debug, Default)]
pub struct Tried<'s> {
    pub attempts: u32,
    pub last: Option<&'s Upstream>,
}

/// The provider's upstreams in the order they are tried for a client of `family`.
pub fn upstream_order(provider: &Provider, family: Family) -> Vec<&Upstream> {
    let mut v: Vec<&Upstream> = provider
        .upstreams
        .iter()
        .filter(|u| u.protocol == family)
        .collect();
    v.extend(provider.upstreams.iter().filter(|u| u.protocol != family));
    v
}

/// Calls the upstreams in order until one answers below 400, or the last one answers at all.
pub async fn call<'s>(
    gw: &Gateway,
    c: &Call<'s>,
    tried: &mut Tried<'s>,
) -> Result<Answer<'s>, GatewayError> {
    let order = upstream_order(c.provider, c.family);
    let mut last: Option<GatewayError> = None;
    for (i, up) in order.iter().copied().enumerate() {
        let is_last = i + 1 == order.len();
        tried.attempts += 1;
        tried.last = Some(up);
        match attempt(gw, c, up).await {
            Ok(a) if a.status < 400 => return Ok(a),
            Ok(mut a) => {
                gw.metrics
                    .upstream_error(&c.provider.id, &a.status.to_string());
                let retry_after =
                    a.ex.session
                        .response_header()
                        .and_then(|h| h.headers.get("retry-after"))
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok());
                let body = read_body(&mut a.ex, MAX_ERROR_BODY)
                    .await
                    .unwrap_or_default();
                let e = upstream_failure(up.protocol, a.status, &body, retry_after);
                if is_last || !(a.status == 429 || a.status >= 500) {
                    return Err(e);
                }
                log::warn!(
                    "{}: upstream {} answered {}; trying the next one",
                    c.request_id,
                    up.base_url,
                    a.status
                );
                last = Some(e);
            }
            Err(e) if e.status >= 500 && !is_last => {
                log::warn!(
                    "{}: upstream {} failed ({e}); trying the next one",
                    c.request_id,
                    up.base_url
                );
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| GatewayError::new(ErrorKind::Internal, "provider has no upstream")))
}

/// One attempt at one upstream.
async fn attempt<'s>(
    gw: &Gateway,
    c: &Call<'s>,
    up: &'s Upstream,
) -> Result<Answer<'s>, GatewayError> {
    let translated = up.protocol != c.family;
    let stream = c.req.stream;
    let usage_injected = !translated
        && spoke(c.family).stream_usage_opt_in
        && stream
        && !c.req.include_usage
        && !c.req.has_stream_options;
    let mut cut = Adjustments::default();
    let cut_body = match spoke(c.family).drop_untranslatable {
        Some(drop) if translated && c.adapt => drop(c.body).map(|(b, names)| {
            for n in names {
                cut.drop_field(n);
            }
            Bytes::from(b)
        }),
        _ => None,
    };
    let client_body = cut_body.as_ref().unwrap_or(c.body);
    let (body, mut adjusted) = if !translated {
        (passthrough_body(c, usage_injected), Adjustments::default())
    } else if client_body.len() > BLOCKING_TRANSLATE_BYTES {
        let (owned, m, pm, family, target) = (
            client_body.clone(),
            c.model.clone(),
            c.path_model.map(str::to_string),
            c.family,
            up.protocol,
        );
        tokio::task::spawn_blocking(move || {
            translate_request(family, target, &owned, pm.as_deref(), stream, &m)
        })
        .await
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("translation failed: {e}")))??
    } else {
        translate_request(
            c.family,
            up.protocol,
            client_body,
            c.path_model,
            stream,
            c.model,
        )?
    };
    adjusted.merge(cut);
    let header = upstream_header(up, c, body.len())?;
    let peer = gw.upstream.peer(&up.url).await?;
    let ex = gw
        .upstream
        .send(peer, &header, body)
        .await
        .inspect_err(|e| {
            let kind = if e.kind == ErrorKind::Timeout {
                "timeout"
            } else {
                "unreachable"
            };
            gw.metrics.upstream_error(&c.provider.id, kind);
        })?;
    let status = ex
        .session
        .response_header()
        .map(|h| h.status.as_u16())
        .ok_or_else(|| {
            GatewayError::new(ErrorKind::BadGateway, "upstream sent no response header")
        })?;
    Ok(Answer {
        up,
        translated,
        ex,
        status,
        usage_injected,
        adjusted,
    })
}

/// Re-encodes a client request of `family` for an upstream speaking `target`.
fn translate_request(
    family: Family,
    target: Family,
    body: &[u8],
    path_model: Option<&str>,
    stream: bool,
    model: &Model,
) -> Result<(Bytes, Adjustments), GatewayError> {
    let ir = protocol::decode_request(
        family,
        body,
        &DecodeContext {
            model: path_model,
            stream,
        },
    )
    .map_err(translate_error)?;
    let mut adjusted = Adjustments::default();
    let out = protocol::encode_request(
        target,
        &ir,
        &EncodeOptions {
            upstream_model: &model.upstream_model,
            default_max_tokens: model.max_output_tokens,
            stream,
        },
        &mut adjusted,
    )
    .map_err(translate_error)?;
    Ok((Bytes::from(out), adjusted))
}

/// A same-family body: the `model` value replaced by the upstream model name
/// (family C carries it in the path), and for an OpenAI stream whose client
/// did not ask for usage, `stream_options.include_usage` added so the request
/// can be metered (the usage chunk is then withheld from the client).
fn passthrough_body(c: &Call<'_>, inject_usage: bool) -> Bytes {
    let body = c.body;
    let span = match &c.req.model_span {
        Some(span)
            if spoke(c.family).model_in_body
                && c.req.model.as_deref() != Some(c.model.upstream_model.as_str()) =>
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

/// The upstream request header for `up`: path, host, provider key, protocol headers.
fn upstream_header(
    up: &Upstream,
    c: &Call<'_>,
    body_len: usize,
) -> Result<RequestHeader, GatewayError> {
    let model = c.model;
    let stream = c.req.stream;
    let key = up.api_key.as_deref().ok_or_else(|| {
        GatewayError::new(
            ErrorKind::Unavailable,
            format!(
                "provider {} has no API key configured{}",
                model.provider,
                up.api_key_env
                    .as_deref()
                    .map(|v| format!(" (set the {v} environment variable)"))
                    .unwrap_or_default()
            ),
        )
        .with_code("provider_key_missing")
    })?;
    let target = UpstreamTarget {
        base_path: &up.url.path,
        upstream_model: &model.upstream_model,
        stream,
        beta_query: up.protocol == c.family && c.beta_query,
        anthropic_beta: c.anthropic_beta.as_deref(),
    };
    let sp = spoke(up.protocol);
    let path = (sp.upstream_path)(&target);
    let internal = |e: pingora_core::BError| {
        GatewayError::new(
            ErrorKind::Internal,
            format!("cannot build the upstream request: {e}"),
        )
    };
    let mut h = RequestHeader::build("POST", path.as_bytes(), Some(8)).map_err(internal)?;
    let mut set = |k: &'static str, v: &str| h.insert_header(k, v).map(|_| ()).map_err(internal);
    set("host", &up.url.authority)?;
    set("content-type", "application/json")?;
    set("content-length", &body_len.to_string())?;
    set(
        "accept",
        if stream {
            "text/event-stream"
        } else {
            "application/json"
        },
    )?;
    set(
        "user-agent",
        concat!("switchboard/", env!("CARGO_PKG_VERSION")),
    )?;
    set("x-request-id", c.request_id)?;
    let mut failed = None;
    (sp.upstream_auth)(key, &target, &mut |k, v| {
        if failed.is_none() {
            failed = set(k, v).err();
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(h)
}

/// Reads at most `limit` bytes of the upstream body.
pub async fn read_body(ex: &mut Exchange, limit: usize) -> Result<Vec<u8>, GatewayError> {
    let mut body = Vec::new();
    while let Some(chunk) = ex
        .session
        .read_response_body()
        .await
        .map_err(|e| transport_error("response", &e))?
    {
        if body.len() + chunk.len() > limit {
            return Err(GatewayError::new(
                ErrorKind::BadGateway,
                format!("upstream response is larger than {limit} bytes"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Turns an upstream error response into the client's error, keeping the upstream's status.
fn upstream_failure(
    upstream: Family,
    status: u16,
    body: &[u8],
    retry_after: Option<u64>,
) -> GatewayError {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| (spoke(upstream).upstream_message)(v))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
    let mut e = GatewayError::new(
        GatewayError::kind_for_status(status),
        format!("upstream error ({status}): {message}"),
    )
    .with_status(status);
    e.retry_after = retry_after;
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Catalog;

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
    fn same_protocol_upstream_first() {
        let c = catalog();
        let p = c.provider("p").unwrap();
        let order: Vec<Family> = upstream_order(p, Family::OpenAi)
            .iter()
            .map(|u| u.protocol)
            .collect();
        assert_eq!(order, vec![Family::OpenAi, Family::Anthropic]);
        let order: Vec<Family> = upstream_order(p, Family::Gemini)
            .iter()
            .map(|u| u.protocol)
            .collect();
        assert_eq!(order, vec![Family::Anthropic, Family::OpenAi]);
    }

    #[test]
    fn passthrough_body_splices_model_and_usage_request() {
        let c = catalog();
        let body = Bytes::from_static(br#"{"model":"p/m","stream":true,"messages":[]}"#);
        let req = crate::validate::inspect(Family::OpenAi, &body, false).unwrap();
        let call = Call {
            family: Family::OpenAi,
            body: &body,
            req: &req,
            path_model: None,
            model: c.model("m").unwrap(),
            provider: c.provider("p").unwrap(),
            anthropic_beta: None,
            beta_query: false,
            adapt: true,
            request_id: "r",
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
