//! Request inspection and the context-length check against model metadata
//! (docs/api.md "Inference behaviour"), done before any upstream call. Each spoke peeks at its own
//! bodies (`protocol::<family>::peek`, borrowed raw values, nothing copied);
//! the context-length check tokenises only when the byte bound cannot prove
//! the request fits. Each optional field is recorded by its catalog
//! vocabulary word and the client's own path ([`Use`]), so that `policy` can
//! refuse it, or drop it from the raw body, by name.

use crate::admit::tokens::{self, Cancel, Countable};
use crate::config::Model;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::protocol::common::peek::body_error;
use crate::protocol::spoke;

pub use crate::protocol::common::peek::{Inspected, Use};

/// Scans a request body of `family` (its spoke's peek). `path_stream` is the
/// stream flag a Gemini route takes from its path.
pub fn inspect(family: Family, body: &[u8], path_stream: bool) -> Result<Inspected, GatewayError> {
    (spoke(family).inspect)(body, path_stream)
}

/// The input-token budget: what is left of the context after `cap` output tokens.
pub fn input_budget(cap: Option<u64>, model: &Model) -> u64 {
    model.context_length.saturating_sub(cap.unwrap_or(0))
}

/// Whether the byte bound alone proves the request fits (a token is at least one byte).
pub fn surely_fits(body_len: usize, cap: Option<u64>, model: &Model) -> bool {
    (body_len as u64) <= input_budget(cap, model)
}

/// The countable text of a request body of `family`.
pub fn countable(family: Family, body: &[u8]) -> Result<Countable, GatewayError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| body_error(&e))?;
    let mut c = Countable::default();
    for k in spoke(family).counted_fields {
        if let Some(x) = v.get(*k) {
            c.add(x);
        }
    }
    Ok(c)
}

/// Counts the input tokens of a request body (blocking; run off the reactor),
/// stopping early once the count passes `limit`; `None` when cancelled.
pub fn count_input(
    family: Family,
    body: &[u8],
    limit: u64,
    cancel: &Cancel,
) -> Result<Option<u64>, GatewayError> {
    Ok(tokens::count(&countable(family, body)?, limit, cancel))
}

/// The 400 for input that does not fit the context (with `max_tokens` of output, if any).
pub fn context_error(
    family: Family,
    model: &Model,
    n: u64,
    max_tokens: Option<u64>,
) -> GatewayError {
    let param = spoke(family).input_field;
    let mut e = GatewayError::new(
        ErrorKind::ContextLengthExceeded,
        format!(
            "this model's maximum context length is {} tokens; the request has about {n} input tokens{}",
            model.context_length,
            max_tokens
                .map(|m| format!(" plus {m} requested output tokens"))
                .unwrap_or_default()
        ),
    );
    e.param = Some(param.into());
    e.with_code("context_length_exceeded")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::util::hash::key;

    fn affinity(family: Family, body: &str) -> u64 {
        inspect(family, body.as_bytes(), false)
            .unwrap()
            .affinity
            .hash(body.as_bytes())
    }

    #[test]
    fn each_family_reads_its_cache_key_and_its_stable_prefix() {
        // The client's key: OpenAI chat and Responses `prompt_cache_key`,
        // Anthropic `metadata.user_id`.
        let keyed = [
            (
                Family::OpenAi,
                r#"{"model":"m","messages":[{"role":"user","content":"a"}],"prompt_cache_key":"k1"}"#,
            ),
            (
                Family::Responses,
                r#"{"model":"m","input":"a","prompt_cache_key":"k1"}"#,
            ),
            (
                Family::Anthropic,
                r#"{"model":"m","messages":[{"role":"user","content":"a"}],"metadata":{"user_id":"k1"}}"#,
            ),
        ];
        for (f, body) in keyed {
            assert_eq!(affinity(f, body), key(b"k1"), "{f:?}");
        }
        // The prefix: a later turn does not change it, the system prompt does.
        let prefixed = [
            (
                Family::OpenAi,
                r#"{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"a"}]}"#,
                r#"{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"stream":true}"#,
                r#"{"model":"m","messages":[{"role":"system","content":"T"},{"role":"user","content":"a"}]}"#,
            ),
            (
                Family::Anthropic,
                r#"{"model":"m","system":"S","messages":[{"role":"user","content":"a"}]}"#,
                r#"{"model":"m","system":"S","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}"#,
                r#"{"model":"m","system":"T","messages":[{"role":"user","content":"a"}]}"#,
            ),
            (
                Family::Responses,
                r#"{"model":"m","instructions":"S","input":[{"role":"developer","content":"d"},{"role":"user","content":"a"}]}"#,
                r#"{"model":"m","instructions":"S","input":[{"role":"developer","content":"d"},{"role":"user","content":"a"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}"#,
                r#"{"model":"m","instructions":"T","input":[{"role":"developer","content":"d"},{"role":"user","content":"a"}]}"#,
            ),
            (
                Family::Gemini,
                r#"{"systemInstruction":{"parts":[{"text":"S"}]},"contents":[{"role":"user","parts":[{"text":"a"}]}]}"#,
                r#"{"system_instruction":{"parts":[{"text":"S"}]},"contents":[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"b"}]}]}"#,
                r#"{"systemInstruction":{"parts":[{"text":"T"}]},"contents":[{"role":"user","parts":[{"text":"a"}]}]}"#,
            ),
        ];
        for (f, first, later, other) in prefixed {
            assert_eq!(affinity(f, first), affinity(f, later), "{f:?}");
            assert_ne!(affinity(f, first), affinity(f, other), "{f:?}");
        }
    }
}
