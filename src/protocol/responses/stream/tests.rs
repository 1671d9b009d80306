//! Tests of the Responses stream codecs: parsing, encoding and round trips.

use super::encoder::Encoder;
use super::parser::Parser;
use crate::ir::stream::{
    BlockDelta, BlockStart, MessageDelta, MessageStart, StreamError, StreamEvent,
};
use crate::ir::StopReason;
use crate::protocol::common::framing::StreamFault;
use crate::protocol::responses::request::custom_input;
use serde_json::Value;

use crate::ir::stream::{Accumulator, GrammarChecker};

use crate::ir::Block;

use serde_json::json;

fn parse(input: &str) -> (Vec<StreamEvent>, Result<(), StreamFault>) {
    let mut p = Parser::new();
    crate::protocol::common::support::parse_all(input.as_bytes(), &mut |event, emit| match event {
        Some(e) => p.push(e, emit),
        None => p.finish(emit),
    })
}

fn fold(events: &[StreamEvent]) -> crate::ir::ChatResponse {
    let mut checker = GrammarChecker::new();
    let mut acc = Accumulator::new();
    for e in events {
        assert_eq!(checker.push(e), Ok(()), "{e:?}\n{events:#?}");
        acc.push(e);
    }
    acc.finish()
}

fn ev(kind: &str, body: &Value) -> String {
    let mut v = body.clone();
    v["type"] = json!(kind);
    format!("event: {kind}\ndata: {v}\n\n")
}

fn encode(events: &[StreamEvent]) -> String {
    let mut e = Encoder::new("acme/m", 1);
    let mut out = Vec::new();
    for event in events {
        e.event(event, &mut out);
    }
    String::from_utf8(out).unwrap_or_default()
}

#[test]
fn a_custom_call_is_told_and_unescaped_however_its_arguments_are_cut() {
    let input = "*** Begin Patch\n+say \"hi\" \\ 😀\n*** End Patch";
    let args = serde_json::to_string(&super::super::request::custom_arguments(input))
        .unwrap_or_default()
        .replace(':', ": ");
    let cuts: Vec<usize> = (0..=args.len())
        .filter(|c| args.is_char_boundary(*c))
        .collect();
    for &cut in &cuts {
        let mut events = vec![
            StreamEvent::MessageStart(MessageStart {
                id: "resp_1".into(),
                ..MessageStart::default()
            }),
            StreamEvent::BlockStart {
                index: 0,
                block: BlockStart::ToolCall {
                    id: "call_1".into(),
                    name: "apply_patch".into(),
                },
            },
        ];
        for piece in [&args[..cut], &args[cut..]] {
            events.push(StreamEvent::BlockDelta {
                index: 0,
                delta: BlockDelta::ToolArguments(piece.to_string()),
            });
        }
        events.push(StreamEvent::BlockStop { index: 0 });
        events.push(StreamEvent::MessageDelta(MessageDelta {
            stop_reason: Some(StopReason::ToolUse),
            usage: None,
        }));
        events.push(StreamEvent::MessageStop);
        let wire = encode(&events);
        assert!(
            wire.contains("\"type\":\"custom_tool_call\""),
            "cut {cut}: {wire}"
        );
        assert!(!wire.contains("function_call"), "cut {cut}: {wire}");
        let (parsed, r) = parse(&wire);
        assert_eq!(r, Ok(()));
        let resp = fold(&parsed);
        let Some(Block::ToolCall(call)) = resp.content.first() else {
            panic!("cut {cut}: {resp:?}");
        };
        assert_eq!(
            custom_input(&call.arguments),
            Some(input),
            "cut {cut}: {wire}"
        );
        assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
    }
}

