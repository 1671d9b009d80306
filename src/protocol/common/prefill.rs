//! What the spokes share to ask for a cut answer's continuation
//! (`translate::continuation`): the body edited as a JSON document, and the
//! prefill appended to the conversation's last assistant turn, or as a new one.

use serde_json::{Map, Value};

/// A spoke's edit of a client body for a continuation: `prefill` (Some:
/// the assistant text the answer continues from) added as the last turn,
/// reasoning settings dropped with it; returns the body and the names of
/// the members dropped (reported as every drop is). None: the body is no
/// JSON object.
pub type ContinueBody = fn(&[u8], Option<&str>) -> Option<(Vec<u8>, Vec<&'static str>)>;

/// Removes each of `names` from `o`, noting in `dropped` those it held.
pub fn drop_members(
    o: &mut Map<String, Value>,
    names: &[&'static str],
    dropped: &mut Vec<&'static str>,
) {
    for name in names {
        if o.remove(*name).is_some() {
            dropped.push(name);
        }
    }
}

/// An upstream body's prefilled last message marked with the member an
/// OpenAI-compatible upstream wants (`prefix`, `partial`) set to true.
pub type MarkPrefill = fn(&[u8], &str) -> Option<Vec<u8>>;

/// Parses `body`, lets `edit` change its object, writes it back.
pub fn edit(body: &[u8], edit: impl FnOnce(&mut Map<String, Value>)) -> Option<Vec<u8>> {
    let mut doc: Value = serde_json::from_slice(body).ok()?;
    edit(doc.as_object_mut()?);
    serde_json::to_vec(&doc).ok()
}

/// Appends `text` to the turn list `turns` (created when missing): to its
/// last turn when `is_assistant` says it is the assistant's own (a prefill
/// the client sent itself: the answer continues it), else as the turn
/// `new_turn` makes. `append` adds the text to an existing turn.
pub fn append_turn(
    turns: &mut Value,
    text: &str,
    is_assistant: impl Fn(&Value) -> bool,
    append: impl Fn(&mut Value, &str),
    new_turn: impl Fn(&str) -> Value,
) {
    if !turns.is_array() {
        *turns = Value::Array(Vec::new());
    }
    let Some(list) = turns.as_array_mut() else {
        return;
    };
    match list.last_mut() {
        Some(last) if is_assistant(last) => append(last, text),
        _ => list.push(new_turn(text)),
    }
}

/// Appends text to a `content` member that is a string, or a list of parts
/// (a new part `part` makes), or missing.
pub fn append_content(content: &mut Value, text: &str, part: impl Fn(&str) -> Value) {
    match content {
        Value::String(s) => s.push_str(text),
        Value::Array(parts) => parts.push(part(text)),
        other => *other = Value::String(text.to_string()),
    }
}
