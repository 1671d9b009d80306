//! Client authentication for inference routes (docs/api.md "Routes", docs/configuration.md "Keys",
//! "JWT clients (OIDC)"): the key where the family's spoke says it is carried, lookup in the snapshot
//! (an expired or revoked key refused, docs/keys.md), or, when OIDC is configured and the credential
//! is a JWT, the token verified (`crate::identity`) and mapped to a principal; model permission.
//! Rate limits and budgets are checked where the request's cost is known (`inference.rs`,
//! `state::limits`).

use crate::config::{now_secs, ApiKey, KeyStore, Status};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::identity::Oidc;
use crate::protocol::spoke;
use pingora_http::RequestHeader;
use std::borrow::Cow;

/// The key the client presented, where its family carries it.
pub fn presented_key(family: Family, req: &RequestHeader) -> Option<&str> {
    (spoke(family).client_key)(&req.headers, req.uri.query()).filter(|k| !k.is_empty())
}

/// Authenticates the request: a key of `keys`, or a JWT `oidc` verifies
/// (then the principal its claims map to).
/// A key is borrowed from the snapshot; a token's principal is made for the request.
pub async fn authenticate<'a>(
    family: Family,
    req: &RequestHeader,
    keys: &'a KeyStore,
    oidc: Option<&Oidc>,
) -> Result<Cow<'a, ApiKey>, GatewayError> {
    let Some(presented) = presented_key(family, req) else {
        let how = spoke(family).client_key_hint;
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            format!("missing API key: send it in {how}"),
        ));
    };
    // A key first (of the file or the store): a key may have a JWT's shape (some are JWTs).
    if let Some(key) = keys.find(presented) {
        return match key.status(now_secs()) {
            Status::Active => Ok(Cow::Borrowed(key)),
            Status::Expired => Err(GatewayError::new(
                ErrorKind::Authentication,
                "this API key has expired",
            )),
            Status::Revoked => Err(GatewayError::new(
                ErrorKind::Authentication,
                "this API key has been revoked",
            )),
        };
    }
    match oidc.filter(|_| crate::identity::looks_like_jwt(presented)) {
        Some(oidc) => oidc
            .verify(presented)
            .await?
            .principal(keys)
            .map(Cow::Owned),
        None => Err(GatewayError::new(
            ErrorKind::Authentication,
            "invalid API key",
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
