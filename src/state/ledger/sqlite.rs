//! The usage ledger in an embedded SQLite file (`DIR/ledger.sqlite`): the
//! writer's [`Backend`] and the admin API's queries.
//!
//! WAL journal, so the admin API reads (on their own read-only connection)
//! while the writer writes, and `synchronous=NORMAL`: a power cut may lose
//! the last transactions, never corrupt the file. A busy timeout lets two
//! processes share the file (the old and new process of a zero-downtime
//! upgrade).

use super::{sql_int, Backend, Group, GroupBy, Row, Usage, UsageQuery};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::time::Duration;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ledger_requests (
    request_id        TEXT NOT NULL,
    time_ms           INTEGER NOT NULL,
    key_id            TEXT NOT NULL,
    family            TEXT NOT NULL,
    provider          TEXT,
    model             TEXT,
    upstream_protocol TEXT,
    upstream_host     TEXT,
    status            INTEGER NOT NULL,
    input_tokens      INTEGER,
    output_tokens     INTEGER,
    cached_tokens     INTEGER,
    reasoning_tokens  INTEGER,
    cost_usd          REAL,
    latency_ms        REAL NOT NULL,
    ttft_ms           REAL
);
CREATE INDEX IF NOT EXISTS ledger_requests_time ON ledger_requests (time_ms);
CREATE TABLE IF NOT EXISTS ledger_daily (
    day              TEXT NOT NULL,
    key_id           TEXT NOT NULL,
    provider         TEXT NOT NULL,
    model            TEXT NOT NULL,
    requests         INTEGER NOT NULL,
    errors           INTEGER NOT NULL,
    input_tokens     INTEGER NOT NULL,
    output_tokens    INTEGER NOT NULL,
    cached_tokens    INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL,
    cost_usd         REAL NOT NULL,
    PRIMARY KEY (day, key_id, provider, model)
) WITHOUT ROWID;
";

/// Columns added since the first schema ([`SCHEMA`]), and their
/// declarations: every file gets them at open ([`migrate`]), a new one and
/// one made before them alike (so the columns are in one order in both);
/// old rows read as null (a request's row) or 0 (a rollup).
const ADDED: [(&str, &str); 4] = [
    ("ledger_requests", "cache_write_tokens INTEGER"),
    (
        "ledger_daily",
        "cache_write_tokens INTEGER NOT NULL DEFAULT 0",
    ),
    ("ledger_requests", "team TEXT"),
    ("ledger_daily", "team TEXT NOT NULL DEFAULT ''"),
];

const INSERT: &str = "INSERT INTO ledger_requests (request_id, time_ms, key_id, family, provider, model, upstream_protocol, upstream_host, status, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost_usd, latency_ms, ttft_ms, team) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)";

const UPSERT: &str = "INSERT INTO ledger_daily (day, key_id, provider, model, requests, errors, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost_usd, team) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
ON CONFLICT (day, key_id, provider, model) DO UPDATE SET
    team = excluded.team,
    requests = requests + excluded.requests,
    errors = errors + excluded.errors,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cached_tokens = cached_tokens + excluded.cached_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
    reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
    cost_usd = cost_usd + excluded.cost_usd";

fn err(e: rusqlite::Error) -> String {
    e.to_string()
}

/// The writer's connection to `ledger.sqlite`.
pub struct Sqlite {
    conn: Connection,
    path: PathBuf,
}

