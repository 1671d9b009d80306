//! State kept beyond one request, a folder per store: the usage ledger
//! (embedded SQLite or PostgreSQL), per-key limits and budgets (embedded or in
//! Redis), and stored responses (docs/api.md "Stored responses"; embedded or
//! in Redis).
//!
//! May import: `config`, `error`, `family`, `ir`, `obs`, `util`.

// Each store's module file is renamed ahead of its split into one file per
// concern (the next commit gives each folder its mod.rs back).
#[path = "ledger/writer.rs"]
pub mod ledger;
#[path = "limits/reservation.rs"]
pub mod limits;
#[path = "responses/store.rs"]
pub mod responses;
