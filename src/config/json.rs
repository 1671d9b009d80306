//! Typed accessors over `serde_json::Value` that report errors with JSON paths.

use super::ConfigError;
use serde_json::{Map, Value};

/// A cursor on one JSON object while validating it: knows its file and path.
pub(crate) struct Obj<'a> {
    pub file: &'a str,
    pub path: String,
    pub map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    /// Views `v` as an object or fails at `path`.
    pub fn new(file: &'a str, path: String, v: &'a Value) -> Result<Self, ConfigError> {
        match v.as_object() {
            Some(map) => Ok(Obj { file, path, map }),
            None => Err(ConfigError::new(file, path, "expected an object")),
        }
    }

    pub fn err(&self, key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(self.file, self.at(key), reason)
    }

    pub fn at(&self, key: &str) -> String {
        format!("{}.{}", self.path, key)
    }

    /// Rejects keys not in `known` (catches typos such as `api_kye_env`).
    pub fn only(&self, known: &[&str]) -> Result<(), ConfigError> {
        for k in self.map.keys() {
            if !known.contains(&k.as_str()) {
                return Err(self.err(k, "unknown field"));
            }
        }
        Ok(())
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(self.err(key, "expected a string")),
        }
    }

    pub fn str(&self, key: &str) -> Result<&'a str, ConfigError> {
        match self.opt_str(key)? {
            Some(s) if !s.is_empty() => Ok(s),
            Some(_) => Err(self.err(key, "must not be empty")),
            None => Err(self.err(key, "missing required field")),
        }
    }

    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.err(key, "expected a non-negative integer")),
        }
    }

    pub fn positive_u64(&self, key: &str) -> Result<u64, ConfigError> {
        match self.opt_u64(key)? {
            Some(0) => Err(self.err(key, "must be positive")),
            Some(n) => Ok(n),
            None => Err(self.err(key, "missing required field")),
        }
    }

    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.err(key, "expected a number")),
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.err(key, "expected true or false")),
        }
    }

    /// An optional array; each element handed to `f` with its path.
    pub fn opt_array(&self, key: &str) -> Result<Option<Vec<(String, &'a Value)>>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => Ok(Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{}.{}[{}]", self.path, key, i), v))
                    .collect(),
            )),
            Some(_) => Err(self.err(key, "expected an array")),
        }
    }

    pub fn array(&self, key: &str) -> Result<Vec<(String, &'a Value)>, ConfigError> {
        self.opt_array(key)?
            .ok_or_else(|| self.err(key, "missing required field"))
    }

    /// An optional array of strings.
    pub fn opt_strings(&self, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(items) = self.opt_array(key)? else {
            return Ok(None);
        };
        items
            .into_iter()
            .map(|(path, v)| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ConfigError::new(self.file, path, "expected a string"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub fn opt_obj(&self, key: &str) -> Result<Option<Obj<'a>>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => Obj::new(self.file, self.at(key), v).map(Some),
        }
    }
}

/// Parses a document, reporting syntax errors with line and column.
pub(crate) fn parse(file: &str, text: &str) -> Result<Value, ConfigError> {
    serde_json::from_str(text).map_err(|e| {
        ConfigError::new(
            file,
            "$",
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )
    })
}
