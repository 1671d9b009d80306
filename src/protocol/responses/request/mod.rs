//! Responses request codec: wire JSON ⇄ canonical request.
//!
//! - [`custom`]: `custom` tools as function tools with one string argument.
//! - `reasoning`: what a reasoning item's `encrypted_content` stands for.
//! - [`decode`](mod@decode): a client's body → the canonical request.
//! - `flatten`: `namespace` tools as flat-named function tools.
//! - [`encode`](mod@encode): the canonical request → an upstream body.

pub mod custom;
pub mod decode;
pub mod encode;
mod flatten;
pub mod prefill;
pub(crate) mod reasoning;
#[cfg(test)]
mod tests;

pub use self::custom::{custom_arguments, custom_input, custom_parameters, CUSTOM_INPUT_KEY};
pub(crate) use self::decode::decode_reasoning_item;
pub use self::decode::{decode, from_wire};
pub use self::encode::encode;
pub(crate) use self::reasoning::{carried, Carried};
