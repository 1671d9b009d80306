//! The admin API's view of the ledger (`GET /admin/usage`, docs/operations.md
//! "Usage ledger"): the query (bounds, grouping), its answer, and the reader
//! that asks the SQLite file or PostgreSQL (the console's series and request
//! pages too).

use super::calendar::{day_string, DAY_MS};
use super::recent::{RequestRow, RequestsQuery};
use super::series::{Series, SeriesQuery};
use super::{pg, sqlite, Sums};
use crate::util::rfc3339::Parsed;

/// What `GET /admin/usage` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Key,
    /// The key's team (`""` for keys in none).
    Team,
    Model,
    Day,
}

impl GroupBy {
    pub fn parse(s: &str) -> Option<GroupBy> {
        match s {
            "key" => Some(GroupBy::Key),
            "team" => Some(GroupBy::Team),
            "model" => Some(GroupBy::Model),
            "day" => Some(GroupBy::Day),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Key => "key",
            GroupBy::Team => "team",
            GroupBy::Model => "model",
            GroupBy::Day => "day",
        }
    }
}

/// A `from` / `to` bound: a whole UTC day (`YYYY-MM-DD`, inclusive) or an
/// instant (RFC 3339; `from` inclusive, `to` exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Days since 1970-01-01.
    Day(i64),
    /// Unix milliseconds.
    Instant(i64),
}

impl Bound {
    /// Parses `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
    pub fn parse(s: &str) -> Option<Bound> {
        Some(match crate::util::rfc3339::parse(s)? {
            Parsed::Day(d) => Bound::Day(d),
            Parsed::Millis(ms) => Bound::Instant(ms),
        })
    }

    /// The first millisecond this bound admits (as `from`).
    pub fn start_ms(self) -> i64 {
        match self {
            Bound::Day(d) => d * DAY_MS,
            Bound::Instant(ms) => ms,
        }
    }

    /// The first millisecond past this bound (as `to`).
    pub fn end_ms(self) -> i64 {
        match self {
            Bound::Day(d) => (d + 1) * DAY_MS,
            Bound::Instant(ms) => ms,
        }
    }
}

/// A `GET /admin/usage` query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageQuery {
    /// Key id.
    pub key: Option<String>,
    /// Team id: the requests of the team's keys.
    pub team: Option<String>,
    /// `model_id` or `provider/model_id`.
    pub model: Option<String>,
    pub from: Option<Bound>,
    pub to: Option<Bound>,
    pub group_by: Option<GroupBy>,
}

impl UsageQuery {
    /// The day range (`YYYY-MM-DD`, inclusive) when every bound is a whole
    /// day: then the rollups answer (they outlive the rows' retention).
    /// `None` when a bound is an instant: then the rows answer.
    pub fn day_range(&self) -> Option<(Option<String>, Option<String>)> {
        let day = |b: Option<Bound>| match b {
            None => Some(None),
            Some(Bound::Day(d)) => Some(Some(day_string(d))),
            Some(Bound::Instant(_)) => None,
        };
        Some((day(self.from)?, day(self.to)?))
    }
}

/// One group of a usage answer: its key (absent without `group_by`) and sums.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The key id, the team id (`""` for keys in no team), `provider/model_id`
    /// (`""` when the model was never resolved), or `YYYY-MM-DD`.
    pub value: String,
    pub sums: Sums,
}

/// The answer to a usage query.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    /// `rollups` (whole days) or `rows` (a bound was an instant).
    pub source: &'static str,
    pub groups: Vec<Group>,
}

/// Where the admin API reads the ledger from.
#[derive(Debug, Clone)]
pub enum Reader {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl Reader {
    /// Runs a query on the SQLite file off the reactor.
    async fn on_file<Q, T>(
        path: &std::path::Path,
        q: &Q,
        f: fn(&std::path::Path, &Q) -> Result<T, String>,
    ) -> Result<T, String>
    where
        Q: Clone + Send + 'static,
        T: Send + 'static,
    {
        let (path, q) = (path.to_path_buf(), q.clone());
        tokio::task::spawn_blocking(move || f(&path, &q))
            .await
            .map_err(|e| format!("ledger query task failed: {e}"))?
    }

    /// Sums of the ledger for `q`.
    pub async fn usage(&self, q: &UsageQuery) -> Result<Usage, String> {
        match self {
            Reader::Sqlite(path) => Reader::on_file(path, q, sqlite::usage).await,
            Reader::Postgres(url) => pg::usage(url, q).await,
        }
    }

    /// The console's time series for `q`.
    pub async fn series(&self, q: &SeriesQuery) -> Result<Series, String> {
        match self {
            Reader::Sqlite(path) => Reader::on_file(path, q, sqlite::series).await,
            Reader::Postgres(url) => pg::series(url, q).await,
        }
    }

    /// A page of the latest requests for `q`, newest first.
    pub async fn requests(&self, q: &RequestsQuery) -> Result<Vec<RequestRow>, String> {
        match self {
            Reader::Sqlite(path) => Reader::on_file(path, q, sqlite::requests).await,
            Reader::Postgres(url) => pg::requests(url, q).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse() {
        assert_eq!(Bound::parse("1970-01-02"), Some(Bound::Day(1)));
        assert_eq!(Bound::parse("2026-02-30"), None);
        assert_eq!(Bound::parse("2026-13-01"), None);
        assert_eq!(
            Bound::parse("1970-01-01T00:00:01Z"),
            Some(Bound::Instant(1000))
        );
        assert_eq!(
            Bound::parse("1970-01-01T00:00:01.5Z"),
            Some(Bound::Instant(1500))
        );
        assert_eq!(
            Bound::parse("1970-01-01T01:00:00+01:00"),
            Some(Bound::Instant(0))
        );
        assert_eq!(Bound::parse("1970-01-01T00:00:00"), None);
        assert_eq!(Bound::parse("yesterday"), None);
        for d in [-1000, 0, 19_000, 20_454, 100_000] {
            assert_eq!(Bound::parse(&day_string(d)), Some(Bound::Day(d)));
        }
        assert_eq!(Bound::Day(1).end_ms(), 2 * DAY_MS);
    }

    #[test]
    fn day_range_only_for_whole_days() {
        let mut q = UsageQuery {
            from: Bound::parse("2026-01-01"),
            ..UsageQuery::default()
        };
        assert_eq!(q.day_range(), Some((Some("2026-01-01".to_string()), None)));
        q.to = Bound::parse("2026-01-01T10:00:00Z");
        assert_eq!(q.day_range(), None);
    }
}
