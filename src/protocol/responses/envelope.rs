//! What the gateway sets on a Responses `response` object it stores or
//! continues (docs/api.md "Stored responses"): its own unguessable `id`, `previous_response_id`,
//! `store` and the request's `instructions`. The translating encoders write
//! these fields directly; a passed-through object or stream event is edited
//! in place (every other byte kept).

use crate::util::jsonedit;
use std::ops::Range;

/// The members of a response object an envelope may set, in the order a
/// stream peek reports where they are ([`MemberSpans`]).
pub const MEMBERS: [&str; 4] = ["id", "previous_response_id", "store", "instructions"];

/// Where each of [`MEMBERS`] is in a stream event (its value's bytes), as
/// the peek's skim of the event's response object found them; None for one
/// the object does not have.
pub type MemberSpans = [Option<Range<usize>>; 4];

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
        let id = self.id_json();
        let set: Vec<(&str, &[u8])> = self.members(id.as_deref()).collect();
        jsonedit::set_members(obj, &set)
    }

    /// The id's JSON string, when the envelope sets one.
    fn id_json(&self) -> Option<Vec<u8>> {
        self.id
            .as_ref()
            .map(|id| serde_json::to_vec(id).unwrap_or_default())
    }

    /// The members set (name, JSON value), in order: `id` (as
    /// [`Envelope::id_json`] wrote it) first, then the fields.
    fn members<'a>(&'a self, id: Option<&'a [u8]>) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        let fields = self.fields.iter().map(|(k, v)| (*k, v.as_slice()));
        id.map(|v| ("id", v)).into_iter().chain(fields)
    }

    /// [`Envelope::apply_event`] of an event whose response object, at
    /// `span`, has its [`MEMBERS`] where `members` says (the peek's skim
    /// found them): the event is written once, in pieces, without another
    /// walk of the object; the bytes are `apply_event`'s. None when the
    /// envelope sets a member outside [`MEMBERS`] or `members` do not lie
    /// in the object (then `apply_event`).
    pub fn apply_event_at(
        &self,
        event: &[u8],
        span: Range<usize>,
        members: &MemberSpans,
    ) -> Option<(Vec<u8>, Range<usize>)> {
        let obj = event.get(span.clone())?;
        if obj.first() != Some(&b'{') {
            return None;
        }
        let id = self.id_json();
        // The value set for each of MEMBERS, and the order they were set in.
        let mut value: [Option<&[u8]>; 4] = [None; 4];
        let mut order = [0usize; 4];
        let mut n = 0;
        for (name, v) in self.members(id.as_deref()) {
            let i = MEMBERS.iter().position(|m| *m == name)?;
            if value[i].replace(v).is_some() {
                return None;
            }
            order[n] = i;
            n += 1;
        }
        let inside = |r: &Range<usize>| r.start > span.start && r.end < span.end;
        if !members.iter().flatten().all(inside) {
            return None;
        }
        let added: usize = value.iter().flatten().map(|v| v.len() + 16).sum();
        let mut out = Vec::with_capacity(event.len() + added);
        out.extend_from_slice(&event[..=span.start]);
        // The members the object lacks go first, in the order set.
        let mut wrote = false;
        for &i in &order[..n] {
            if members[i].is_some() {
                continue;
            }
            if wrote {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(MEMBERS[i].as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(value[i].unwrap_or_default());
            wrote = true;
        }
        let empty = obj[1..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}');
        if wrote && !empty {
            out.push(b',');
        }
        // Then the object, its members that are set given their new values.
        let mut replaced: [(usize, usize, &[u8]); 4] = [(0, 0, &[]); 4];
        let mut r = 0;
        for (i, at) in members.iter().enumerate() {
            if let (Some(at), Some(v)) = (at, value[i]) {
                replaced[r] = (at.start, at.end, v);
                r += 1;
            }
        }
        let replaced = &mut replaced[..r];
        replaced.sort_unstable_by_key(|(start, _, _)| *start);
        let mut at = span.start + 1;
        for &(start, end, v) in replaced.iter() {
            out.extend_from_slice(&event[at..start]);
            out.extend_from_slice(v);
            at = end;
        }
        out.extend_from_slice(&event[at..span.end]);
        let response = span.start..out.len();
        out.extend_from_slice(&event[span.end..]);
        Some((out, response))
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
    fn members_found_by_the_peek_are_set_as_a_walk_of_the_object_sets_them() {
        let envs = [
            env(),
            Envelope {
                id: None,
                fields: vec![("store", b"false".to_vec())],
            },
            Envelope {
                id: Some("resp_\"q\"".into()),
                fields: vec![
                    ("instructions", b"\"be brief\"".to_vec()),
                    ("previous_response_id", b"\"resp_0\"".to_vec()),
                ],
            },
        ];
        let events: [&[u8]; 7] = [
            br#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_up","object":"response","model":"m","store":false,"output":[]}}"#,
            br#"{"type":"response.completed","response":{"output":[{"type":"message","content":[{"text":"{\"id\":1}"}]}],"previous_response_id":null,"instructions":null,"usage":{"input_tokens":3,"output_tokens":4}},"sequence_number":9}"#,
            br#"{"type":"response.in_progress","response":{ }}"#,
            br#"{"type":"response.in_progress","response":{}}"#,
            br#"{ "type" : "response.created" , "response" : { "store" : true , "id" : "r" , "model" : "m" } }"#,
            // Escaped keys and a duplicate: the skim leaves these to serde.
            br#"{"type":"response.created","response":{"\u0069d":"x","model":"m"}}"#,
            br#"{"type":"response.created","response":{"store":true,"store":false}}"#,
        ];
        for ev in events {
            let p = crate::protocol::responses::peek::response(ev).unwrap();
            let at = p.response.clone().unwrap();
            let members = crate::protocol::responses::peek::envelope_members(ev);
            // Handed over once: a second ask, or one about another
            // document, has no answer.
            assert_eq!(crate::protocol::responses::peek::envelope_members(ev), None);
            for e in &envs {
                let walked = e.apply_event(ev, at.clone()).unwrap();
                match &members {
                    Some(m) => {
                        let found = e.apply_event_at(ev, at.clone(), m).unwrap();
                        assert_eq!(
                            String::from_utf8_lossy(&found.0),
                            String::from_utf8_lossy(&walked.0)
                        );
                        assert_eq!(found.1, walked.1);
                        let v: serde_json::Value = serde_json::from_slice(&found.0).unwrap();
                        assert!(v["response"].is_object());
                    }
                    // Only the duplicate has no spans (serde's walk then).
                    None => assert!(ev.windows(7).filter(|w| w == br#""store""#).count() == 2),
                }
            }
        }
        // An envelope setting a member outside MEMBERS is the walk's to apply.
        let other = Envelope {
            id: None,
            fields: vec![("metadata", b"{}".to_vec())],
        };
        let ev = events[0];
        let p = crate::protocol::responses::peek::response(ev).unwrap();
        let m = crate::protocol::responses::peek::envelope_members(ev).unwrap();
        assert_eq!(other.apply_event_at(ev, p.response.unwrap(), &m), None);
        // Another document peeked at since: no answer for the first.
        crate::protocol::responses::peek::response(events[4]).unwrap();
        assert_eq!(crate::protocol::responses::peek::envelope_members(ev), None);
        // Nor for a delta peeked at after it (it has no response object).
        crate::protocol::responses::peek::response(events[4]).unwrap();
        let delta = br#"{"type":"response.output_text.delta","sequence_number":3,"delta":"x"}"#;
        crate::protocol::responses::peek::response(delta).unwrap();
        assert_eq!(
            crate::protocol::responses::peek::envelope_members(events[4]),
            None
        );
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
