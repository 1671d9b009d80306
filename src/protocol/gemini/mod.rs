//! The `gemini` wire protocol.

pub mod error;
pub mod models;
pub mod request;
pub mod response;
pub mod stream;
pub mod wire;
