//! AWS's event stream (`application/vnd.amazon.eventstream`): binary
//! messages of a prelude (total length, headers length, the prelude's
//! CRC32), typed headers, a payload and the message's CRC32, as Bedrock's
//! streaming APIs send them. `decode`: an upstream's messages into the
//! events the spokes' stream parsers read.

pub mod decode;
