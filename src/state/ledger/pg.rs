//! The usage ledger in PostgreSQL (`--database postgres://…`, fleet mode):
//! the writer's [`Backend`] and the admin API's queries.
//!
//! The writer thread owns a single-threaded tokio runtime and one connection,
//! opened lazily and again after any failure (the writer's back-off paces the
//! attempts), so a database that goes away costs retries and, past the bound,
//! dropped rows, never a request. A batch is two statements in one
//! transaction: the rows, sent as arrays and `unnest`ed (one statement
//! whatever the batch size), and the batch's per-day sums upserted into the
//! rollups (atomic across instances). Plain TCP: the database is expected
//! on a private network or the same host (see docs/configuration.md, `--database`).

use super::recent::{RequestRow, RequestsQuery};
use super::series::{Bucket, Cell, Series, SeriesBy, SeriesQuery};
use super::{sql_int, Backend, Group, GroupBy, Row, Sums, Usage, UsageQuery};
use std::time::Duration;
use tokio_postgres::{Client, Config, NoTls};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Created on connect, under an advisory lock so that instances starting
/// together do not race on `CREATE TABLE IF NOT EXISTS`; the columns added
/// since the first schema (`cache_write_tokens`; `team`; a request's
/// attempts, adjustments and error; the rollups' summed latency) are added
/// to a database made before them (old rows: null, old rollups: 0; `team`:
/// null, `''`), and the (key, time) index the console's request list reads
/// by key.
const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(7426318514);
CREATE TABLE IF NOT EXISTS ledger_requests (
    request_id        text NOT NULL,
    time              timestamptz NOT NULL,
    key_id            text NOT NULL,
    family            text NOT NULL,
    provider          text,
    model             text,
    upstream_protocol text,
    upstream_host     text,
    status            integer NOT NULL,
    input_tokens      bigint,
    output_tokens     bigint,
    cached_tokens     bigint,
    reasoning_tokens  bigint,
    cost_usd          double precision,
    latency_ms        double precision NOT NULL,
    ttft_ms           double precision
);
CREATE INDEX IF NOT EXISTS ledger_requests_time ON ledger_requests (time);
CREATE TABLE IF NOT EXISTS ledger_daily (
    day              date NOT NULL,
    key_id           text NOT NULL,
    provider         text NOT NULL,
    model            text NOT NULL,
    requests         bigint NOT NULL,
    errors           bigint NOT NULL,
    input_tokens     bigint NOT NULL,
    output_tokens    bigint NOT NULL,
    cached_tokens    bigint NOT NULL,
    reasoning_tokens bigint NOT NULL,
    cost_usd         double precision NOT NULL,
    PRIMARY KEY (day, key_id, provider, model)
);
ALTER TABLE ledger_requests ADD COLUMN IF NOT EXISTS cache_write_tokens bigint;
ALTER TABLE ledger_daily ADD COLUMN IF NOT EXISTS cache_write_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE ledger_requests ADD COLUMN IF NOT EXISTS team text;
ALTER TABLE ledger_daily ADD COLUMN IF NOT EXISTS team text NOT NULL DEFAULT '';
ALTER TABLE ledger_requests ADD COLUMN IF NOT EXISTS tried text;
ALTER TABLE ledger_requests ADD COLUMN IF NOT EXISTS adjusted text;
ALTER TABLE ledger_requests ADD COLUMN IF NOT EXISTS error text;
ALTER TABLE ledger_daily ADD COLUMN IF NOT EXISTS latency_ms_sum double precision NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS ledger_requests_key_time ON ledger_requests (key_id, time);
COMMIT;
";

const INSERT: &str = "INSERT INTO ledger_requests (request_id, time, key_id, family, provider, model, upstream_protocol, upstream_host, status, input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost_usd, latency_ms, ttft_ms, cache_write_tokens, team, tried, adjusted, error)
SELECT r, to_timestamp(t / 1000.0), k, f, p, m, up, uh, s, it, ot, ct, rt, c, l, tt, cw, tm, tr, ad, er
FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int4[], $10::int8[], $11::int8[], $12::int8[], $13::int8[], $14::float8[], $15::float8[], $16::float8[], $17::int8[], $18::text[], $19::text[], $20::text[], $21::text[])
    AS u(r, t, k, f, p, m, up, uh, s, it, ot, ct, rt, c, l, tt, cw, tm, tr, ad, er)";

