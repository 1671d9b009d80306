//! Continuing an answer whose upstream stream was cut (docs/resilience.md
//! "Continuing a cut stream"): what the client has received so far
//! ([`Partial`]), what a continuation request carries of it ([`Plan`]: an
//! assistant prefill, or nothing, then the whole answer is asked for again),
//! and the [`Splice`] that puts the continuation's canonical events into the
//! client's stream so the client sees one answer: the same message, its open
//! block continued at the same index, later blocks numbered on, usage summed.
//!
//! What the continuation cannot carry in a prefill (a tool call, or
//! everything when the model takes no prefill) it must reproduce: the splice
//! swallows continuation output while it equals what the client already has
//! and passes on only what follows; output that differs ends the stream with
//! [`StreamFault::Diverged`]. Reasoning of the continuation is never passed
//! on (the client's answer is past its reasoning, or has its own).
//!
//! Synchronous and I/O-free, like the rest of `translate`.

use crate::family::Family;
use crate::ir::stream::{
    merge_usage, BlockDelta, BlockStart, MessageDelta, MessageStart, StreamEvent,
};
use crate::ir::{StopReason, Usage};
use crate::protocol::common::framing::StreamFault;
use crate::protocol::stream_codec::Parser;
use crate::sse::{SseDecoder, SseItem};
use std::collections::VecDeque;

/// The most upstream bytes a stream's transcript takes in to rebuild its
/// [`Partial`] after a cut (`super::transcript`: it keeps far fewer); a
/// longer answer is not continued.
pub const MAX_TRANSCRIPT: usize = 1 << 20;

/// One block the client received, as far as it got.
#[derive(Debug, Clone, PartialEq)]
struct Piece {
    start: BlockStart,
    /// Its text, reasoning or tool-call argument text so far.
    text: String,
    /// A `BlockStop` was received.
    closed: bool,
}

impl Piece {
    fn is_reasoning(&self) -> bool {
        matches!(
            self.start,
            BlockStart::Thinking | BlockStart::RedactedThinking { .. }
        )
    }
}

/// What the client has received of an answer, in canonical terms: recorded
/// from the events its encoder was given, or rebuilt from a passed-through
/// stream's upstream bytes ([`Partial::replay`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Partial {
    start: Option<MessageStart>,
    pieces: Vec<Piece>,
    stop: Option<StopReason>,
    usage: Option<Usage>,
}

impl Partial {
    /// Takes one event the client was sent into account.
    pub fn record(&mut self, e: &StreamEvent) {
        match e {
            StreamEvent::MessageStart(s) => {
                let mut s = s.clone();
                if let Some(u) = s.usage.take() {
                    self.usage = Some(merge_usage(self.usage.take(), &u));
                }
                self.start = Some(s);
            }
            StreamEvent::BlockStart { block, .. } => {
                if let Some(open) = self.pieces.last_mut() {
                    open.closed = true;
                }
                self.pieces.push(Piece {
                    start: block.clone(),
                    text: String::new(),
                    closed: false,
                });
            }
            StreamEvent::BlockDelta { delta, .. } => {
                let Some(open) = self.pieces.last_mut().filter(|p| !p.closed) else {
                    return;
                };
                match delta {
                    BlockDelta::Text(t)
                    | BlockDelta::Thinking(t)
                    | BlockDelta::ToolArguments(t) => open.text.push_str(t),
                    BlockDelta::Signature(_) => {}
                }
            }
            StreamEvent::BlockStop { .. } => {
                if let Some(open) = self.pieces.last_mut() {
                    open.closed = true;
                }
            }
            StreamEvent::MessageDelta(d) => {
                if let Some(r) = &d.stop_reason {
                    self.stop = Some(r.clone());
                }
                if let Some(u) = &d.usage {
                    self.usage = Some(merge_usage(self.usage.take(), u));
                }
            }
            StreamEvent::MessageStop | StreamEvent::Ping | StreamEvent::Error(_) => {}
        }
    }

