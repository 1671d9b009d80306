//! Model listing routes (`GET {root}/models[/{provider}[/{model_id}]]` of each protocol), answered from the snapshot's
//! pre-rendered bodies without touching an upstream.

use super::route::Endpoint;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::runtime::Snapshot;
use bytes::Bytes;

fn no_provider(family: Family, p: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!(
            "unknown provider or model {} for the {family} protocol",
            crate::error::quote(p)
        ),
    )
}

/// The body for a listing endpoint, or a 404.
pub fn answer(snap: &Snapshot, family: Family, endpoint: &Endpoint) -> Result<Bytes, GatewayError> {
    let l = snap.listings(family);
    match endpoint {
        Endpoint::ListModels => Ok(l.all.clone()),
        Endpoint::ProviderOrModel(x) => {
            if let Some(b) = l.by_provider.get(x) {
                return Ok(b.clone());
            }
            // `models.retrieve(id)` in the SDKs: a bare model id, `models/<id>`,
            // `provider/model_id` (the name OpenAI chat responses carry), or an
            // alias of any of these forms: the canonical model answers.
            let id = x.strip_prefix("models/").unwrap_or(x);
            match id.split_once('/') {
                Some((provider, model)) => get_model(snap, family, provider, model),
                None => snap
                    .catalog
                    .lookup(id)
                    .and_then(|(m, _)| l.by_model.get(&m.id))
                    .cloned()
                    .ok_or_else(|| no_provider(family, x)),
            }
        }
        Endpoint::GetModel { provider, model } => get_model(snap, family, provider, model),
        _ => Err(GatewayError::new(
            ErrorKind::Internal,
            "not a listing endpoint",
        )),
    }
}

/// `GET {root}/models/{provider}/{model_id}`: one model under one provider.
fn get_model(
    snap: &Snapshot,
    family: Family,
    provider: &str,
    model: &str,
) -> Result<Bytes, GatewayError> {
    let l = snap.listings(family);
    // A name of the catalog's index: `provider/id`, `provider/alias`, or an
    // alias holding a '/' (whose first part need not be a provider).
    let found = snap.catalog.lookup(&format!("{provider}/{model}"));
    if found.is_none_or(|(_, prefixed)| prefixed) && !l.by_provider.contains_key(provider) {
        return Err(no_provider(family, provider));
    }
    let found = found.and_then(|(m, _)| l.by_model.get(&m.id));
    found.cloned().ok_or_else(|| {
        GatewayError::new(
            ErrorKind::NotFound,
            format!(
                "model {} not found under provider {}",
                crate::error::quote(model),
                crate::error::quote(provider)
            ),
        )
    })
}
