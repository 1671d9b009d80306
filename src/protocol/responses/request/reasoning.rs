//! Responses reasoning items in the canonical model: what an item's
//! `encrypted_content` stands for ([`Carried`]) and the text of its parts.
//! Used by the decoder, the encoder and the stream parser.

use crate::ir::signature::{
    wrap_reasoning_item, FOREIGN_REDACTED_PREFIX, FOREIGN_SIGNATURE_PREFIX,
};
use crate::protocol::responses::wire::Part;

/// Joins the texts of reasoning parts.
pub(super) fn joined(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
    texts.join("\n\n")
}

/// What a reasoning item's `encrypted_content` stands for in the canonical model.
pub(crate) enum Carried {
    /// A thinking signature: an Anthropic / Gemini one this gateway wrapped,
    /// or the item itself, packed (see [`crate::ir::signature`]).
    Signature(String),
    /// Anthropic redacted thinking this gateway wrapped.
    Redacted(String),
}

/// Reads a reasoning item's `encrypted_content`.
pub(crate) fn carried(id: &str, encrypted: &str) -> Carried {
    if let Some(data) = encrypted.strip_prefix(FOREIGN_REDACTED_PREFIX) {
        return Carried::Redacted(data.to_string());
    }
    match encrypted.strip_prefix(FOREIGN_SIGNATURE_PREFIX) {
        Some(native) => Carried::Signature(native.to_string()),
        None => Carried::Signature(wrap_reasoning_item(id, encrypted)),
    }
}
