//! The audit log (docs/keys.md "Audit"): one entry per change made through the
//! admin API, written in the change's own transaction, so the log and the
//! store never disagree. An entry holds the record before and after, with
//! the secret's digest taken out ([`redact`]): the log never holds a secret
//! nor anything derived from one.

use serde_json::{json, Value};

/// One audit entry, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its place in the log (increasing): the cursor of `GET /admin/audit?before=`.
    pub seq: i64,
    /// RFC 3339, milliseconds.
    pub at: String,
    /// Who made the change: `admin-key`, or a signed-in subject.
    pub actor: String,
    /// `key.create`, `key.update`, `key.rotate`, `key.revoke`, `team.create`, ...
    pub action: String,
    /// `key` or `team`.
    pub kind: String,
    pub id: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

impl Entry {
    /// The JSON the admin API answers with.
    pub fn render(&self) -> Value {
        json!({
            "seq": self.seq,
            "at": self.at,
            "actor": self.actor,
            "action": self.action,
            "target": {"type": self.kind, "id": self.id},
            "before": self.before,
            "after": self.after,
        })
    }
}

/// A record as the audit log keeps it: without `sha256` and `previous`.
pub fn redact(record: Option<&Value>) -> Option<Value> {
    let mut v = record?.clone();
    if let Value::Object(m) = &mut v {
        m.remove("sha256");
        m.remove("previous");
    }
    Some(v)
}

/// A redacted record as stored text (`None` stays NULL).
pub fn text(record: Option<&Value>) -> Option<String> {
    redact(record).map(|v| v.to_string())
}

/// Stored text back to JSON (unreadable text: `null`).
pub fn parse(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_never_reaches_the_log() {
        let r = json!({"id": "k", "sha256": "ab", "previous": {"sha256": "cd", "until": "x"}, "rpm": 5});
        let t = text(Some(&r)).unwrap();
        assert!(!t.contains("ab") && !t.contains("cd"), "{t}");
        assert_eq!(parse(Some(t)), Some(json!({"id": "k", "rpm": 5})));
        assert_eq!(text(None), None);
    }
}
