//! OpenAI Responses streams: [`Parser`] turns an upstream's Responses events
//! into canonical [`StreamEvent`](crate::ir::stream::StreamEvent)s, [`Encoder`] turns canonical events into
//! the events a Responses client reads.
//!
//! - [`parser`]: upstream SSE → canonical events.
//! - `custom_input`: a custom tool's input escaped into / unescaped from
//!   its JSON arguments as it streams.
//! - [`encoder`]: canonical events → client SSE.

pub(crate) mod custom_input;
pub mod encoder;
pub mod parser;
#[cfg(test)]
mod tests;

pub use self::encoder::{passthrough_failure, Encoder};
pub use self::parser::Parser;
