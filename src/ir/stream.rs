//! Canonical stream events: what every stream parser emits and every stream
//! encoder consumes, with their grammar, a checker for it, an accumulator that
//! folds a stream back into a [`ChatResponse`], and the reverse
//! ([`response_to_events`]).
//!
//! # Grammar
//!
//! ```text
//! stream := MessageStart item* (MessageStop | Error)
//!         | Error                                   (failure before anything was produced)
//! item   := block | MessageDelta | Ping
//! block  := BlockStart(i) (BlockDelta(i) | Ping)* BlockStop(i)
//! ```
//!
//! - Block indices are 0, 1, 2, … in order; at most one block is open at a
//!   time (an OpenAI parser that sees interleaved tool-call deltas must
//!   buffer). This is the Anthropic discipline and every encoder can follow it.
//! - Deltas must fit the open block: [`BlockDelta::Text`] in a text block,
//!   [`BlockDelta::Thinking`] in a thinking block, [`BlockDelta::ToolArguments`]
//!   (fragments of the JSON arguments text, concatenated in order) in a tool
//!   call, [`BlockDelta::Signature`] (appended) in a text, thinking or tool-call
//!   block (Gemini puts `thoughtSignature` on any part). Redacted thinking,
//!   image and opaque blocks are whole at their start and take no deltas.
//! - [`MessageDelta`] may come several times, only between blocks. A stop
//!   reason, once given, stays unless a later one replaces it; usage is the
//!   cumulative total so far (a later usage replaces the earlier one, field by
//!   field where the later one has a value).
//! - [`StreamEvent::Error`] ends the stream at any point, including mid-block:
//!   encoders turn it into the client family's error event, never into a
//!   normal end.

use super::content::{
    Block, ImageBlock, Opaque, RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolCall,
};
use super::extra::Extra;
use super::response::{ChatResponse, StopReason, Usage};
use serde_json::Value;
use std::fmt;

/// One canonical stream event.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The message begins.
    MessageStart(MessageStart),
    /// A content block begins.
    BlockStart {
        /// Block index (0, 1, 2, … in order).
        index: usize,
        /// What kind of block, with what is known at its start.
        block: BlockStart,
    },
    /// A fragment of the open block.
    BlockDelta {
        /// Index of the open block.
        index: usize,
        /// The fragment.
        delta: BlockDelta,
    },
    /// The open block is complete.
    BlockStop {
        /// Index of the block.
        index: usize,
    },
    /// Stop reason and/or usage so far.
    MessageDelta(MessageDelta),
    /// The message is complete (normal end).
    MessageStop,
    /// Keep-alive; carries nothing.
    Ping,
    /// The stream failed; nothing follows.
    Error(StreamError),
}

/// What is known when a message starts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MessageStart {
    /// Upstream message id (may be empty).
    pub id: String,
    /// Upstream model name (may be empty).
    pub model: String,
    /// Creation time, unix seconds, when the upstream said.
    pub created: Option<u64>,
    /// Usage known at the start (Anthropic reports input tokens here).
    pub usage: Option<Usage>,
}

/// The start of a content block.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockStart {
    /// Text follows in [`BlockDelta::Text`].
    Text,
    /// Reasoning follows in [`BlockDelta::Thinking`], its signature in [`BlockDelta::Signature`].
    Thinking,
    /// Encrypted reasoning, whole.
    RedactedThinking {
        /// The encrypted payload.
        data: String,
    },
    /// A tool call; its JSON arguments follow in [`BlockDelta::ToolArguments`] fragments.
    ToolCall {
        /// The call id.
        id: String,
        /// The function name.
        name: String,
    },
    /// An image, whole (Gemini image output).
    Image(ImageBlock),
    /// A protocol-specific block, whole.
    Opaque(Opaque),
}

impl BlockStart {
    fn kind(&self) -> &'static str {
        match self {
            BlockStart::Text => "text",
            BlockStart::Thinking => "thinking",
            BlockStart::RedactedThinking { .. } => "redacted thinking",
            BlockStart::ToolCall { .. } => "tool call",
            BlockStart::Image(_) => "image",
            BlockStart::Opaque(_) => "opaque",
        }
    }
}

