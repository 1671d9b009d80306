//! Changes made elsewhere, put in force here (docs/keys.md "Propagation").
//!
//! - SQLite (processes sharing a data directory): the version row is read
//!   every [`POLL`] (one row, from the page cache); when it moved, the rows
//!   past the version seen are read.
//! - PostgreSQL (a fleet): a connection `LISTEN`s for the store's
//!   notifications; each one (and each reconnection) reads the rows past the
//!   version seen. The version row is also read every [`CHECK`], in case a
//!   notification was lost with its connection.

use super::{Backend, KeyDb};
use std::sync::Arc;
use std::time::Duration;

/// How often the embedded store's version is checked.
pub const POLL: Duration = Duration::from_millis(250);
/// How often PostgreSQL's version is checked besides the notifications.
pub const CHECK: Duration = Duration::from_secs(5);

/// Reads what changed when the version moved past what was seen.
async fn catch_up(db: &KeyDb, seen: &mut i64) {
    match db.version().await {
        Ok(v) if v == *seen => {}
        Ok(v) => match db.refresh().await {
            Ok(_) => *seen = v,
            Err(e) => log::warn!("key store: cannot read changes: {e}"),
        },
        Err(e) => log::warn!("key store: cannot check for changes: {e}"),
    }
}

/// Starts the watch; returns at once. Call it in the process that serves
/// (after a daemonizing fork: a fork keeps no thread).
pub fn spawn(db: Arc<KeyDb>) -> Result<(), String> {
    if let Backend::Postgres(p) = &db.backend {
        let (rt, _) = p.handle()?;
        let listener = db.clone();
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let driver = rt.clone();
        rt.spawn(async move {
            if let Backend::Postgres(p) = &listener.backend {
                p.listen(driver, tx).await;
            }
        });
        let watcher = db.clone();
        rt.spawn(async move {
            let mut check = tokio::time::interval(CHECK);
            loop {
                tokio::select! {
                    Some(()) = rx.recv() => {
                        if let Err(e) = watcher.refresh().await {
                            log::warn!("key store: cannot read changes: {e}");
                        }
                    }
                    _ = check.tick() => {
                        let mut seen = watcher.cache.lock().await.version;
                        catch_up(&watcher, &mut seen).await;
                    }
                }
            }
        });
        return Ok(());
    }
    std::thread::Builder::new()
        .name("switchboard-keys".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    log::error!("key store: changes by other processes not watched: {e}");
                    return;
                }
            };
            runtime.block_on(async move {
                let mut seen = db.cache.lock().await.version;
                loop {
                    tokio::time::sleep(POLL).await;
                    catch_up(&db, &mut seen).await;
                }
            });
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
}