#[test]
fn what_comes_only_in_done_events_is_read_from_there() {
    let input = [
        ev("response.created", &json!({"response": {"id": "resp_1", "model": "m", "created_at": 5}})),
        ev("response.output_item.added", &json!({"item": {"type": "reasoning", "id": "rs_1", "summary": []}})),
        ev("response.output_item.done", &json!({"item": {"type": "reasoning", "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
            "encrypted_content": "gAAA"}})),
        ev("response.output_item.added", &json!({"item": {"type": "message", "role": "assistant", "content": []}})),
        ev("response.output_text.done", &json!({"text": "whole"})),
        ev("response.content_part.done", &json!({})),
        ev("response.output_item.done", &json!({"item": {"type": "message", "content": []}})),
        ev("response.output_item.done", &json!({"item": {"type": "message",
            "content": [{"type": "refusal", "refusal": "no"}]}})),
        ev("response.output_item.done", &json!({"item": {"type": "function_call", "call_id": "c1",
            "name": "f", "arguments": "{\"a\":1}"}})),
        ev("response.completed", &json!({"response": {"status": "completed",
            "usage": {"input_tokens": 3, "output_tokens": 4}}})),
    ]
    .concat();
    let (events, r) = parse(&input);
    assert_eq!(r, Ok(()));
    let resp = fold(&events);
    assert_eq!(resp.id, "resp_1");
    assert_eq!(resp.created, Some(5));
    assert!(
        matches!(&resp.content[0], Block::Thinking(t) if t.text == "a\n\nb"
        && t.signature.as_deref().and_then(crate::ir::signature::unwrap_reasoning_item)
            == Some(("rs_1".into(), "gAAA".into())))
    );
    assert!(matches!(&resp.content[1], Block::Text(t) if t.text == "whole"));
    assert!(matches!(&resp.content[2], Block::Text(t) if t.text == "no"));
    assert!(matches!(&resp.content[3], Block::ToolCall(c) if c.arguments == json!({"a": 1})));
    // A refusal part wins over the tool call.
    assert_eq!(resp.stop_reason, Some(StopReason::Refusal));
    assert_eq!(resp.usage.map(|u| u.output_tokens), Some(4));
}

#[test]
fn errors_and_incomplete_ends() {
    let (events, r) = parse(&ev(
        "error",
        &json!({"code": "rate_limit_exceeded", "message": "slow down", "param": null}),
    ));
    assert_eq!(r, Ok(()));
    assert_eq!(
        events,
        [StreamEvent::Error(StreamError {
            kind: crate::ir::stream::StreamErrorKind::RateLimited,
            message: "slow down".into()
        })]
    );
    let input = [
        ev("response.created", &json!({"response": {"id": "resp_1"}})),
        ev("response.output_text.delta", &json!({"delta": "x"})),
        ev(
            "response.incomplete",
            &json!({"response": {"status": "incomplete",
            "incomplete_details": {"reason": "content_filter"}}}),
        ),
    ]
    .concat();
    let (events, r) = parse(&input);
    assert_eq!(r, Ok(()));
    assert_eq!(
        fold(&events).stop_reason,
        Some(StopReason::ContentFilter(None))
    );
    // Without its terminal event a stream is truncated.
    let (_, r) = parse(&ev(
        "response.created",
        &json!({"response": {"id": "resp_1"}}),
    ));
    assert_eq!(r, Err(StreamFault::Truncated));
    // Unknown event types are skipped, even with fields of other shapes.
    let input = [
        ev("response.created", &json!({"response": {"id": "resp_1"}})),
        ev(
            "response.image_generation_call.partial_image",
            &json!({"delta": {"x": 1}}),
        ),
        ev(
            "response.completed",
            &json!({"response": {"status": "completed"}}),
        ),
    ]
    .concat();
    assert_eq!(parse(&input).1, Ok(()));
}

#[test]
fn a_failure_before_anything_still_opens_the_response() {
    let mut e = Encoder::new("acme/m", 1);
    let mut out = Vec::new();
    e.event(
        &StreamEvent::Error(StreamError {
            kind: crate::ir::stream::StreamErrorKind::Overloaded,
            message: "busy".into(),
        }),
        &mut out,
    );
    assert!(e.is_ended());
    let text = String::from_utf8(out).unwrap_or_default();
    let kinds: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "error",
            "response.failed"
        ]
    );
    assert!(text.contains("\"message\":\"busy\""), "{text}");
    assert!(text.contains("\"status\":\"failed\""), "{text}");
}

