//! State kept beyond one request, a folder per store: the usage ledger
//! (embedded SQLite or PostgreSQL), per-key limits and budgets (embedded or in
//! Redis), stored responses (docs/api.md "Stored responses"; embedded or
//! in Redis), and the keys and teams made through the admin API with their
//! audit log (docs/keys.md; embedded SQLite or PostgreSQL).
//!
//! May import: `config`, `error`, `family`, `ir`, `obs`, `util`.

pub mod keys;
pub mod ledger;
pub mod limits;
pub mod responses;
