//! Client authentication for inference routes (CONTRACT 2 and 4.2): the key
//! where the family's spoke says it is carried, lookup in the snapshot, rate limits, model permission.

use crate::config::{ApiKey, KeyStore};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::protocol::spoke;
use crate::runtime::RateLimiter;
use pingora_http::RequestHeader;

/// The key the client presented, where its family carries it.
pub fn presented_key(family: Family, req: &RequestHeader) -> Option<&str> {
    (spoke(family).client_key)(&req.headers, req.uri.query()).filter(|k| !k.is_empty())
}

/// Authenticates the request and counts it against the key's rate limit.
pub fn authenticate<'a>(
    family: Family,
    req: &RequestHeader,
    keys: &'a KeyStore,
    limiter: &RateLimiter,
) -> Result<&'a ApiKey, GatewayError> {
    let Some(presented) = presented_key(family, req) else {
        let how = spoke(family).client_key_hint;
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