impl Sqlite {
    /// Opens (creating when missing) the ledger file and its tables.
    pub fn open(path: &Path) -> Result<Sqlite, String> {
        Sqlite::try_open(path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// [`Sqlite::open`], with SQLite's own error (see [`is_full`]).
    pub fn try_open(path: &Path) -> rusqlite::Result<Sqlite> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        // journal_mode answers with a row; read it rather than execute.
        let _: Option<String> = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .optional()?;
        conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
        conn.execute_batch(SCHEMA)?;
        migrate(&conn)?;
        Ok(Sqlite {
            conn,
            path: path.to_path_buf(),
        })
    }
}

/// Adds the [`ADDED`] columns a ledger file made before them lacks. Two
/// processes opening an old file at once (an upgrade) may both try: the one
/// that finds the column there already has nothing to do.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    for (table, decl) in ADDED {
        let column = decl.split(' ').next().unwrap_or(decl);
        if has_column(conn, table, column)? {
            continue;
        }
        if let Err(e) = conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {decl}")) {
            if !has_column(conn, table, column)? {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Whether `table` has `column` (a file not yet opened by a writer of this
/// version lacks the [`ADDED`] ones).
fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2",
        params![table, column],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Whether `e` says the disk is full.
pub fn is_full(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DiskFull)
}

/// The ledger file opened on the first write that can (a start on a full
/// disk: the writer holds the rows and retries until the file can be made).
pub struct Lazy {
    path: PathBuf,
    db: Option<Sqlite>,
}

impl Lazy {
    /// The ledger file at `path`, opened when first written.
    pub fn new(path: &Path) -> Lazy {
        Lazy {
            path: path.to_path_buf(),
            db: None,
        }
    }

    fn db(&mut self) -> Result<&mut Sqlite, String> {
        if self.db.is_none() {
            if let Some(dir) = self.path.parent() {
                // A start on a full disk may not have made it.
                let _ = std::fs::create_dir_all(dir);
            }
            self.db = Some(Sqlite::open(&self.path)?);
        }
        self.db
            .as_mut()
            .ok_or_else(|| format!("{}: not open", self.path.display()))
    }
}

impl Backend for Lazy {
    fn write(&mut self, rows: &[Row]) -> Result<(), String> {
        self.db()?.write(rows)
    }

    fn purge(&mut self, before_ms: i64) -> Result<u64, String> {
        self.db()?.purge(before_ms)
    }

    fn describe(&self) -> String {
        format!("sqlite {}", self.path.display())
    }
}

impl Backend for Sqlite {
    fn write(&mut self, rows: &[Row]) -> Result<(), String> {
        let tx = self.conn.transaction().map_err(err)?;
        {
            let mut ins = tx.prepare_cached(INSERT).map_err(err)?;
            for r in rows {
                ins.execute(params![
                    r.request_id,
                    r.time_ms,
                    r.key_id,
                    r.family,
                    r.provider,
                    r.model,
                    r.upstream_protocol,
                    r.upstream_host,
                    r.status,
                    sql_int(r.input_tokens),
                    sql_int(r.output_tokens),
                    sql_int(r.cached_tokens),
                    sql_int(r.cache_write_tokens),
                    sql_int(r.reasoning_tokens),
                    r.cost_usd,
                    r.latency_ms,
                    r.ttft_ms,
                    r.team,
                ])
                .map_err(err)?;
            }
            let mut up = tx.prepare_cached(UPSERT).map_err(err)?;
            for ((day, key, provider, model), (team, s)) in super::rollup(rows) {
                up.execute(params![
                    day,
                    key,
                    provider,
                    model,
                    s.requests,
                    s.errors,
                    s.input_tokens,
                    s.output_tokens,
                    s.cached_tokens,
                    s.cache_write_tokens,
                    s.reasoning_tokens,
                    s.cost_usd,
                    team,
                ])
                .map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    fn purge(&mut self, before_ms: i64) -> Result<u64, String> {
        // In slices, so the write lock is never held long.
        let mut total = 0u64;
        loop {
            let n = self
                .conn
                .execute(
                    "DELETE FROM ledger_requests WHERE rowid IN (SELECT rowid FROM ledger_requests WHERE time_ms < ?1 LIMIT 5000)",
                    params![before_ms],
                )
                .map_err(err)?;
            total += n as u64;
            if n < 5000 {
                return Ok(total);
            }
        }
    }

    fn describe(&self) -> String {
        format!("sqlite {}", self.path.display())
    }
}

/// The SQL of a usage query: `SELECT group, sums FROM table WHERE filters GROUP BY group`.
/// `writes`: the table has `cache_write_tokens` (else they sum to 0);
/// `teams`: it has `team` (else every request is of no team).
fn usage_sql(q: &UsageQuery, rollups: bool, writes: bool, teams: bool) -> String {
    let (table, group_col, sums, time_filter) = if rollups {
        (
            "ledger_daily",
            match q.group_by {
                Some(GroupBy::Key) => "key_id",
                Some(GroupBy::Team) if teams => "team",
                Some(GroupBy::Team) => "''",
                Some(GroupBy::Model) => "CASE WHEN provider = '' THEN model ELSE provider || '/' || model END",
                Some(GroupBy::Day) => "day",
                None => "''",
            },
            "SUM(requests), SUM(errors), SUM(input_tokens), SUM(output_tokens), SUM(cached_tokens), SUM(reasoning_tokens), TOTAL(cost_usd), SUM(cache_write_tokens)",
            "(?3 IS NULL OR day >= ?3) AND (?4 IS NULL OR day <= ?4)",
        )
    } else {
        (
            "ledger_requests",
            match q.group_by {
                Some(GroupBy::Key) => "key_id",
                Some(GroupBy::Team) if teams => "COALESCE(team, '')",
                Some(GroupBy::Team) => "''",
                Some(GroupBy::Model) => "CASE WHEN provider IS NULL THEN COALESCE(model, '') ELSE provider || '/' || COALESCE(model, '') END",
                Some(GroupBy::Day) => "strftime('%Y-%m-%d', time_ms / 1000, 'unixepoch')",
                None => "''",
            },
            "COUNT(*), SUM(status >= 400), TOTAL(input_tokens), TOTAL(output_tokens), TOTAL(cached_tokens), TOTAL(reasoning_tokens), TOTAL(cost_usd), TOTAL(cache_write_tokens)",
            "(?3 IS NULL OR time_ms >= ?3) AND (?4 IS NULL OR time_ms < ?4)",
        )
    };
    let model_filter = "(?2 IS NULL OR model = ?2 OR provider || '/' || model = ?2)";
    let team_filter = if teams {
        "(?5 IS NULL OR team = ?5)"
    } else {
        "(?5 IS NULL)"
    };
    let sums = if writes {
        sums.to_string()
    } else {
        sums.replace("SUM(cache_write_tokens)", "0")
            .replace("TOTAL(cache_write_tokens)", "0")
    };
    format!(
        "SELECT {group_col} AS g, {sums} FROM {table} WHERE (?1 IS NULL OR key_id = ?1) AND {model_filter} AND {team_filter} AND {time_filter} GROUP BY g ORDER BY g"
    )
}

/// Answers a usage query from `path` on a read-only connection.
pub fn usage(path: &Path, q: &UsageQuery) -> Result<Usage, String> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(err)?;
    let day_range = q.day_range();
    let table = if day_range.is_some() {
        "ledger_daily"
    } else {
        "ledger_requests"
    };
    // A file made by an earlier version and not yet written by this one.
    let writes = has_column(&conn, table, "cache_write_tokens").map_err(err)?;
    let teams = has_column(&conn, table, "team").map_err(err)?;
    let mut stmt = conn
        .prepare(&usage_sql(q, day_range.is_some(), writes, teams))
        .map_err(err)?;
    let read = |r: &rusqlite::Row<'_>| -> rusqlite::Result<Group> {
        // TOTAL() is a float; token sums are exact integers well below 2^53.
        let int = |i: usize| -> rusqlite::Result<i64> {
            Ok(match r.get_ref(i)? {
                rusqlite::types::ValueRef::Integer(n) => n,
                rusqlite::types::ValueRef::Real(f) => f as i64,
                _ => 0,
            })
        };
        Ok(Group {
            value: r.get(0)?,
            sums: super::Sums {
                requests: int(1)?,
                errors: int(2)?,
                input_tokens: int(3)?,
                output_tokens: int(4)?,
                cached_tokens: int(5)?,
                reasoning_tokens: int(6)?,
                cost_usd: r.get(7)?,
                cache_write_tokens: int(8)?,
            },
        })
    };
    let groups = match &day_range {
        Some((from, to)) => stmt
            .query_map(params![q.key, q.model, from, to, q.team], read)
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>(),
        None => stmt
            .query_map(
                params![
                    q.key,
                    q.model,
                    q.from.map(|b| b.start_ms()),
                    q.to.map(|b| b.end_ms()),
                    q.team
                ],
                read,
            )
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>(),
    }
    .map_err(err)?;
    Ok(Usage {
        source: if day_range.is_some() {
            "rollups"
        } else {
            "rows"
        },
        // A query without group_by over no rows has one all-null row: count 0.
        groups: groups.into_iter().filter(|g| g.sums.requests > 0).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ledger::{Bound, Sums};

    fn row(key: &str, provider: &str, model: &str, time_ms: i64, input: u64) -> Row {
        Row {
            request_id: format!("r{time_ms}"),
            time_ms,
            key_id: key.into(),
            team: None,
            family: "openai",
            provider: Some(provider.into()),
            model: Some(model.into()),
            upstream_protocol: Some("openai"),
            upstream_host: Some("127.0.0.1:1".into()),
            status: 200,
            input_tokens: Some(input),
            output_tokens: Some(1),
            cached_tokens: None,
            cache_write_tokens: Some(2),
            reasoning_tokens: None,
            cost_usd: Some(0.25),
            latency_ms: 3.0,
            ttft_ms: Some(1.0),
        }
    }

    #[test]
    fn writes_rollups_and_answers_from_both() {
        let dir = std::env::temp_dir().join(format!("sb-ledger-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.sqlite");
        let mut db = Sqlite::open(&path).unwrap();
        let day = 86_400_000;
        db.write(&[
            row("a", "openai", "gpt-5", 10, 3),
            row("a", "openai", "gpt-5", day + 10, 4),
        ])
        .unwrap();
        db.write(&[row("b", "google", "gemini", day + 20, 5)])
            .unwrap();
        let q = UsageQuery {
            group_by: Some(GroupBy::Day),
            ..UsageQuery::default()
        };
        let u = usage(&path, &q).unwrap();
        assert_eq!(u.source, "rollups");
        let days: Vec<_> = u
            .groups
            .iter()
            .map(|g| (g.value.as_str(), g.sums.requests, g.sums.input_tokens))
            .collect();
        assert_eq!(days, [("1970-01-01", 1, 3), ("1970-01-02", 2, 9)]);
        // The same from the rows (an instant bound), with a model filter.
        let q = UsageQuery {
            group_by: Some(GroupBy::Key),
            model: Some("openai/gpt-5".into()),
            from: Bound::parse("1970-01-01T00:00:00Z"),
            ..UsageQuery::default()
        };
        let u = usage(&path, &q).unwrap();
        assert_eq!(u.source, "rows");
        assert_eq!(u.groups.len(), 1);
        assert_eq!(
            u.groups[0].sums,
            Sums {
                requests: 2,
                errors: 0,
                input_tokens: 7,
                output_tokens: 2,
                cached_tokens: 0,
                cache_write_tokens: 4,
                reasoning_tokens: 0,
                cost_usd: 0.5
            }
        );
        // Retention deletes rows, never rollups.
        assert_eq!(db.purge(day).unwrap(), 1);
        let all = usage(&path, &UsageQuery::default()).unwrap();
        assert_eq!(all.groups[0].sums.requests, 3);
        let q = UsageQuery {
            from: Bound::parse("1970-01-01T00:00:00Z"),
            ..UsageQuery::default()
        };
        assert_eq!(usage(&path, &q).unwrap().groups[0].sums.requests, 2);
        // Nothing matches: no groups.
        let q = UsageQuery {
            key: Some("nobody".into()),
            ..UsageQuery::default()
        };
        assert!(usage(&path, &q).unwrap().groups.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_ledger_made_before_cache_writes_is_migrated() {
        let dir = std::env::temp_dir().join(format!("sb-ledger-mig-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.sqlite");
        // A file as the first schema left it, with a row and its rollup.
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(SCHEMA).unwrap();
            old.execute_batch(
                "INSERT INTO ledger_requests (request_id, time_ms, key_id, family, status, input_tokens, output_tokens, cost_usd, latency_ms)
                     VALUES ('old', 10, 'a', 'openai', 200, 7, 3, 0.5, 12.0);
                 INSERT INTO ledger_daily VALUES ('1970-01-01', 'a', 'openai', 'gpt-5', 1, 0, 7, 3, 0, 0, 0.5);",
            )
            .unwrap();
        }
        // Read before any writer of this version opened it (an upgrade,
        // before its first request): the writes sum to 0.
        for q in [
            UsageQuery::default(),
            UsageQuery {
                from: Bound::parse("1970-01-01T00:00:00Z"),
                ..UsageQuery::default()
            },
        ] {
            let s = usage(&path, &q).unwrap().groups[0].sums;
            assert_eq!((s.requests, s.cache_write_tokens), (1, 0));
        }
        // Opened twice, as two processes on one file would: the second finds
        // the columns there.
        let mut db = Sqlite::open(&path).unwrap();
        drop(Sqlite::open(&path).unwrap());
        db.write(&[row("a", "openai", "gpt-5", 20, 5)]).unwrap();
        for (q, want) in [
            (UsageQuery::default(), 2),
            (
                UsageQuery {
                    from: Bound::parse("1970-01-01T00:00:00Z"),
                    ..UsageQuery::default()
                },
                2,
            ),
        ] {
            let u = usage(&path, &q).unwrap();
            let s = u.groups[0].sums;
            assert_eq!((s.requests, s.input_tokens), (2, 12), "{}", u.source);
            assert_eq!(s.cache_write_tokens, want, "{}", u.source);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Rows carry the key's team: grouped by team and filtered by it, from
    /// the rollups and from the rows alike; keys in no team group under "".
    #[test]
    fn usage_by_team() {
        let dir = std::env::temp_dir().join(format!("sb-ledger-team-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.sqlite");
        let mut db = Sqlite::open(&path).unwrap();
        let in_team = |key: &str, t: i64| Row {
            team: Some("ml".into()),
            ..row(key, "openai", "gpt-5", t, 2)
        };
        db.write(&[
            in_team("a", 10),
            in_team("b", 20),
            row("c", "openai", "gpt-5", 30, 2),
        ])
        .unwrap();
        for from in [None, Bound::parse("1970-01-01T00:00:00Z")] {
            let q = UsageQuery {
                group_by: Some(GroupBy::Team),
                from,
                ..UsageQuery::default()
            };
            let u = usage(&path, &q).unwrap();
            let groups: Vec<_> = u
                .groups
                .iter()
                .map(|g| (g.value.as_str(), g.sums.requests))
                .collect();
            assert_eq!(groups, [("", 1), ("ml", 2)], "{}", u.source);
            let q = UsageQuery {
                team: Some("ml".into()),
                group_by: Some(GroupBy::Key),
                from,
                ..UsageQuery::default()
            };
            let keys: Vec<_> = usage(&path, &q)
                .unwrap()
                .groups
                .into_iter()
                .map(|g| g.value)
                .collect();
            assert_eq!(keys, ["a", "b"]);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
