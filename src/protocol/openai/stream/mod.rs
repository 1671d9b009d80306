//! OpenAI chat-completions streams: [`Parser`] turns upstream
//! `chat.completion.chunk` frames into canonical [`StreamEvent`](crate::ir::stream::StreamEvent)s, [`Encoder`]
//! turns canonical events into the chunks an OpenAI client reads.
//!
//! - [`parser`]: upstream SSE → canonical events.
//! - [`encoder`]: canonical events → client SSE.

pub mod encoder;
pub mod parser;

pub use self::encoder::Encoder;
pub use self::parser::Parser;
