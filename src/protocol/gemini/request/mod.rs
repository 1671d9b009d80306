//! Gemini generateContent request codec: wire JSON ⇄ canonical request, plus
//! the Gemini-specific helpers the response and stream codecs share.
//!
//! - [`call_id`]: synthetic tool-call ids and thought signatures carried inside ids.
//! - [`schema`]: JSON Schema ⇄ Gemini's OpenAPI-subset schema.
//! - [`function_response`]: a tool result's text ⇄ `functionResponse.response`.
//! - [`decode`](mod@decode): a client's body → the canonical request.
//! - [`encode`](mod@encode): the canonical request → an upstream body.

pub mod call_id;
pub mod decode;
pub mod encode;
pub mod function_response;
pub mod prefill;
pub mod schema;

pub use self::call_id::{
    embed_signature, split_call_id, synthetic_call_id, wire_call_id, SYNTHETIC_ID_PREFIX,
};
pub(crate) use self::decode::decode_part;
pub use self::decode::{decode, from_wire};
pub(crate) use self::encode::encode_part;
pub use self::encode::{encode, tool_result_response};
pub use self::schema::{from_gemini_schema, to_gemini_schema};
