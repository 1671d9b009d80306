//! Bedrock ConverseStream: [`Parser`] turns upstream events (event-stream
//! messages, handed over as [`SseEvent`](crate::sse::SseEvent)s whose name is
//! the `:event-type` or `:exception-type` header and whose data is the JSON
//! payload) into canonical events; [`Encoder`] writes canonical events as
//! the event-stream messages a Converse client reads.
//!
//! - [`parser`]: upstream events → canonical events.
//! - [`encoder`]: canonical events → client event-stream messages.

pub mod encoder;
pub mod parser;

pub use self::encoder::Encoder;
pub use self::parser::Parser;