    /// Rebuilds what a client of a passed-through stream received from the
    /// upstream's bytes (`family`'s SSE); an incomplete last frame is left
    /// out, as it never reached the client.
    pub fn replay(family: Family, transcript: &[u8], max_frame_bytes: usize) -> Partial {
        let mut partial = Partial::default();
        let mut decoder = SseDecoder::new(max_frame_bytes);
        let mut parser = Parser::new(family);
        let _ = decoder.push(transcript, |item| {
            if let SseItem::Event(ev) = item {
                // Frames the stream skipped are skipped again.
                let _ = parser.push(&ev, &mut |e: &StreamEvent| partial.record(e));
            }
        });
        partial
    }

    /// The upstream already gave its stop reason: the answer is whole.
    pub fn is_finished(&self) -> bool {
        self.stop.is_some()
    }

    /// The usage the upstream reported for what the client received.
    pub fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    /// The text, reasoning and argument text received, for an estimate of
    /// the output tokens when the upstream reported none.
    pub fn output_text(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().map(|p| p.text.as_str())
    }

    /// Whether a continuation can rebuild the answer at all: images and
    /// other whole blocks cannot be asked for again or carried.
    pub fn continuable(&self) -> bool {
        self.pieces.iter().all(|p| {
            matches!(
                p.start,
                BlockStart::Text
                    | BlockStart::Thinking
                    | BlockStart::RedactedThinking { .. }
                    | BlockStart::ToolCall { .. }
            )
        })
    }

    /// The events that bring a fresh client encoder to where the client is
    /// (their output is discarded: the client has it): the message start,
    /// then every block with its whole text, closed ones closed.
    pub fn events(&self) -> Vec<StreamEvent> {
        let mut out = Vec::with_capacity(2 + 3 * self.pieces.len());
        out.push(StreamEvent::MessageStart(
            self.start.clone().unwrap_or_default(),
        ));
        for (index, p) in self.pieces.iter().enumerate() {
            out.push(StreamEvent::BlockStart {
                index,
                block: p.start.clone(),
            });
            let delta = match p.start {
                BlockStart::Text => Some(BlockDelta::Text(p.text.clone())),
                BlockStart::Thinking => Some(BlockDelta::Thinking(p.text.clone())),
                BlockStart::ToolCall { .. } => Some(BlockDelta::ToolArguments(p.text.clone())),
                _ => None,
            };
            if let Some(delta) = delta.filter(|_| !p.text.is_empty()) {
                out.push(StreamEvent::BlockDelta { index, delta });
            }
            if p.closed {
                out.push(StreamEvent::BlockStop { index });
            }
        }
        out
    }

    /// What a continuation request carries and what its answer must
    /// reproduce. With `prefill`, the text the client received before its
    /// first tool call goes up as an assistant prefill (without trailing
    /// whitespace, which some upstreams refuse at the end of a prefill);
    /// without, nothing does and the whole answer is asked for again.
    pub fn plan(&self, prefill: bool) -> Plan {
        let visible: Vec<(usize, &Piece)> = self
            .pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.is_reasoning())
            .collect();
        let carried = if prefill {
            visible
                .iter()
                .take_while(|(_, p)| p.start == BlockStart::Text)
                .count()
        } else {
            0
        };
        let mut text: String = visible[..carried]
            .iter()
            .map(|(_, p)| p.text.as_str())
            .collect();
        let kept = text.trim_end().len();
        let trailing = text.split_off(kept);
        let expect = visible[carried..]
            .iter()
            .filter_map(|&(index, p)| {
                let (call, rest) = match &p.start {
                    BlockStart::Text => (None, p.text.clone()),
                    BlockStart::ToolCall { name, .. } => (Some(name.clone()), p.text.clone()),
                    _ => return None,
                };
                Some(Expect {
                    call,
                    rest,
                    index,
                    open: !p.closed,
                })
            })
            .collect();
        // The client's block the continuation's first text goes on in: the
        // last one, when it is a carried text block still open.
        let open_text = match self.pieces.last() {
            Some(p) if carried > 0 && !p.closed && p.start == BlockStart::Text => {
                Some(self.pieces.len() - 1)
            }
            _ => None,
        };
        let open = self
            .pieces
            .last()
            .filter(|p| !p.closed)
            .map(|_| self.pieces.len() - 1);
        Plan {
            prefill: (carried > 0 && !text.is_empty()).then_some(text),
            splice: Splice {
                expect,
                trailing: (!trailing.is_empty() && open_text.is_some()).then_some(trailing),
                open_text,
                open,
                next_index: self.pieces.len(),
                cur: Cur::None,
                base: self.usage.clone().unwrap_or_default(),
                cont: None,
            },
        }
    }
}

