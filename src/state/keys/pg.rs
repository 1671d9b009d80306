//! The key store in PostgreSQL (`--database`, fleet mode: every instance on
//! one database). A change is one transaction: the row read `FOR UPDATE`, the
//! version row incremented (its row lock makes the changes of all instances
//! commit in version order, so a reader past version N has missed nothing
//! below it), the row and the audit entry written, and `NOTIFY
//! switchboard_keys` sent, which PostgreSQL delivers at commit: every
//! instance `LISTEN`s on a connection of its own ([`listen`]) and re-reads
//! the rows past the version it has (docs/keys.md "Propagation").
//!
//! Connections run on the store's own runtime, so the admin API's calls,
//! made on Pingora's runtimes, and the watch share them; a lost connection is
//! opened again on the next call. The runtime is made again in a process
//! that is not the one that made it (Pingora's `--daemon` forks after the
//! store was read at start, and a fork keeps no thread). Plain TCP, as the
//! ledger's (docs/configuration.md, `--database`).

use super::audit::{self, Entry};
use super::record::{Kind, Row, Written};
use serde_json::Value;
use std::time::Duration;
use tokio::sync::{mpsc, Mutex};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};

/// The channel changes are announced on.
pub const CHANNEL: &str = "switchboard_keys";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Made on connect, under an advisory lock (instances starting together).
const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(7426318515);
CREATE TABLE IF NOT EXISTS keystore_entries (
    kind    text NOT NULL,
    id      text NOT NULL,
    body    text,
    version bigint NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS keystore_entries_version ON keystore_entries (version);
CREATE TABLE IF NOT EXISTS keystore_version (
    one     integer PRIMARY KEY CHECK (one = 1),
    version bigint NOT NULL
);
INSERT INTO keystore_version VALUES (1, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS keystore_audit (
    seq    bigserial PRIMARY KEY,
    at     text NOT NULL,
    actor  text NOT NULL,
    action text NOT NULL,
    kind   text NOT NULL,
    id     text NOT NULL,
    before text,
    after  text
);
COMMIT;";

/// The PostgreSQL key store.
pub struct Postgres {
    config: Config,
    /// The store's runtime and the process that made it.
    runtime: std::sync::Mutex<Option<(u32, tokio::runtime::Runtime)>>,
    client: Mutex<Option<Client>>,
}

fn pg_err(e: impl std::fmt::Display) -> String {
    format!("key store (postgres): {e}")
}

async fn timed<T, E: std::fmt::Display>(
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    tokio::time::timeout(QUERY_TIMEOUT, f)
        .await
        .map_err(|_| pg_err(format!("no answer within {QUERY_TIMEOUT:?}")))?
        .map_err(pg_err)
}

/// Connects, its connection driven on `handle`; `notify` (for the listening
/// connection) gets a message per notification, and the sender is dropped
/// when the connection ends.
async fn connect(
    config: &Config,
    handle: &tokio::runtime::Handle,
    notify: Option<mpsc::Sender<()>>,
) -> Result<Client, String> {
    let (client, mut connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls))
        .await
        .map_err(|_| pg_err(format!("no connection within {CONNECT_TIMEOUT:?}")))?
        .map_err(pg_err)?;
    handle.spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(_))) => {
                    if let Some(n) = &notify {
                        // Full: a re-read is already due, which sees this change too.
                        let _ = n.try_send(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    log::debug!("key store: postgres connection ended: {e}");
                    break;
                }
                None => break,
            }
        }
    });
    Ok(client)
}

impl Postgres {
    /// Checks the URL; connects on the first call.
    pub fn new(url: &str) -> Result<Postgres, String> {
        Ok(Postgres {
            config: crate::state::ledger::pg::parse_url(url)?,
            runtime: std::sync::Mutex::new(None),
            client: Mutex::new(None),
        })
    }

