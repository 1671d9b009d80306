//! The usage ledger in an embedded SQLite file (`DIR/ledger.sqlite`): the
//! writer's [`Backend`] and the admin API's queries.
//!
//! WAL journal, so the admin API reads (on their own read-only connection)
//! while the writer writes, and `synchronous=NORMAL`: a power cut may lose
//! the last transactions, never corrupt the file. A busy timeout lets two
//! processes share the file (the old and new process of a zero-downtime
//! upgrade).

use super::calendar::DAY_MS;
use super::recent::{RequestRow, RequestsQuery};
use super::series::{Bucket, Cell, Series, SeriesBy, SeriesQuery};
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
const ADDED: [(&str, &str); 8] = [
    ("ledger_requests", "cache_write_tokens INTEGER"),
    (
        "ledger_daily",
        "cache_write_tokens INTEGER NOT NULL DEFAULT 0",
    ),
    ("ledger_requests", "team TEXT"),
    ("ledger_daily", "team TEXT NOT NULL DEFAULT ''"),
    // The request's attempts (a JSON array), adjustments and error, for the
    // console's request list (docs/operations.md "Console").
    ("ledger_requests", "tried TEXT"),
    ("ledger_requests", "adjusted TEXT"),
    ("ledger_requests", "error TEXT"),
    // Summed latency, for the mean per day (0 in rollups made before it).
    ("ledger_daily", "latency_ms_sum REAL NOT NULL DEFAULT 0"),
];

/// Indexes made after the [`ADDED`] columns: a key's latest requests are
/// read by key, then time (the console's request list filtered by key).
const INDEXES: &str =
    "CREATE INDEX IF NOT EXISTS ledger_requests_key_time ON ledger_requests (key_id, time_ms);";

/// The columns a request's row sets, in [`bind_row`]'s order.
const COLUMNS: usize = 21;

const INSERT_INTO: &str = "INSERT INTO ledger_requests (request_id, time_ms, key_id, family, provider, model, upstream_protocol, upstream_host, status, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost_usd, latency_ms, ttft_ms, team, tried, adjusted, error) VALUES ";

/// Rows one INSERT statement writes, largest first: a batch goes in as
/// many statements of the first size as it holds, what is left in
/// statements of the next, and so on, so a statement's start, end and reset
/// are paid once for many rows (`benches/ledger.rs`: docs/performance.md
/// "The ledger's writes"). A batch under load is 256 rows, eight of 32; a
/// quieter writer's batch of, say, 45 takes 32 + 8 + 5 × 1. 32 rows bind
/// 672 parameters, far below SQLite's limit (32,766).
const INSERT_ROWS: [usize; 3] = [32, 8, 1];

/// `INSERT ... VALUES (?, ...), ...` of `rows` rows, numbered parameters.
fn insert_sql(rows: usize) -> String {
    let mut sql = String::from(INSERT_INTO);
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..COLUMNS {
            if c > 0 {
                sql.push_str(", ");
            }
            sql.push('?');
            sql.push_str(&(r * COLUMNS + c + 1).to_string());
        }
        sql.push(')');
    }
    sql
}

/// Binds `r`'s columns to the parameters after `base` (the row's place in
/// a multi-row statement times [`COLUMNS`]); `tried` is a buffer for the
/// attempts' JSON, reused row after row (SQLite copies a bound text).
fn bind_row(
    stmt: &mut rusqlite::Statement<'_>,
    base: usize,
    r: &Row,
    tried: &mut Vec<u8>,
) -> rusqlite::Result<()> {
    tried.clear();
    r.write_tried(tried);
    let p = |i: usize| base + i;
    stmt.raw_bind_parameter(p(1), &r.request_id)?;
    stmt.raw_bind_parameter(p(2), r.time_ms)?;
    stmt.raw_bind_parameter(p(3), &r.key_id)?;
    stmt.raw_bind_parameter(p(4), r.family)?;
    stmt.raw_bind_parameter(p(5), &r.provider)?;
    stmt.raw_bind_parameter(p(6), &r.model)?;
    stmt.raw_bind_parameter(p(7), r.upstream_protocol)?;
    stmt.raw_bind_parameter(p(8), &r.upstream_host)?;
    stmt.raw_bind_parameter(p(9), r.status)?;
    stmt.raw_bind_parameter(p(10), sql_int(r.input_tokens))?;
    stmt.raw_bind_parameter(p(11), sql_int(r.output_tokens))?;
    stmt.raw_bind_parameter(p(12), sql_int(r.cached_tokens))?;
    stmt.raw_bind_parameter(p(13), sql_int(r.cache_write_tokens))?;
    stmt.raw_bind_parameter(p(14), sql_int(r.reasoning_tokens))?;
    stmt.raw_bind_parameter(p(15), r.cost_usd)?;
    stmt.raw_bind_parameter(p(16), r.latency_ms)?;
    stmt.raw_bind_parameter(p(17), r.ttft_ms)?;
    stmt.raw_bind_parameter(p(18), &r.team)?;
    stmt.raw_bind_parameter(p(19), std::str::from_utf8(tried).unwrap_or("[]"))?;
    stmt.raw_bind_parameter(p(20), &r.adjusted)?;
    stmt.raw_bind_parameter(p(21), &r.error)
}