const UPSERT: &str = "INSERT INTO ledger_daily (day, key_id, provider, model, requests, errors, input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost_usd, cache_write_tokens, team, latency_ms_sum)
SELECT d::date, k, p, m, n, e, it, ot, ct, rt, c, cw, tm, ls
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::int8[], $10::int8[], $11::float8[], $12::int8[], $13::text[], $14::float8[])
    AS u(d, k, p, m, n, e, it, ot, ct, rt, c, cw, tm, ls)
ON CONFLICT (day, key_id, provider, model) DO UPDATE SET
    team = EXCLUDED.team,
    requests = ledger_daily.requests + EXCLUDED.requests,
    errors = ledger_daily.errors + EXCLUDED.errors,
    input_tokens = ledger_daily.input_tokens + EXCLUDED.input_tokens,
    output_tokens = ledger_daily.output_tokens + EXCLUDED.output_tokens,
    cached_tokens = ledger_daily.cached_tokens + EXCLUDED.cached_tokens,
    cache_write_tokens = ledger_daily.cache_write_tokens + EXCLUDED.cache_write_tokens,
    reasoning_tokens = ledger_daily.reasoning_tokens + EXCLUDED.reasoning_tokens,
    cost_usd = ledger_daily.cost_usd + EXCLUDED.cost_usd,
    latency_ms_sum = ledger_daily.latency_ms_sum + EXCLUDED.latency_ms_sum";

/// `host:port/dbname` of a configuration, for logs (never the password).
fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}/{}", config.get_dbname().unwrap_or(""))
}

/// Parses `--database`: a `postgres://` or `postgresql://` URL (or libpq's
/// key=value form), refused at start when it does not parse.
pub fn parse_url(url: &str) -> Result<Config, String> {
    let config = url
        .parse::<Config>()
        .map_err(|e| format!("--database: not a PostgreSQL connection string: {e}"))?;
    if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        return Err(
            "--database: sslmode=require, but the ledger connects over plain TCP (sslmode=disable or prefer)"
                .into(),
        );
    }
    if config.get_hosts().is_empty() {
        return Err("--database: no host (postgres://user@host:port/db)".into());
    }
    Ok(config)
}

async fn connect(config: &Config) -> Result<Client, String> {
    let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls))
        .await
        .map_err(|_| format!("no connection within {CONNECT_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            log::debug!("ledger: postgres connection ended: {e}");
        }
    });
    Ok(client)
}

/// The writer's side: a runtime of its own and a connection opened on demand.
pub struct Postgres {
    config: Config,
    rt: tokio::runtime::Runtime,
    client: Option<Client>,
}

