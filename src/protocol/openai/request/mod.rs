//! OpenAI chat request codec: wire JSON ⇄ canonical request.
//!
//! - [`decode`](mod@decode): a client's body → the canonical request.
//! - [`encode`](mod@encode): the canonical request → an upstream body.

pub mod decode;
pub mod encode;
pub mod prefill;

pub(crate) use self::decode::decode_content;
pub use self::decode::{decode, from_wire};
pub use self::encode::encode;
pub(crate) use self::encode::{encode_effort, openai_user};
