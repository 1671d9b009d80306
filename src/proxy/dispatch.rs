//! Calling a provider's upstreams for one request: the pool's pick (healthy,
//! by weight, the client's protocol first), the request body for each
//! (passthrough splice or translation), its URL and headers with the provider
//! key, the provider's deadlines (connect, first token, total), and moving on
//! to the next upstream on a connect failure, a first-token timeout, a 429,
//! a 5xx, a refused credential (401/403) or a redirect, before anything
//! reached the client, cooling the one that failed. Upstream error text is
//! scrubbed of secrets before it is quoted (`crate::secrets`).

use super::Gateway;
use crate::adjust::Adjustments;
use crate::admit::validate::Inspected;
use crate::config::{Model, Provider, Upstream};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::protocol::common::http::UpstreamTarget;
use crate::protocol::{self, spoke, DecodeContext, EncodeOptions, TranslateError};
use crate::translate::passthrough;
use crate::upstream::client::{
    bound, deadline_error, Exchange, Message, ReadFault, Resent, UpstreamClient,
};
use crate::upstream::h1::RequestHead;
use crate::upstream::pool::{self, Cause, InFlight, ProviderPool};
use crate::util::gather::Gathered;
use bytes::Bytes;
use serde::Serialize;
use std::time::{Duration, Instant};

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
pub struct Call<'a, 's> {
    pub family: Family,
    pub body: &'a Bytes,
    pub req: &'a Inspected,
    /// Family C's model from the path.
    pub path_model: Option<&'a str>,
    pub model: &'s Model,
    pub provider: &'s Provider,
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
    /// The provider's pool (health, in flight, weights).
    pub pool: &'s ProviderPool,
    /// When the request must be done: its start plus the provider's `total`.
    pub deadline: Option<Instant>,
    /// The request's span and the exporter (each attempt gets a child span
    /// and sends it upstream as `traceparent`), or, without telemetry, the
    /// client's own `traceparent`, forwarded as it is.
    pub trace: Option<(
        &'a crate::obs::telemetry::RequestTrace,
        &'a crate::obs::telemetry::Telemetry,
    )>,
    pub client_traceparent: Option<&'a str>,
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
    /// What was read before anything reached the client: a stream's first
    /// chunk (None: it ended at once), or a whole answer's body.
    pub first: Option<Bytes>,
    /// The request in flight on the upstream's pool member (ends when dropped).
    pub in_flight: InFlight,
    /// The provider's `idle` timeout, and the request's `total` deadline.
    pub idle: Option<Duration>,
    pub deadline: Option<Instant>,
}

/// One upstream attempt, as the access log reports it.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptNote {
    pub provider: String,
    pub model: String,
    pub upstream: String,
    /// The upstream's status, when it answered.
    pub status: Option<u16>,
    /// Why the attempt failed (`rate_limited`, `status_5xx`, `timeout`,
    /// `unreachable`, `invalid`, `credential_refused`, `stale_connection`),
    /// or null when it answered.
    pub failure: Option<&'static str>,
    /// The cool-down it started, in milliseconds.
    pub cooled_ms: Option<u64>,
    pub ms: u64,
}

impl AttemptNote {
    /// An attempt of `c`'s model at `up`, its outcome not yet known.
    fn of(c: &Call<'_, '_>, up: &Upstream) -> AttemptNote {
        AttemptNote {
            provider: c.provider.id.clone(),
            model: c.model.id.clone(),
            upstream: up.id.clone(),
            status: None,
            failure: None,
            cooled_ms: None,
            ms: 0,
        }
    }
}

/// What `call` tried: the upstream calls made, the last upstream, each attempt.
#[derive(Debug, Default)]
pub struct Tried<'s> {
    pub attempts: u32,
    pub last: Option<&'s Upstream>,
    pub notes: Vec<AttemptNote>,
}

/// Why `call` found no answer.
pub enum Failed {
    /// An answer or error that goes to the client as it is (a 4xx from the
    /// upstream, a request that cannot be translated, the deadline).
    Final(GatewayError),
    /// Every upstream it could try failed or was cooling down (None: none
    /// was tried), or the attempts ran out: a fallback may take over.
    Exhausted(Option<GatewayError>),
    /// The request cannot be put to this model's upstream (a translation
    /// refusal): the client's error for the model it named, a reason to skip
    /// a fallback.
    Unfit(GatewayError),
}

