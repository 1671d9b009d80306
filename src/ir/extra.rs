//! Unknown wire fields carried through the hub, tagged with their family.

use crate::family::Family;
use serde_json::{Map, Value};
use std::sync::{Arc, OnceLock};

/// The unknown fields of one wire object, remembered with the family whose
/// wire they came from. Encoders re-emit them only for that same family: an
/// OpenAI `logit_bias` goes back to an OpenAI upstream, never into an
/// Anthropic or Gemini body.
///
/// The fields are shared, not copied, when an `Extra` is cloned: a stream's
/// usage is merged and cloned a few times a request (the OpenAI usage's
/// `audio_tokens` and the like are nested maps, a copy of them seven
/// allocations each time), and none of those copies is changed.
#[derive(Clone, Default, PartialEq)]
pub struct Extra {
    origin: Option<Family>,
    /// None when there are none (never an empty map: `Default` allocates nothing).
    fields: Option<Arc<Map<String, Value>>>,
}

/// Written as the map itself, shared or not, none an empty map: an answer
/// without an upstream id gets one hashed from its content's `Debug` text
/// (`openai::response::fallback_id`), which must not change with how the
/// fields are held.
impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extra")
            .field("origin", &self.origin)
            .field("fields", self.fields())
            .finish()
    }
}

/// The fields of an `Extra` that has none.
fn no_fields() -> &'static Map<String, Value> {
    static EMPTY: OnceLock<Map<String, Value>> = OnceLock::new();
    EMPTY.get_or_init(Map::new)
}

impl Extra {
    /// Unknown fields of an object of `origin`'s wire (empty maps are stored as "none").
    pub fn new(origin: Family, fields: Map<String, Value>) -> Self {
        if fields.is_empty() {
            Extra::default()
        } else {
            Extra {
                origin: Some(origin),
                fields: Some(Arc::new(fields)),
            }
        }
    }

    /// The family the fields came from, if there are any.
    pub fn origin(&self) -> Option<Family> {
        self.origin
    }

    /// True when there is nothing to carry.
    pub fn is_empty(&self) -> bool {
        self.fields.is_none()
    }

    /// The fields, whatever their family (for inspection and tests).
    pub fn fields(&self) -> &Map<String, Value> {
        match &self.fields {
            Some(f) => f,
            None => no_fields(),
        }
    }

    /// The fields if they came from `family`'s wire.
    pub fn for_family(&self, family: Family) -> Option<&Map<String, Value>> {
        match self.origin {
            Some(origin) if origin == family => Some(self.fields()),
            _ => None,
        }
    }

    /// One field, if the fields came from `family`'s wire.
    pub fn get(&self, family: Family, key: &str) -> Option<&Value> {
        self.for_family(family).and_then(|m| m.get(key))
    }

    /// A copy of the fields for `family` (empty when they came from another family).
    pub fn to_map(&self, family: Family) -> Map<String, Value> {
        self.for_family(family).cloned().unwrap_or_default()
    }

    /// Adds a field of `family`'s wire. Fields of another family are replaced
    /// (one object is only ever decoded from one wire).
    pub fn insert(&mut self, family: Family, key: impl Into<String>, value: Value) {
        if self.origin != Some(family) {
            self.fields = None;
            self.origin = Some(family);
        }
        Arc::make_mut(self.fields.get_or_insert_with(Arc::default)).insert(key.into(), value);
    }
}

/// Merges `extra` into `target`: objects are merged key by key, anything else
/// in `extra` replaces what `target` has. Used to put unknown fields back into
/// an encoded wire object (including nested ones such as `generationConfig`).
pub fn deep_merge(target: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (key, value) in extra {
        match (target.get_mut(key), value) {
            (Some(Value::Object(existing)), Value::Object(incoming)) => {
                deep_merge(existing, incoming);
            }
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extra_is_family_scoped() {
        let mut m = Map::new();
        m.insert("seed".into(), json!(3));
        let e = Extra::new(Family::OpenAi, m);
        assert_eq!(e.get(Family::OpenAi, "seed"), Some(&json!(3)));
        assert!(e.for_family(Family::Anthropic).is_none());
        assert!(Extra::new(Family::Gemini, Map::new()).origin().is_none());
    }

    #[test]
    fn debug_text_is_the_maps_whether_fields_are_held_or_not() {
        // Content ids without an upstream id are hashed from this text.
        assert_eq!(
            format!("{:?}", Extra::default()),
            "Extra { origin: None, fields: {} }"
        );
        let mut m = Map::new();
        m.insert("seed".into(), json!(3));
        let e = Extra::new(Family::OpenAi, m);
        assert_eq!(
            format!("{:?}", e.clone()),
            r#"Extra { origin: Some(OpenAi), fields: {"seed": Number(3)} }"#
        );
    }

    #[test]
    fn deep_merge_merges_objects() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "d": 1});
        let e = json!({"a": {"c": 3, "x": 4}, "d": [1]});
        if let (Value::Object(t), Value::Object(e)) = (&mut t, &e) {
            deep_merge(t, e);
        }
        assert_eq!(t, json!({"a": {"b": 1, "c": 3, "x": 4}, "d": [1]}));
    }
}
