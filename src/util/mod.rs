//! Leaf helpers, each written once and used across the gateway: the global
//! allocator (mimalloc), byte-preserving
//! JSON edits, the nesting-depth scan, JSON text valid by construction,
//! JSON strings and numbers written by hand, RFC 3339 and HTTP dates, body pieces
//! gathered into one buffer, base64, hex and percent-decoding, the affinity hash,
//! word-at-a-time byte search, optional strings serde borrows.
//!
//! May import: nothing of ours.

pub mod allocator;
pub mod base64;
pub mod gather;
pub mod h1_body;
pub mod hash;
pub mod hex;
pub mod json_depth;
pub mod json_text;
pub mod json_write;
pub mod jsonedit;
pub mod percent;
pub mod rfc3339;
pub mod serde_str;
pub mod words;