/// The pause before the `n`th attempt (n ≥ 2): random, up to 25 ms doubled
/// for each attempt before it, at most 400 ms.
fn backoff(n: u32) -> Duration {
    let cap_ms = (25u64 << n.saturating_sub(2).min(4)).min(400);
    let mut b = [0u8; 4];
    let r = if getrandom::getrandom(&mut b).is_ok() {
        u32::from_le_bytes(b)
    } else {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    };
    Duration::from_millis(u64::from(r) % (cap_ms + 1))
}

/// Calls the provider's upstreams until one answers: each pick is the pool's
/// weighted choice among the untried, healthy upstreams (docs/resilience.md). A
/// connect failure, a first-token timeout, a 429 or a 5xx cools the upstream
/// and moves on, while `attempts_left` lasts; `panic` (every upstream of
/// the request's chain is cooling down) tries the one recovering first.
pub async fn call<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    tried: &mut Tried<'s>,
    attempts_left: &mut u32,
    panic: bool,
) -> Result<Answer<'s>, Failed> {
    let ups = &c.provider.upstreams;
    let mut seen = pool::Tried::default();
    let mut last: Option<GatewayError> = None;
    while *attempts_left > 0 {
        let now = Instant::now();
        let pick = if panic {
            c.pool.soonest(ups, c.family, seen, now)
        } else {
            c.pool.pick(ups, c.family, seen, now)
        };
        let Some(i) = pick else { break };
        seen.insert(i);
        let up = &ups[i];
        if tried.attempts > 0 {
            let pause = backoff(tried.attempts + 1);
            if c.deadline.is_some_and(|d| Instant::now() + pause >= d) {
                // No time for another attempt: the last failure is the answer.
                return Err(Failed::Final(last.unwrap_or_else(deadline_error)));
            }
            tokio::time::sleep(pause).await;
        }
        *attempts_left -= 1;
        tried.attempts += 1;
        tried.last = Some(up);
        let member = c.pool.member(i);
        let started = Instant::now();
        let span = c.trace.map(|(t, tel)| {
            t.attempt(
                tel,
                tried.attempts,
                &c.provider.id,
                &up.id,
                up.protocol.name(),
                &up.url.authority,
            )
        });
        let parent = span.as_ref().map(|s| s.traceparent());
        let traceparent = parent.as_deref().or(c.client_traceparent);
        let mut resent = None;
        let outcome = attempt(gw, c, up, member.start(), traceparent, &mut resent).await;
        if let Some(r) = resent {
            // The request went out twice: a pooled connection failed before
            // any byte of the answer and it was sent once more on a new one.
            tried.attempts += 1;
            gw.metrics
                .upstream_attempt(&c.provider.id, &up.id, "stale_connection");
            let mut stale = AttemptNote::of(c, up);
            stale.failure = Some("stale_connection");
            stale.ms = r.after.as_millis() as u64;
            tried.notes.push(stale);
        }
        let mut note = AttemptNote::of(c, up);
        let result = match outcome {
            Outcome::Answer(a) => {
                member.succeeded();
                note.status = Some(a.status);
                Ok(*a)
            }
            Outcome::Final(e, Some(status)) => {
                // The upstream is alive: it judged the request.
                member.succeeded();
                note.status = Some(status);
                Err(Failed::Final(e))
            }
            Outcome::Final(e, None) => Err(Failed::Final(e)),
            Outcome::Expired(e) => {
                // The total deadline passed while this upstream was silent.
                let cool = member.failed(Cause::Timeout, Instant::now());
                gw.metrics
                    .upstream_cooled(&c.provider.id, &up.id, Cause::Timeout.label());
                note.failure = Some(Cause::Timeout.label());
                note.cooled_ms = Some(cool.as_millis() as u64);
                Err(Failed::Final(e))
            }
            Outcome::Unfit(e) => {
                note.failure = Some("unfit");
                Err(Failed::Unfit(e))
            }
            Outcome::Skip(e) => {
                log::warn!(
                    "{}: upstream {} of {} skipped ({e})",
                    c.request_id,
                    up.id,
                    c.provider.id
                );
                note.failure = Some("skipped");
                last = Some(e);
                Err(Failed::Exhausted(None))
            }
            Outcome::Retry(e, cause, status) => {
                let cool = member.failed(cause, Instant::now());
                gw.metrics
                    .upstream_cooled(&c.provider.id, &up.id, cause.label());
                log::warn!(
                    "{}: upstream {} of {} failed ({e}); cooled for {} ms",
                    c.request_id,
                    up.id,
                    c.provider.id,
                    cool.as_millis()
                );
                note.status = status;
                note.failure = Some(cause.label());
                note.cooled_ms = Some(cool.as_millis() as u64);
                last = Some(e);
                Err(Failed::Exhausted(None))
            }
        };
        note.ms = started.elapsed().as_millis() as u64;
        gw.metrics.upstream_attempt(
            &c.provider.id,
            &up.id,
            note.failure
                .unwrap_or(if result.is_ok() { "ok" } else { "error" }),
        );
        if let Some(span) = span {
            span.end(note.status, note.failure);
        }
        tried.notes.push(note);
        match result {
            Ok(a) => return Ok(a),
            Err(Failed::Exhausted(_)) => continue,
            Err(stop) => return Err(stop),
        }
    }
    Err(Failed::Exhausted(last))
}