const UPSERT: &str = "INSERT INTO ledger_daily (day, key_id, provider, model, requests, errors, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost_usd, team, latency_ms_sum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
ON CONFLICT (day, key_id, provider, model) DO UPDATE SET
    team = excluded.team,
    requests = requests + excluded.requests,
    errors = errors + excluded.errors,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cached_tokens = cached_tokens + excluded.cached_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
    reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
    cost_usd = cost_usd + excluded.cost_usd,
    latency_ms_sum = latency_ms_sum + excluded.latency_ms_sum";

fn err(e: rusqlite::Error) -> String {
    e.to_string()
}

/// The writer's connection to `ledger.sqlite`.
pub struct Sqlite {
    conn: Connection,
    path: PathBuf,
    /// The INSERT of each of [`INSERT_ROWS`]' sizes, in its order.
    inserts: [String; INSERT_ROWS.len()],
    /// A row's attempts as JSON, while it is bound ([`bind_row`]).
    tried: Vec<u8>,
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
        crate::state::sqlite_wal_settings(&conn)?;
        conn.execute_batch(SCHEMA)?;
        migrate(&conn)?;
        Ok(Sqlite {
            conn,
            path: path.to_path_buf(),
            inserts: INSERT_ROWS.map(insert_sql),
            tried: Vec::new(),
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
    conn.execute_batch(INDEXES)
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
            let mut rest = rows;
            for (sql, size) in self.inserts.iter().zip(INSERT_ROWS) {
                let whole = rest.len() / size * size;
                if whole == 0 {
                    continue;
                }
                let mut insert = tx.prepare_cached(sql).map_err(err)?;
                for chunk in rest[..whole].chunks_exact(size) {
                    for (i, r) in chunk.iter().enumerate() {
                        bind_row(&mut insert, i * COLUMNS, r, &mut self.tried).map_err(err)?;
                    }
                    insert.raw_execute().map_err(err)?;
                }
                rest = &rest[whole..];
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
                    s.latency_ms,
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
/// `teams`: it has `team` (else every request is of no team);
/// `latency`: the rollups have `latency_ms_sum` (else it sums to 0).
fn usage_sql(q: &UsageQuery, rollups: bool, writes: bool, teams: bool, latency: bool) -> String {
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
            "SUM(requests), SUM(errors), SUM(input_tokens), SUM(output_tokens), SUM(cached_tokens), SUM(reasoning_tokens), TOTAL(cost_usd), SUM(cache_write_tokens), TOTAL(latency_ms_sum)",
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
            "COUNT(*), SUM(status >= 400), TOTAL(input_tokens), TOTAL(output_tokens), TOTAL(cached_tokens), TOTAL(reasoning_tokens), TOTAL(cost_usd), TOTAL(cache_write_tokens), TOTAL(latency_ms)",
            "(?3 IS NULL OR time_ms >= ?3) AND (?4 IS NULL OR time_ms < ?4)",
        )
    };
    let model_filter = "(?2 IS NULL OR model = ?2 OR provider || '/' || model = ?2)";
    let team_filter = if teams {
        "(?5 IS NULL OR team = ?5)"
    } else {
        "(?5 IS NULL)"
    };
    let mut sums = sums.to_string();
    if !writes {
        sums = sums
            .replace("SUM(cache_write_tokens)", "0")
            .replace("TOTAL(cache_write_tokens)", "0");
    }
    if !latency {
        sums = sums.replace("TOTAL(latency_ms_sum)", "0.0");
    }
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
    let latency = day_range.is_none() || has_column(&conn, table, "latency_ms_sum").map_err(err)?;
    let mut stmt = conn
        .prepare(&usage_sql(q, day_range.is_some(), writes, teams, latency))
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
                latency_ms: r.get(9)?,
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

/// A read-only connection for the admin API's queries.
fn read_only(path: &Path) -> Result<Connection, String> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(err)?;
    Ok(conn)
}

/// The SQL pieces of a series: (table, bucket start in ms, group, range
/// condition on `?1`/`?2`, sums: requests, errors, input, output, cost, latency).
fn series_sql(q: &SeriesQuery) -> [&'static str; 6] {
    match (q.bucket, q.by) {
        (Bucket::Hour, by) => [
            "ledger_requests",
            "(time_ms / 3600000) * 3600000",
            match by {
                SeriesBy::Team => "COALESCE(team, '')",
                SeriesBy::Key => "key_id",
                SeriesBy::Model => "CASE WHEN provider IS NULL THEN COALESCE(model, '') ELSE provider || '/' || COALESCE(model, '') END",
            },
            "time_ms >= ?1 AND time_ms < ?2",
            "COUNT(*), SUM(status >= 400), TOTAL(input_tokens), TOTAL(output_tokens), TOTAL(cost_usd), TOTAL(latency_ms)",
            "COUNT(*)",
        ],
        (Bucket::Day, by) => [
            "ledger_daily",
            "CAST(strftime('%s', day) AS INTEGER) * 1000",
            match by {
                SeriesBy::Team => "team",
                SeriesBy::Key => "key_id",
                SeriesBy::Model => "CASE WHEN provider = '' THEN model ELSE provider || '/' || model END",
            },
            "day >= ?1 AND day < ?2",
            "SUM(requests), SUM(errors), SUM(input_tokens), SUM(output_tokens), TOTAL(cost_usd), TOTAL(latency_ms_sum)",
            "SUM(requests)",
        ],
    }
}

/// The statements of a series: the top groups in the range, by cost then
/// requests; then each bucket's sums per group, every group outside the
/// top `n` (`?3`… its names) summed as NULL ("other").
fn series_statements(q: &SeriesQuery, n: usize) -> (String, String) {
    let [table, bucket, group, range, sums, count] = series_sql(q);
    let top = format!(
        "SELECT {group} AS g FROM {table} WHERE {range} GROUP BY g ORDER BY TOTAL(cost_usd) DESC, {count} DESC, g LIMIT ?3"
    );
    let names = (0..n)
        .map(|i| format!("?{}", i + 3))
        .collect::<Vec<_>>()
        .join(", ");
    let cells = format!(
        "SELECT {bucket} AS b, CASE WHEN {group} IN ({names}) THEN {group} END AS gg, {sums} FROM {table} WHERE {range} GROUP BY b, gg"
    );
    (top, cells)
}

/// Answers a series query from `path` (docs/operations.md "Console").
pub fn series(path: &Path, q: &SeriesQuery) -> Result<Series, String> {
    let conn = read_only(path)?;
    let (lo, hi): (Box<dyn rusqlite::ToSql>, Box<dyn rusqlite::ToSql>) = match q.bucket {
        Bucket::Hour => (Box::new(q.from_ms), Box::new(q.to_ms)),
        Bucket::Day => (
            Box::new(super::day_string(q.from_ms.div_euclid(DAY_MS))),
            Box::new(super::day_string(q.to_ms.div_euclid(DAY_MS))),
        ),
    };
    let (top_sql, _) = series_statements(q, 0);
    let top: Vec<String> = conn
        .prepare(&top_sql)
        .map_err(err)?
        .query_map(params![lo, hi, q.top as i64], |r| {
            r.get::<_, Option<String>>(0).map(Option::unwrap_or_default)
        })
        .map_err(err)?
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let source = match q.bucket {
        Bucket::Hour => "rows",
        Bucket::Day => "rollups",
    };
    if top.is_empty() {
        return Ok(Series::assemble(q, source, &top, Vec::new()));
    }
    let (_, cells_sql) = series_statements(q, top.len());
    let mut args: Vec<&dyn rusqlite::ToSql> = vec![&*lo, &*hi];
    args.extend(top.iter().map(|t| t as &dyn rusqlite::ToSql));
    let cells = conn
        .prepare(&cells_sql)
        .map_err(err)?
        .query_map(args.as_slice(), |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, Option<String>>(1)?,
                super::Sums {
                    requests: r.get(2)?,
                    errors: r.get(3)?,
                    input_tokens: r.get::<_, f64>(4)? as i64,
                    output_tokens: r.get::<_, f64>(5)? as i64,
                    cost_usd: r.get(6)?,
                    latency_ms: r.get(7)?,
                    ..super::Sums::default()
                },
            ))
        })
        .map_err(err)?
        .collect::<Result<Vec<Cell>, _>>()
        .map_err(err)?;
    Ok(Series::assemble(q, source, &top, cells))
}

