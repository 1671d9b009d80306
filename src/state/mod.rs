//! State kept beyond one request.

pub mod ledger;
pub mod ledger_pg;
pub mod ledger_sqlite;
