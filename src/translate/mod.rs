//! Response shaping between an upstream and a client: same-family
//! pass-through rewriting of bodies and streams (`passthrough`), the
//! per-request client stream (`stream`: pass-through or translated through the
//! IR), a cut stream's continuation spliced into it (`continuation`) from
//! the bytes a continuable stream keeps (`transcript`), whole
//! bodies translated through the IR (`body`). Plain arguments in,
//! bytes out: no session, no I/O.
//!
//! May import: `adjust`, `config`, `error`, `family`, `ir`, `protocol`, `sse`, `util`.

pub mod body;
pub mod continuation;
pub mod passthrough;
pub mod stream;
pub mod transcript;
