//! Cross-checks of the SSE module: realistic fixture streams split at every byte,
//! a slow reference decoder, and property tests of decoder and encoder together.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;

use super::*;

/// An owned copy of an [`SseItem`], for comparing decode results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item {
    Event {
        event: Option<Vec<u8>>,
        data: Vec<u8>,
        id: Option<Vec<u8>>,
        retry: Option<u64>,
    },
    Comment(Vec<u8>),
}

impl Item {
    /// An event with only `data`.
    pub(super) fn data(data: &str) -> Self {
        Self::named(None, data)
    }

    /// An event with a name (or none) and `data`.
    pub(super) fn named(event: Option<&str>, data: &str) -> Self {
        Item::Event {
            event: event.map(|e| e.as_bytes().to_vec()),
            data: data.as_bytes().to_vec(),
            id: None,
            retry: None,
        }
    }

    /// A comment.
    pub(super) fn comment(text: &str) -> Self {
        Item::Comment(text.as_bytes().to_vec())
    }
}

impl From<SseItem<'_>> for Item {
    fn from(item: SseItem<'_>) -> Self {
        match item {
            SseItem::Event(e) => Item::Event {
                event: e.event.map(<[u8]>::to_vec),
                data: e.data.to_vec(),
                id: e.id.map(<[u8]>::to_vec),
                retry: e.retry,
            },
            SseItem::Comment(c) => Item::Comment(c.to_vec()),
        }
    }
}

/// Decodes `chunks` in order with a fresh decoder: the items, then the first
/// error or the result of `finish`. Checks the memory bound after every push.
pub(super) fn decode_chunks<'a>(
    max: usize,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<Item>, Result<(), SseError>) {
    let mut decoder = SseDecoder::new(max);
    let mut items = Vec::new();
    for chunk in chunks {
        let pushed = decoder.push(chunk, |item| items.push(Item::from(item)));
        assert!(
            decoder.buffered_bytes() <= max,
            "holds {} > {max}",
            decoder.buffered_bytes()
        );
        if let Err(e) = pushed {
            return (items, Err(e));
        }
    }
    let end = decoder.finish();
    (items, end)
}

/// Decodes `input` as a single chunk.
pub(super) fn decode_whole(max: usize, input: &[u8]) -> (Vec<Item>, Result<(), SseError>) {
    decode_chunks(max, [input])
}

/// `input` cut at the given (sorted, in-range) positions.
fn split_at_points<'a>(input: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut chunks = Vec::new();
    let mut last = 0;
    for &p in points {
        chunks.push(&input[last..p]);
        last = p;
    }
    chunks.push(&input[last..]);
    chunks
}

/// A deliberately simple decoder written straight from the spec (and the
/// module's size rule), working on the whole input at once.
fn reference(max: usize, input: &[u8]) -> (Vec<Item>, Result<(), SseError>) {
    let too_large = Err(SseError::FrameTooLarge { limit: max });
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);

    // Split into lines; `tail` is the unterminated rest.
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'\n' => {
                lines.push(&input[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&input[start..i]);
                if input.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let tail = &input[start..];

    let mut items = Vec::new();
    let (mut data, mut event, mut id, mut retry): (Option<Vec<u8>>, Option<Vec<u8>>, _, _) =
        (None, None, None, None);
    let mut size = 0usize;
    for line in lines {
        if line.is_empty() {
            if let Some(data) = data.take() {
                items.push(Item::Event {
                    event: event.take(),
                    data,
                    id: id.take(),
                    retry: retry.take(),
                });
            }
            (event, id, retry, size) = (None, None, None, 0);
            continue;
        }
        if size + line.len() + 1 > max {
            return (items, too_large);
        }
        if line[0] == b':' {
            let text = &line[1..];
            items.push(Item::Comment(
                text.strip_prefix(b" ").unwrap_or(text).to_vec(),
            ));
            continue;
        }
        size += line.len() + 1;
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => match &mut data {
                None => data = Some(value.to_vec()),
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(value);
                }
            },
            b"event" => event = (!value.is_empty()).then(|| value.to_vec()),
            b"id" if !value.contains(&0) => id = Some(value.to_vec()),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Ok(v) = std::str::from_utf8(value).unwrap().parse::<u64>() {
                    retry = Some(v);
                }
            }
            _ => {}
        }
    }
    if size + tail.len() > max {
        return (items, too_large);
    }
    let truncated = !tail.is_empty() || size > 0;
    (
        items,
        if truncated {
            Err(SseError::Truncated)
        } else {
            Ok(())
        },
    )
}

