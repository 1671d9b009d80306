//! What the four spokes share, and the only part of `protocol/` they import:
//! the [`Spoke`](spoke::Spoke) table type, the codec inputs
//! ([`DecodeContext`], [`EncodeOptions`]) and the one error type
//! ([`TranslateError`]), serde helpers for wire types (`json`), request and
//! response peeks ([`peek`], with the validating [`skim`] of a stream frame's
//! top-level members), HTTP addressing ([`http`]), stream framing and
//! faults ([`framing`]), stream codec helpers ([`support`], and [`repeat`]: a
//! frame that repeats the last but for its text), OpenAI's strict-schema rules
//! ([`strict`]) and the report of what a translation could not carry (`report`).
//!
//! Nothing here imports a spoke or the registry.

pub mod framing;
pub mod http;
pub(crate) mod json;
pub mod options;
pub mod peek;
pub mod prefill;
pub mod repeat;
pub(crate) mod report;
pub mod skim;
pub mod spoke;
pub mod strict;
pub mod support;
pub mod translate_error;

pub use options::{DecodeContext, EncodeOptions};
pub use translate_error::{TranslateError, TranslateErrorKind};