/// How one attempt ended.
enum Outcome<'s> {
    Answer(Box<Answer<'s>>),
    /// Goes to the client as it is (with the upstream's status, when it answered).
    Final(GatewayError, Option<u16>),
    /// The upstream failed: cool it and move on.
    Retry(GatewayError, Cause, Option<u16>),
    /// This upstream cannot be used (no key): move on without blaming it.
    Skip(GatewayError),
    /// The request cannot be translated for this upstream.
    Unfit(GatewayError),
    /// The request's total deadline passed waiting for this upstream.
    Expired(GatewayError),
}

/// One attempt at one upstream, bounded by the provider's deadlines;
/// `resent` says whether the request had to be sent a second time (a pooled
/// connection that failed before the answer).
async fn attempt<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    up: &'s Upstream,
    in_flight: InFlight,
    traceparent: Option<&str>,
    resent: &mut Option<Resent>,
) -> Outcome<'s> {
    let (body, adjusted, usage_injected) = match request_for(c, up).await {
        Ok(r) => r,
        Err(e) => return Outcome::Unfit(e),
    };
    let translated = up.protocol != c.family;
    let msg = match upstream_header(up, c, body.len(), traceparent) {
        Ok(h) => Message::new(h, &body),
        Err(e) if e.kind == ErrorKind::Unavailable => return Outcome::Skip(e),
        Err(e) => return Outcome::Final(e, None),
    };
    drop(body);
    // Connections are pooled per provider, base URL and credential.
    let identity =
        gw.upstream
            .identity(&c.provider.id, &up.url, up.api_key.as_deref().unwrap_or(""));
    let timeouts = c.provider.timeouts;
    let stream = c.req.stream;
    // Until the first byte of the answer (a stream: its first chunk):
    // bounded by `first_token` and the total deadline.
    let first_wait = bound(timeouts.first_token, c.deadline);
    let exchange = async {
        let mut ex = gw
            .upstream
            .send(&up.url, identity, timeouts.connect, &msg, resent)
            .await?;
        let status = ex.status();
        let first = if !stream || status >= 400 {
            None
        } else if timeouts.first_token.is_some() {
            read_to_first_token(&mut ex, spoke(up.protocol).stream_started).await?
        } else {
            UpstreamClient::read_chunk(&mut ex, None, None)
                .await
                .map_err(|f| f.error())?
        };
        Ok::<_, GatewayError>((ex, status, first))
    };
    let done = match first_wait {
        None => exchange.await,
        Some((limit, by_deadline)) => match tokio::time::timeout(limit, exchange).await {
            Ok(r) => r,
            Err(_) if by_deadline => {
                gw.metrics.upstream_error(&c.provider.id, "timeout");
                return Outcome::Expired(deadline_error());
            }
            Err(_) => {
                gw.metrics.upstream_error(&c.provider.id, "timeout");
                let e = GatewayError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the upstream sent no {} within {} ms (the provider's first_token timeout)",
                        if stream { "first token" } else { "answer" },
                        limit.as_millis()
                    ),
                );
                return Outcome::Retry(e, Cause::Timeout, None);
            }
        },
    };
    let (mut ex, status, first) = match done {
        Ok(r) => r,
        Err(e) => {
            let (kind, cause) = if e.kind == ErrorKind::Timeout {
                ("timeout", Cause::Timeout)
            } else {
                ("unreachable", Cause::Unreachable)
            };
            gw.metrics.upstream_error(&c.provider.id, kind);
            return Outcome::Retry(e, cause, None);
        }
    };
    if status >= 300 {
        gw.metrics
            .upstream_error(&c.provider.id, &status.to_string());
        let retry_after = ex.header("retry-after").and_then(parse_retry_after);
        let raw = if status >= 400 {
            read_body(&mut ex, MAX_ERROR_BODY, timeouts.idle, c.deadline)
                .await
                .unwrap_or_default()
        } else {
            Bytes::new()
        };
        if let Some((e, cause)) = refused(c, up, status, &raw) {
            return Outcome::Retry(e, cause, Some(status));
        }
        let mut e = upstream_failure(up.protocol, status, &raw, retry_after);
        e.retry_after = retry_after.map(|d| d.as_secs().max(1));
        return match status {
            429 => Outcome::Retry(e, Cause::RateLimited(retry_after), Some(status)),
            s if s >= 500 => Outcome::Retry(e, Cause::Status(s, retry_after), Some(status)),
            s => Outcome::Final(e, Some(s)),
        };
    }
    // A whole answer is read here, while failing over is still possible.
    let first = if stream {
        first
    } else {
        match read_body(
            &mut ex,
            gw.settings.max_response_bytes,
            timeouts.idle,
            c.deadline,
        )
        .await
        {
            Ok(b) => Some(b),
            Err(f) => {
                let e = f.error();
                if matches!(f, BodyFault::Read(ReadFault::Deadline)) {
                    return Outcome::Expired(e);
                }
                if matches!(f, BodyFault::TooLarge(_)) {
                    // The upstream is healthy and another would answer the
                    // same: the client learns the limit. The connection is
                    // closed (dropped with the exchange), its rest unread.
                    gw.metrics.upstream_error(&c.provider.id, "too_large");
                    return Outcome::Final(e, Some(status));
                }
                let cause = if f.is_timeout() {
                    Cause::Timeout
                } else {
                    Cause::Unreachable
                };
                return Outcome::Retry(e, cause, Some(status));
            }
        }
    };
    Outcome::Answer(Box::new(Answer {
        up,
        translated,
        ex,
        status,
        usage_injected,
        adjusted,
        first,
        in_flight,
        idle: timeouts.idle,
        deadline: c.deadline,
    }))
}

