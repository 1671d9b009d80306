//! State kept beyond one request, a folder per store: the usage ledger
//! (embedded SQLite or PostgreSQL), per-key limits and budgets (embedded or in
//! Redis), and stored responses (docs/api.md "Stored responses"; embedded or
//! in Redis).
//!
//! May import: `config`, `error`, `family`, `ir`, `obs`, `util`.

pub mod ledger;
pub mod limits;
pub mod responses;
