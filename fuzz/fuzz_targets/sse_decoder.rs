//! Fuzz target: the SSE decoder yields the same items and outcome whether its
//! input arrives whole or split at an arbitrary point, never panics, and never
//! holds more than its frame limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard::sse::{SseDecoder, SseError, SseItem};

/// An owned copy of a decoded item.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Event {
        event: Option<Vec<u8>>,
        data: Vec<u8>,
        id: Option<Vec<u8>>,
        retry: Option<u64>,
    },
    Comment(Vec<u8>),
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

/// Decodes `chunks` in order: the items, then the first error or the end result.
fn decode(max: usize, chunks: &[&[u8]]) -> (Vec<Item>, Result<(), SseError>) {
    let mut decoder = SseDecoder::new(max);
    let mut items = Vec::new();
    for chunk in chunks {
        let pushed = decoder.push(chunk, |item| items.push(Item::from(item)));
        assert!(decoder.buffered_bytes() <= max);
        if let Err(e) = pushed {
            return (items, Err(e));
        }
    }
    let end = decoder.finish();
    (items, end)
}

fuzz_target!(|input: &[u8]| {
    // The first byte picks the split point, the second the frame limit (small
    // limits exercise FrameTooLarge); the rest is the stream.
    let (control, stream) = input.split_at(input.len().min(2));
    let split = control
        .first()
        .map_or(0, |&b| usize::from(b) * stream.len() / 255);
    let max = match control.get(1) {
        Some(&b) if b < 0x80 => usize::from(b),
        _ => usize::MAX,
    };
    let whole = decode(max, &[stream]);
    let (head, tail) = stream.split_at(split.min(stream.len()));
    assert_eq!(decode(max, &[head, tail]), whole);
});
