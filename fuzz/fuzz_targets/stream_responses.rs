//! Fuzz target: the responses stream parser behind the translator, for every client
//! family and framing (see `stream_common.rs` for what is checked).
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard::family::Family;

#[path = "stream_common.rs"]
mod common;

fuzz_target!(|input: &[u8]| common::check(Family::Responses, input));
