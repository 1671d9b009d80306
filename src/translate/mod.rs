//! Response shaping between an upstream and a client: same-family
//! pass-through rewriting of bodies and streams (`passthrough`), the
//! per-request client stream (`stream`: pass-through or translated through the
//! IR). Plain arguments in, bytes out: no session, no I/O.
//!
//! May import: `adjust`, `error`, `family`, `ir`, `protocol`, `sse`, `util`.

pub mod passthrough;
pub mod stream;
