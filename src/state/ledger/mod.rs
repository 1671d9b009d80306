//! The usage ledger (docs/operations.md "Usage ledger"): one row per inference
//! request, written off the request path.
//!
//! The pieces, in the order a request meets them:
//! - [`row`]: the request path builds a [`Row`] (the access line's figures);
//! - [`handle`]: [`Ledger::record`] `try_send`s it on a bounded channel; it
//!   never waits, and a full channel counts the row as dropped;
//! - [`writer`]: one writer thread drains the channel and writes batches, one
//!   transaction each (every [`BATCH_ROWS`] rows or [`FLUSH_EVERY`] after the
//!   first row of a batch, whichever comes first; while a batch fills it
//!   polls the channel every few milliseconds rather than waiting on it, so
//!   requests never wake it one by one). A failed write keeps its rows for a
//!   retry with a growing back-off (a database restarting loses nothing), as
//!   long as the rows held stay within the queue bound; past it rows are
//!   dropped and counted. Rows older than the retention are deleted hourly.
//!   [`Ledger::close`] (graceful shutdown) writes what is queued before exit;
//! - [`backend`]: where the batches go, the embedded SQLite file ([`sqlite`],
//!   `ledger_sqlite`) or PostgreSQL ([`pg`], `ledger_pg`), each adding the
//!   batch's sums to the daily rollups (per UTC day, key and model) in the
//!   same transaction, so a rollup never disagrees with the rows it
//!   summarises; rollups are kept past the retention;
//! - [`calendar`]: the UTC days the rollups are kept by;
//! - [`query`]: `GET /admin/usage` reads the rollups (whole days) or the rows;
//!   [`series`] (the console's charts: hours from the rows, days from the
//!   rollups, the top groups and "other") and [`recent`] (the console's
//!   request list, keyset-paginated) are its other questions.

pub mod backend;
pub mod calendar;
pub mod handle;
pub mod pg;
pub mod query;
pub mod recent;
pub mod row;
pub mod series;
pub mod sqlite;
pub mod writer;

pub use backend::{Backend, BackendFactory};
pub use calendar::day_string;
pub use handle::{open, Ledger, LedgerService};
pub use query::{Bound, Group, GroupBy, Reader, Usage, UsageQuery};
pub use recent::{Cursor, RequestRow, RequestsQuery, StatusFilter};
pub use row::{expand_tried, now_ms, rollup, sql_int, DailyCell, DailyKey, Row, Sums};
pub use series::{Bucket, Series, SeriesBy, SeriesGroup, SeriesQuery};
pub use writer::{LedgerSettings, BATCH_ROWS, DEFAULT_QUEUE, DEFAULT_RETENTION_DAYS, FLUSH_EVERY};
