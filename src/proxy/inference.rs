//! The inference exchange (E4, E8, E8c, E12–E14), run from `request_filter`:
//! read the body (any size up to the limit), inspect and validate it, resolve
//! the model and upstream, send the rewritten request through the pooled
//! connector, and relay the answer — whole, or frame by frame for streams while
//! watching for the client going away.

use super::ctx::RequestCtx;
use super::respond;
use super::route::{Endpoint, GeminiStream, Route};
use super::upstream::{transport_error, Exchange};
use super::Gateway;
use crate::config::{ApiKey, Model, Provider, Upstream};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::passthrough::{self, Framing, PassthroughStream, Usage};
use crate::protocol::{anthropic, gemini, openai};
use crate::runtime::Snapshot;
use crate::validate::{self, Inspected};
use bytes::{Bytes, BytesMut};
use pingora_http::RequestHeader;
use pingora_proxy::Session;

/// The most of an upstream error body that is read.
const MAX_ERROR_BODY: usize = 1 << 20;

/// Why the exchange stopped early.
enum Stop {
    /// Tell the client, in its family's shape (only possible before the response header).
    Client(GatewayError),
    /// The downstream connection failed; nothing more can be sent.
    Io(Box<pingora_core::Error>),
}

impl From<GatewayError> for Stop {
    fn from(e: GatewayError) -> Self {
        Stop::Client(e)
    }
}

/// Handles an authenticated inference request.
pub async fn handle(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    route: &Route,
    snap: &Snapshot,
    key: &ApiKey,
) -> pingora_core::Result<()> {
    match run(gw, session, ctx, route, snap, key).await {
        Ok(()) => Ok(()),
        Err(Stop::Client(e)) if ctx.status == 0 => {
            respond::error(session, ctx, route.family, &e).await
        }
        Err(Stop::Client(e)) => {
            log::warn!("{}: error after the response started: {e}", ctx.request_id);
            Ok(())
        }
        Err(Stop::Io(e)) => Err(e),
    }
}

async fn read_body(gw: &Gateway, session: &mut Session) -> Result<Bytes, Stop> {
    let limit = gw.settings.max_body_bytes;
    let too_large = || {
        GatewayError::new(
            ErrorKind::PayloadTooLarge,
            format!("request body is larger than the limit of {limit} bytes"),
        )
    };
    let req = session.req_header();
    let declared = req
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large().into());
    }
    let expects_continue = req
        .headers
        .get("expect")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if expects_continue {
        session.write_continue_response().await.map_err(Stop::Io)?;
    }
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(4096).min(limit));
    while let Some(chunk) = session.read_request_body().await.map_err(Stop::Io)? {
        if buf.len() + chunk.len() > limit {
            return Err(too_large().into());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

fn not_found_model(family: Family, name: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!("model {name:?} not found for the {family} protocol"),
    )
    .with_code("model_not_found")
}

/// Resolves `provider/model_id` or a bare id; `from_path` applies family C's provider rule.
fn resolve<'s>(
    snap: &'s Snapshot,
    family: Family,
    name: &str,
    from_path: bool,
) -> Result<(&'s Model, &'s Provider), GatewayError> {
    let name = name.strip_prefix("models/").unwrap_or(name);
    let model = match name.split_once('/') {
        Some((p, id)) => {
            let provider = snap
                .catalog
                .provider(p)
                .filter(|prov| !from_path || prov.accepts(family))
                .ok_or_else(|| not_found_model(family, name))?;
            snap.catalog
                .model(id)
                .filter(|m| m.provider == provider.id)
                .ok_or_else(|| not_found_model(family, name))?
        }
        None => snap
            .catalog
            .model(name)
            .ok_or_else(|| not_found_model(family, name))?,
    };
    if !snap.visible(family, model) {
        return Err(not_found_model(family, name));
    }
    let provider = snap
        .catalog
        .provider_of(model)
        .ok_or_else(|| not_found_model(family, name))?;
    Ok((model, provider))
}