/// A fragment of the open block.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockDelta {
    /// More text.
    Text(String),
    /// More reasoning text.
    Thinking(String),
    /// (Part of) the block's signature: Anthropic `signature_delta`, Gemini `thoughtSignature`.
    Signature(String),
    /// A fragment of a tool call's JSON arguments text (OpenAI argument
    /// deltas, Anthropic `input_json_delta`, a whole Gemini `args` object serialized).
    ToolArguments(String),
}

impl BlockDelta {
    fn kind(&self) -> &'static str {
        match self {
            BlockDelta::Text(_) => "text",
            BlockDelta::Thinking(_) => "thinking",
            BlockDelta::Signature(_) => "signature",
            BlockDelta::ToolArguments(_) => "tool arguments",
        }
    }

    fn fits(&self, block: &BlockStart) -> bool {
        matches!(
            (self, block),
            (BlockDelta::Text(_), BlockStart::Text)
                | (BlockDelta::Thinking(_), BlockStart::Thinking)
                | (BlockDelta::ToolArguments(_), BlockStart::ToolCall { .. })
                | (
                    BlockDelta::Signature(_),
                    BlockStart::Text | BlockStart::Thinking | BlockStart::ToolCall { .. }
                )
        )
    }
}

/// Stop reason and/or usage, mid-stream or at its end.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MessageDelta {
    /// Why generation stopped, once known.
    pub stop_reason: Option<StopReason>,
    /// Cumulative usage so far.
    pub usage: Option<Usage>,
}

/// A stream failure, rendered by the client encoder as its family's error event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamError {
    /// What went wrong, in canonical terms.
    pub kind: StreamErrorKind,
    /// A human-readable explanation.
    pub message: String,
}

/// Canonical error kinds (each family's encoder maps them to its own error types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamErrorKind {
    /// The request was rejected (400).
    InvalidRequest,
    /// Authentication failed (401).
    Authentication,
    /// Not allowed (403).
    Permission,
    /// Not found (404).
    NotFound,
    /// Rate limited (429).
    RateLimited,
    /// The upstream is overloaded (529 / 503).
    Overloaded,
    /// The upstream failed (500).
    Api,
    /// The upstream timed out (504).
    Timeout,
    /// The upstream sent something that cannot be parsed or translated (502).
    InvalidUpstream,
}

/// A violation of the stream grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrammarError(pub String);

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GrammarError {}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    BeforeStart,
    Running,
    Done,
}

/// Checks a sequence of events against the grammar (for parser and encoder tests).
#[derive(Debug, Clone)]
pub struct GrammarChecker {
    phase: Phase,
    next_index: usize,
    open: Option<(usize, BlockStart)>,
}

impl Default for GrammarChecker {
    fn default() -> Self {
        GrammarChecker {
            phase: Phase::BeforeStart,
            next_index: 0,
            open: None,
        }
    }
}

impl GrammarChecker {
    /// A checker at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the stream has ended (normally or with an error).
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Accepts the next event or says why it breaks the grammar.
    pub fn push(&mut self, event: &StreamEvent) -> Result<(), GrammarError> {
        let fail = |m: String| Err(GrammarError(m));
        if self.phase == Phase::Done {
            return fail(format!("event after the end of the stream: {event:?}"));
        }
        if let StreamEvent::Error(_) = event {
            self.phase = Phase::Done;
            return Ok(());
        }
        if self.phase == Phase::BeforeStart {
            return match event {
                StreamEvent::MessageStart(_) => {
                    self.phase = Phase::Running;
                    Ok(())
                }
                other => fail(format!(
                    "the stream must begin with MessageStart, got {other:?}"
                )),
            };
        }
        match event {
            StreamEvent::MessageStart(_) => fail("a second MessageStart".into()),
            StreamEvent::Ping | StreamEvent::Error(_) => Ok(()),
            StreamEvent::BlockStart { index, block } => {
                if let Some((open, _)) = &self.open {
                    return fail(format!("block {index} starts while block {open} is open"));
                }
                if *index != self.next_index {
                    return fail(format!(
                        "block index {index} out of order (expected {})",
                        self.next_index
                    ));
                }
                self.open = Some((*index, block.clone()));
                self.next_index += 1;
                Ok(())
            }
            StreamEvent::BlockDelta { index, delta } => match &self.open {
                Some((open, block)) if open == index => {
                    if delta.fits(block) {
                        Ok(())
                    } else {
                        fail(format!(
                            "a {} delta in a {} block",
                            delta.kind(),
                            block.kind()
                        ))
                    }
                }
                _ => fail(format!("delta for block {index}, which is not open")),
            },
            StreamEvent::BlockStop { index } => match &self.open {
                Some((open, _)) if open == index => {
                    self.open = None;
                    Ok(())
                }
                _ => fail(format!("stop for block {index}, which is not open")),
            },
            StreamEvent::MessageDelta(_) => match &self.open {
                Some((open, _)) => fail(format!("MessageDelta while block {open} is open")),
                None => Ok(()),
            },
            StreamEvent::MessageStop => match &self.open {
                Some((open, _)) => fail(format!("MessageStop while block {open} is open")),
                None => {
                    self.phase = Phase::Done;
                    Ok(())
                }
            },
        }
    }
}

