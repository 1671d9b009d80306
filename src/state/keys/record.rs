//! What the key store holds (docs/keys.md "Storage"): one row per key or team,
//! its record as JSON text (a key's: the keys file's fields with its secret's
//! SHA-256, never the secret, and the API's own: `expires_at`, `revoked_at`,
//! `created_at`, `metadata`, `previous` during a rotation's grace), and the
//! store's version at its last change. Every change takes the next version,
//! so an instance re-reads only the rows past the version it has seen. A
//! deleted team keeps its row with no record, so the deletion is seen too.

use crate::config::{stored_key, stored_team, StoredKey, StoredKeys, Team};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A row's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Key,
    Team,
}

impl Kind {
    /// `key` or `team`: the stored name and the audit entry's `target.type`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Key => "key",
            Kind::Team => "team",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        match s {
            "key" => Some(Kind::Key),
            "team" => Some(Kind::Team),
            _ => None,
        }
    }
}

/// One row as read back: `body` `None` for a deleted team.
#[derive(Debug, Clone)]
pub struct Row {
    pub kind: Kind,
    pub id: String,
    pub body: Option<String>,
    pub version: i64,
}

/// What a change writes: the new record (`None`: delete) and the audit
/// entry's action (`key.create`, `team.delete`, ...).
pub type Written = (Option<Value>, &'static str);

/// The store as this process last read it, parsed.
#[derive(Debug, Default)]
pub struct Cache {
    /// The highest version read.
    pub version: i64,
    keys: BTreeMap<String, Arc<StoredKey>>,
    teams: BTreeMap<String, Arc<Team>>,
}

/// Where a record that does not validate is named in the log.
const WHERE: &str = "key store";

impl Cache {
    /// Applies rows read past `self.version`; a record that does not
    /// validate (written by a newer version, or by hand) is logged and left out.
    pub fn apply(&mut self, rows: Vec<Row>) {
        for row in rows {
            self.version = self.version.max(row.version);
            let body = row
                .body
                .as_deref()
                .map(|b| serde_json::from_str::<Value>(b).map_err(|e| e.to_string()));
            match (row.kind, body) {
                (Kind::Key, None) => {
                    self.keys.remove(&row.id);
                }
                (Kind::Team, None) => {
                    self.teams.remove(&row.id);
                }
                (kind, Some(Err(e))) => {
                    log::error!("{WHERE}: {} {:?} is not JSON: {e}", kind.name(), row.id)
                }
                (Kind::Key, Some(Ok(v))) => match stored_key(WHERE, &v) {
                    Ok(k) => {
                        self.keys.insert(row.id, Arc::new(k));
                    }
                    Err(e) => log::error!("{WHERE}: key {:?} left out: {e}", row.id),
                },
                (Kind::Team, Some(Ok(v))) => match stored_team(WHERE, &v) {
                    Ok(t) => {
                        self.teams.insert(row.id, Arc::new(t));
                    }
                    Err(e) => log::error!("{WHERE}: team {:?} left out: {e}", row.id),
                },
            }
        }
    }

    /// The parsed keys and teams, shared with the cache.
    pub fn stored(&self) -> StoredKeys {
        StoredKeys {
            teams: self.teams.clone(),
            keys: self.keys.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: Kind, id: &str, body: Option<&str>, version: i64) -> Row {
        Row {
            kind,
            id: id.into(),
            body: body.map(str::to_string),
            version,
        }
    }

    #[test]
    fn rows_apply_in_order_and_bad_records_are_left_out() {
        let mut c = Cache::default();
        let sha = "a".repeat(64);
        c.apply(vec![
            row(Kind::Team, "ml", Some(r#"{"id":"ml","rpm":5}"#), 1),
            row(
                Kind::Key,
                "k",
                Some(&format!(r#"{{"id":"k","sha256":"{sha}","team":"ml"}}"#)),
                2,
            ),
            row(Kind::Key, "bad", Some(r#"{"id":"bad"}"#), 3),
            row(Kind::Key, "junk", Some("{"), 4),
        ]);
        assert_eq!(c.version, 4);
        let s = c.stored();
        assert_eq!(s.keys.len(), 1);
        assert_eq!(s.keys["k"].team.as_deref(), Some("ml"));
        assert_eq!(s.teams["ml"].rpm, Some(5));
        c.apply(vec![row(Kind::Team, "ml", None, 5)]);
        assert!(c.stored().teams.is_empty());
        assert_eq!(c.version, 5);
    }
}
