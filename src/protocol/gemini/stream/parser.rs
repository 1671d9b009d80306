//! Gemini stream parser: upstream SSE events → canonical [`StreamEvent`]s.
//!
//! The first chunk starts the message (`responseId`, `modelVersion`). Parts
//! of the first candidate are read in order: text parts extend an open text
//! block, `thought: true` parts an open thinking block, and a part's
//! `thoughtSignature` is that block's signature, after which the block is
//! closed (the next part starts a new one). A `functionCall` part is a whole
//! tool call: start, its `args` serialized as one arguments fragment, its
//! signature, stop. Calls without an id get a stable synthetic one (as the
//! non-streaming decoder does), and a thought signature travels inside the
//! id as well, so a client of another protocol hands it back. `inlineData`
//! is an image block; other parts are opaque blocks. Usage (sent on many
//! chunks, cumulative) is held and sent with the stop reason; `finishReason`
//! (or a `promptFeedback.blockReason`) gives the stop reason. Gemini has no
//! end event: the end of the upstream body after a finish reason ends the
//! message, without one it is a truncation.

use crate::family::Family;
use crate::ir::stream::{BlockStart, MessageDelta, MessageStart, StreamError, StreamEvent};
use crate::ir::Extra;
use crate::ir::{ImageBlock, ImageSource, Opaque, StopReason, Usage};
use crate::protocol::common::framing::{check_utf8, StreamFault};
use crate::protocol::common::support::{
    error_kind, error_kind_for_status, malformed, unreadable, DeltaBuf, DeltaKind, Emit, First,
    Indexed,
};
use crate::protocol::gemini::request::{embed_signature, synthetic_call_id};
use crate::protocol::gemini::response::{decode_finish_reason, decode_usage};
use crate::protocol::gemini::wire::UsageMetadata;
use crate::sse::SseEvent;
use crate::util::serde_str::opt_str;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

const F: Family = Family::Gemini;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(borrow, default)]
    candidates: First<Candidate<'a>>,
    #[serde(borrow, default)]
    usage_metadata: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    model_version: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    response_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(borrow, default)]
    error: Option<ErrorObject<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    finish_reason: Option<Cow<'a, str>>,
}

impl Indexed for Candidate<'_> {
    fn index(&self) -> Option<u64> {
        self.index
    }
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    parts: Parts<'a>,
}

/// A candidate's parts, unparsed; the first two (a chunk has one or two in
/// practice) are kept without allocating.
#[derive(Default)]
struct Parts<'a> {
    inline: [Option<&'a RawValue>; 2],
    more: Vec<&'a RawValue>,
}

impl<'a> Parts<'a> {
    fn iter(&self) -> impl Iterator<Item = &'a RawValue> + '_ {
        self.inline
            .iter()
            .flatten()
            .copied()
            .chain(self.more.iter().copied())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Parts<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Parts<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of parts")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Parts::default())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut parts = Parts::default();
                let mut n = 0;
                while let Some(raw) = seq.next_element::<&'de RawValue>()? {
                    match parts.inline.get_mut(n) {
                        Some(slot) => *slot = Some(raw),
                        None => parts.more.push(raw),
                    }
                    n += 1;
                }
                Ok(parts)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartWire<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(
        borrow,
        default,
        alias = "thought_signature",
        deserialize_with = "opt_str"
    )]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(borrow, default, alias = "function_call")]
    function_call: Option<FunctionCallWire<'a>>,
    #[serde(borrow, default, alias = "inline_data")]
    inline_data: Option<BlobWire<'a>>,
}

#[derive(Deserialize)]
struct FunctionCallWire<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlobWire<'a> {
    #[serde(borrow, default, alias = "mime_type", deserialize_with = "opt_str")]
    mime_type: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    data: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback<'a> {
    #[serde(borrow, default, deserialize_with = "opt_str")]
    block_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ErrorObject<'a> {
    #[serde(default)]
    code: Option<u64>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    message: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_str")]
    status: Option<Cow<'a, str>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Text(usize),
    Thinking(usize),
}

/// Upstream Gemini chunks → canonical events.
#[derive(Debug)]
pub struct Parser {
    started: bool,
    /// A finish reason has been read: the end of the body ends the message.
    finished: bool,
    /// An in-band error ended the stream.
    failed: bool,
    open: Open,
    next_index: usize,
    /// Position of the next part in the whole stream (for synthetic call ids).
    part_position: usize,
    has_calls: bool,
    response_id: String,
    /// The latest `usageMetadata`, unparsed (Gemini repeats it on every chunk).
    usage: Vec<u8>,
    buf: DeltaBuf,
}