/// Merges a later cumulative usage into an earlier one, field by field.
pub fn merge_usage(earlier: Option<Usage>, later: &Usage) -> Usage {
    let Some(mut u) = earlier else {
        return later.clone();
    };
    // Cumulative: the input never shrinks (an Anthropic `message_delta`
    // may repeat `input_tokens` without `message_start`'s cache counts).
    if later.input_tokens > u.input_tokens {
        u.input_tokens = later.input_tokens;
    }
    if later.output_tokens != 0 {
        u.output_tokens = later.output_tokens;
    }
    u.total_tokens = later.total_tokens.or(u.total_tokens);
    u.cache_read_tokens = later.cache_read_tokens.or(u.cache_read_tokens);
    u.cache_creation_tokens = later.cache_creation_tokens.or(u.cache_creation_tokens);
    u.cache_write_1h_tokens = later.cache_write_1h_tokens.or(u.cache_write_1h_tokens);
    u.reasoning_tokens = later.reasoning_tokens.or(u.reasoning_tokens);
    if !later.extra.is_empty() {
        u.extra = later.extra.clone();
    }
    u
}

#[derive(Debug, Clone)]
enum Building {
    Text(TextBlock),
    Thinking(ThinkingBlock),
    Call { call: ToolCall, args: String },
    Whole(Block),
}

