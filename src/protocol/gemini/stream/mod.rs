//! Gemini `streamGenerateContent` streams: [`Parser`] turns upstream
//! `GenerateContentResponse` chunks into canonical [`StreamEvent`](crate::ir::stream::StreamEvent)s,
//! [`Encoder`] turns canonical events into the chunks a Gemini client reads
//! (SSE, or the JSON array Gemini sends without `alt=sse`).
//!
//! - [`parser`]: upstream SSE → canonical events.
//! - [`encoder`]: canonical events → client SSE.

pub mod encoder;
pub mod parser;

pub use self::encoder::Encoder;
pub use self::parser::Parser;
