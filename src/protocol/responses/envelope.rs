//! What the gateway sets on a Responses `response` object it stores or
//! continues (docs/api.md "Stored responses"): its own unguessable `id`, `previous_response_id`,
//! `store` and the request's `instructions`. The translating encoders write
//! these fields directly; a passed-through object or stream event is edited
//! in place (every other byte kept).

use crate::util::jsonedit;
use std::ops::Range;

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
        let id = self
            .id
            .as_ref()
            .map(|id| serde_json::to_vec(id).unwrap_or_default());
        let mut set: Vec<(&str, &[u8])> = Vec::with_capacity(self.fields.len() + 1);
        if let Some(id) = &id {
            set.push(("id", id));
        }
        set.extend(self.fields.iter().map(|(k, v)| (*k, v.as_slice())));
        jsonedit::set_members(obj, &set)
    }

    /// A stream event with its nested `response` object, at `span` (as the
    /// stream peek found it: `Peeked::response`), edited, and where that
    /// object now is in it; `None` when `span` holds no object.
    pub fn apply_event(&self, event: &[u8], span: Range<usize>) -> Option<(Vec<u8>, Range<usize>)> {
        let edited = self.apply(event.get(span.clone())?)?;
        let mut out = Vec::with_capacity(event.len() + edited.len() - span.len());
        out.extend_from_slice(&event[..span.start]);
        out.extend_from_slice(&edited);
        let response = span.start..out.len();
        out.extend_from_slice(&event[span.end..]);
        Some((out, response))
    }
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
        let peeked = |ev: &[u8]| crate::protocol::responses::peek::response(ev).unwrap();
        let at = peeked(ev).response.unwrap();
        assert_eq!(
            &ev[at.clone()],
            br#"{"id":"resp_up","previous_response_id":null}"#
        );
        let (out, response) = env().apply_event(ev, at).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let found = jsonedit::member_span(&out, "response").map(|s| &out[s]);
        assert_eq!(Some(&out[response]), found);
        assert_eq!(v["response"]["id"], "resp_new");
        assert_eq!(v["response"]["previous_response_id"], "resp_old");
        assert_eq!(v["response"]["store"], true);
        assert_eq!(v["sequence_number"], 9);
        // A delta has no response object to edit.
        let delta = br#"{"type":"response.output_text.delta","delta":"x"}"#;
        assert_eq!(peeked(delta).response, None);
    }
}
