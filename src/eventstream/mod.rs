//! The AWS event-stream framing (`application/vnd.amazon.eventstream`), as
//! Bedrock's streaming operations use it: binary messages, each a prelude
//! (total and header lengths, CRC32), typed headers, a payload and a CRC32
//! of the whole. The codec is AWS's own (`aws-smithy-eventstream`); these
//! files say which messages the gateway writes (`encode`: the client routes'
//! streams) and reads (`decode`: an upstream's messages into the events the
//! spokes' stream parsers read).

pub mod decode;
pub mod encode;