/// Every `data:` object of a stream.
fn data_objects(wire: &str) -> Vec<Value> {
    wire.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

#[test]
fn a_call_of_a_namespaced_tool_streams_with_its_namespace_and_own_name() {
    let call = |index: usize, id: &str, name: &str| {
        [
            StreamEvent::BlockStart {
                index,
                block: BlockStart::ToolCall {
                    id: id.into(),
                    name: name.into(),
                },
            },
            StreamEvent::BlockDelta {
                index,
                delta: BlockDelta::ToolArguments("{\"message\":".into()),
            },
            StreamEvent::BlockDelta {
                index,
                delta: BlockDelta::ToolArguments("\"review\"}".into()),
            },
            StreamEvent::BlockStop { index },
        ]
    };
    let mut events = vec![StreamEvent::MessageStart(MessageStart {
        id: "resp_1".into(),
        ..MessageStart::default()
    })];
    events.extend(call(0, "call_1", "multi_agent_v1__spawn_agent"));
    // Not declared in a namespace: a plain tool whose name has `__`.
    events.extend(call(1, "call_2", "plain__tool"));
    events.push(StreamEvent::MessageDelta(MessageDelta {
        stop_reason: Some(StopReason::ToolUse),
        usage: None,
    }));
    events.push(StreamEvent::MessageStop);
    let mut names = crate::protocol::responses::namespace::Namespaces::default();
    names.add("multi_agent_v1", "spawn_agent".into());
    let mut e = Encoder::new("acme/m", 1);
    e.set_namespaces(names);
    let mut out = Vec::new();
    for event in &events {
        e.event(event, &mut out);
    }
    let wire = String::from_utf8(out).unwrap_or_default();
    let objects = data_objects(&wire);
    let items: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            matches!(
                o["type"].as_str(),
                Some("response.output_item.added" | "response.output_item.done")
            )
        })
        .map(|o| &o["item"])
        .collect();
    assert_eq!(items.len(), 4, "{wire}");
    for item in &items[..2] {
        assert_eq!(item["type"], "function_call", "{item}");
        assert_eq!(item["namespace"], "multi_agent_v1", "{item}");
        assert_eq!(item["name"], "spawn_agent", "{item}");
        assert_eq!(item["call_id"], "call_1", "{item}");
    }
    assert_eq!(items[1]["arguments"], "{\"message\":\"review\"}");
    for item in &items[2..] {
        assert_eq!(item["name"], "plain__tool", "{item}");
        assert!(item.get("namespace").is_none(), "{item}");
    }
    let done: Vec<&Value> = objects
        .iter()
        .filter(|o| o["type"] == "response.function_call_arguments.done")
        .collect();
    assert_eq!(done[0]["name"], "spawn_agent");
    assert_eq!(done[1]["name"], "plain__tool");
    let completed = objects
        .iter()
        .find(|o| o["type"] == "response.completed")
        .map(|o| o["response"]["output"].clone())
        .unwrap_or_default();
    assert_eq!(completed[0]["namespace"], "multi_agent_v1");
    assert_eq!(completed[0]["name"], "spawn_agent");
    assert!(completed[1].get("namespace").is_none());
}

