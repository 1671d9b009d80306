//! Gemini tool-call ids: Gemini often sends calls without an id, so they get a
//! stable synthetic one from their position and name; thought signatures ride
//! inside ids through clients of other families. Shared by the request,
//! response and stream codecs.

use crate::ir::ids;
use serde_json::Value;

/// Prefix of the ids this gateway invents for Gemini function calls.
pub const SYNTHETIC_ID_PREFIX: &str = "gcall_";

/// Separates a call id from a thought signature carried inside it.
const SIGNATURE_SEPARATOR: &str = "__ts_";

/// A stable id for a function call that has none, from where it sits
/// (`scope` and `position`), its name and its arguments.
pub fn synthetic_call_id(scope: &str, position: usize, name: &str, args: &Value) -> String {
    let position = position.to_string();
    let args = args.to_string();
    ids::stable_id(
        SYNTHETIC_ID_PREFIX,
        &[
            scope.as_bytes(),
            position.as_bytes(),
            name.as_bytes(),
            args.as_bytes(),
        ],
    )
}

/// Carries a Gemini thought signature inside a tool call id, so that it comes
/// back from a client whose protocol has no field for it (OpenAI, Anthropic):
/// clients always echo call ids. The result stays within `[A-Za-z0-9_-]`.
pub fn embed_signature(id: &str, signature: &str) -> String {
    let standard_b64 = !signature.is_empty()
        && signature
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=');
    let payload = if standard_b64 {
        format!("b{}", crate::util::base64::standard_to_url_safe(signature))
    } else {
        let mut s = String::from("h");
        crate::util::hex::push(&mut s, signature.as_bytes());
        s
    };
    format!("{id}{SIGNATURE_SEPARATOR}{payload}")
}

/// Splits an id made by [`embed_signature`] into the original id and signature.
pub fn split_call_id(id: &str) -> (&str, Option<String>) {
    let Some((base, payload)) = id.split_once(SIGNATURE_SEPARATOR) else {
        return (id, None);
    };
    let signature = if let Some(b64) = payload.strip_prefix('b') {
        Some(crate::util::base64::url_safe_to_standard(b64))
    } else if let Some(hex) = payload.strip_prefix('h') {
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect();
        bytes.and_then(|b| String::from_utf8(b).ok())
    } else {
        None
    };
    match signature {
        Some(s) => (base, Some(s)),
        None => (id, None),
    }
}

/// The id to put on the Gemini wire for an IR call id: none for ids this
/// gateway invented, the original id otherwise (signature stripped).
pub fn wire_call_id(id: &str) -> Option<String> {
    let (base, _) = split_call_id(id);
    let synthetic = base.len() == SYNTHETIC_ID_PREFIX.len() + 16
        && base.starts_with(SYNTHETIC_ID_PREFIX)
        && base[SYNTHETIC_ID_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit());
    (!synthetic && !base.is_empty()).then(|| base.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signatures_survive_inside_ids() {
        for sig in [
            "c2lnbmF0dXJlLWE+Lw==",
            "AAAA",
            "skip_thought_signature_validator",
            "é+/",
        ] {
            let id = embed_signature("gcall_0123456789abcdef", sig);
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "{id}"
            );
            assert_eq!(
                split_call_id(&id),
                ("gcall_0123456789abcdef", Some(sig.to_string()))
            );
        }
        assert_eq!(split_call_id("call_1"), ("call_1", None));
    }

    #[test]
    fn synthetic_ids_stay_off_the_wire() {
        let id = synthetic_call_id("r", 0, "f", &json!({}));
        assert_eq!(wire_call_id(&id), None);
        assert_eq!(wire_call_id(&embed_signature(&id, "AAAA")), None);
        assert_eq!(wire_call_id("call_abc"), Some("call_abc".to_string()));
        assert_eq!(
            wire_call_id(&embed_signature("fc-1", "AAAA")),
            Some("fc-1".to_string())
        );
        assert_ne!(id, synthetic_call_id("r", 1, "f", &json!({})));
    }
}
