//! Reasoning state that must come back to the provider that issued it, carried
//! through clients whose protocol has another place (or none) for it.
//!
//! [`ThinkingBlock::signature`](super::ThinkingBlock::signature) is an opaque
//! string that only its issuer can verify. Three kinds travel in it:
//!
//! - an Anthropic thinking `signature` and a Gemini `thoughtSignature`, kept
//!   verbatim (as before the Responses API was added: an Anthropic client of a Gemini
//!   upstream gets the Gemini signature in its `signature` field and sends it
//!   back there);
//! - an OpenAI Responses reasoning item (a Responses upstream), which needs two
//!   values to be sent back, its `id` and its `encrypted_content`. They are
//!   packed by [`wrap_reasoning_item`] into one string that
//!   - starts with [`REASONING_ITEM_PREFIX`], so every encoder can tell it from
//!     an Anthropic or Gemini signature and never sends it to a provider that
//!     could not verify it (the Anthropic and Gemini request encoders drop it,
//!     the Responses encoder unpacks it), and
//!   - is canonical standard base64 as a whole (the prefix is 8 base64
//!     characters, i.e. 6 whole bytes), because the google-genai SDKs decode a
//!     `thoughtSignature` into bytes and encode it again, possibly in the
//!     URL-safe alphabet: [`unwrap_reasoning_item`] accepts both alphabets,
//!     with or without padding.
//!
//! In the other direction, a Responses *client* holds reasoning in
//! `encrypted_content`. The Responses codec writes an Anthropic or Gemini
//! signature there behind [`FOREIGN_SIGNATURE_PREFIX`] and an Anthropic
//! `redacted_thinking` payload behind [`FOREIGN_REDACTED_PREFIX`], and strips
//! them when the client sends the item back, so the issuer gets its own value
//! back and an OpenAI upstream is never sent a foreign value as
//! `encrypted_content` (the Responses request encoder drops reasoning whose
//! signature is not a packed reasoning item).

/// Marks a packed Responses reasoning item (8 base64 characters: 6 bytes, no
/// `+`, `/` or padding, so it reads the same in both base64 alphabets).
pub const REASONING_ITEM_PREFIX: &str = "swbRSitm";

/// Marks an Anthropic / Gemini signature written into a Responses client's `encrypted_content`.
pub const FOREIGN_SIGNATURE_PREFIX: &str = "swb-sig:";

/// Marks an Anthropic `redacted_thinking` payload written into a Responses client's `encrypted_content`.
pub const FOREIGN_REDACTED_PREFIX: &str = "swb-redacted:";

/// Separates the id from the encrypted content inside a packed item (never in an id).
const SEPARATOR: u8 = b'\n';

/// Packs a Responses reasoning item's `id` and `encrypted_content` into one
/// signature string (see the module documentation).
pub fn wrap_reasoning_item(id: &str, encrypted_content: &str) -> String {
    let mut payload = Vec::with_capacity(id.len() + 1 + encrypted_content.len());
    payload.extend_from_slice(id.as_bytes());
    payload.push(SEPARATOR);
    payload.extend_from_slice(encrypted_content.as_bytes());
    let mut out = String::with_capacity(REASONING_ITEM_PREFIX.len() + payload.len() / 3 * 4 + 4);
    out.push_str(REASONING_ITEM_PREFIX);
    crate::util::base64::encode(&payload, &mut out);
    out
}

/// True when `signature` is a packed Responses reasoning item.
pub fn is_reasoning_item(signature: &str) -> bool {
    signature.starts_with(REASONING_ITEM_PREFIX)
}

/// Unpacks a signature made by [`wrap_reasoning_item`] into the item's `id`
/// and `encrypted_content`; `None` for any other signature.
pub fn unwrap_reasoning_item(signature: &str) -> Option<(String, String)> {
    let rest = signature.strip_prefix(REASONING_ITEM_PREFIX)?;
    let bytes = crate::util::base64::decode(rest)?;
    let split = bytes.iter().position(|b| *b == SEPARATOR)?;
    let id = std::str::from_utf8(&bytes[..split]).ok()?;
    let content = std::str::from_utf8(&bytes[split + 1..]).ok()?;
    Some((id.to_string(), content.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reasoning_item_survives_both_base64_alphabets() {
        let sig = wrap_reasoning_item("rs_68af0c", "gAAAAABo-_x/y+z==");
        assert!(is_reasoning_item(&sig));
        assert!(sig.len().is_multiple_of(4), "{sig}");
        assert!(
            crate::util::base64::decode(&sig).is_some(),
            "the whole string is base64"
        );
        let want = Some(("rs_68af0c".to_string(), "gAAAAABo-_x/y+z==".to_string()));
        assert_eq!(unwrap_reasoning_item(&sig), want);
        // What a google-genai client sends back after decoding to bytes and
        // encoding URL-safe without padding.
        let url_safe: String = sig
            .trim_end_matches('=')
            .chars()
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                c => c,
            })
            .collect();
        assert_eq!(unwrap_reasoning_item(&url_safe), want);
        assert!(!is_reasoning_item("EqQBCkgIARAB"));
        assert_eq!(unwrap_reasoning_item("EqQBCkgIARAB"), None);
    }

    #[test]
    fn base64_matches_the_standard() {
        let mut s = String::new();
        crate::util::base64::encode(b"Man", &mut s);
        crate::util::base64::encode(b"Ma", &mut s);
        crate::util::base64::encode(b"M", &mut s);
        assert_eq!(s, "TWFuTWE=TQ==");
        assert_eq!(
            crate::util::base64::decode("TWFu").as_deref(),
            Some(&b"Man"[..])
        );
        assert_eq!(
            crate::util::base64::decode("TWE").as_deref(),
            Some(&b"Ma"[..])
        );
        assert_eq!(crate::util::base64::decode("T"), None);
        assert_eq!(crate::util::base64::decode("T*"), None);
        // The prefix alone is six whole bytes.
        assert_eq!(
            crate::util::base64::decode(REASONING_ITEM_PREFIX).map(|b| b.len()),
            Some(6)
        );
    }
}