/// A continuation request's part of the answer: the prefill it carries, and
/// the splice for its stream.
#[derive(Debug)]
pub struct Plan {
    /// The assistant text sent as a prefill (None: the answer is asked for
    /// again from its start).
    pub prefill: Option<String>,
    pub splice: Splice,
}

/// A block the client has that the continuation must reproduce.
#[derive(Debug, Clone, PartialEq)]
struct Expect {
    /// A tool call's name (None: text).
    call: Option<String>,
    /// Its text (arguments) the continuation has not yet reproduced.
    rest: String,
    /// The client's block index.
    index: usize,
    /// The client's block is still open: what follows goes on in it.
    open: bool,
}

/// Where the continuation's current block goes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
enum Cur {
    #[default]
    None,
    /// Reasoning, or whitespace-only text before an expected tool call: not passed on.
    Drop,
    /// Whitespace-only text allowed (before an expected tool call).
    Blank,
    /// Being matched against the front expectation.
    Match,
    /// Matched a closed block of the client's: nothing more may follow in it.
    Matched,
    /// Passed on into the client's block at this index.
    Into(usize),
}

/// Puts a continuation's canonical events into the client's stream
/// (`Default`: an empty placeholder, for moving a splice out).
#[derive(Debug, Default)]
pub struct Splice {
    expect: VecDeque<Expect>,
    /// Whitespace the client has at the end of its open text block that the
    /// prefill left out: the continuation's leading whitespace, up to it, is
    /// not passed on again.
    trailing: Option<String>,
    /// The client's open text block the continuation's first text continues.
    open_text: Option<usize>,
    /// The client's open block (closed before any new block starts).
    open: Option<usize>,
    next_index: usize,
    cur: Cur,
    /// Usage of what the client received before (earlier segments).
    base: Usage,
    /// This continuation's usage so far.
    cont: Option<Usage>,
}

/// Adds two usages field by field (the answer's segments were billed apart).
pub fn sum_usage(a: &Usage, b: &Usage) -> Usage {
    let add = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    Usage {
        input_tokens: a.input_tokens + b.input_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
        total_tokens: add(a.total_tokens, b.total_tokens),
        cache_read_tokens: add(a.cache_read_tokens, b.cache_read_tokens),
        cache_creation_tokens: add(a.cache_creation_tokens, b.cache_creation_tokens),
        cache_write_1h_tokens: add(a.cache_write_1h_tokens, b.cache_write_1h_tokens),
        reasoning_tokens: add(a.reasoning_tokens, b.reasoning_tokens),
        extra: b.extra.clone(),
    }
}

fn diverged(what: &str) -> StreamFault {
    StreamFault::Diverged(format!(
        "the continuation {what}, not what the client already received"
    ))
}

/// Consumes the common start of `t` and `rest`; `Err` when they differ
/// within it. Returns what of `t` is left past `rest`.
fn consume<'t>(rest: &mut String, t: &'t str) -> Result<&'t str, ()> {
    let n = rest.len().min(t.len());
    if rest.as_bytes()[..n] != t.as_bytes()[..n] {
        return Err(());
    }
    // Equal bytes up to `n`, both valid UTF-8: `n` is a boundary of both.
    rest.drain(..n);
    Ok(&t[n..])
}

impl Splice {
    /// The usage of the earlier segments, and this continuation's so far.
    pub fn usage_parts(&self) -> (&Usage, Option<&Usage>) {
        (&self.base, self.cont.as_ref())
    }

    /// The earlier segments' usage, to complete what their upstream did not
    /// report (the output of a segment cut before its usage).
    pub fn base_mut(&mut self) -> &mut Usage {
        &mut self.base
    }

