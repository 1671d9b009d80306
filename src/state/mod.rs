//! State kept beyond one request: the usage ledger (embedded SQLite or
//! PostgreSQL), per-key limits and budgets (embedded or in Redis), and stored
//! responses (docs/api.md "Stored responses"; embedded or in Redis).

pub mod ledger;
pub mod ledger_pg;
pub mod ledger_sqlite;
pub mod limits;
pub mod limits_local;
pub mod limits_redis;
pub mod responses;
pub mod responses_redis;
pub mod responses_sqlite;
