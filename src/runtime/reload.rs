//! Hot reload: a watcher thread polls the catalog and keys files for changes and
//! listens for SIGHUP; either way it prepares a new snapshot (which may fail and
//! is then logged and dropped) and swaps it in atomically.

use crate::runtime::Runtime;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How often the files are checked for changes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp(Option<(SystemTime, u64)>, Option<(SystemTime, u64)>);

fn stamp_of(path: &str) -> Option<(SystemTime, u64)> {
    let md = std::fs::metadata(path).ok()?;
    Some((md.modified().ok()?, md.len()))
}

fn stamp(rt: &Runtime) -> Stamp {
    Stamp(stamp_of(&rt.paths.catalog), stamp_of(&rt.paths.keys))
}

fn reload(rt: &Runtime, why: &str) {
    match rt.reload() {
        Ok(()) => log::info!("configuration reloaded ({why})"),
        Err(e) => log::error!("configuration reload failed ({why}), keeping the previous one: {e}"),
    }
}

/// Starts the watcher thread (file changes and SIGHUP). Returns at once.
pub fn spawn(rt: Arc<Runtime>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("switchboard-reload".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    log::error!("hot reload disabled: cannot start its runtime: {e}");
                    return;
                }
            };
            runtime.block_on(watch(rt));
        })
        .map(|_| ())
}

async fn watch(rt: Arc<Runtime>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("SIGHUP reload unavailable: {e}");
            None
        }
    };
    let mut last = stamp(&rt);
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = stamp(&rt);
                if now != last {
                    last = now;
                    reload(&rt, "file changed");
                }
            }
            Some(()) = async {
                match hup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                last = stamp(&rt);
                reload(&rt, "SIGHUP");
            }
        }
    }
}