    /// The answer's usage so far: the earlier segments' and this one's. An
    /// earlier segment cut before its upstream said its input (OpenAI says
    /// it at the end) is taken to have read this one's input: the same
    /// conversation, the prefill aside.
    fn summed(&self) -> Usage {
        let Some(c) = &self.cont else {
            return self.base.clone();
        };
        let mut base = self.base.clone();
        if base.input_tokens == 0 {
            base.input_tokens = c.input_tokens;
        }
        sum_usage(&base, c)
    }

    fn close_open(&mut self, emit: &mut dyn FnMut(&StreamEvent)) {
        if let Some(index) = self.open.take() {
            emit(&StreamEvent::BlockStop { index });
        }
        self.open_text = None;
    }

    fn new_block(&mut self, block: &BlockStart, emit: &mut dyn FnMut(&StreamEvent)) -> usize {
        self.close_open(emit);
        let index = self.next_index;
        self.next_index += 1;
        emit(&StreamEvent::BlockStart {
            index,
            block: block.clone(),
        });
        self.open = Some(index);
        index
    }

    fn start(
        &mut self,
        block: &BlockStart,
        emit: &mut dyn FnMut(&StreamEvent),
    ) -> Result<Cur, StreamFault> {
        let front = self.expect.front();
        Ok(match (block, front) {
            (BlockStart::Thinking | BlockStart::RedactedThinking { .. }, _) => Cur::Drop,
            (BlockStart::Text, Some(e)) if e.call.is_none() => Cur::Match,
            (BlockStart::Text, Some(_)) => Cur::Blank,
            (BlockStart::Text, None) => match self.open_text {
                Some(i) => Cur::Into(i),
                None => Cur::Into(self.new_block(block, emit)),
            },
            (BlockStart::ToolCall { name, .. }, Some(e)) => {
                if e.call.is_none() && e.rest.trim().is_empty() && !e.open {
                    // Whitespace the client has as a block of its own.
                    self.expect.pop_front();
                    return self.start(block, emit);
                }
                if e.call.as_deref() != Some(name.as_str()) {
                    return Err(diverged(
                        "called another tool, or called one where the answer had text",
                    ));
                }
                Cur::Match
            }
            (_, Some(_)) => return Err(diverged("sent another kind of block")),
            (_, None) => Cur::Into(self.new_block(block, emit)),
        })
    }

    fn delta(
        &mut self,
        delta: &BlockDelta,
        emit: &mut dyn FnMut(&StreamEvent),
    ) -> Result<(), StreamFault> {
        match self.cur {
            Cur::None | Cur::Drop => Ok(()),
            Cur::Blank => match delta {
                BlockDelta::Text(t) if !t.trim().is_empty() => {
                    Err(diverged("wrote text where the answer called a tool"))
                }
                _ => Ok(()),
            },
            Cur::Matched => match delta {
                BlockDelta::Text(t) | BlockDelta::ToolArguments(t) if !t.is_empty() => Err(
                    diverged("went on past the end of a block the client has whole"),
                ),
                _ => Ok(()),
            },
            Cur::Match => {
                let (BlockDelta::Text(t) | BlockDelta::ToolArguments(t)) = delta else {
                    return Ok(());
                };
                let Some(e) = self.expect.front_mut() else {
                    return Ok(());
                };
                let left =
                    consume(&mut e.rest, t).map_err(|()| diverged("wrote something else"))?;
                if !e.rest.is_empty() {
                    return Ok(());
                }
                let Some(done) = self.expect.pop_front() else {
                    return Ok(());
                };
                if done.open {
                    self.cur = Cur::Into(done.index);
                    self.open = Some(done.index);
                    if done.call.is_none() && self.expect.is_empty() {
                        self.open_text = Some(done.index);
                    }
                    self.forward(done.index, delta, left, emit);
                    Ok(())
                } else {
                    self.cur = Cur::Matched;
                    if left.is_empty() {
                        Ok(())
                    } else {
                        Err(diverged(
                            "went on past the end of a block the client has whole",
                        ))
                    }
                }
            }
            Cur::Into(index) => {
                match delta {
                    BlockDelta::Text(t) | BlockDelta::ToolArguments(t) => {
                        let t = self.skip_trailing(t);
                        self.forward(index, delta, t, emit);
                    }
                    BlockDelta::Thinking(_) => {}
                    BlockDelta::Signature(_) => emit(&StreamEvent::BlockDelta {
                        index,
                        delta: delta.clone(),
                    }),
                }
                Ok(())
            }
        }
    }