impl Postgres {
    /// Checks the URL and prepares the runtime; connects on the first write.
    pub fn new(url: &str) -> Result<Postgres, String> {
        let config = parse_url(url)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("ledger runtime: {e}"))?;
        Ok(Postgres {
            config,
            rt,
            client: None,
        })
    }

    async fn write_batch(
        config: &Config,
        slot: &mut Option<Client>,
        rows: &[Row],
    ) -> Result<(), String> {
        if slot.as_ref().is_none_or(Client::is_closed) {
            let client = connect(config).await?;
            client
                .batch_execute(SCHEMA)
                .await
                .map_err(|e| format!("creating the ledger tables: {e}"))?;
            *slot = Some(client);
        }
        let Some(client) = slot.as_mut() else {
            return Err("no connection".into());
        };
        let col = |f: fn(&Row) -> Option<i64>| rows.iter().map(f).collect::<Vec<_>>();
        let ids: Vec<&str> = rows.iter().map(|r| r.request_id.as_str()).collect();
        let times: Vec<i64> = rows.iter().map(|r| r.time_ms).collect();
        let keys: Vec<&str> = rows.iter().map(|r| r.key_id.as_str()).collect();
        let families: Vec<&str> = rows.iter().map(|r| r.family).collect();
        let providers: Vec<Option<&str>> = rows.iter().map(|r| r.provider.as_deref()).collect();
        let models: Vec<Option<&str>> = rows.iter().map(|r| r.model.as_deref()).collect();
        let protocols: Vec<Option<&str>> = rows.iter().map(|r| r.upstream_protocol).collect();
        let hosts: Vec<Option<&str>> = rows.iter().map(|r| r.upstream_host.as_deref()).collect();
        let statuses: Vec<i32> = rows.iter().map(|r| i32::from(r.status)).collect();
        let input = col(|r| sql_int(r.input_tokens));
        let output = col(|r| sql_int(r.output_tokens));
        let cached = col(|r| sql_int(r.cached_tokens));
        let reasoning = col(|r| sql_int(r.reasoning_tokens));
        let cache_write = col(|r| sql_int(r.cache_write_tokens));
        let costs: Vec<Option<f64>> = rows.iter().map(|r| r.cost_usd).collect();
        let latencies: Vec<f64> = rows.iter().map(|r| r.latency_ms).collect();
        let ttfts: Vec<Option<f64>> = rows.iter().map(|r| r.ttft_ms).collect();
        let teams: Vec<Option<&str>> = rows.iter().map(|r| r.team.as_deref()).collect();
        let tried: Vec<String> = rows.iter().map(Row::tried_json).collect();
        let adjusted: Vec<Option<&str>> = rows.iter().map(|r| r.adjusted.as_deref()).collect();
        let errors: Vec<Option<&str>> = rows.iter().map(|r| r.error.as_deref()).collect();

        let sums = super::rollup(rows);
        let mut d = (
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            Vec::<Sums>::new(),
            Vec::new(),
        );
        for ((day, key, provider, model), (team, s)) in sums {
            d.0.push(day);
            d.1.push(key);
            d.2.push(provider);
            d.3.push(model);
            d.4.push(s);
            d.5.push(team);
        }
        let sum = |f: fn(&Sums) -> i64| d.4.iter().map(f).collect::<Vec<i64>>();
        let (n, e, it, ot, ct, rt) = (
            sum(|s| s.requests),
            sum(|s| s.errors),
            sum(|s| s.input_tokens),
            sum(|s| s.output_tokens),
            sum(|s| s.cached_tokens),
            sum(|s| s.reasoning_tokens),
        );
        let c: Vec<f64> = d.4.iter().map(|s| s.cost_usd).collect();
        let cw = sum(|s| s.cache_write_tokens);
        let ls: Vec<f64> = d.4.iter().map(|s| s.latency_ms).collect();

        let tx = client.transaction().await.map_err(|e| e.to_string())?;
        tx.execute(
            INSERT,
            &[
                &ids,
                &times,
                &keys,
                &families,
                &providers,
                &models,
                &protocols,
                &hosts,
                &statuses,
                &input,
                &output,
                &cached,
                &reasoning,
                &costs,
                &latencies,
                &ttfts,
                &cache_write,
                &teams,
                &tried,
                &adjusted,
                &errors,
            ],
        )
        .await
        .map_err(|e| e.to_string())?;
        tx.execute(
            UPSERT,
            &[
                &d.0, &d.1, &d.2, &d.3, &n, &e, &it, &ot, &ct, &rt, &c, &cw, &d.5, &ls,
            ],
        )
        .await
        .map_err(|e| e.to_string())?;
        tx.commit().await.map_err(|e| e.to_string())
    }
}

impl Backend for Postgres {
    fn write(&mut self, rows: &[Row]) -> Result<(), String> {
        let Postgres { config, rt, client } = self;
        let r = rt.block_on(async {
            tokio::time::timeout(WRITE_TIMEOUT, Postgres::write_batch(config, client, rows))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {WRITE_TIMEOUT:?}")))
        });
        if r.is_err() {
            // Start afresh next time: the connection may be half dead.
            *client = None;
        }
        r
    }

    fn purge(&mut self, before_ms: i64) -> Result<u64, String> {
        let Postgres { rt, client, .. } = self;
        rt.block_on(async {
            if client.as_ref().is_none_or(Client::is_closed) {
                // The next write connects; a purge waits for it.
                return Err("not connected yet".to_string());
            }
            let Some(c) = client.as_ref() else {
                return Err("no connection".into());
            };
            tokio::time::timeout(
                QUERY_TIMEOUT,
                c.execute(
                    "DELETE FROM ledger_requests WHERE time < to_timestamp($1::int8 / 1000.0)",
                    &[&before_ms],
                ),
            )
            .await
            .map_err(|_| "retention purge timed out".to_string())?
            .map_err(|e| e.to_string())
        })
    }

    fn describe(&self) -> String {
        format!("postgres {}", describe(&self.config))
    }
}

