//! What the gateway sets on a Responses `response` object it stores or
//! continues (docs/api.md "Stored responses"): its own unguessable `id`, `previous_response_id`,
//! `store` and the request's `instructions`. The translating encoders write
//! these fields directly; a passed-through object or stream event is edited
//! in place (every other byte kept).

use crate::util::jsonedit::{self, Edit};

/// Members set on a response object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Envelope {
    /// The response id the client sees (and the store keys by).
    pub id: Option<String>,
    /// Other members, as JSON bytes.
    pub fields: Vec<(&'static str, Vec<u8>)>,
}

impl Envelope {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.id.is_none() && self.fields.is_empty()
    }

    /// Every member set, `id` first, as (name, JSON bytes).
    pub fn members(&self) -> Vec<(&'static str, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.fields.len() + 1);
        if let Some(id) = &self.id {
            out.push(("id", serde_json::to_vec(id).unwrap_or_default()));
        }
        out.extend(self.fields.iter().cloned());
        out
    }

    /// The value set for `name`, if any (not `id`).
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_slice())
    }

    /// `obj` (a response object) with the members set: replaced where present,
    /// added at the front where not. `None` when `obj` is not an object.
    pub fn apply(&self, obj: &[u8]) -> Option<Vec<u8>> {
        let start = obj.iter().position(|b| !b.is_ascii_whitespace())?;
        if obj[start] != b'{' {
            return None;
        }
        let mut edits = Vec::new();
        let mut missing = Vec::new();
        for (name, value) in self.members() {
            if jsonedit::member_span(obj, name).is_some() {
                edits.push(Edit::set(name, value));
            } else {
                missing.push((name, value));
            }
        }
        let edited = if edits.is_empty() {
            obj.to_vec()
        } else {
            jsonedit::apply(obj, &edits).unwrap_or_else(|| obj.to_vec())
        };
        if missing.is_empty() {
            return Some(edited);
        }
        let open = edited.iter().position(|&b| b == b'{')?;
        let empty = edited[open + 1..]
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'}');
        let mut out = Vec::with_capacity(edited.len() + 64);
        out.extend_from_slice(&edited[..=open]);
        for (i, (name, value)) in missing.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(value);
        }
        if !empty {
            out.push(b',');
        }
        out.extend_from_slice(&edited[open + 1..]);
        Some(out)
    }

    /// A stream event with its nested `response` object edited; `None` when
    /// the event has none.
    pub fn apply_event(&self, event: &[u8]) -> Option<Vec<u8>> {
        let span = jsonedit::member_span(event, "response")?;
        let edited = self.apply(&event[span.clone()])?;
        let mut out = Vec::with_capacity(event.len() + edited.len() - span.len());
        out.extend_from_slice(&event[..span.start]);
        out.extend_from_slice(&edited);
        out.extend_from_slice(&event[span.end..]);
        Some(out)
    }
}

/// The `response` object of a stream event, as bytes.
pub fn event_response(event: &[u8]) -> Option<&[u8]> {
    jsonedit::member_span(event, "response").map(|s| &event[s])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Envelope {
        Envelope {
            id: Some("resp_new".into()),
            fields: vec![
                ("previous_response_id", b"\"resp_old\"".to_vec()),
                ("store", b"true".to_vec()),
            ],
        }
    }

    #[test]
    fn sets_present_members_and_adds_missing_ones() {
        let out = env()
            .apply(br#"{"id":"resp_up", "store":false,"output":[]}"#)
            .unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"previous_response_id":"resp_old","id":"resp_new", "store":true,"output":[]}"#
        );
        let out = env().apply(b"{}").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], "resp_new");
        assert!(env().apply(b"[1]").is_none());
    }

    #[test]
    fn edits_the_response_of_an_event() {
        let ev = br#"{"type":"response.completed","sequence_number":9,"response":{"id":"resp_up","previous_response_id":null}}"#;
        let out = env().apply_event(ev).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["response"]["id"], "resp_new");
        assert_eq!(v["response"]["previous_response_id"], "resp_old");
        assert_eq!(v["response"]["store"], true);
        assert_eq!(v["sequence_number"], 9);
        assert!(env()
            .apply_event(br#"{"type":"response.output_text.delta","delta":"x"}"#)
            .is_none());
        assert_eq!(
            event_response(ev).unwrap(),
            br#"{"id":"resp_up","previous_response_id":null}"#
        );
    }
}