    /// The continuation's leading whitespace, as far as the client has it already.
    fn skip_trailing<'t>(&mut self, t: &'t str) -> &'t str {
        let Some(ws) = self.trailing.as_mut() else {
            return t;
        };
        let n = ws
            .chars()
            .zip(t.chars())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a.len_utf8())
            .sum::<usize>();
        ws.drain(..n);
        if ws.is_empty() || n < t.len() {
            self.trailing = None;
        }
        &t[n..]
    }

    fn forward(
        &self,
        index: usize,
        like: &BlockDelta,
        text: &str,
        emit: &mut dyn FnMut(&StreamEvent),
    ) {
        if text.is_empty() {
            return;
        }
        let delta = match like {
            BlockDelta::ToolArguments(_) => BlockDelta::ToolArguments(text.to_string()),
            _ => BlockDelta::Text(text.to_string()),
        };
        emit(&StreamEvent::BlockDelta { index, delta });
    }

    fn stop(&mut self, emit: &mut dyn FnMut(&StreamEvent)) -> Result<(), StreamFault> {
        match std::mem::replace(&mut self.cur, Cur::None) {
            Cur::Match if self.expect.front().is_some_and(|e| !e.rest.is_empty()) => Err(diverged(
                "ended a block before reaching what the client already received",
            )),
            Cur::Into(index) => {
                if self.open == Some(index) {
                    self.open = None;
                    self.open_text = None;
                    emit(&StreamEvent::BlockStop { index });
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Maps one event of the continuation's stream onto the client's,
    /// handing what the client gets to `emit`. An error: the continuation
    /// differs from what the client has, or failed in its stream.
    pub fn map(
        &mut self,
        e: &StreamEvent,
        emit: &mut dyn FnMut(&StreamEvent),
    ) -> Result<(), StreamFault> {
        match e {
            StreamEvent::MessageStart(s) => {
                if let Some(u) = &s.usage {
                    self.cont = Some(merge_usage(self.cont.take(), u));
                }
                Ok(())
            }
            StreamEvent::BlockStart { block, .. } => {
                self.cur = self.start(block, emit)?;
                Ok(())
            }
            StreamEvent::BlockDelta { delta, .. } => self.delta(delta, emit),
            StreamEvent::BlockStop { .. } => self.stop(emit),
            StreamEvent::MessageDelta(d) => {
                if let Some(u) = &d.usage {
                    self.cont = Some(merge_usage(self.cont.take(), u));
                }
                if d.stop_reason.is_some() && !self.expect.is_empty() {
                    return Err(diverged(
                        "stopped before reaching what the client already received",
                    ));
                }
                if d.stop_reason.is_some() {
                    self.close_open(emit);
                }
                emit(&StreamEvent::MessageDelta(MessageDelta {
                    stop_reason: d.stop_reason.clone(),
                    usage: d.usage.as_ref().map(|_| self.summed()),
                }));
                Ok(())
            }
            StreamEvent::MessageStop => {
                if !self.expect.is_empty() {
                    return Err(diverged(
                        "ended before reaching what the client already received",
                    ));
                }
                self.close_open(emit);
                emit(e);
                Ok(())
            }
            StreamEvent::Ping => {
                emit(e);
                Ok(())
            }
            StreamEvent::Error(err) => Err(StreamFault::Upstream(err.clone(), Vec::new())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn text(index: usize, t: &str) -> StreamEvent {
        StreamEvent::BlockDelta {
            index,
            delta: BlockDelta::Text(t.into()),
        }
    }

    fn args(index: usize, t: &str) -> StreamEvent {
        StreamEvent::BlockDelta {
            index,
            delta: BlockDelta::ToolArguments(t.into()),
        }
    }

    fn start(index: usize, block: BlockStart) -> StreamEvent {
        StreamEvent::BlockStart { index, block }
    }

    fn usage(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
            ..Usage::default()
        }
    }

    fn recorded(events: &[StreamEvent]) -> Partial {
        let mut p = Partial::default();
        for e in events {
            p.record(e);
        }
        p
    }

    fn run(splice: &mut Splice, events: &[StreamEvent]) -> Result<Vec<StreamEvent>, StreamFault> {
        let mut out = Vec::new();
        for e in events {
            splice.map(e, &mut |x: &StreamEvent| out.push(x.clone()))?;
        }
        Ok(out)
    }

    fn finish(stop: StopReason, u: Usage) -> [StreamEvent; 2] {
        [
            StreamEvent::MessageDelta(MessageDelta {
                stop_reason: Some(stop),
                usage: Some(u),
            }),
            StreamEvent::MessageStop,
        ]
    }

    #[test]
    fn a_prefilled_continuation_goes_on_in_the_open_text_block() {
        let p = recorded(&[
            StreamEvent::MessageStart(MessageStart {
                id: "m1".into(),
                usage: Some(usage(10, 1)),
                ..MessageStart::default()
            }),
            start(0, BlockStart::Thinking),
            StreamEvent::BlockDelta {
                index: 0,
                delta: BlockDelta::Thinking("hmm".into()),
            },
            StreamEvent::BlockStop { index: 0 },
            start(1, BlockStart::Text),
            text(1, "Hello "),
        ]);
        let mut plan = p.plan(true);
        assert_eq!(plan.prefill.as_deref(), Some("Hello"));
        let mut cont = vec![
            StreamEvent::MessageStart(MessageStart {
                id: "m2".into(),
                usage: Some(usage(14, 0)),
                ..MessageStart::default()
            }),
            start(0, BlockStart::Text),
            text(0, " world"),
            text(0, ", bye"),
            StreamEvent::BlockStop { index: 0 },
        ];
        cont.extend(finish(StopReason::EndTurn, usage(14, 3)));
        let out = run(&mut plan.splice, &cont).unwrap();
        assert_eq!(
            out,
            vec![
                text(1, "world"),
                text(1, ", bye"),
                StreamEvent::BlockStop { index: 1 },
                StreamEvent::MessageDelta(MessageDelta {
                    stop_reason: Some(StopReason::EndTurn),
                    usage: Some(usage(24, 4)),
                }),
                StreamEvent::MessageStop,
            ]
        );
    }

    #[test]
    fn without_a_prefill_the_answer_must_begin_with_what_the_client_has() {
        let p = recorded(&[
            StreamEvent::MessageStart(MessageStart::default()),
            start(0, BlockStart::Text),
            text(0, "Let me look."),
            StreamEvent::BlockStop { index: 0 },
            start(
                1,
                BlockStart::ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                },
            ),
            args(1, "{\"city\":\"Pa"),
        ]);
        let mut plan = p.plan(false);
        assert_eq!(plan.prefill, None);
        let mut cont = vec![
            start(0, BlockStart::Text),
            text(0, "Let me "),
            text(0, "look."),
            StreamEvent::BlockStop { index: 0 },
            start(
                1,
                BlockStart::ToolCall {
                    id: "call_other".into(),
                    name: "get_weather".into(),
                },
            ),
            args(1, "{\"city\":"),
            args(1, "\"Paris\"}"),
            StreamEvent::BlockStop { index: 1 },
        ];
        cont.extend(finish(StopReason::ToolUse, usage(5, 9)));
        let out = run(&mut plan.splice, &cont).unwrap();
        assert_eq!(out[0], args(1, "ris\"}"));
        assert_eq!(out[1], StreamEvent::BlockStop { index: 1 });

        // Another answer: refused as soon as it differs.
        let mut plan = p.plan(false);
        let other = [start(0, BlockStart::Text), text(0, "Sure! Let")];
        assert!(matches!(
            run(&mut plan.splice, &other),
            Err(StreamFault::Diverged(_))
        ));
    }

    #[test]
    fn a_prefill_stops_at_the_first_tool_call_and_the_call_is_matched() {
        let p = recorded(&[
            start(0, BlockStart::Text),
            text(0, "Checking"),
            start(
                1,
                BlockStart::ToolCall {
                    id: "c".into(),
                    name: "f".into(),
                },
            ),
            args(1, "{\"a\""),
        ]);
        let mut plan = p.plan(true);
        assert_eq!(plan.prefill.as_deref(), Some("Checking"));
        let cont = [
            start(0, BlockStart::Text),
            text(0, " "),
            StreamEvent::BlockStop { index: 0 },
            start(
                1,
                BlockStart::ToolCall {
                    id: "x".into(),
                    name: "f".into(),
                },
            ),
            args(1, "{\"a\":1}"),
            StreamEvent::BlockStop { index: 1 },
            start(2, BlockStart::Text),
            text(2, "done"),
        ];
        let out = run(&mut plan.splice, &cont).unwrap();
        assert_eq!(
            out,
            vec![
                args(1, ":1}"),
                StreamEvent::BlockStop { index: 1 },
                start(2, BlockStart::Text),
                text(2, "done"),
            ]
        );
    }

    #[test]
    fn a_stop_before_the_client_s_text_is_reproduced_diverges() {
        let p = recorded(&[start(0, BlockStart::Text), text(0, "abc")]);
        let mut plan = p.plan(false);
        let cont = [
            start(0, BlockStart::Text),
            text(0, "ab"),
            StreamEvent::BlockStop { index: 0 },
        ];
        assert!(run(&mut plan.splice, &cont).is_err());
    }

    #[test]
    fn a_cut_inside_reasoning_closes_it_and_the_answer_follows() {
        let p = recorded(&[
            StreamEvent::MessageStart(MessageStart::default()),
            start(0, BlockStart::Thinking),
            StreamEvent::BlockDelta {
                index: 0,
                delta: BlockDelta::Thinking("let me th".into()),
            },
        ]);
        let mut plan = p.plan(true);
        assert_eq!(plan.prefill, None, "no visible text to carry");
        let cont = [
            start(0, BlockStart::Thinking),
            StreamEvent::BlockDelta {
                index: 0,
                delta: BlockDelta::Thinking("other thoughts".into()),
            },
            StreamEvent::BlockStop { index: 0 },
            start(1, BlockStart::Text),
            text(1, "Answer."),
            StreamEvent::BlockStop { index: 1 },
        ];
        let out = run(&mut plan.splice, &cont).unwrap();
        assert_eq!(
            out,
            vec![
                StreamEvent::BlockStop { index: 0 },
                start(1, BlockStart::Text),
                text(1, "Answer."),
                StreamEvent::BlockStop { index: 1 },
            ]
        );
    }

    #[test]
    fn a_continuation_that_differs_inside_a_tool_call_diverges() {
        let p = recorded(&[
            start(
                0,
                BlockStart::ToolCall {
                    id: "c".into(),
                    name: "f".into(),
                },
            ),
            args(0, "{\"a\":1"),
        ]);
        for cont in [
            vec![start(
                0,
                BlockStart::ToolCall {
                    id: "x".into(),
                    name: "g".into(),
                },
            )],
            vec![
                start(
                    0,
                    BlockStart::ToolCall {
                        id: "x".into(),
                        name: "f".into(),
                    },
                ),
                args(0, "{\"a\":2}"),
            ],
            vec![start(0, BlockStart::Text), text(0, "I will not")],
        ] {
            let mut plan = p.plan(true);
            assert!(
                matches!(run(&mut plan.splice, &cont), Err(StreamFault::Diverged(_))),
                "{cont:?}"
            );
        }
    }

    #[test]
    fn replay_rebuilds_a_passed_through_stream_without_its_cut_frame() {
        let sse = concat!(
            "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"object\":\"chat.com"
        );
        let p = Partial::replay(Family::OpenAi, sse.as_bytes(), 1 << 20);
        assert_eq!(p.output_text().collect::<String>(), "Hello");
        assert!(!p.is_finished());
        assert_eq!(p.plan(true).prefill.as_deref(), Some("Hello"));
    }
}