/// An `OpenAI` chat-completions stream with a keep-alive comment and multi-byte text.
fn openai_fixture() -> Vec<u8> {
    let mut s: Vec<String> = Vec::new();
    s.push(": OPENROUTER PROCESSING\n\n".to_owned());
    let head = r#"{"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":"#;
    s.push(format!(
        "data: {head}{{\"role\":\"assistant\",\"content\":\"\"}},\"finish_reason\":null}}]}}\n\n"
    ));
    for piece in ["h\u{e9}llo", " \u{1F30D}", " \u{65E5}\u{672C}", "!"] {
        s.push(format!(
            "data: {head}{{\"content\":\"{piece}\"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    s.push(format!(
        "data: {head}{{}},\"finish_reason\":\"stop\"}}]}}\n\n"
    ));
    s.push("data: [DONE]\n\n".to_owned());
    s.concat().into_bytes()
}

/// An Anthropic Messages stream (named events).
fn anthropic_fixture() -> Vec<u8> {
    concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\n",
        "data: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"h\u{e9}llo \u{1F30D} \u{65E5}\u{672C}\"}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    )
    .as_bytes()
    .to_vec()
}

/// A Gemini `alt=sse` stream, which ends lines with CRLF.
fn gemini_fixture() -> Vec<u8> {
    concat!(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"h\u{e9}llo \u{1F30D}\"}],\"role\": \"model\"},\"index\": 0}],\"modelVersion\": \"gemini-2.5-flash\"}\r\n\r\n",
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \" \u{65E5}\u{672C}\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 5,\"candidatesTokenCount\": 4,\"totalTokenCount\": 9}}\r\n\r\n",
    )
    .as_bytes()
    .to_vec()
}

/// Every rule at once: BOM, CR/LF/CRLF, comments, multi-line data, id, retry,
/// fields without colon, unknown fields, frames that dispatch nothing.
fn mixed_fixture() -> Vec<u8> {
    b"\xEF\xBB\xBF: hi\r\nevent: a\rdata: 1\r\ndata:2\n\ndata\nid: 7\rretry: 300\n\r\
      event: ping\n\nfoo: bar\nid\ndata:  sp\xC3\xA9\r\n\r:\n"
        .to_vec()
}

fn fixtures() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("openai", openai_fixture()),
        ("anthropic", anthropic_fixture()),
        ("gemini", gemini_fixture()),
        ("mixed", mixed_fixture()),
    ]
}

#[test]
fn fixtures_decode_as_expected() {
    let (items, end) = decode_whole(usize::MAX, &openai_fixture());
    assert_eq!(end, Ok(()));
    assert_eq!(items.len(), 8);
    assert_eq!(items[0], Item::comment("OPENROUTER PROCESSING"));
    assert_eq!(items[7], Item::data("[DONE]"));
    let Item::Event { data, .. } = &items[3] else {
        panic!("{:?}", items[3])
    };
    let json = std::str::from_utf8(data).unwrap();
    assert!(json.contains("\"content\":\" \u{1F30D}\""), "{json}");

    let (items, end) = decode_whole(usize::MAX, &anthropic_fixture());
    assert_eq!(end, Ok(()));
    let names: Vec<_> = items
        .iter()
        .map(|i| match i {
            Item::Event { event, .. } => String::from_utf8(event.clone().unwrap()).unwrap(),
            Item::Comment(_) => panic!("no comments expected"),
        })
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(items[2], Item::named(Some("ping"), "{\"type\": \"ping\"}"));

    let (items, end) = decode_whole(usize::MAX, &gemini_fixture());
    assert_eq!(end, Ok(()));
    assert_eq!(items.len(), 2);
    let Item::Event { data, .. } = &items[1] else {
        panic!("{:?}", items[1])
    };
    assert!(data.starts_with(b"{\"candidates\"") && data.ends_with(b"}}"));

    let (items, end) = decode_whole(usize::MAX, &mixed_fixture());
    assert_eq!(end, Ok(()));
    assert_eq!(
        items,
        [
            Item::comment("hi"),
            Item::named(Some("a"), "1\n2"),
            Item::Event {
                event: None,
                data: b"".to_vec(),
                id: Some(b"7".to_vec()),
                retry: Some(300)
            },
            Item::Event {
                event: None,
                data: " sp\u{e9}".as_bytes().to_vec(),
                id: Some(Vec::new()),
                retry: None
            },
            Item::comment(""),
        ]
    );
}

