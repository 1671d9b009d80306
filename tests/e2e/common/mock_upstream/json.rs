//! Ordered JSON (`J`, `obj!`): serde_json's `Value` sorts keys, real APIs
//! do not; and SSE frame writing shared by the protocol files.
//! Imports `super::*` (the rest of the mock upstream).

use super::*;

/// A JSON value whose objects keep their key order when serialised.
#[derive(Clone, Debug)]
pub(super) enum J {
    Raw(Value),
    Obj(Vec<(&'static str, J)>),
    Arr(Vec<J>),
}

pub(super) const NULL: J = J::Raw(Value::Null);

macro_rules! obj {
    ($($key:literal : $value:expr),* $(,)?) => {
        J::Obj(vec![$(($key, J::from($value))),*])
    };
}

impl J {
    pub(super) fn with(mut self, key: &'static str, value: impl Into<J>) -> J {
        if let J::Obj(fields) = &mut self {
            fields.push((key, value.into()));
        }
        self
    }

    /// Appends the fields of `other` (an object) to this object.
    pub(super) fn with_all(mut self, other: J) -> J {
        if let (J::Obj(fields), J::Obj(more)) = (&mut self, other) {
            fields.extend(more);
        }
        self
    }

    pub(super) fn to_json_string(&self) -> String {
        // Serialising string keys and JSON values cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            J::Raw(value) => value.serialize(serializer),
            J::Obj(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            J::Arr(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
        }
    }
}

impl From<Value> for J {
    fn from(value: Value) -> J {
        J::Raw(value)
    }
}

impl From<&str> for J {
    fn from(value: &str) -> J {
        J::Raw(Value::from(value))
    }
}

impl From<&String> for J {
    fn from(value: &String) -> J {
        J::Raw(Value::from(value.as_str()))
    }
}

impl From<String> for J {
    fn from(value: String) -> J {
        J::Raw(Value::from(value))
    }
}

impl From<bool> for J {
    fn from(value: bool) -> J {
        J::Raw(Value::from(value))
    }
}

impl From<u64> for J {
    fn from(value: u64) -> J {
        J::Raw(Value::from(value))
    }
}

impl From<Vec<J>> for J {
    fn from(items: Vec<J>) -> J {
        J::Arr(items)
    }
}

impl<T: Into<J>> From<Option<T>> for J {
    fn from(value: Option<T>) -> J {
        value.map_or(NULL, Into::into)
    }
}

pub(super) fn tool_args() -> Value {
    json!({ "location": "Paris", "unit": "c" })
}

pub(super) fn sse(event: Option<&str>, data: &str, newline: &str) -> Vec<u8> {
    let mut frame = String::new();
    if let Some(event) = event {
        frame.push_str("event: ");
        frame.push_str(event);
        frame.push_str(newline);
    }
    frame.push_str("data: ");
    frame.push_str(data);
    frame.push_str(newline);
    frame.push_str(newline);
    frame.into_bytes()
}