/// The name a client of `family` sees for `m` in responses (CONTRACT 5).
fn client_model_name(family: Family, m: &Model) -> &str {
    match family {
        Family::OpenAi => &m.qualified_id,
        Family::Anthropic | Family::Gemini => &m.id,
    }
}

fn usage_cost(m: &Model, u: Usage) -> Option<f64> {
    let (i, o) = (u.input?, u.output.unwrap_or(0));
    Some(i as f64 * m.pricing.prompt_usd + o as f64 * m.pricing.completion_usd)
}

fn record_usage(ctx: &mut RequestCtx, m: &Model, u: Usage) {
    ctx.input_tokens = u.input;
    ctx.output_tokens = u.output;
    ctx.cost_usd = usage_cost(m, u);
}

/// Builds the upstream request header for `up`.
fn upstream_header(
    up: &Upstream,
    model: &Model,
    stream: bool,
    body_len: usize,
    client: &RequestHeader,
    request_id: &str,
) -> Result<RequestHeader, GatewayError> {
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
    let base = &up.url.path;
    let path = match up.protocol {
        Family::OpenAi => format!("{base}/chat/completions"),
        Family::Anthropic => format!("{base}/messages"),
        Family::Gemini if stream => {
            format!("{base}/models/{}:streamGenerateContent?alt=sse", model.upstream_model)
        }
        Family::Gemini => format!("{base}/models/{}:generateContent", model.upstream_model),
    };
    let internal = |e: pingora_core::BError| {
        GatewayError::new(ErrorKind::Internal, format!("cannot build the upstream request: {e}"))
    };
    let mut h = RequestHeader::build("POST", path.as_bytes(), Some(8)).map_err(internal)?;
    let mut set = |k: &'static str, v: &str| h.insert_header(k, v).map(|_| ()).map_err(internal);
    set("host", &up.url.authority)?;
    set("content-type", "application/json")?;
    set("content-length", &body_len.to_string())?;
    set("accept", if stream { "text/event-stream" } else { "application/json" })?;
    set("user-agent", concat!("switchboard/", env!("CARGO_PKG_VERSION")))?;
    set("x-request-id", request_id)?;
    match up.protocol {
        Family::OpenAi => set("authorization", &format!("Bearer {key}"))?,
        Family::Anthropic => {
            set("x-api-key", key)?;
            set("anthropic-version", "2023-06-01")?;
            if let Some(beta) = client.headers.get("anthropic-beta").and_then(|v| v.to_str().ok()) {
                set("anthropic-beta", beta)?;
            }
        }
        Family::Gemini => set("x-goog-api-key", key)?,
    }
    Ok(h)
}

/// Replaces the `model` value of a same-family body with the upstream model name.
fn passthrough_body(body: &Bytes, req: &Inspected, model: &Model) -> Bytes {
    match &req.model_span {
        Some(span) if model.upstream_model != req.model.as_deref().unwrap_or("") => {
            let name = passthrough::model_json(&model.upstream_model);
            let mut out = Vec::with_capacity(body.len() + name.len());
            out.extend_from_slice(&body[..span.start]);
            out.extend_from_slice(&name);
            out.extend_from_slice(&body[span.end..]);
            Bytes::from(out)
        }
        _ => body.clone(),
    }
}

fn error_object_json(family: Family, e: &GatewayError) -> Vec<u8> {
    respond::error_body(family, e)
}

