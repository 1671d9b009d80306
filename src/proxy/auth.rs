//! Client authentication for inference routes (CONTRACT 2 and 4.2): where each
//! family carries its key, lookup in the snapshot, rate limits, model permission.

use crate::config::{ApiKey, KeyStore};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::runtime::RateLimiter;
use pingora_http::RequestHeader;

fn bearer(req: &RequestHeader) -> Option<&str> {
    let v = req.headers.get("authorization")?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn header<'a>(req: &'a RequestHeader, name: &str) -> Option<&'a str> {
    req.headers.get(name)?.to_str().ok().map(str::trim)
}

fn query_key(req: &RequestHeader) -> Option<&str> {
    req.uri
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("key="))
}

/// The key the client presented, where its family carries it.
pub fn presented_key(family: Family, req: &RequestHeader) -> Option<&str> {
    let k = match family {
        // D: Bearer, as family A.
        Family::OpenAi | Family::Responses => bearer(req),
        Family::Anthropic => header(req, "x-api-key").or_else(|| bearer(req)),
        Family::Gemini => header(req, "x-goog-api-key").or_else(|| query_key(req)),
    };
    k.filter(|k| !k.is_empty())
}

/// Authenticates the request and counts it against the key's rate limit.
pub fn authenticate<'a>(
    family: Family,
    req: &RequestHeader,
    keys: &'a KeyStore,
    limiter: &RateLimiter,
) -> Result<&'a ApiKey, GatewayError> {
    let Some(presented) = presented_key(family, req) else {
        let how = match family {
            // D: as family A.
            Family::OpenAi | Family::Responses => "an Authorization: Bearer header",
            Family::Anthropic => "an x-api-key header",
            Family::Gemini => "an x-goog-api-key header or a key query parameter",
        };
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            format!("missing API key: send it in {how}"),
        ));
    };
    let key = keys
        .find(presented)
        .ok_or_else(|| GatewayError::new(ErrorKind::Authentication, "invalid API key"))?;
    if let Some(rpm) = key.rpm {
        limiter.check(&key.id, rpm).map_err(|wait| {
            GatewayError::new(
                ErrorKind::RateLimited,
                format!("rate limit of {rpm} requests per minute exceeded for this key"),
            )
            .with_retry_after(wait)
        })?;
    }
    Ok(key)
}

/// Fails with 403 unless `key` may call `qualified` (`provider/model_id`).
pub fn authorize(key: &ApiKey, qualified: &str) -> Result<(), GatewayError> {
    if key.allows(qualified) {
        Ok(())
    } else {
        Err(GatewayError::new(
            ErrorKind::PermissionDenied,
            format!("this API key is not allowed to use model {qualified}"),
        ))
    }
}
