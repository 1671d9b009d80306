//! Surgical edits of a raw JSON document: remove members or replace values at
//! dotted paths while every other byte (key order, whitespace, number
//! spelling, unknown fields) is copied through unchanged. Used to adapt
//! same-protocol request bodies (docs/api.md "Adapt or refuse") without re-serialising them.

use std::ops::Range;

/// What to do at the end of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Remove the member (and its parent object, if that leaves it empty).
    Remove,
    /// Replace the value with these bytes (valid JSON).
    Set(Vec<u8>),
}

/// One edit: a path of object keys, where `*` stands for every element of an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub path: Vec<&'static str>,
    pub op: Op,
}

impl Edit {
    /// Removes the member at the dotted `path` (`messages.*.content.*.cache_control`).
    pub fn remove(path: &'static str) -> Edit {
        Edit {
            path: path.split('.').collect(),
            op: Op::Remove,
        }
    }

    /// Replaces the value at the dotted `path` with `value` (JSON bytes).
    pub fn set(path: &'static str, value: Vec<u8>) -> Edit {
        Edit {
            path: path.split('.').collect(),
            op: Op::Set(value),
        }
    }
}

/// The most nesting followed (deeper documents are copied unchanged below it).
const MAX_DEPTH: usize = 128;

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// `i` at an opening quote; returns the index after the closing quote.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    // From one quote or backslash to the next: most of a document's bytes
    // are strings' text, which is not looked at.
    super::json_depth::string_end(b, i + 1).map(|q| q + 1)
}

/// `i` at the first byte of a value; returns the index after it.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_string(b, i),
        // A word at a time between strings.
        b'{' | b'[' => super::json_depth::container_end(b, i),
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// One object member: the key string (quotes included) and the value.
#[derive(Debug, Clone)]
struct Member {
    key: Range<usize>,
    value: Range<usize>,
}

/// The members of the object whose `{` is at `open`, read up to its
/// closing `}` (`None`: not a well-formed object).
fn members(b: &[u8], open: usize) -> Option<Vec<Member>> {
    let mut out = Vec::new();
    let mut i = ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(b, i)?;
        let colon = ws(b, key_end);
        if b.get(colon) != Some(&b':') {
            return None;
        }
        let vs = ws(b, colon + 1);
        let ve = skip_value(b, vs)?;
        out.push(Member {
            key: i..key_end,
            value: vs..ve,
        });
        i = ws(b, ve);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return Some(out),
            _ => return None,
        }
    }
}

/// The elements of the array spanning `span`.
fn elements(b: &[u8], span: &Range<usize>) -> Option<Vec<Range<usize>>> {
    let mut out = Vec::new();
    let mut i = ws(b, span.start + 1);
    if b.get(i) == Some(&b']') {
        return Some(out);
    }
    loop {
        let e = skip_value(b, i)?;
        out.push(i..e);
        i = ws(b, e);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b']') => return Some(out),
            _ => return None,
        }
    }
}

fn key_is(b: &[u8], key: &Range<usize>, name: &str) -> bool {
    let raw = &b[key.start + 1..key.end - 1];
    if raw.contains(&b'\\') {
        serde_json::from_slice::<String>(&b[key.clone()]).is_ok_and(|k| k == name)
    } else {
        raw == name.as_bytes()
    }
}

/// Whether `doc` can have a member named `name` at all: its name appears
/// between quotes, or an escape (`\u…`) that could spell it does. Outside
/// a key a raw `"name"` can only be a string value (quotes inside strings
/// are escaped), so this never says no to a document that has the member;
/// it lets most stream events skip the scan.
///
/// Found from the quotes and backslashes (`memchr`), not with a substring
/// searcher: building one cost more than a stream event's whole scan.
fn may_have_key(doc: &[u8], name: &str) -> bool {
    let n = name.as_bytes();
    memchr::memchr_iter(b'"', doc).any(|i| {
        // The closing quote first: one byte rules out most places.
        doc.get(i + 1 + n.len()) == Some(&b'"') && &doc[i + 1..i + 1 + n.len()] == n
    }) || memchr::memchr_iter(b'\\', doc).any(|i| doc.get(i + 1) == Some(&b'u'))
}

/// Byte range of the top-level member `name`'s value, if the document is an object that has it.
pub fn member_span(doc: &[u8], name: &str) -> Option<Range<usize>> {
    if !may_have_key(doc, name) {
        return None;
    }
    member_span_scan(doc, name)
}