#[test]
fn fixtures_agree_with_reference() {
    for (name, input) in fixtures() {
        assert_eq!(
            decode_whole(usize::MAX, &input),
            reference(usize::MAX, &input),
            "{name}"
        );
    }
}

#[test]
fn fixtures_are_invariant_under_one_split_at_every_byte() {
    for (name, input) in fixtures() {
        let whole = decode_whole(usize::MAX, &input);
        for at in 0..=input.len() {
            let split = decode_chunks(usize::MAX, [&input[..at], &input[at..]]);
            assert_eq!(split, whole, "{name} split at {at}");
        }
    }
}

#[test]
fn fixtures_are_invariant_under_one_byte_chunks() {
    for (name, input) in fixtures() {
        let whole = decode_whole(usize::MAX, &input);
        assert_eq!(decode_chunks(usize::MAX, input.chunks(1)), whole, "{name}");
    }
}

#[test]
fn mixed_fixture_is_invariant_under_every_pair_of_splits() {
    let input = mixed_fixture();
    let whole = decode_whole(usize::MAX, &input);
    for a in 0..=input.len() {
        for b in a..=input.len() {
            assert_eq!(
                decode_chunks(usize::MAX, split_at_points(&input, &[a, b])),
                whole,
                "splits at {a}, {b}"
            );
        }
    }
}

#[test]
fn fixtures_with_tight_limit_fail_identically_however_split() {
    // A limit below the largest frame: every split must fail at the same item.
    for (name, input) in fixtures() {
        let limit = 60;
        let whole = decode_whole(limit, &input);
        assert_eq!(whole, reference(limit, &input), "{name}");
        for at in 0..=input.len() {
            assert_eq!(
                decode_chunks(limit, [&input[..at], &input[at..]]),
                whole,
                "{name} at {at}"
            );
        }
    }
}

#[test]
fn encoded_fixture_events_decode_back() {
    for (name, input) in fixtures() {
        let (items, _) = decode_whole(usize::MAX, &input);
        let mut wire = bytes::BytesMut::new();
        let mut decoder = SseDecoder::new(usize::MAX);
        decoder
            .push(&input, |item| match item {
                SseItem::Event(e) => encode_frame(&mut wire, &e),
                SseItem::Comment(c) => encode_comment(&mut wire, c),
            })
            .unwrap();
        assert_eq!(decode_whole(usize::MAX, &wire), (items, Ok(())), "{name}");
    }
}

/// Pieces that make byte soup look like an event stream often enough to reach
/// every branch of the decoder.
fn stream_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data:".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"event: ".to_vec()),
        Just(b"id:".to_vec()),
        Just(b"retry: ".to_vec()),
        Just(b":".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n\n".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just(b"\xEF\xBB".to_vec()),
        Just(b"\0".to_vec()),
        "[0-9]{1,3}".prop_map(String::into_bytes),
        "[a-z\u{e9}\u{1F30D}]{1,6}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 1..6),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|p| p.concat())
}

/// Sorted cut points inside `len` bytes.
fn cut_points(len: usize, picks: &[prop::sample::Index]) -> Vec<usize> {
    let mut points: Vec<usize> = picks.iter().map(|i| i.index(len + 1)).collect();
    points.sort_unstable();
    points
}

/// An event to encode: optional name, data, and comments written before it.
#[derive(Debug, Clone)]
struct Spec {
    comment: Option<Vec<u8>>,
    event: Option<String>,
    data: Vec<u8>,
}

