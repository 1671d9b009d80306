//! Client authentication for inference routes (docs/api.md "Routes", docs/configuration.md "Keys"):
//! the key where the family's spoke says it is carried, lookup in the snapshot, refusal of an
//! expired or revoked key (docs/keys.md), model permission.
//! Rate limits and budgets are checked where the request's cost is known (`inference.rs`,
//! `state::limits`).

use crate::config::{now_secs, ApiKey, KeyStore, Status};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::protocol::spoke;
use pingora_http::RequestHeader;

/// The key the client presented, where its family carries it.
pub fn presented_key(family: Family, req: &RequestHeader) -> Option<&str> {
    (spoke(family).client_key)(&req.headers, req.uri.query()).filter(|k| !k.is_empty())
}

/// Authenticates the request.
pub fn authenticate<'a>(
    family: Family,
    req: &RequestHeader,
    keys: &'a KeyStore,
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
    match key.status(now_secs()) {
        Status::Active => Ok(key),
        Status::Expired => Err(GatewayError::new(
            ErrorKind::Authentication,
            "this API key has expired",
        )),
        Status::Revoked => Err(GatewayError::new(
            ErrorKind::Authentication,
            "this API key has been revoked",
        )),
    }
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