/// The most of a stream's preamble held back while waiting for its first token.
const MAX_PREAMBLE: usize = 256 * 1024;

/// Reads a stream's first chunks until they carry the answer's first token
/// (`started`, the upstream protocol's test), the stream ends, or the held
/// bytes pass `MAX_PREAMBLE`: a preamble alone (a role chunk, a
/// `message_start`) does not meet a `first_token` deadline. Nothing has
/// reached the client yet; the caller bounds the wait.
async fn read_to_first_token(
    ex: &mut Exchange,
    started: fn(&[u8]) -> bool,
) -> Result<Option<Bytes>, GatewayError> {
    let mut held = Gathered::default();
    loop {
        let Some(chunk) = UpstreamClient::read_chunk(ex, None, None)
            .await
            .map_err(|f| f.error())?
        else {
            break;
        };
        let scanned = held.len();
        held.push(chunk);
        let all = held.as_slice();
        // Only the new bytes need a look, with enough before them for a
        // marker split across chunks.
        if started(&all[scanned.saturating_sub(64)..]) || all.len() > MAX_PREAMBLE {
            break;
        }
    }
    Ok((!held.is_empty()).then(|| held.finish()))
}

/// `retry-after` as seconds, or as an HTTP date (IMF-fixdate) from now.
fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    if let Ok(s) = v.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(1e9)));
    }
    let at = crate::util::rfc3339::parse_http_date(v)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// The body for `up` (passthrough splice or translation, D's hosted tools