fn spec() -> impl Strategy<Value = Spec> {
    let text = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..48),
        "[ -~\u{e9}\u{1F30D}\u{65E5}\n\r]{0,48}".prop_map(String::into_bytes),
    ];
    let comment = prop::option::of("[ -~\u{e9}\n\r]{0,12}".prop_map(String::into_bytes));
    let event = prop::option::of("[ -~\u{e9}\n\r]{0,12}");
    (comment, event, text).prop_map(|(comment, event, data)| Spec {
        comment,
        event,
        data,
    })
}

/// Splits text into lines as the encoder does (CR, LF or CRLF).
fn lines_of(text: &[u8]) -> Vec<Vec<u8>> {
    let mut lines = vec![Vec::new()];
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'\r' | b'\n' => {
                if text[i] == b'\r' && text.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                lines.push(Vec::new());
            }
            b => lines.last_mut().unwrap().push(b),
        }
        i += 1;
    }
    lines
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Encoded events and comments decode back, however the bytes are chunked.
    #[test]
    fn encode_then_decode_round_trips(
        specs in prop::collection::vec(spec(), 0..12),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        into_bytes_mut in any::<bool>(),
    ) {
        let mut wire = Vec::new();
        let mut wire_bm = bytes::BytesMut::new();
        let mut expected = Vec::new();
        for s in &specs {
            if let Some(c) = &s.comment {
                if into_bytes_mut { encode_comment(&mut wire_bm, c) } else { encode_comment(&mut wire, c) }
                expected.extend(lines_of(c).into_iter().map(Item::Comment));
            }
            if into_bytes_mut {
                encode_event(&mut wire_bm, s.event.as_deref(), &s.data);
            } else {
                encode_event(&mut wire, s.event.as_deref(), &s.data);
            }
            let name: Vec<u8> = s.event.as_deref().unwrap_or("").bytes().filter(|b| !matches!(b, b'\r' | b'\n')).collect();
            expected.push(Item::Event {
                event: (!name.is_empty()).then_some(name),
                data: lines_of(&s.data).join(&b'\n'),
                id: None,
                retry: None,
            });
        }
        if into_bytes_mut {
            wire = wire_bm.to_vec();
        }
        let points = cut_points(wire.len(), &picks);
        prop_assert_eq!(decode_chunks(usize::MAX, split_at_points(&wire, &points)), (expected, Ok(())));
    }

    /// `encode_frame` keeps every field a decoded event has.
    #[test]
    fn encode_frame_round_trips(
        event in prop::option::of("[!-~]{1,10}"),
        id in prop::option::of("[ -~]{0,10}"),
        retry in prop::option::of(any::<u64>()),
        data in "[ -~\u{e9}\n]{0,40}",
    ) {
        let original = SseEvent {
            event: event.as_deref().map(str::as_bytes),
            data: data.as_bytes(),
            id: id.as_deref().map(str::as_bytes),
            retry,
            one_line: !data.contains('\n'),
        };
        let mut wire = Vec::new();
        encode_frame(&mut wire, &original);
        let (items, end) = decode_whole(usize::MAX, &wire);
        prop_assert_eq!(end, Ok(()));
        prop_assert_eq!(items, vec![Item::from(SseItem::Event(original))]);
    }

    /// Arbitrary input: the decoder matches the reference (items, limit errors,
    /// truncation) for any chunking and any limit, without panicking or
    /// holding more than the limit (checked in `decode_chunks`).
    #[test]
    fn arbitrary_bytes_match_reference_under_any_chunking(
        input in stream_bytes(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        max in prop_oneof![Just(usize::MAX), 0usize..96],
    ) {
        let expected = reference(max, &input);
        prop_assert_eq!(&decode_whole(max, &input), &expected);
        let points = cut_points(input.len(), &picks);
        prop_assert_eq!(&decode_chunks(max, split_at_points(&input, &points)), &expected);
        prop_assert_eq!(&decode_chunks(max, input.chunks(1)), &expected);
    }

    /// Fully random bytes never panic and stay within the limit.
    #[test]
    fn random_bytes_never_panic(
        input in prop::collection::vec(any::<u8>(), 0..512),
        chunk in 1usize..64,
        max in 0usize..128,
    ) {
        let expected = reference(max, &input);
        prop_assert_eq!(decode_chunks(max, input.chunks(chunk)), expected);
    }
}