proptest::proptest! {
    /// Delta events that repeat the last but for their text, counter and
    /// padding (of each kind, some texts with escapes or empty, some with
    /// the type named only by the `event:` line), among items of every
    /// kind opening and closing: parsing each in full gives the same.
    #[test]
    fn repeated_deltas_read_as_parsed_ones(
        steps in proptest::collection::vec(
            (
                proptest::prop_oneof![4 => proptest::strategy::Just(0usize), 1 => 0usize..10],
                proptest::prop_oneof![
                    4 => "[a-z \u{e9}]{0,5}",
                    1 => "([a-z]|\\\\n|\\\\\"){0,3}",
                ],
                "[a-zA-Z0-9]{0,6}",
            ),
            1..32,
        ),
    ) {
        let mut input = ev("response.created", &json!({"sequence_number": 0, "response": {"id": "resp_1", "model": "m", "status": "in_progress"}}));
        let item = |seq: usize, item: Value| ev("response.output_item.added", &json!({"sequence_number": seq, "output_index": 0, "item": item}));
        input.push_str(&item(1, json!({"type": "message", "id": "msg_1", "role": "assistant", "content": []})));
        for (seq, (shape, text, pad)) in steps.into_iter().enumerate() {
            let seq = seq + 2;
            let delta = |kind: &str| format!(
                "event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{seq},\"item_id\":\"i\",\"output_index\":0,\"delta\":\"{text}\",\"obfuscation\":\"{pad}\"}}\n\n"
            );
            input.push_str(&match shape {
                0..=2 => delta("response.output_text.delta"),
                3 => delta("response.refusal.delta"),
                4 => delta("response.function_call_arguments.delta"),
                5 => delta("response.reasoning_summary_text.delta"),
                6 => format!("event: response.output_text.delta\ndata: {{\"sequence_number\":{seq},\"delta\":\"{text}\"}}\n\n"),
                7 => item(seq, json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""})),
                8 => item(seq, json!({"type": "reasoning", "id": "rs_1", "summary": []})),
                _ => item(seq, json!({"type": "message", "id": "msg_2", "role": "assistant", "content": []})),
            });
        }
        input.push_str(&ev("response.completed", &json!({"response": {"id": "resp_1", "model": "m", "status": "completed", "usage": {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}}})));
        let [quick, full] = [false, true].map(|full| {
            let mut p = Parser::new();
            crate::protocol::common::support::parse_all(input.as_bytes(), &mut |event, emit| match event {
                Some(e) => {
                    if full {
                        p.forget_repeat();
                    }
                    p.push(e, emit)
                }
                None => p.finish(emit),
            })
        });
        proptest::prop_assert_eq!(quick, full, "{}", input);
    }
}

#[test]
fn a_delta_that_repeats_the_last_is_read_without_a_parse_and_alike() {
    let d = |seq: u32, text: &str, pad: &str| {
        ev(
            "response.output_text.delta",
            &json!({"sequence_number": seq, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text, "logprobs": [], "obfuscation": pad}),
        )
    };
    let input = [
        ev(
            "response.created",
            &json!({"response": {"id": "r", "model": "m"}}),
        ),
        d(1, "Hello", "abc"),
        d(2, " big", "abcdef"),
        d(10, " world", ""),
        d(11, "\n", ""),
        ev(
            "response.completed",
            &json!({"response": {"status": "completed"}}),
        ),
    ]
    .concat();
    let mut p = Parser::new();
    // Whether a repeat was kept when each event came.
    let mut kept = Vec::new();
    let (events, r) = crate::protocol::common::support::parse_all(
        input.as_bytes(),
        &mut |event, emit| match event {
            Some(e) => {
                kept.push(p.repeats());
                p.push(e, emit)
            }
            None => p.finish(emit),
        },
    );
    assert_eq!(r, Ok(()));
    // The second and third deltas repeat the first; the fourth's text
    // has an escape and is parsed, and so is the end.
    assert_eq!(kept, [false, false, true, true, true, false]);
    let texts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::BlockDelta {
                delta: BlockDelta::Text(t),
                ..
            } => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts.concat(), "Hello big world\n");
}

#[test]
fn a_delta_that_repeats_the_last_but_is_not_utf8_is_malformed() {
    let d = |seq: u32, pad: &str| {
        ev(
            "response.output_text.delta",
            &json!({"sequence_number": seq, "delta": "Hi", "obfuscation": pad}),
        )
    };
    let mut input = [
        ev(
            "response.created",
            &json!({"response": {"id": "r", "model": "m"}}),
        ),
        d(1, "abc"),
        d(2, "P#D"),
    ]
    .concat()
    .into_bytes();
    // The second padding's middle byte a lone continuation byte.
    let at = input.iter().rposition(|&b| b == b'#').unwrap_or_default();
    input[at] = 0x80;
    let mut p = Parser::new();
    let (_, r) =
        crate::protocol::common::support::parse_all(&input, &mut |event, emit| match event {
            Some(e) => p.push(e, emit),
            None => p.finish(emit),
        });
    assert!(matches!(r, Err(StreamFault::Malformed(_))), "{r:?}");
}
