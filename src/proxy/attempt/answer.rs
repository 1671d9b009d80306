//! Reading and judging an upstream's answer before anything reaches the
//! client: a whole body within the response limit, a refused credential or a
//! redirect (the gateway's fault, never relayed), an error's message scrubbed
//! of secrets, `retry-after`.

use super::Call;
use crate::config::Upstream;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::protocol::spoke;
use crate::upstream::client::{Exchange, ReadFault, UpstreamClient};
use crate::upstream::pool::Cause;
use crate::util::gather::Gathered;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// The most of an upstream error body that is read.
pub(super) const MAX_ERROR_BODY: usize = 1 << 20;

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

    pub(super) fn is_timeout(&self) -> bool {
        matches!(self, BodyFault::Read(f) if f.is_timeout())
    }
}

/// Reads at most `limit` bytes of the upstream body, each chunk within
/// `idle`, all of it before `deadline`. A declared length above `limit` is
/// refused before a byte of the body is read; within it, the body is read
/// into one buffer of that size. A chunked or close-delimited body is read
/// until it passes `limit`, then refused: what the gateway holds of it
/// stays within the limit and one read.
pub async fn read_answer_body(
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
pub(super) fn refused(
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
        c.client.request_id,
        up.id,
        c.provider.id,
        upstream_text(up.protocol, raw, serde_json::from_slice(raw).ok().as_ref())
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
fn upstream_text(upstream: Family, body: &[u8], parsed: Option<&serde_json::Value>) -> String {
    if body.is_empty() {
        return String::from("(no body)");
    }
    let message = parsed.and_then(|v| {
        (spoke(upstream).upstream_message)(v)
            .or_else(|| crate::protocol::cloud::aws_error_message(v))
    });
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
/// upstream's status and code; its message is scrubbed (`upstream_text`).
pub(super) fn upstream_failure(
    upstream: Family,
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
) -> GatewayError {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let message = upstream_text(upstream, body, parsed.as_ref());
    let mut e = GatewayError::new(
        GatewayError::kind_for_status(status),
        format!("upstream error ({status}): {message}"),
    )
    .with_status(status);
    e.retry_after = retry_after.map(|d| d.as_secs().max(1));
    // The upstream's code goes on to the client as it is (a context
    // overflow under its one name whatever the upstream calls it).
    let code = parsed.and_then(|v| {
        (spoke(upstream).upstream_code)(&v).or_else(|| crate::protocol::cloud::aws_error_code(&v))
    });
    match code {
        Some(c) => e.with_code(c),
        None => e,
    }
}

/// `retry-after` as seconds, or as an HTTP date (IMF-fixdate) from now.
pub(super) fn parse_retry_after(v: &str) -> Option<Duration> {
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