/// The SQL of a usage query (`$1` key, `$2` model, `$3`/`$4` bounds, `$5` team).
fn usage_sql(q: &UsageQuery, rollups: bool) -> String {
    let group_col = match (q.group_by, rollups) {
        (Some(GroupBy::Key), _) => Some("key_id"),
        (Some(GroupBy::Team), true) => Some("team"),
        (Some(GroupBy::Team), false) => Some("COALESCE(team, '')"),
        (Some(GroupBy::Model), true) => {
            Some("CASE WHEN provider = '' THEN model ELSE provider || '/' || model END")
        }
        (Some(GroupBy::Model), false) => Some(
            "CASE WHEN provider IS NULL THEN COALESCE(model, '') ELSE provider || '/' || COALESCE(model, '') END",
        ),
        (Some(GroupBy::Day), true) => Some("to_char(day, 'YYYY-MM-DD')"),
        (Some(GroupBy::Day), false) => Some("to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD')"),
        (None, _) => None,
    };
    let (table, sums, time_filter) = if rollups {
        (
            "ledger_daily",
            "SUM(requests)::int8, SUM(errors)::int8, SUM(input_tokens)::int8, SUM(output_tokens)::int8, SUM(cached_tokens)::int8, SUM(reasoning_tokens)::int8, COALESCE(SUM(cost_usd), 0)::float8, SUM(cache_write_tokens)::int8, COALESCE(SUM(latency_ms_sum), 0)::float8",
            "($3::text IS NULL OR day >= ($3::text)::date) AND ($4::text IS NULL OR day <= ($4::text)::date)",
        )
    } else {
        (
            "ledger_requests",
            "COUNT(*)::int8, COUNT(*) FILTER (WHERE status >= 400)::int8, COALESCE(SUM(input_tokens), 0)::int8, COALESCE(SUM(output_tokens), 0)::int8, COALESCE(SUM(cached_tokens), 0)::int8, COALESCE(SUM(reasoning_tokens), 0)::int8, COALESCE(SUM(cost_usd), 0)::float8, COALESCE(SUM(cache_write_tokens), 0)::int8, COALESCE(SUM(latency_ms), 0)::float8",
            "($3::int8 IS NULL OR time >= to_timestamp($3::int8 / 1000.0)) AND ($4::int8 IS NULL OR time < to_timestamp($4::int8 / 1000.0))",
        )
    };
    let filters = format!(
        "($1::text IS NULL OR key_id = $1::text) AND ($2::text IS NULL OR model = $2::text OR provider || '/' || model = $2::text) AND ($5::text IS NULL OR team = $5::text) AND {time_filter}"
    );
    match group_col {
        Some(g) => {
            format!("SELECT {g} AS g, {sums} FROM {table} WHERE {filters} GROUP BY 1 ORDER BY 1")
        }
        None => format!("SELECT ''::text AS g, {sums} FROM {table} WHERE {filters}"),
    }
}