impl Default for Parser {
    fn default() -> Self {
        Self::new()
    }
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Parser {
            started: false,
            finished: false,
            failed: false,
            open: Open::None,
            next_index: 0,
            part_position: 0,
            has_calls: false,
            response_id: String::new(),
            usage: Vec::new(),
            buf: DeltaBuf::default(),
        }
    }

    /// True once a finish reason (or an in-band error) has been read.
    pub fn is_complete(&self) -> bool {
        self.finished || self.failed
    }

    /// Reads one SSE event.
    pub fn push(&mut self, event: &SseEvent<'_>, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        let text = check_utf8(event.event, event.data)?;
        if self.failed {
            return Ok(());
        }
        let data = event.data;
        let chunk: Chunk<'_> = serde_json::from_str(text)
            .map_err(|e| unreadable(F, &format!("invalid chunk ({e})"), data))?;
        if let Some(err) = chunk.error {
            self.failed = true;
            let kind = match (err.status.as_deref(), err.code) {
                (Some(status), _) => error_kind(status),
                (None, Some(code)) => error_kind_for_status(code),
                (None, None) => error_kind(""),
            };
            emit(&StreamEvent::Error(StreamError {
                kind,
                message: err.message.map_or_else(String::new, Cow::into_owned),
            }));
            return Ok(());
        }
        if let Some(raw) = chunk.usage_metadata {
            self.usage.clear();
            self.usage.extend_from_slice(raw.get().as_bytes());
        }
        if !self.started {
            self.started = true;
            self.response_id = chunk.response_id.as_deref().unwrap_or_default().to_string();
            // The prompt count is known from the first chunk on: say it at the start.
            emit(&StreamEvent::MessageStart(MessageStart {
                id: self.response_id.clone(),
                model: chunk
                    .model_version
                    .as_deref()
                    .unwrap_or_default()
                    .to_string(),
                created: None,
                usage: self.peek_usage(),
            }));
        }
        let mut stop = None;
        match chunk.candidates.0 {
            Some(candidate) => {
                if let Some(content) = candidate.content {
                    for raw in content.parts.iter() {
                        self.part(raw, data, emit)?;
                    }
                }
                if let Some(reason) = candidate.finish_reason {
                    stop = Some(decode_finish_reason(&reason, self.has_calls));
                }
            }
            None => {
                if let Some(reason) = chunk.prompt_feedback.and_then(|p| p.block_reason) {
                    stop = Some(StopReason::ContentFilter(Some(reason.into_owned())));
                }
            }
        }
        if stop.is_some() || (self.finished && !self.usage.is_empty()) {
            self.close(emit);
            self.finished = true;
            let usage = self.peek_usage();
            self.usage.clear();
            emit(&StreamEvent::MessageDelta(MessageDelta {
                stop_reason: stop,
                usage,
            }));
        }
        Ok(())
    }

    /// The latest usage, parsed (a usage object of the wrong shape is ignored).
    fn peek_usage(&self) -> Option<Usage> {
        if self.usage.is_empty() {
            return None;
        }
        serde_json::from_slice::<UsageMetadata>(&self.usage)
            .map(decode_usage)
            .inspect_err(|e| log::warn!("ignoring a malformed Gemini usageMetadata: {e}"))
            .ok()
    }

    /// Called at the end of the upstream stream: ends the message after a
    /// finish reason; without one the stream was truncated.
    pub fn finish(&mut self, emit: &mut Emit<'_>) -> Result<(), StreamFault> {
        if self.failed {
            return Ok(());
        }
        if !self.finished {
            return Err(StreamFault::Truncated);
        }
        self.close(emit);
        emit(&StreamEvent::MessageStop);
        Ok(())
    }

    fn close(&mut self, emit: &mut Emit<'_>) {
        match self.open {
            Open::None => {}
            Open::Text(index) | Open::Thinking(index) => {
                emit(&StreamEvent::BlockStop { index });
            }
        }
        self.open = Open::None;
    }

    fn start_block(&mut self, block: BlockStart, emit: &mut Emit<'_>) -> usize {
        self.close(emit);
        let index = self.next_index;
        self.next_index += 1;
        emit(&StreamEvent::BlockStart { index, block });
        index
    }

    fn part(
        &mut self,
        raw: &RawValue,
        data: &[u8],
        emit: &mut Emit<'_>,
    ) -> Result<(), StreamFault> {
        let position = self.part_position;
        self.part_position += 1;
        let p: PartWire<'_> = serde_json::from_str(raw.get())
            .map_err(|e| malformed(F, &format!("invalid part ({e})"), data))?;
        let signature = p.thought_signature.as_deref().filter(|s| !s.is_empty());
        if let Some(call) = p.function_call {
            self.has_calls = true;
            let name = call.name.as_deref().unwrap_or_default().to_string();
            let args = call.args.unwrap_or_else(|| Value::Object(Map::new()));
            let mut id = match call.id.as_deref().filter(|id| !id.is_empty()) {
                Some(id) => id.to_string(),
                None => synthetic_call_id(&self.response_id, position, &name, &args),
            };
            if let Some(sig) = signature {
                id = embed_signature(&id, sig);
            }
            let index = self.start_block(BlockStart::ToolCall { id, name }, emit);
            let text = args.to_string();
            self.buf.emit(index, DeltaKind::ToolArguments, &text, emit);
            if let Some(sig) = signature {
                self.buf.emit(index, DeltaKind::Signature, sig, emit);
            }
            emit(&StreamEvent::BlockStop { index });
            return Ok(());
        }
        if let Some(text) = p.text {
            let thought = p.thought == Some(true);
            if text.is_empty() && signature.is_none() {
                return Ok(());
            }
            let index = match (self.open, thought) {
                (Open::Text(i), false) | (Open::Thinking(i), true) => i,
                (_, false) => {
                    let i = self.start_block(BlockStart::Text, emit);
                    self.open = Open::Text(i);
                    i
                }
                (_, true) => {
                    let i = self.start_block(BlockStart::Thinking, emit);
                    self.open = Open::Thinking(i);
                    i
                }
            };
            if !text.is_empty() {
                let kind = if thought {
                    DeltaKind::Thinking
                } else {
                    DeltaKind::Text
                };
                self.buf.emit(index, kind, &text, emit);
            }
            if let Some(sig) = signature {
                self.buf.emit(index, DeltaKind::Signature, sig, emit);
                self.close(emit);
            }
            return Ok(());
        }
        if let Some(blob) = p.inline_data {
            let image = ImageBlock {
                source: ImageSource::Base64 {
                    media_type: blob.mime_type.as_deref().unwrap_or_default().to_string(),
                    data: blob.data.as_deref().unwrap_or_default().to_string(),
                },
                detail: None,
                cache_control: None,
                extra: Extra::default(),
            };
            let index = self.start_block(BlockStart::Image(image), emit);
            emit(&StreamEvent::BlockStop { index });
            return Ok(());
        }
        let value: Value = serde_json::from_str(raw.get())
            .map_err(|e| malformed(F, &format!("invalid part ({e})"), data))?;
        let kind = value
            .as_object()
            .and_then(|o| o.keys().find(|k| k.as_str() != "thoughtSignature"))
            .cloned()
            .unwrap_or_else(|| "part".to_string());
        let index = self.start_block(
            BlockStart::Opaque(Opaque {
                origin: F,
                kind,
                value,
            }),
            emit,
        );
        emit(&StreamEvent::BlockStop { index });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::stream::BlockDelta;

    fn parse(input: &str) -> (Vec<StreamEvent>, Result<(), StreamFault>) {
        let mut p = Parser::new();
        crate::protocol::common::support::parse_all(
            input.as_bytes(),
            &mut |event, emit| match event {
                Some(e) => p.push(e, emit),
                None => p.finish(emit),
            },
        )
    }

    #[test]
    fn a_blocked_prompt_ends_with_a_content_filter_stop() {
        let (events, r) = parse("data: {\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\"},\"usageMetadata\":{\"promptTokenCount\":7}}\r\n\r\n");
        assert_eq!(r, Ok(()));
        assert!(events.contains(&StreamEvent::MessageDelta(MessageDelta {
            stop_reason: Some(StopReason::ContentFilter(Some("PROHIBITED_CONTENT".into()))),
            usage: Some(Usage {
                input_tokens: 7,
                ..Usage::default()
            }),
        })));
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop));
    }

    #[test]
    fn a_signature_closes_its_block() {
        let (events, r) = parse(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\",\"thoughtSignature\":\"s\"},{\"text\":\"b\"}]},\"finishReason\":\"STOP\"}]}\r\n\r\n",
        );
        assert_eq!(r, Ok(()));
        let starts = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::BlockStart { .. }))
            .count();
        assert_eq!(starts, 2, "{events:?}");
        assert!(events.contains(&StreamEvent::BlockDelta {
            index: 0,
            delta: BlockDelta::Signature("s".into())
        }));
    }

    #[test]
    fn no_finish_reason_is_a_truncation() {
        let (_, r) =
            parse("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}\r\n\r\n");
        assert_eq!(r, Err(StreamFault::Truncated));
    }
}
