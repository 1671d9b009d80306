//! Anthropic Messages request codec: wire JSON ⇄ canonical request.
//!
//! - [`decode`](mod@decode): a client's body → the canonical request.
//! - [`encode`](mod@encode): the canonical request → an upstream body.

pub mod decode;
pub mod encode;
pub mod prefill;

pub(crate) use self::decode::decode_block;
pub use self::decode::{decode, from_wire};
pub(crate) use self::encode::encode_block;
pub use self::encode::{encode, response_format_instruction};
