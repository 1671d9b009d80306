//! Anthropic Messages streams: [`Parser`] turns upstream events into canonical
//! [`StreamEvent`](crate::ir::stream::StreamEvent)s, [`Encoder`] turns canonical events into the event
//! sequence an Anthropic client reads.
//!
//! - [`parser`]: upstream SSE → canonical events.
//! - [`encoder`]: canonical events → client SSE.

pub mod encoder;
pub mod parser;

pub use self::encoder::Encoder;
pub use self::parser::Parser;

/// The kind of an open content block, tracked by both the parser and the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    Call,
    /// Whole at its start (redacted thinking, opaque): deltas are dropped.
    Whole,
}
