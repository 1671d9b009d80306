//! Each family's stream parser (upstream SSE events → canonical events) and
//! encoder (canonical events → client bytes), picked by family: the enum
//! dispatch over the spokes' `stream/` codecs, like `decode_request` and friends
//! for whole bodies.

use crate::family::Family;
use crate::ir::stream::StreamEvent;
use crate::protocol::common::framing::{Framing, StreamFault};
use crate::protocol::{anthropic, bedrock, gemini, openai, responses};

/// An upstream family's stream parser (enum dispatch).
#[derive(Debug)]
pub enum Parser {
    /// Upstream OpenAI chunks.
    OpenAi(openai::stream::Parser),
    /// Upstream Anthropic events.
    Anthropic(anthropic::stream::Parser),
    /// Upstream Gemini chunks.
    Gemini(gemini::stream::Parser),
    /// Upstream Responses events.
    Responses(responses::stream::Parser),
    /// Upstream ConverseStream events.
    Bedrock(bedrock::stream::Parser),
}

impl Parser {
    /// The parser for streams of `family`.
    pub fn new(family: Family) -> Self {
        match family {
            Family::OpenAi => Parser::OpenAi(openai::stream::Parser::new()),
            Family::Anthropic => Parser::Anthropic(anthropic::stream::Parser::new()),
            Family::Gemini => Parser::Gemini(gemini::stream::Parser::new()),
            Family::Responses => Parser::Responses(responses::stream::Parser::new()),
            Family::Bedrock => Parser::Bedrock(bedrock::stream::Parser::new()),
        }
    }

    /// Reads one upstream SSE event, handing canonical events to `emit`.
    pub fn push(
        &mut self,
        event: &crate::sse::SseEvent<'_>,
        emit: &mut dyn FnMut(&StreamEvent),
    ) -> Result<(), StreamFault> {
        match self {
            Parser::OpenAi(p) => p.push(event, emit),
            Parser::Anthropic(p) => p.push(event, emit),
            Parser::Gemini(p) => p.push(event, emit),
            Parser::Responses(p) => p.push(event, emit),
            Parser::Bedrock(p) => p.push(event, emit),
        }
    }

    /// Whether the upstream's terminal event (or an in-band error) has been read.
    pub fn is_complete(&self) -> bool {
        match self {
            Parser::OpenAi(p) => p.is_complete(),
            Parser::Anthropic(p) => p.is_complete(),
            Parser::Gemini(p) => p.is_complete(),
            Parser::Responses(p) => p.is_complete(),
            Parser::Bedrock(p) => p.is_complete(),
        }
    }

    /// The upstream body ended: emits what the end means, or says it was truncated.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&StreamEvent)) -> Result<(), StreamFault> {
        match self {
            Parser::OpenAi(p) => p.finish(emit),
            Parser::Anthropic(p) => p.finish(emit),
            Parser::Gemini(p) => p.finish(emit),
            Parser::Responses(p) => p.finish(emit),
            Parser::Bedrock(p) => p.finish(emit),
        }
    }
}

/// A client family's stream encoder (enum dispatch).
#[derive(Debug)]
pub enum Encoder {
    /// OpenAI `chat.completion.chunk`s.
    OpenAi(openai::stream::Encoder),
    /// Anthropic events.
    Anthropic(anthropic::stream::Encoder),
    /// Gemini chunks (SSE or JSON array).
    Gemini(gemini::stream::Encoder),
    /// Responses events.
    Responses(responses::stream::Encoder),
    /// ConverseStream event-stream messages.
    Bedrock(bedrock::stream::Encoder),
}

impl Encoder {
    /// The encoder for clients of `family`.
    pub fn new(
        family: Family,
        framing: Framing,
        client_model: &str,
        include_usage: bool,
        created: u64,
    ) -> Self {
        match family {
            Family::OpenAi => Encoder::OpenAi(openai::stream::Encoder::new(
                client_model,
                include_usage,
                created,
            )),
            Family::Anthropic => Encoder::Anthropic(anthropic::stream::Encoder::new(client_model)),
            Family::Gemini => Encoder::Gemini(gemini::stream::Encoder::new(client_model, framing)),
            Family::Responses => {
                Encoder::Responses(responses::stream::Encoder::new(client_model, created))
            }
            Family::Bedrock => Encoder::Bedrock(bedrock::stream::Encoder::new()),
        }
    }

    /// Writes what `event` means for the client.
    pub fn event(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        match self {
            Encoder::OpenAi(e) => e.event(event, out),
            Encoder::Anthropic(e) => e.event(event, out),
            Encoder::Gemini(e) => e.event(event, out),
            Encoder::Responses(e) => e.event(event, out),
            Encoder::Bedrock(e) => e.event(event, out),
        }
    }

    /// Forwards an upstream SSE comment (keep-alive) where the framing allows.
    pub fn comment(&mut self, text: &[u8], out: &mut Vec<u8>) {
        match self {
            Encoder::OpenAi(e) => e.comment(text, out),
            Encoder::Anthropic(e) => e.comment(text, out),
            Encoder::Gemini(e) => e.comment(text, out),
            Encoder::Responses(e) => e.comment(text, out),
            Encoder::Bedrock(e) => e.comment(text, out),
        }
    }

    /// Ends the stream with the family's error event carrying `error_body`.
    pub fn fail(&mut self, error_body: &[u8], out: &mut Vec<u8>) {
        match self {
            Encoder::OpenAi(e) => e.fail(error_body, out),
            Encoder::Anthropic(e) => e.fail(error_body, out),
            Encoder::Gemini(e) => e.fail(error_body, out),
            Encoder::Responses(e) => e.fail(error_body, out),
            Encoder::Bedrock(e) => e.fail(error_body, out),
        }
    }

    /// Closes the framing after the last event (the JSON array's `]`).
    pub fn close(&mut self, out: &mut Vec<u8>) {
        if let Encoder::Gemini(e) = self {
            e.close(out);
        }
    }

    /// True once the stream has ended (normally or with an error event).
    pub fn is_ended(&self) -> bool {
        match self {
            Encoder::OpenAi(e) => e.is_ended(),
            Encoder::Anthropic(e) => e.is_ended(),
            Encoder::Gemini(e) => e.is_ended(),
            Encoder::Responses(e) => e.is_ended(),
            Encoder::Bedrock(e) => e.is_ended(),
        }
    }
}