/// Folds a stream of events into the [`ChatResponse`] it describes (the
/// non-streaming equivalent). Tolerant: it does not check the grammar.
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    response: ChatResponse,
    open: Option<Building>,
    error: Option<StreamError>,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event into account.
    pub fn push(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::MessageStart(start) => {
                self.response.id.clone_from(&start.id);
                self.response.model.clone_from(&start.model);
                self.response.created = start.created;
                if let Some(usage) = &start.usage {
                    self.response.usage = Some(merge_usage(self.response.usage.take(), usage));
                }
            }
            StreamEvent::BlockStart { block, .. } => {
                self.close();
                self.open = Some(match block {
                    BlockStart::Text => Building::Text(TextBlock::default()),
                    BlockStart::Thinking => Building::Thinking(ThinkingBlock::default()),
                    BlockStart::RedactedThinking { data } => {
                        Building::Whole(Block::RedactedThinking(RedactedThinkingBlock {
                            data: data.clone(),
                            extra: Extra::default(),
                        }))
                    }
                    BlockStart::ToolCall { id, name } => Building::Call {
                        call: ToolCall {
                            id: id.clone(),
                            name: name.clone(),
                            arguments: Value::Null,
                            signature: None,
                            cache_control: None,
                            extra: Extra::default(),
                        },
                        args: String::new(),
                    },
                    BlockStart::Image(image) => Building::Whole(Block::Image(image.clone())),
                    BlockStart::Opaque(opaque) => Building::Whole(Block::Opaque(opaque.clone())),
                });
            }
            StreamEvent::BlockDelta { delta, .. } => match (&mut self.open, delta) {
                (Some(Building::Text(t)), BlockDelta::Text(s)) => t.text.push_str(s),
                (Some(Building::Thinking(t)), BlockDelta::Thinking(s)) => t.text.push_str(s),
                (Some(Building::Call { args, .. }), BlockDelta::ToolArguments(s)) => {
                    args.push_str(s);
                }
                (Some(Building::Text(t)), BlockDelta::Signature(s)) => {
                    t.signature.get_or_insert_with(String::new).push_str(s);
                }
                (Some(Building::Thinking(t)), BlockDelta::Signature(s)) => {
                    t.signature.get_or_insert_with(String::new).push_str(s);
                }
                (Some(Building::Call { call, .. }), BlockDelta::Signature(s)) => {
                    call.signature.get_or_insert_with(String::new).push_str(s);
                }
                _ => {}
            },
            StreamEvent::BlockStop { .. } => self.close(),
            StreamEvent::MessageDelta(delta) => {
                if let Some(reason) = &delta.stop_reason {
                    self.response.stop_reason = Some(reason.clone());
                }
                if let Some(usage) = &delta.usage {
                    self.response.usage = Some(merge_usage(self.response.usage.take(), usage));
                }
            }
            // The grammar allows pings inside a block (Anthropic sends one there):
            // they carry nothing and must not close the open block.
            StreamEvent::Ping => {}
            StreamEvent::MessageStop => self.close(),
            StreamEvent::Error(error) => {
                self.close();
                self.error = Some(error.clone());
            }
        }
    }

    fn close(&mut self) {
        let Some(building) = self.open.take() else {
            return;
        };
        let block = match building {
            Building::Text(t) => Block::Text(t),
            Building::Thinking(t) => Block::Thinking(t),
            Building::Call { mut call, args } => {
                call.arguments = parse_arguments(&args);
                Block::ToolCall(call)
            }
            Building::Whole(block) => block,
        };
        self.response.content.push(block);
    }

    /// The error that ended the stream, if one did.
    pub fn error(&self) -> Option<&StreamError> {
        self.error.as_ref()
    }

    /// The response so far (closing any open block).
    pub fn finish(mut self) -> ChatResponse {
        self.close();
        self.response
    }
}

