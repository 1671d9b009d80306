//! Anthropic Messages request codec: wire JSON ⇄ canonical request.
//!
//! - [`decode`](mod@decode): a client's body → the canonical request.
//! - [`encode`](mod@encode): the canonical request → an upstream body.
//! - [`structured`](mod@structured): structured output as `output_config.format`,
//!   strict tools, or the prompt instruction.

pub mod decode;
pub mod encode;
pub mod prefill;
pub mod structured;

pub(crate) use self::decode::decode_block;
pub use self::decode::{decode, from_wire};
pub use self::encode::encode;
pub(crate) use self::encode::encode_block;
pub use self::structured::instruction as response_format_instruction;
