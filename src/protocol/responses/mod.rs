//! The `responses` wire protocol (family D, the OpenAI Responses API).

pub mod error;
pub mod request;
pub mod response;
pub mod stream;
pub mod wire;