/// Reads at most `limit` bytes of the upstream body.
async fn read_upstream_body(ex: &mut Exchange, limit: usize) -> Result<Vec<u8>, GatewayError> {
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
        .and_then(|v| match upstream {
            Family::OpenAi => openai::error::upstream_message(v),
            Family::Anthropic => anthropic::error::upstream_message(v),
            Family::Gemini => gemini::error::upstream_message(v),
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
    let mut e = GatewayError::new(
        GatewayError::kind_for_status(status),
        format!("upstream error ({status}): {message}"),
    )
    .with_status(status);
    e.retry_after = retry_after;
    e
}

async fn run(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    route: &Route,
    snap: &Snapshot,
    key: &ApiKey,
) -> Result<(), Stop> {
    let family = route.family;
    if family == Family::Anthropic && session.req_header().headers.get("anthropic-version").is_none() {
        return Err(GatewayError::invalid_param(
            "anthropic-version",
            "anthropic-version: header is required",
        )
        .into());
    }
    let body = read_body(gw, session).await?;
    let (path_model, gemini_stream) = match &route.endpoint {
        Endpoint::GenerateContent { model, stream } => (Some(model.as_str()), *stream),
        Endpoint::GeminiCountTokens { model } => (Some(model.as_str()), GeminiStream::None),
        _ => (None, GeminiStream::None),
    };
    let req = validate::inspect(family, &body, gemini_stream != GeminiStream::None)?;
    let name = path_model
        .or(req.model.as_deref())
        .ok_or_else(|| GatewayError::invalid_param("model", "model is required"))?;
    let (model, provider) = resolve(snap, family, name, path_model.is_some())?;
    ctx.provider = Some(provider.id.clone());
    ctx.model = Some(model.id.clone());
    super::auth::authorize(key, &model.qualified_id)?;

    if matches!(route.endpoint, Endpoint::AnthropicCountTokens | Endpoint::GeminiCountTokens { .. }) {
        let owned = body.clone();
        let counted = tokio::task::spawn_blocking(move || {
            validate::countable(family, &owned).map(|c| crate::tokens::count(&c, u64::MAX))
        })
        .await
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("token counting failed: {e}")))??;
        ctx.input_tokens = Some(counted);
        let out = match family {
            Family::Gemini => format!("{{\"totalTokens\":{counted}}}"),
            _ => format!("{{\"input_tokens\":{counted}}}"),
        };
        return respond::json(session, ctx, 200, Bytes::from(out))
            .await
            .map_err(Stop::Io);
    }

    validate::check(family, &req, model)?;
    if !validate::surely_fits(body.len(), &req, model) {
        let (owned, r, m) = (body.clone(), req.clone(), model.clone());
        let n = tokio::task::spawn_blocking(move || validate::check_context(family, &owned, &r, &m))
            .await
            .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("token counting failed: {e}")))??;
        log::debug!("{}: {n} input tokens counted", ctx.request_id);
    }

    let up = provider
        .upstream_for(family)
        .ok_or_else(|| GatewayError::new(ErrorKind::Internal, "provider has no upstream"))?;
    if up.protocol != family {
        return Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            format!(
                "provider {} speaks only the {} protocol and translation from {family} is not available",
                provider.id, up.protocol
            ),
        )
        .into());
    }
    let stream = req.stream;
    let upstream_body = match family {
        Family::Gemini => body.clone(),
        _ => passthrough_body(&body, &req, model),
    };
    let header = upstream_header(up, model, stream, upstream_body.len(), session.req_header(), &ctx.request_id)?;
    let peer = gw.upstream.peer(&up.url).await?;
    let mut ex = gw
        .upstream
        .send(peer, &header, upstream_body)
        .await
        .inspect_err(|e| {
            let kind = if e.kind == ErrorKind::Timeout { "timeout" } else { "unreachable" };
            gw.metrics.upstream_error(&provider.id, kind);
        })?;
    let (status, retry_after) = match ex.session.response_header() {
        Some(h) => (
            h.status.as_u16(),
            h.headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok()),
        ),
        None => return Err(GatewayError::new(ErrorKind::BadGateway, "upstream sent no response header").into()),
    };
    let model_json = passthrough::model_json(client_model_name(family, model));
    if status >= 400 {
        gw.metrics.upstream_error(&provider.id, &status.to_string());
        let err_body = read_upstream_body(&mut ex, MAX_ERROR_BODY).await.unwrap_or_default();
        return Err(upstream_failure(up.protocol, status, &err_body, retry_after).into());
    }
    if !stream {
        let raw = read_upstream_body(&mut ex, gw.settings.max_response_bytes).await?;
        // A 200 whose body is not a JSON document is a broken upstream, not an answer.
        if serde_json::from_slice::<serde::de::IgnoredAny>(&raw).is_err() {
            gw.metrics.upstream_error(&provider.id, "invalid");
            return Err(GatewayError::new(
                ErrorKind::BadGateway,
                "upstream sent a response body that is not valid JSON",
            )
            .into());
        }
        let (out, usage) = passthrough::rewrite_body(family, &raw, &model_json);
        record_usage(ctx, model, usage);
        gw.upstream.release(ex).await;
        return respond::json(session, ctx, status, Bytes::from(out)).await.map_err(Stop::Io);
    }
    let framing = if gemini_stream == GeminiStream::JsonArray {
        Framing::JsonArray
    } else {
        Framing::Sse
    };
    let mut pass = PassthroughStream::new(family, framing, model_json, gw.settings.max_frame_bytes);
    let _active = gw.metrics.stream_started();
    let clean = relay_stream(gw, session, ctx, ex, &mut pass, family, framing).await?;
    if !clean {
        gw.metrics.upstream_error(&provider.id, "stream");
    }
    record_usage(ctx, model, pass.usage);
    Ok(())
}