/// cut under adapt), what translation dropped, and whether stream usage was
/// asked for on the client's behalf.
async fn request_for(
    c: &Call<'_, '_>,
    up: &Upstream,
) -> Result<(Bytes, Adjustments, bool), GatewayError> {
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
    Ok((body, adjusted, usage_injected))
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
fn passthrough_body(c: &Call<'_, '_>, inject_usage: bool) -> Bytes {
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

/// The upstream request head for `up`: path, host, provider key, protocol headers.
fn upstream_header(
    up: &Upstream,
    c: &Call<'_, '_>,
    body_len: usize,
    traceparent: Option<&str>,
) -> Result<RequestHead, GatewayError> {
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
        // Family B to family B only (docs/api.md "Inference behaviour"): a translated request is
        // the gateway's own, and a beta flag could change what the upstream answers in ways the
        // translation does not know.
        anthropic_beta: c
            .anthropic_beta
            .as_deref()
            .filter(|_| up.protocol == c.family),
    };
    let sp = spoke(up.protocol);
    let path = (sp.upstream_path)(&target);
    let internal = |e: crate::upstream::h1::WireError| {
        GatewayError::new(
            ErrorKind::Internal,
            format!("cannot build the upstream request: {e}"),
        )
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
    set("host", &up.url.authority)?;
    set("content-type", "application/json")?;
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
    if let Some(tp) = traceparent {
        set("traceparent", tp)?;
    }
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

/// Why a whole body could not be read.
#[derive(Debug)]
pub enum BodyFault {
    Read(ReadFault),
    TooLarge(usize),
}

impl BodyFault {
    pub fn error(&self) -> GatewayError {
        match self {
            BodyFault::Read(f) => f.error(),
            BodyFault::TooLarge(limit) => GatewayError::new(
                ErrorKind::BadGateway,
                format!(
                    "the upstream's answer is larger than the gateway's limit of {limit} bytes (--max-response-bytes)"
                ),
            ),
        }
    }

    fn is_timeout(&self) -> bool {
        matches!(self, BodyFault::Read(f) if f.is_timeout())
    }
}

/// Reads at most `limit` bytes of the upstream body, each chunk within
/// `idle`, all of it before `deadline`. A declared length above `limit` is
/// refused before a byte of the body is read; within it, the body is read
/// into one buffer of that size. A chunked or close-delimited body is read
/// until it passes `limit`, then refused: what the gateway holds of it
/// stays within the limit and one read.
pub async fn read_body(
    ex: &mut Exchange,
    limit: usize,
    idle: Option<Duration>,
    deadline: Option<Instant>,
) -> Result<Bytes, BodyFault> {
    if let Some(len) = ex.length_left() {
        if len > limit as u64 {
            return Err(BodyFault::TooLarge(limit));
        }
        return UpstreamClient::read_sized(ex, idle, deadline)
            .await
            .map_err(BodyFault::Read);
    }
    let mut body = Gathered::default();
    while let Some(chunk) = UpstreamClient::read_chunk(ex, idle, deadline)
        .await
        .map_err(BodyFault::Read)?
    {
        if body.len() + chunk.len() > limit {
            return Err(BodyFault::TooLarge(limit));
        }
        body.push(chunk);
    }
    Ok(body.finish())
}

/// An upstream answer that is no fault of the client's: a 401 or 403 (the
/// provider refused the gateway's credential) or a 3xx (a redirect, which
/// an API call never follows: the catalog's `base_url` is wrong). The client
/// gets a 502 naming the provider, never the upstream's status (a 401 would
/// read as its own key being wrong); the operator gets a warning with the
/// upstream's message, scrubbed. The upstream cools and the request moves on.
fn refused(
    c: &Call<'_, '_>,
    up: &Upstream,
    status: u16,
    raw: &[u8],
) -> Option<(GatewayError, Cause)> {
    let (what, code, cause) = match status {
        401 | 403 => (
            "refused the gateway's credential",
            "upstream_credential_refused",
            Cause::Credential,
        ),
        300..=399 => (
            "answered with a redirect",
            "upstream_redirect",
            Cause::Invalid,
        ),
        _ => return None,
    };
    log::warn!(
        "{}: upstream {} of provider {} {what} (status {status}): {}",
        c.request_id,
        up.id,
        c.provider.id,
        upstream_text(up.protocol, raw)
    );
    let e = GatewayError::new(
        ErrorKind::BadGateway,
        format!(
            "provider {} {what} (upstream status {status}); the gateway's configuration needs fixing, not the request",
            c.provider.id
        ),
    )
    .with_code(code);
    Some((e, cause))
}

/// The message of an upstream error body (its protocol's `message`, else the
/// body's first bytes), scrubbed of every secret and masked key before it is
/// cut, so no cut leaves part of a key.
fn upstream_text(upstream: Family, body: &[u8]) -> String {
    if body.is_empty() {
        return String::from("(no body)");
    }
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| (spoke(upstream).upstream_message)(v));
    let mut text = match message {
        Some(m) => crate::secrets::scrub_upstream(&m),
        None => crate::secrets::scrub_upstream(&String::from_utf8_lossy(
            &body[..body.len().min(64 * 1024)],
        )),
    };
    if parsed.is_none() && text.len() > 300 {
        let mut cut = 300;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Turns an upstream error response into the client's error, keeping the
/// upstream's status; its message is scrubbed (`upstream_text`).
fn upstream_failure(
    upstream: Family,
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
) -> GatewayError {
    let message = upstream_text(upstream, body);
    let mut e = GatewayError::new(
        GatewayError::kind_for_status(status),
        format!("upstream error ({status}): {message}"),
    )
    .with_status(status);
    e.retry_after = retry_after.map(|d| d.as_secs().max(1));
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
    fn passthrough_body_splices_model_and_usage_request() {
        let c = catalog();
        let body = Bytes::from_static(br#"{"model":"p/m","stream":true,"messages":[]}"#);
        let req = crate::admit::validate::inspect(Family::OpenAi, &body, false).unwrap();
        let pools = crate::upstream::pool::Registry::default().pools(&c);
        let call = Call {
            pool: &pools[0],
            deadline: None,
            trace: None,
            client_traceparent: None,
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
