//! Which catalog model a request names: `provider/model_id`, a bare id or an alias
//! (a Gemini path's own provider rule), visible to the client's protocol; the
//! name the client sees in answers; a fallback by its qualified name.

use crate::config::{Model, Provider};
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::protocol::spoke;
use crate::runtime::Snapshot;

fn not_found_model(family: Family, name: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!(
            "model {} not found for the {family} protocol",
            crate::error::quote(name)
        ),
    )
    .with_code("model_not_found")
}

/// Resolves `provider/model_id`, a bare id, an alias or `provider/alias` (one
/// hash lookup in the catalog's name index); `from_path` applies the Gemini
/// path's provider rule.
pub(super) fn resolve<'s>(
    snap: &'s Snapshot,
    family: Family,
    name: &str,
    from_path: bool,
) -> Result<(&'s Model, &'s Provider), GatewayError> {
    let name = name.strip_prefix("models/").unwrap_or(name);
    let (model, prefixed) = snap
        .catalog
        .lookup(name)
        .ok_or_else(|| not_found_model(family, name))?;
    let provider = snap
        .catalog
        .provider_of(model)
        .ok_or_else(|| not_found_model(family, name))?;
    if (from_path && prefixed && !provider.accepts(family)) || !snap.visible(family, model) {
        return Err(not_found_model(family, name));
    }
    Ok((model, provider))
}

/// The name a client of `family` sees for `m` in responses (docs/api.md "Inference behaviour").
pub(super) fn client_model_name(family: Family, m: &Model) -> &str {
    spoke(family).client_model(&m.qualified_id, &m.id)
}

/// A fallback named `provider/model_id`, when the catalog still has it.
pub(super) fn fallback_target<'s>(
    snap: &'s Snapshot,
    name: &str,
) -> Option<(&'s Model, &'s Provider)> {
    let (p, id) = name.split_once('/')?;
    let m = snap.catalog.model(id).filter(|m| m.provider == p)?;
    Some((m, snap.catalog.provider(p)?))
}