enum Next {
    Upstream(pingora_core::Result<Option<Bytes>>),
    ClientGone,
}

/// Relays an upstream stream to the client frame by frame.
async fn relay_stream(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    mut ex: Exchange,
    pass: &mut PassthroughStream,
    family: Family,
    framing: Framing,
) -> Result<bool, Stop> {
    let content_type = match framing {
        Framing::Sse => "text/event-stream",
        Framing::JsonArray => "application/json",
    };
    let mut h = respond::header(ctx, 200, content_type, None).map_err(Stop::Io)?;
    h.insert_header("cache-control", "no-cache").map_err(Stop::Io)?;
    if session.as_downstream().is_http2() {
        h.remove_header("transfer-encoding");
    }
    ctx.status = 200;
    session.write_response_header(Box::new(h), false).await.map_err(Stop::Io)?;
    let mut out = Vec::with_capacity(8192);
    let mut failed = false;
    loop {
        let next = tokio::select! {
            r = ex.session.read_response_body() => Next::Upstream(r),
            _ = session.as_downstream_mut().read_body_or_idle(true) => Next::ClientGone,
        };
        out.clear();
        let mut done = false;
        match next {
            Next::ClientGone => {
                log::info!("{}: client went away mid-stream; dropping the upstream request", ctx.request_id);
                ex.session.shutdown().await;
                return Ok(true);
            }
            Next::Upstream(Ok(Some(chunk))) => {
                if let Err(fault) = pass.push(&chunk, &mut out) {
                    let e = GatewayError::new(ErrorKind::BadGateway, fault.to_string());
                    pass.fail(&error_object_json(family, &e), &mut out);
                    done = true;
                    failed = true;
                }
            }
            Next::Upstream(Ok(None)) => {
                if let Err(fault) = pass.finish(&mut out) {
                    let e = GatewayError::new(ErrorKind::BadGateway, fault.to_string());
                    pass.fail(&error_object_json(family, &e), &mut out);
                    failed = true;
                }
                done = true;
            }
            Next::Upstream(Err(err)) => {
                let e = transport_error("stream", &err);
                pass.fail(&error_object_json(family, &e), &mut out);
                done = true;
                failed = true;
            }
        }
        if !out.is_empty() {
            if ctx.ttft.is_none() {
                ctx.ttft = Some(ctx.started.elapsed());
            }
            session
                .write_response_body(Some(Bytes::copy_from_slice(&out)), false)
                .await
                .map_err(Stop::Io)?;
        }
        if done {
            break;
        }
    }
    session.write_response_body(None, true).await.map_err(Stop::Io)?;
    if ex.session.response_done() {
        gw.upstream.release(ex).await;
    } else {
        ex.session.shutdown().await;
    }
    Ok(!failed)
}
