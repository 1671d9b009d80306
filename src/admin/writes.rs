//! What the key and team changes share (docs/keys.md): a refusal decided
//! inside a change's transaction, fields set on a record (`null` removes
//! one), a new record checked by the keys file's own rules, the change run
//! in the key store, the empty 204.

use super::{error, fail, reply, Ctx, Fail, Reply};
use crate::config::ConfigError;
use crate::state::keys::{record::Written, EntryKind};
use serde_json::{Map, Value};

/// A refusal made inside a change's transaction: (status, type, message).
pub type Refusal = (u16, &'static str, String);

/// Sets `fields` on `record`: `null` removes the field.
pub fn set(record: &mut Map<String, Value>, fields: Map<String, Value>) {
    for (k, v) in fields {
        if v.is_null() {
            record.remove(&k);
        } else {
            record.insert(k, v);
        }
    }
}

/// `record` once `check` (the keys file's rules for a key or a team)
/// accepts it; else a 400 naming the field (`rpm: must be positive`).
pub fn validated<T>(
    record: Map<String, Value>,
    check: fn(&str, &Value) -> Result<T, ConfigError>,
) -> Result<Value, Refusal> {
    let v = Value::Object(record);
    check("request body", &v).map_err(|e| {
        let field = e.path.strip_prefix("$.").unwrap_or(&e.path).to_string();
        (400, "invalid_request", format!("{field}: {}", e.reason))
    })?;
    Ok(v)
}

/// Runs one change of `kind`/`id` in the key store: `f` decides from the
/// record (in the transaction) what is written, or refuses.
pub async fn change(
    cx: &Ctx<'_>,
    kind: EntryKind,
    id: &str,
    f: impl FnOnce(Option<Value>) -> Result<Written, Refusal> + Send + 'static,
) -> Result<(), Fail> {
    match cx.db()?.change(kind, id, cx.actor, f).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((status, kind, message))) => Err(fail(status, kind, message)),
        Err(e) => {
            log::warn!("admin: {} {id:?} not changed: {e}", kind.name());
            Err(fail(
                503,
                "unavailable",
                format!("the key store cannot be written: {e}"),
            ))
        }
    }
}

/// 204, no body; or the failure.
pub fn no_content(done: Result<(), Fail>) -> Reply {
    match done {
        Ok(()) => {
            let mut r = reply(204, &Value::Null);
            r.body_mut().clear();
            r
        }
        Err(r) => *r,
    }
}

/// A 500 for a change written but not in force (left out of the merge: logged).
pub fn not_in_force(kind: EntryKind, id: &str) -> Reply {
    error(
        500,
        "internal",
        format!(
            "{} {} was written but is not in force (see the log)",
            kind.name(),
            crate::error::quote(id)
        ),
    )
}