/// The columns of a request as the list reads them.
const REQUEST_COLUMNS: &str = "request_id, time_ms, key_id, family, provider, model, upstream_protocol, upstream_host, status, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost_usd, latency_ms, ttft_ms, tried, adjusted, error";

/// The statement of a request page and its arguments: only the filters
/// given, so SQLite reads the (key, time) index for a key and the time
/// index otherwise, from the cursor on.
fn requests_statement(q: &RequestsQuery) -> (String, Vec<Box<dyn rusqlite::ToSql>>) {
    let mut conds = Vec::new();
    let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
    if let Some(k) = &q.key {
        args.push(Box::new(k.clone()));
        conds.push(format!("key_id = ?{}", args.len()));
    }
    if let Some(m) = &q.model {
        args.push(Box::new(m.clone()));
        let i = args.len();
        conds.push(format!("(model = ?{i} OR provider || '/' || model = ?{i})"));
    }
    if let Some(c) = &q.before {
        args.push(Box::new(c.time_ms));
        args.push(Box::new(c.request_id.clone()));
        let (t, id) = (args.len() - 1, args.len());
        conds.push(format!(
            "time_ms <= ?{t} AND (time_ms < ?{t} OR request_id < ?{id})"
        ));
    }
    if let Some(s) = q.status {
        conds.push(s.sql());
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    let sql = format!(
        "SELECT {REQUEST_COLUMNS} FROM ledger_requests{filter} ORDER BY time_ms DESC, request_id DESC LIMIT {}",
        q.limit.clamp(1, super::recent::MAX_LIMIT)
    );
    (sql, args)
}

/// A page of the latest requests from `path`, newest first.
pub fn requests(path: &Path, q: &RequestsQuery) -> Result<Vec<RequestRow>, String> {
    let conn = read_only(path)?;
    let (sql, args) = requests_statement(q);
    let mut stmt = conn.prepare(&sql).map_err(err)?;
    let refs: Vec<&dyn rusqlite::ToSql> = args.iter().map(|a| &**a).collect();
    let rows = stmt
        .query_map(refs.as_slice(), |r| {
            Ok(RequestRow {
                request_id: r.get(0)?,
                time_ms: r.get(1)?,
                key_id: r.get(2)?,
                family: r.get(3)?,
                provider: r.get(4)?,
                model: r.get(5)?,
                upstream_protocol: r.get(6)?,
                upstream_host: r.get(7)?,
                status: r.get(8)?,
                input_tokens: r.get(9)?,
                output_tokens: r.get(10)?,
                cached_tokens: r.get(11)?,
                cache_write_tokens: r.get(12)?,
                reasoning_tokens: r.get(13)?,
                cost_usd: r.get(14)?,
                latency_ms: r.get(15)?,
                ttft_ms: r.get(16)?,
                tried: r.get(17)?,
                adjusted: r.get(18)?,
                error: r.get(19)?,
            })
        })
        .map_err(err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::obs::outcome::AttemptNote;
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
            tried: Vec::new(),
            adjusted: None,
            error: None,
        }
    }

    /// Every column of every row, read back in rowid order.
    fn stored_rows(path: &Path) -> Vec<Vec<rusqlite::types::Value>> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT request_id, time_ms, key_id, family, provider, model, upstream_protocol, upstream_host, status, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost_usd, latency_ms, ttft_ms, team, tried, adjusted, error FROM ledger_requests ORDER BY rowid")
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                (0..COLUMNS)
                    .map(|i| r.get::<_, rusqlite::types::Value>(i))
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .unwrap();
        rows.collect::<rusqlite::Result<Vec<_>>>().unwrap()
    }

    #[test]
    fn a_batch_in_multi_row_statements_keeps_every_row_as_one_by_one() {
        use rusqlite::types::Value;
        let dir = std::env::temp_dir().join(format!("sb-ledger-many-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Statements of every size: 2 x 32 + 8 + 7 x 1 rows, each unlike
        // its neighbours in every column that can differ, nulls included.
        let n = 2 * INSERT_ROWS[0] + INSERT_ROWS[1] + 7;
        let rows: Vec<Row> = (0..n)
            .map(|i| {
                let t = i64::try_from(i).unwrap();
                let u = u64::try_from(i).unwrap();
                let mut r = row(
                    &format!("k{}", i % 3),
                    "openai",
                    &format!("m{}", i % 2),
                    t,
                    u,
                );
                r.team = (i % 4 == 0).then(|| "ml".to_string());
                r.status = if i % 5 == 0 { 503 } else { 200 };
                r.cached_tokens = (i % 2 == 0).then_some(u);
                r.reasoning_tokens = (i % 3 == 0).then_some(u + 1);
                r.cost_usd = (i % 6 != 0).then_some(0.000_001 * (t as f64));
                r.ttft_ms = (i % 7 != 0).then_some(t as f64 / 4.0);
                r.adjusted = (i % 8 == 0).then(|| format!("temperature dropped {i}"));
                r.error = (i % 5 == 0).then(|| "upstream: 503".to_string());
                r.tried = vec![AttemptNote {
                    provider: "openai".into(),
                    model: format!("m{}", i % 2),
                    upstream: format!("u{i}"),
                    status: Some(r.status),
                    failure: (i % 5 == 0).then_some("status_5xx"),
                    cooled_ms: None,
                    ms: u,
                }];
                r
            })
            .collect();
        let many = dir.join("many.sqlite");
        Sqlite::open(&many).unwrap().write(&rows).unwrap();
        let one = dir.join("one.sqlite");
        let mut db = Sqlite::open(&one).unwrap();
        for r in &rows {
            db.write(std::slice::from_ref(r)).unwrap();
        }
        let stored = stored_rows(&many);
        assert_eq!(stored.len(), n);
        assert_eq!(stored, stored_rows(&one));
        // The values are the rows' own, in the rows' order.
        for (r, s) in rows.iter().zip(&stored) {
            assert_eq!(s[0], Value::Text(r.request_id.clone()));
            assert_eq!(s[2], Value::Text(r.key_id.clone()));
            assert_eq!(s[8], Value::Integer(i64::from(r.status)));
            assert_eq!(s[18], Value::Text(r.tried_json()));
            assert_eq!(s[20], r.error.clone().map_or(Value::Null, Value::Text));
        }
        // The rollups of the one batch are those of the single rows.
        let q = UsageQuery {
            group_by: Some(GroupBy::Key),
            ..UsageQuery::default()
        };
        let sums = |p: &Path| {
            let u = usage(p, &q).unwrap();
            assert_eq!(u.source, "rollups");
            u.groups
                .into_iter()
                .map(|g| (g.value, g.sums.requests, g.sums.errors, g.sums.input_tokens))
                .collect::<Vec<_>>()
        };
        assert_eq!(sums(&many), sums(&one));
        assert_eq!(sums(&many).iter().map(|g| g.1).sum::<i64>(), 79);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_wal_is_checkpointed_every_4000_pages() {
        let dir = std::env::temp_dir().join(format!("sb-ledger-wal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = Sqlite::open(&dir.join("ledger.sqlite")).unwrap();
        let pages: i64 = db
            .conn
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .unwrap();
        assert_eq!(pages, 4000);
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
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
                cost_usd: 0.5,
                latency_ms: 6.0,
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

    /// The plan SQLite chose for `sql`, one line per step.
    fn plan(path: &Path, sql: &str, args: &[&dyn rusqlite::ToSql]) -> String {
        let conn = read_only(path).unwrap();
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let steps: Vec<String> = stmt
            .query_map(args, |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        steps.join("\n")
    }

    #[test]
    fn series_and_request_pages_read_ranges_of_an_index() {
        let dir = std::env::temp_dir().join(format!("sb-ledger-console-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.sqlite");
        let mut db = Sqlite::open(&path).unwrap();
        let hour = 3_600_000;
        let mut rows = Vec::new();
        for i in 0..30i64 {
            let (key, model) = match i % 3 {
                0 => ("a", "gpt-5"),
                1 => ("b", "gpt-5"),
                _ => ("c", "mini"),
            };
            let mut r = row(key, "openai", model, 10 * hour + i * 60_000, 1);
            r.request_id = format!("req_{i:02}");
            r.cost_usd = Some(if key == "c" { 1.0 } else { 0.25 });
            r.status = if i == 7 { 502 } else { 200 };
            rows.push(r);
        }
        rows[7] = rows[7].clone().with_details(
            vec![crate::obs::outcome::AttemptNote {
                provider: "openai".into(),
                model: "gpt-5".into(),
                upstream: "east".into(),
                status: Some(503),
                failure: Some("status_5xx"),
                cooled_ms: Some(1000),
                ms: 12,
            }],
            Some("max_tokens=4096".into()),
            Some("upstream: 503".into()),
        );
        db.write(&rows).unwrap();

        // Hours, by key, top 1: "c" costs most; a and b are "other".
        let q = SeriesQuery::new(
            Bound::parse("1970-01-01T09:00:00Z"),
            Bound::parse("1970-01-01T12:00:00Z"),
            Bucket::Hour,
            SeriesBy::Key,
            1,
            0,
        )
        .unwrap();
        let s = series(&path, &q).unwrap();
        assert_eq!(s.buckets.len(), 3);
        assert_eq!(s.groups.len(), 2);
        assert_eq!(s.groups[0].name.as_deref(), Some("c"));
        assert_eq!(s.groups[0].points[1].requests, 10);
        assert_eq!(s.groups[1].name, None);
        assert_eq!(
            (s.groups[1].points[1].requests, s.groups[1].points[1].errors),
            (20, 1)
        );
        assert_eq!(s.groups[1].points[1].latency_ms, 60.0);
        // Days, from the rollups, by model.
        let q = SeriesQuery::new(None, None, Bucket::Day, SeriesBy::Model, 5, 0).unwrap();
        let s = series(&path, &q).unwrap();
        assert_eq!(s.source, "rollups");
        let names: Vec<_> = s.groups.iter().map(|g| g.name.clone().unwrap()).collect();
        assert_eq!(names, ["openai/mini", "openai/gpt-5"]);
        let last = s.buckets.len() - 1;
        assert_eq!(s.groups[1].points[last].requests, 20);
        assert_eq!(s.groups[1].points[last].latency_ms, 60.0);

        // Pages, newest first, each after the last one's cursor.
        let mut q = RequestsQuery {
            limit: 4,
            key: Some("a".into()),
            ..RequestsQuery::default()
        };
        let first = requests(&path, &q).unwrap();
        let ids: Vec<_> = first.iter().map(|r| r.request_id.as_str()).collect();
        assert_eq!(ids, ["req_27", "req_24", "req_21", "req_18"]);
        q.before = Some(first[3].cursor());
        let second = requests(&path, &q).unwrap();
        assert_eq!(second[0].request_id, "req_15");
        let errors = requests(
            &path,
            &RequestsQuery {
                status: Some(super::super::StatusFilter::Error),
                ..RequestsQuery::default()
            },
        )
        .unwrap();
        assert_eq!(errors.len(), 1);
        let e = &errors[0];
        assert_eq!(e.adjusted.as_deref(), Some("max_tokens=4096"));
        assert_eq!(e.error.as_deref(), Some("upstream: 503"));
        assert!(e.tried.as_deref().unwrap().contains("\"status_5xx\""));

        // The plans: ranges of an index, never a scan of the table.
        let (sql, args) = requests_statement(&q);
        let refs: Vec<&dyn rusqlite::ToSql> = args.iter().map(|a| &**a).collect();
        let p = plan(&path, &sql, &refs);
        assert!(
            p.contains("USING INDEX ledger_requests_key_time (key_id=? AND time_ms<?)"),
            "{p}"
        );
        let (sql, args) = requests_statement(&RequestsQuery::default());
        let refs: Vec<&dyn rusqlite::ToSql> = args.iter().map(|a| &**a).collect();
        let p = plan(&path, &sql, &refs);
        assert!(p.contains("USING INDEX ledger_requests_time"), "{p}");
        let hours = SeriesQuery::new(None, None, Bucket::Hour, SeriesBy::Model, 5, 0).unwrap();
        let (top, cells) = series_statements(&hours, 2);
        for (sql, args) in [
            (top, vec![&0i64 as &dyn rusqlite::ToSql, &1i64, &5i64]),
            (
                cells,
                vec![&0i64 as &dyn rusqlite::ToSql, &1i64, &"x", &"y"],
            ),
        ] {
            let p = plan(&path, &sql, &args);
            assert!(
                p.contains("USING INDEX ledger_requests_time (time_ms>? AND time_ms<?)"),
                "{p}"
            );
        }
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