/// Answers a usage query on a connection of its own (admin queries are rare).
pub async fn usage(url: &str, q: &UsageQuery) -> Result<Usage, String> {
    let client = reader(url).await?;
    let day_range = q.day_range();
    let sql = usage_sql(q, day_range.is_some());
    let query = async {
        match &day_range {
            Some((from, to)) => {
                client
                    .query(&sql, &[&q.key, &q.model, from, to, &q.team])
                    .await
            }
            None => {
                let (from, to) = (q.from.map(|b| b.start_ms()), q.to.map(|b| b.end_ms()));
                client
                    .query(&sql, &[&q.key, &q.model, &from, &to, &q.team])
                    .await
            }
        }
    };
    let rows = tokio::time::timeout(QUERY_TIMEOUT, query)
        .await
        .map_err(|_| format!("no answer within {QUERY_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())?;
    let mut groups = Vec::with_capacity(rows.len());
    for r in rows {
        let get = |i: usize| -> Result<i64, String> {
            r.try_get::<_, Option<i64>>(i)
                .map(Option::unwrap_or_default)
                .map_err(|e| e.to_string())
        };
        let g = Group {
            value: r
                .try_get::<_, Option<String>>(0)
                .map_err(|e| e.to_string())?
                .unwrap_or_default(),
            sums: Sums {
                requests: get(1)?,
                errors: get(2)?,
                input_tokens: get(3)?,
                output_tokens: get(4)?,
                cached_tokens: get(5)?,
                reasoning_tokens: get(6)?,
                cost_usd: r
                    .try_get::<_, Option<f64>>(7)
                    .map_err(|e| e.to_string())?
                    .unwrap_or_default(),
                cache_write_tokens: get(8)?,
                latency_ms: r
                    .try_get::<_, Option<f64>>(9)
                    .map_err(|e| e.to_string())?
                    .unwrap_or_default(),
            },
        };
        if g.sums.requests > 0 {
            groups.push(g);
        }
    }
    Ok(Usage {
        source: if day_range.is_some() {
            "rollups"
        } else {
            "rows"
        },
        groups,
    })
}

/// A connection for one admin query, with the schema this version reads
/// (a database no writer of this version has written yet: an upgrade,
/// before its first request).
async fn reader(url: &str) -> Result<Client, String> {
    let config = parse_url(url)?;
    let client = connect(&config).await?;
    tokio::time::timeout(QUERY_TIMEOUT, client.batch_execute(SCHEMA))
        .await
        .map_err(|_| format!("no answer within {QUERY_TIMEOUT:?}"))?
        .map_err(|e| format!("creating the ledger tables: {e}"))?;
    Ok(client)
}

/// `f` within [`QUERY_TIMEOUT`].
async fn timed<T>(
    f: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, String> {
    tokio::time::timeout(QUERY_TIMEOUT, f)
        .await
        .map_err(|_| format!("no answer within {QUERY_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())
}

/// The statements of a series (`$1`/`$2` the range, `$3` the top's size,
/// then its names): as in the SQLite file (`sqlite::series`).
fn series_statements(q: &SeriesQuery) -> (String, String) {
    let (table, bucket, group, range, sums, count) = match (q.bucket, q.by) {
        (Bucket::Hour, by) => (
            "ledger_requests",
            "(floor(extract(epoch FROM time) / 3600) * 3600000)::int8",
            match by {
                SeriesBy::Team => "COALESCE(team, '')",
                SeriesBy::Key => "key_id",
                SeriesBy::Model => "CASE WHEN provider IS NULL THEN COALESCE(model, '') ELSE provider || '/' || COALESCE(model, '') END",
            },
            "time >= to_timestamp($1::int8 / 1000.0) AND time < to_timestamp($2::int8 / 1000.0)",
            "COUNT(*)::int8, (COUNT(*) FILTER (WHERE status >= 400))::int8, COALESCE(SUM(input_tokens), 0)::int8, COALESCE(SUM(output_tokens), 0)::int8, COALESCE(SUM(cost_usd), 0)::float8, COALESCE(SUM(latency_ms), 0)::float8",
            "COUNT(*)",
        ),
        (Bucket::Day, by) => (
            "ledger_daily",
            "((day - DATE '1970-01-01')::int8 * 86400000)",
            match by {
                SeriesBy::Team => "team",
                SeriesBy::Key => "key_id",
                SeriesBy::Model => "CASE WHEN provider = '' THEN model ELSE provider || '/' || model END",
            },
            "day >= (DATE '1970-01-01' + ($1::int8 / 86400000)::int4) AND day < (DATE '1970-01-01' + ($2::int8 / 86400000)::int4)",
            "SUM(requests)::int8, SUM(errors)::int8, SUM(input_tokens)::int8, SUM(output_tokens)::int8, COALESCE(SUM(cost_usd), 0)::float8, COALESCE(SUM(latency_ms_sum), 0)::float8",
            "SUM(requests)",
        ),
    };
    let top = format!(
        "SELECT {group} AS g FROM {table} WHERE {range} GROUP BY 1 ORDER BY COALESCE(SUM(cost_usd), 0) DESC, {count} DESC, 1 LIMIT $3::int8"
    );
    let cells = format!(
        "SELECT {bucket} AS b, CASE WHEN {group} = ANY($3::text[]) THEN {group} END AS gg, {sums} FROM {table} WHERE {range} GROUP BY 1, 2"
    );
    (top, cells)
}

/// Answers a series query (docs/operations.md "Console").
pub async fn series(url: &str, q: &SeriesQuery) -> Result<Series, String> {
    let client = reader(url).await?;
    let (top_sql, cells_sql) = series_statements(q);
    let n = q.top as i64;
    let top: Vec<String> = timed(client.query(&top_sql, &[&q.from_ms, &q.to_ms, &n]))
        .await?
        .iter()
        .map(|r| {
            r.try_get::<_, Option<String>>(0)
                .map(Option::unwrap_or_default)
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let source = match q.bucket {
        Bucket::Hour => "rows",
        Bucket::Day => "rollups",
    };
    if top.is_empty() {
        return Ok(Series::assemble(q, source, &top, Vec::new()));
    }
    let rows = timed(client.query(&cells_sql, &[&q.from_ms, &q.to_ms, &top])).await?;
    let mut cells: Vec<Cell> = Vec::with_capacity(rows.len());
    for r in rows {
        let e = |e: tokio_postgres::Error| e.to_string();
        let int = |i: usize| -> Result<i64, String> {
            r.try_get::<_, Option<i64>>(i)
                .map(Option::unwrap_or_default)
                .map_err(e)
        };
        let float = |i: usize| -> Result<f64, String> {
            r.try_get::<_, Option<f64>>(i)
                .map(Option::unwrap_or_default)
                .map_err(e)
        };
        cells.push((
            int(0)?,
            r.try_get::<_, Option<String>>(1).map_err(e)?,
            Sums {
                requests: int(2)?,
                errors: int(3)?,
                input_tokens: int(4)?,
                output_tokens: int(5)?,
                cost_usd: float(6)?,
                latency_ms: float(7)?,
                ..Sums::default()
            },
        ));
    }
    Ok(Series::assemble(q, source, &top, cells))
}

/// A page of the latest requests, newest first: only the filters given, so
/// the (key, time) or the time index is read from the cursor on.
pub async fn requests(url: &str, q: &RequestsQuery) -> Result<Vec<RequestRow>, String> {
    let client = reader(url).await?;
    let mut conds = Vec::new();
    let mut args: Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> = Vec::new();
    if let Some(k) = &q.key {
        args.push(Box::new(k.clone()));
        conds.push(format!("key_id = ${}", args.len()));
    }
    if let Some(m) = &q.model {
        args.push(Box::new(m.clone()));
        let i = args.len();
        conds.push(format!("(model = ${i} OR provider || '/' || model = ${i})"));
    }
    if let Some(c) = &q.before {
        args.push(Box::new(c.time_ms));
        args.push(Box::new(c.request_id.clone()));
        let (t, id) = (args.len() - 1, args.len());
        conds.push(format!(
            "time <= to_timestamp(${t}::int8 / 1000.0) AND (time < to_timestamp(${t}::int8 / 1000.0) OR request_id < ${id})"
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
        "SELECT request_id, (extract(epoch FROM time) * 1000)::int8, key_id, family, provider, model, upstream_protocol, upstream_host, status, input_tokens, output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens, cost_usd, latency_ms, ttft_ms, tried, adjusted, error FROM ledger_requests{filter} ORDER BY time DESC, request_id DESC LIMIT {}",
        q.limit.clamp(1, super::recent::MAX_LIMIT)
    );
    let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = args
        .iter()
        .map(|a| &**a as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect();
    let rows = timed(client.query(&sql, &refs)).await?;
    rows.iter()
        .map(|r| -> Result<RequestRow, tokio_postgres::Error> {
            Ok(RequestRow {
                request_id: r.try_get(0)?,
                time_ms: r.try_get(1)?,
                key_id: r.try_get(2)?,
                family: r.try_get(3)?,
                provider: r.try_get(4)?,
                model: r.try_get(5)?,
                upstream_protocol: r.try_get(6)?,
                upstream_host: r.try_get(7)?,
                status: u16::try_from(r.try_get::<_, i32>(8)?).unwrap_or(0),
                input_tokens: r.try_get(9)?,
                output_tokens: r.try_get(10)?,
                cached_tokens: r.try_get(11)?,
                cache_write_tokens: r.try_get(12)?,
                reasoning_tokens: r.try_get(13)?,
                cost_usd: r.try_get(14)?,
                latency_ms: r.try_get(15)?,
                ttft_ms: r.try_get(16)?,
                tried: r.try_get(17)?,
                adjusted: r.try_get(18)?,
                error: r.try_get(19)?,
            })
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls() {
        assert!(parse_url("postgres://postgres@127.0.0.1:5432/test").is_ok());
        assert!(parse_url("postgresql://u:p@db.internal/ledger?sslmode=prefer").is_ok());
        assert!(parse_url("host=127.0.0.1 user=postgres dbname=test").is_ok());
        let e = parse_url("postgres://u@h/db?sslmode=require").unwrap_err();
        assert!(e.contains("sslmode"), "{e}");
        assert!(parse_url("mysql://nope").is_err());
        assert!(parse_url("postgres:///db").is_err());
    }
}