/// The value spans of the top-level members `names` of the object `doc`
/// (None for one absent; a key with escapes read as serde reads it), in
/// one walk; None when `doc` is no object or has one of them twice (serde
/// refuses a duplicate field). Nothing else is checked: the caller parsed
/// `doc` before.
pub fn member_spans<const N: usize>(
    doc: &[u8],
    names: [&str; N],
) -> Option<[Option<Range<usize>>; N]> {
    let start = ws(doc, 0);
    if doc.get(start) != Some(&b'{') {
        return None;
    }
    let mut found = std::array::from_fn(|_| None);
    for m in members(doc, start)? {
        if let Some(k) = names.iter().position(|n| key_is(doc, &m.key, n)) {
            if found[k].replace(m.value).is_some() {
                return None;
            }
        }
    }
    Some(found)
}

/// [`member_span`] without its shortcut: the scan of every top-level member
/// (the reference the shortcut is checked against).
fn member_span_scan(doc: &[u8], name: &str) -> Option<Range<usize>> {
    let start = ws(doc, 0);
    if doc.get(start) != Some(&b'{') {
        return None;
    }
    members(doc, start)?
        .into_iter()
        .find(|m| key_is(doc, &m.key, name))
        .map(|m| m.value)
}

/// The object `doc` with each member of `set` (name, JSON value) given its
/// value: replaced wherever the object has that member, else added at the
/// front in `set`'s order; every other byte is kept. One pass over the
/// object, where an [`apply`] per name would take several. `None` when
/// `doc` is not a well-formed object.
pub fn set_members(doc: &[u8], set: &[(&str, &[u8])]) -> Option<Vec<u8>> {
    let start = ws(doc, 0);
    if doc.get(start) != Some(&b'{') {
        return None;
    }
    let ms = members(doc, start)?;
    // Which of `set` each member is (the first of that name), found once:
    // a key without escapes is compared as bytes.
    let which: Vec<Option<usize>> = ms
        .iter()
        .map(|m| {
            let raw = &doc[m.key.start + 1..m.key.end - 1];
            if raw.contains(&b'\\') {
                set.iter().position(|(n, _)| key_is(doc, &m.key, n))
            } else {
                set.iter().position(|(n, _)| n.as_bytes() == raw)
            }
        })
        .collect();
    let mut present = vec![false; set.len()];
    for k in which.iter().flatten() {
        present[*k] = true;
    }
    let added: usize = set.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
    let mut out = Vec::with_capacity(doc.len() + added);
    out.extend_from_slice(&doc[..=start]);
    let mut wrote = false;
    for (name, value) in set {
        let first = set.iter().position(|(n, _)| n == name).unwrap_or_default();
        if present[first] {
            continue;
        }
        if wrote {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(value);
        wrote = true;
    }
    if wrote && !ms.is_empty() {
        out.push(b',');
    }
    let mut at = start + 1;
    for (m, k) in ms.iter().zip(&which) {
        if let Some(k) = k {
            out.extend_from_slice(&doc[at..m.value.start]);
            out.extend_from_slice(set[*k].1);
            at = m.value.end;
        }
    }
    out.extend_from_slice(&doc[at..]);
    Some(out)
}

/// Result of rewriting one value.
enum Rewritten {
    /// Nothing matched: the caller copies the original bytes.
    Same,
    /// The new bytes.
    New(Vec<u8>),
    /// An object all of whose members were removed: the caller removes it too.
    Emptied,
}

fn rewrite(
    b: &[u8],
    span: Range<usize>,
    edits: &[(&[&'static str], &Op)],
    depth: usize,
) -> Rewritten {
    if edits.is_empty() || depth > MAX_DEPTH {
        return Rewritten::Same;
    }
    match b.get(span.start) {
        Some(b'{') => {
            let Some(ms) = members(b, span.start) else {
                return Rewritten::Same;
            };
            let mut changed = false;
            // Each member's fate: None = removed, Some(None) = unchanged, Some(Some(v)) = new value.
            let mut fates: Vec<Option<Option<Vec<u8>>>> = Vec::with_capacity(ms.len());
            for m in &ms {
                let here: Vec<(&[&'static str], &Op)> = edits
                    .iter()
                    .filter(|(p, _)| p.first().is_some_and(|k| key_is(b, &m.key, k)))
                    .map(|(p, op)| (&p[1..], *op))
                    .collect();
                let mut fate = Some(None);
                if let Some((_, op)) = here.iter().find(|(p, _)| p.is_empty()) {
                    changed = true;
                    fate = match op {
                        Op::Remove => None,
                        Op::Set(v) => Some(Some(v.clone())),
                    };
                } else {
                    match rewrite(b, m.value.clone(), &here, depth + 1) {
                        Rewritten::Same => {}
                        Rewritten::New(v) => {
                            changed = true;
                            fate = Some(Some(v));
                        }
                        Rewritten::Emptied => {
                            changed = true;
                            fate = None;
                        }
                    }
                }
                fates.push(fate);
            }
            if !changed {
                return Rewritten::Same;
            }
            if !ms.is_empty() && fates.iter().all(Option::is_none) {
                return Rewritten::Emptied;
            }
            let mut out = Vec::with_capacity(span.len());
            out.extend_from_slice(&b[span.start..ms.first().map_or(span.end, |m| m.key.start)]);
            let mut first = true;
            for (i, (m, fate)) in ms.iter().zip(&fates).enumerate() {
                let Some(value) = fate else { continue };
                if !first {
                    // the separator that preceded this member in the original
                    out.extend_from_slice(&b[ms[i - 1].value.end..m.key.start]);
                }
                first = false;
                out.extend_from_slice(&b[m.key.start..m.value.start]);
                match value {
                    Some(v) => out.extend_from_slice(v),
                    None => out.extend_from_slice(&b[m.value.clone()]),
                }
            }
            if let Some(last) = ms.last() {
                out.extend_from_slice(&b[last.value.end..span.end]);
            }
            Rewritten::New(out)
        }
        Some(b'[') => {
            let here: Vec<(&[&'static str], &Op)> = edits
                .iter()
                .filter(|(p, _)| p.first() == Some(&"*") && p.len() > 1)
                .map(|(p, op)| (&p[1..], *op))
                .collect();
            if here.is_empty() {
                return Rewritten::Same;
            }
            let Some(es) = elements(b, &span) else {
                return Rewritten::Same;
            };
            let mut out = Vec::new();
            let mut at = span.start;
            let mut changed = false;
            for e in es {
                let v = match rewrite(b, e.clone(), &here, depth + 1) {
                    Rewritten::Same => continue,
                    Rewritten::New(v) => v,
                    // an element is never removed, only emptied
                    Rewritten::Emptied => b"{}".to_vec(),
                };
                out.extend_from_slice(&b[at..e.start]);
                out.extend_from_slice(&v);
                at = e.end;
                changed = true;
            }
            if !changed {
                return Rewritten::Same;
            }
            out.extend_from_slice(&b[at..span.end]);
            Rewritten::New(out)
        }
        _ => Rewritten::Same,
    }
}

/// Applies `edits` to the JSON object `doc`. Returns `None` when nothing
/// matched or the document is not an object (then `doc` stands as it is).
/// A top-level object is never removed, even when every member is.
pub fn apply(doc: &[u8], edits: &[Edit]) -> Option<Vec<u8>> {
    let start = ws(doc, 0);
    if doc.get(start) != Some(&b'{') {
        return None;
    }
    let end = skip_value(doc, start)?;
    let list: Vec<(&[&'static str], &Op)> =
        edits.iter().map(|e| (e.path.as_slice(), &e.op)).collect();
    let inner = match rewrite(doc, start..end, &list, 0) {
        Rewritten::Same => return None,
        Rewritten::New(v) => v,
        Rewritten::Emptied => b"{}".to_vec(),
    };
    let mut out = Vec::with_capacity(doc.len());
    out.extend_from_slice(&doc[..start]);
    out.extend_from_slice(&inner);
    out.extend_from_slice(&doc[end..]);
    Some(out)
}

/// Whether any member at `path` (as in [`Edit`]) exists with a value other than `null`.
pub fn has_path(doc: &[u8], path: &str) -> bool {
    let segs: Vec<&str> = path.split('.').collect();
    let start = ws(doc, 0);
    match skip_value(doc, start) {
        Some(end) => found(doc, start..end, &segs, 0),
        None => false,
    }
}

fn found(b: &[u8], span: Range<usize>, path: &[&str], depth: usize) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return &b[span] != b"null";
    };
    if depth > MAX_DEPTH {
        return false;
    }
    match b.get(span.start) {
        Some(b'{') if *first != "*" => members(b, span.start).is_some_and(|ms| {
            ms.iter()
                .any(|m| key_is(b, &m.key, first) && found(b, m.value.clone(), rest, depth + 1))
        }),
        Some(b'[') if *first == "*" => elements(b, &span)
            .is_some_and(|es| es.into_iter().any(|e| found(b, e, rest, depth + 1))),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(doc: &str, edits: &[Edit]) -> String {
        String::from_utf8(apply(doc.as_bytes(), edits).unwrap_or_else(|| doc.as_bytes().to_vec()))
            .unwrap()
    }

    #[test]
    fn removes_members_keeping_everything_else() {
        let doc = "{\n  \"model\": \"m\",\n  \"thinking\": {\"type\": \"adaptive\"},\n  \"zz_unknown\": [1, 2.50, {\"a\":null}],\n  \"metadata\": {\"user_id\": \"u\"}\n}\n";
        let out = run(doc, &[Edit::remove("thinking"), Edit::remove("metadata")]);
        assert_eq!(
            out,
            "{\n  \"model\": \"m\",\n  \"zz_unknown\": [1, 2.50, {\"a\":null}]\n}\n"
        );
        let out = run(doc, &[Edit::remove("model")]);
        assert!(out.starts_with("{\n  \"thinking\""), "{out}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap();
    }

    #[test]
    fn sets_values_and_removes_emptied_parents() {
        let doc = r#"{"max_tokens":32000,"output_config":{"effort":"high"},"generationConfig":{"thinkingConfig":{"thinkingBudget":1},"topK":3}}"#;
        let out = run(
            doc,
            &[
                Edit::set("max_tokens", b"8192".to_vec()),
                Edit::remove("output_config.effort"),
                Edit::remove("generationConfig.thinkingConfig"),
            ],
        );
        assert_eq!(out, r#"{"max_tokens":8192,"generationConfig":{"topK":3}}"#);
    }

    #[test]
    fn walks_arrays_and_ignores_lookalikes_in_strings() {
        let doc = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"\"cache_control\": x","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":"hi"}],"system":"s"}"#;
        assert!(has_path(
            doc.as_bytes(),
            "messages.*.content.*.cache_control"
        ));
        assert!(!has_path(doc.as_bytes(), "system.*.cache_control"));
        let out = run(doc, &[Edit::remove("messages.*.content.*.cache_control")]);
        assert_eq!(
            out,
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"\"cache_control\": x"}]},{"role":"assistant","content":"hi"}],"system":"s"}"#
        );
        assert!(apply(doc.as_bytes(), &[Edit::remove("tools.*.cache_control")]).is_none());
        assert_eq!(
            member_span(doc.as_bytes(), "system"),
            Some(doc.len() - 4..doc.len() - 1)
        );
    }

    use proptest::prelude::*;
    use serde_json::{Map, Value};

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-c\\\\\"{}\\[\\],: é]{0,24}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[abk]", inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    /// The reference: the same edit on a parsed value (removing emptied parents too).
    fn reference(v: &mut Value, path: &[&str]) -> bool {
        match (v, path) {
            (Value::Object(o), [k]) => o.remove(*k).is_some(),
            (Value::Object(o), [k, rest @ ..]) if *k != "*" => {
                let Some(child) = o.get_mut(*k) else {
                    return false;
                };
                let was_full = child.as_object().is_some_and(|c| !c.is_empty());
                let changed = reference(child, rest);
                if changed && was_full && child.as_object().is_some_and(Map::is_empty) {
                    o.remove(*k);
                }
                changed
            }
            (Value::Array(a), ["*", rest @ ..]) if !rest.is_empty() => {
                let mut changed = false;
                for e in a {
                    changed |= reference(e, rest);
                }
                changed
            }
            _ => false,
        }
    }

    proptest! {
        #[test]
        fn removal_matches_the_value_level_reference(
            mut fields in prop::collection::vec(("[abk]", json_value()), 0..6),
            path in prop::sample::select(vec!["a", "k", "a.b", "a.*.k", "b.*.a.k", "k.b.a"]),
            pretty in any::<bool>(),
        ) {
            fields.dedup_by(|x, y| x.0 == y.0);
            let mut doc = Value::Object(fields.into_iter().collect());
            let text = if pretty {
                serde_json::to_vec_pretty(&doc).unwrap()
            } else {
                serde_json::to_vec(&doc).unwrap()
            };
            // compare parse with parse (float text round trips are not exact)
            doc = serde_json::from_slice(&text).unwrap();
            let segs: Vec<&'static str> = path.split('.').collect();
            let edited = apply(&text, &[Edit { path: segs.clone(), op: Op::Remove }]);
            let changed = reference(&mut doc, &segs);
            match edited {
                Some(out) => {
                    let parsed: Value = serde_json::from_slice(&out).unwrap();
                    prop_assert_eq!(parsed, doc);
                    prop_assert!(changed);
                }
                None => prop_assert!(!changed),
            }
        }
    }

    proptest! {
        #[test]
        fn member_span_agrees_with_the_full_scan(
            mut fields in prop::collection::vec(("[abk]|response|respons\\\\u0065", json_value()), 0..6),
            name in prop::sample::select(vec!["a", "k", "response", "b"]),
            pretty in any::<bool>(),
        ) {
            fields.dedup_by(|x, y| x.0 == y.0);
            let doc = Value::Object(fields.into_iter().collect());
            let mut text = if pretty {
                serde_json::to_vec_pretty(&doc).unwrap()
            } else {
                serde_json::to_vec(&doc).unwrap()
            };
            // An escaped key spelled in the raw text, as an upstream may send it.
            if let Some(i) = memchr::memmem::find(&text, b"respons\\\\u0065") {
                text.splice(i..i + 14, b"respons\\u0065".iter().copied());
            }
            prop_assert_eq!(member_span(&text, name), member_span_scan(&text, name));
        }
    }

    proptest! {
        #[test]
        fn set_members_matches_the_value_level_reference(
            mut fields in prop::collection::vec(("[abk]", json_value()), 0..6),
            set in prop::collection::vec(("[abck]", json_value()), 0..4),
            pretty in any::<bool>(),
        ) {
            fields.dedup_by(|x, y| x.0 == y.0);
            let doc = Value::Object(fields.into_iter().collect());
            let text = if pretty {
                serde_json::to_vec_pretty(&doc).unwrap()
            } else {
                serde_json::to_vec(&doc).unwrap()
            };
            let mut set: Vec<(String, Vec<u8>)> = set
                .into_iter()
                .map(|(k, v)| (k, serde_json::to_vec(&v).unwrap()))
                .collect();
            set.sort_by(|x, y| x.0.cmp(&y.0));
            set.dedup_by(|x, y| x.0 == y.0);
            let pairs: Vec<(&str, &[u8])> =
                set.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
            let out = set_members(&text, &pairs).unwrap();
            // compare parse with parse (float text round trips are not exact)
            let mut want: Value = serde_json::from_slice(&text).unwrap();
            for (k, v) in &set {
                want[k.as_str()] = serde_json::from_slice(v).unwrap();
            }
            let got: Value = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(got, want);
            // Members it does not set keep their bytes: the original text
            // is the output's tail once the added ones are taken off the front.
            if pairs.iter().all(|(k, _)| !doc.as_object().unwrap().contains_key(*k)) {
                let open = text.iter().position(|&b| b == b'{').unwrap();
                prop_assert!(out.ends_with(&text[open + 1..]));
            }
        }
    }

    #[test]
    fn set_members_replaces_in_place_and_adds_in_front() {
        let doc = br#" { "id" : "up",
  "x":[1, {"id":2}], "store":false }"#;
        let out =
            set_members(doc, &[("id", b"\"gw\""), ("store", b"true"), ("new", b"1")]).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#" {"new":1, "id" : "gw",
  "x":[1, {"id":2}], "store":true }"#
        );
        assert_eq!(
            set_members(b"{}", &[("a", b"1"), ("b", b"2")]).unwrap(),
            br#"{"a":1,"b":2}"#
        );
        assert_eq!(set_members(b"{ }", &[]).unwrap(), b"{ }");
        assert!(set_members(b"[1]", &[("a", b"1")]).is_none());
        assert!(set_members(br#"{"a":1,"#, &[("a", b"2")]).is_none());
    }

    #[test]
    fn the_member_shortcut_never_misses_a_member() {
        for (doc, name, found) in [
            (
                r#"{"type":"response.output_text.delta","delta":"response"}"#,
                "response",
                false,
            ),
            (r#"{"type":"x","response":{"id":"r"}}"#, "response", true),
            (
                r#"{"type":"x","respons\u0065":{"id":"r"}}"#,
                "response",
                true,
            ),
            (r#"{"a":{"response":1}}"#, "response", false),
            (r#"{"text":"say \"response\": 1"}"#, "response", false),
        ] {
            let got = member_span(doc.as_bytes(), name);
            assert_eq!(got, member_span_scan(doc.as_bytes(), name), "{doc}");
            assert_eq!(got.is_some(), found, "{doc}");
        }
    }

    #[test]
    fn escaped_keys_and_malformed_documents() {
        let doc = r#"{"see\u0064":1,"x":2}"#;
        assert_eq!(run(doc, &[Edit::remove("seed")]), r#"{"x":2}"#);
        assert!(apply(b"[1]", &[Edit::remove("x")]).is_none());
        assert!(apply(b"{\"x\":", &[Edit::remove("x")]).is_none());
        assert!(!has_path(b"{\"x\":null}", "x"));
        assert_eq!(run(r#"{"x":1}"#, &[Edit::remove("x")]), "{}");
    }
}
