//! Bedrock Converse requests: `decode.rs` (client body → IR), `encode.rs`
//! (IR → upstream body), `prefill.rs` (a cut answer's continuation).

pub mod decode;
pub mod encode;
pub mod prefill;

pub use decode::decode;
pub use encode::encode;