/// Parses tool-call argument text: empty means `{}`, invalid JSON is kept as
/// a JSON string holding the raw text.
pub fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// The argument text of a tool call (the inverse of [`parse_arguments`]).
pub fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// The events a stream of `response` would consist of (one delta per block).
/// Tool results never occur in responses and are skipped.
pub fn response_to_events(response: &ChatResponse) -> Vec<StreamEvent> {
    let mut events = vec![StreamEvent::MessageStart(MessageStart {
        id: response.id.clone(),
        model: response.model.clone(),
        created: response.created,
        usage: None,
    })];
    let mut index = 0;
    for block in &response.content {
        let (start, deltas): (BlockStart, Vec<BlockDelta>) = match block {
            Block::Text(t) => {
                let mut d = vec![BlockDelta::Text(t.text.clone())];
                d.extend(t.signature.clone().map(BlockDelta::Signature));
                (BlockStart::Text, d)
            }
            Block::Thinking(t) => {
                let mut d = vec![BlockDelta::Thinking(t.text.clone())];
                d.extend(t.signature.clone().map(BlockDelta::Signature));
                (BlockStart::Thinking, d)
            }
            Block::RedactedThinking(r) => (
                BlockStart::RedactedThinking {
                    data: r.data.clone(),
                },
                vec![],
            ),
            Block::ToolCall(c) => {
                let mut d = vec![BlockDelta::ToolArguments(arguments_text(&c.arguments))];
                d.extend(c.signature.clone().map(BlockDelta::Signature));
                (
                    BlockStart::ToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                    },
                    d,
                )
            }
            Block::Image(i) => (BlockStart::Image(i.clone()), vec![]),
            Block::Opaque(o) => (BlockStart::Opaque(o.clone()), vec![]),
            Block::ToolResult(_) => continue,
        };
        events.push(StreamEvent::BlockStart {
            index,
            block: start,
        });
        events.extend(
            deltas
                .into_iter()
                .map(|delta| StreamEvent::BlockDelta { index, delta }),
        );
        events.push(StreamEvent::BlockStop { index });
        index += 1;
    }
    events.push(StreamEvent::MessageDelta(MessageDelta {
        stop_reason: response.stop_reason.clone(),
        usage: response.usage.clone(),
    }));
    events.push(StreamEvent::MessageStop);
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> ChatResponse {
        ChatResponse {
            id: "msg_1".into(),
            model: "m".into(),
            created: None,
            content: vec![
                Block::Thinking(ThinkingBlock {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                    extra: Extra::default(),
                }),
                Block::text("hello"),
                Block::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments: json!({"a": 1}),
                    signature: None,
                    cache_control: None,
                    extra: Extra::default(),
                }),
            ],
            stop_reason: Some(StopReason::ToolUse),
            usage: Some(Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Usage::default()
            }),
            extra: Extra::default(),
            choice_extra: Extra::default(),
        }
    }

    #[test]
    fn events_follow_grammar_and_fold_back() {
        let resp = sample();
        let events = response_to_events(&resp);
        let mut checker = GrammarChecker::new();
        let mut acc = Accumulator::new();
        for e in &events {
            assert_eq!(checker.push(e), Ok(()), "{e:?}");
            acc.push(e);
        }
        assert!(checker.is_done());
        assert_eq!(acc.finish(), resp);
    }

    #[test]
    fn a_ping_inside_a_block_loses_nothing() {
        let resp = sample();
        let events = response_to_events(&resp);
        let mut acc = Accumulator::new();
        for e in &events {
            acc.push(e);
            if matches!(
                e,
                StreamEvent::BlockDelta { .. } | StreamEvent::BlockStart { .. }
            ) {
                acc.push(&StreamEvent::Ping);
            }
        }
        assert_eq!(acc.finish(), resp);
    }

    #[test]
    fn grammar_rejects_bad_sequences() {
        let start = StreamEvent::MessageStart(MessageStart::default());
        let mut c = GrammarChecker::new();
        assert!(c.push(&StreamEvent::MessageStop).is_err());

        let mut c = GrammarChecker::new();
        assert!(c.push(&start).is_ok());
        assert!(c
            .push(&StreamEvent::BlockStart {
                index: 1,
                block: BlockStart::Text
            })
            .is_err());

        let mut c = GrammarChecker::new();
        assert!(c.push(&start).is_ok());
        let text = StreamEvent::BlockStart {
            index: 0,
            block: BlockStart::Text,
        };
        assert!(c.push(&text).is_ok());
        assert!(c
            .push(&StreamEvent::BlockDelta {
                index: 0,
                delta: BlockDelta::ToolArguments("{".into())
            })
            .is_err());
        assert!(c.push(&StreamEvent::MessageStop).is_err());
        assert!(c
            .push(&StreamEvent::Error(StreamError {
                kind: StreamErrorKind::Api,
                message: "boom".into()
            }))
            .is_ok());
        assert!(c.is_done());
        assert!(c.push(&StreamEvent::Ping).is_err());
    }

    #[test]
    fn arguments_fragments_accumulate() {
        let mut acc = Accumulator::new();
        acc.push(&StreamEvent::MessageStart(MessageStart::default()));
        acc.push(&StreamEvent::BlockStart {
            index: 0,
            block: BlockStart::ToolCall {
                id: "x".into(),
                name: "f".into(),
            },
        });
        for frag in ["{\"ci", "ty\": \"Pa", "ris\"}"] {
            acc.push(&StreamEvent::BlockDelta {
                index: 0,
                delta: BlockDelta::ToolArguments(frag.into()),
            });
        }
        acc.push(&StreamEvent::BlockStop { index: 0 });
        let resp = acc.finish();
        assert!(
            matches!(&resp.content[0], Block::ToolCall(c) if c.arguments == json!({"city": "Paris"}))
        );
    }

    #[test]
    fn usage_merges_field_by_field() {
        let start = Usage {
            input_tokens: 10,
            cache_read_tokens: Some(4),
            ..Usage::default()
        };
        let end = Usage {
            output_tokens: 7,
            ..Usage::default()
        };
        let merged = merge_usage(Some(start), &end);
        assert_eq!(merged.input_tokens, 10);
        assert_eq!(merged.output_tokens, 7);
        assert_eq!(merged.cache_read_tokens, Some(4));
    }
}