    /// The store's runtime, made on first use in this process; `true` when
    /// it was made now (connections made before, if any, are not driven).
    pub fn handle(&self) -> Result<(tokio::runtime::Handle, bool), String> {
        let mut slot = self
            .runtime
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pid = std::process::id();
        if let Some((made_by, rt)) = slot.as_ref() {
            if *made_by == pid {
                return Ok((rt.handle().clone(), false));
            }
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("switchboard-keys")
            .enable_all()
            .build()
            .map_err(|e| pg_err(format!("runtime: {e}")))?;
        let handle = rt.handle().clone();
        if let Some((_, forked)) = slot.replace((pid, rt)) {
            // Its threads stayed in the parent: nothing here to stop or join.
            std::mem::forget(forked);
        }
        Ok((handle, true))
    }

    /// Runs `f` with a live connection (made, and the tables with it, if
    /// there is none); a failure drops the connection for the next call.
    async fn with<T>(
        &self,
        f: impl for<'c> FnOnce(
            &'c mut Client,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T, String>> + Send + 'c>,
        >,
    ) -> Result<T, String> {
        let mut slot = self.client.lock().await;
        let (handle, fresh) = self.handle()?;
        if fresh {
            *slot = None;
        }
        if slot.as_ref().is_none_or(Client::is_closed) {
            let config = self.config.clone();
            let driver = handle.clone();
            let client = handle
                .spawn(async move {
                    let c = connect(&config, &driver, None).await?;
                    timed(c.batch_execute(SCHEMA)).await?;
                    Ok::<_, String>(c)
                })
                .await
                .map_err(pg_err)??;
            *slot = Some(client);
        }
        let Some(client) = slot.as_mut() else {
            return Err(pg_err("no connection"));
        };
        let out = f(client).await;
        if out.is_err() {
            *slot = None;
        }
        out
    }

    /// The store's version (one row read).
    pub async fn version(&self) -> Result<i64, String> {
        self.with(|c| {
            Box::pin(async move {
                let row = timed(c.query_one("SELECT version FROM keystore_version", &[])).await?;
                Ok(row.get(0))
            })
        })
        .await
    }

    /// The rows changed past `version`.
    pub async fn since(&self, version: i64) -> Result<Vec<Row>, String> {
        self.with(move |c| {
            Box::pin(async move {
                let rows = timed(c.query(
                    "SELECT kind, id, body, version FROM keystore_entries WHERE version > $1 ORDER BY version",
                    &[&version],
                ))
                .await?;
                Ok(rows
                    .iter()
                    .filter_map(|r| {
                        Some(Row {
                            kind: Kind::from_name(r.get(0))?,
                            id: r.get(1),
                            body: r.get(2),
                            version: r.get(3),
                        })
                    })
                    .collect())
            })
        })
        .await
    }

    /// As `Sqlite::change`: read, decide, write, audit, announce; one transaction.
    pub async fn change<E: Send + 'static>(
        &self,
        kind: Kind,
        id: String,
        actor: String,
        at: String,
        change: impl FnOnce(Option<Value>) -> Result<Written, E> + Send + 'static,
    ) -> Result<Result<Option<Value>, E>, String> {
        self.with(move |c| {
            Box::pin(async move {
                let tx = timed(c.transaction()).await?;
                // The version row first: it serialises every change.
                let version: i64 = timed(tx.query_one(
                    "UPDATE keystore_version SET version = version + 1 RETURNING version",
                    &[],
                ))
                .await?
                .get(0);
                let old = timed(tx.query_opt(
                    "SELECT body FROM keystore_entries WHERE kind = $1 AND id = $2 FOR UPDATE",
                    &[&kind.name(), &id],
                ))
                .await?
                .and_then(|r| r.get::<_, Option<String>>(0))
                .and_then(|t| serde_json::from_str::<Value>(&t).ok());
                let before = audit::text(old.as_ref());
                let (new, action) = match change(old) {
                    Ok(w) => w,
                    Err(e) => {
                        timed(tx.rollback()).await?;
                        return Ok(Err(e));
                    }
                };
                let body = new.as_ref().map(Value::to_string);
                timed(tx.execute(
                    "INSERT INTO keystore_entries (kind, id, body, version) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (kind, id) DO UPDATE SET body = EXCLUDED.body, version = EXCLUDED.version",
                    &[&kind.name(), &id, &body, &version],
                ))
                .await?;
                let after = audit::text(new.as_ref());
                timed(tx.execute(
                    "INSERT INTO keystore_audit (at, actor, action, kind, id, before, after) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[&at, &actor, &action, &kind.name(), &id, &before, &after],
                ))
                .await?;
                timed(tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &version.to_string()]))
                    .await?;
                timed(tx.commit()).await?;
                Ok(Ok(new))
            })
        })
        .await
    }

    /// Audit entries, newest first.
    pub async fn audit(&self, limit: usize, before: Option<i64>) -> Result<Vec<Entry>, String> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let before = before.unwrap_or(i64::MAX);
        self.with(move |c| {
            Box::pin(async move {
                let rows = timed(c.query(
                    "SELECT seq, at, actor, action, kind, id, before, after FROM keystore_audit
                     WHERE seq < $1 ORDER BY seq DESC LIMIT $2",
                    &[&before, &limit],
                ))
                .await?;
                Ok(rows
                    .iter()
                    .map(|r| Entry {
                        seq: r.get(0),
                        at: r.get(1),
                        actor: r.get(2),
                        action: r.get(3),
                        kind: r.get(4),
                        id: r.get(5),
                        before: audit::parse(r.get(6)),
                        after: audit::parse(r.get(7)),
                    })
                    .collect())
            })
        })
        .await
    }

    /// Listens for changes on a connection of its own, for ever: a message on
    /// `tx` per notification and on every (re)connection (what changed while
    /// it was down is then read too). Runs on the store's runtime.
    pub async fn listen(&self, handle: tokio::runtime::Handle, tx: mpsc::Sender<()>) {
        let mut pause = Duration::from_millis(200);
        loop {
            match connect(&self.config, &handle, Some(tx.clone())).await {
                Ok(client) => match timed(client.batch_execute(&format!("LISTEN {CHANNEL}"))).await
                {
                    Ok(()) => {
                        pause = Duration::from_millis(200);
                        let _ = tx.try_send(());
                        // Until the connection ends.
                        while !client.is_closed() {
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        log::warn!(
                            "key store: the LISTEN connection to postgres ended; reconnecting"
                        );
                    }
                    Err(e) => log::warn!("key store: LISTEN failed: {e}"),
                },
                Err(e) => log::warn!("key store: cannot listen for changes: {e}"),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }
}
