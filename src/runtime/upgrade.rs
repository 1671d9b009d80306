//! Upgrades (docs/operations.md "Shutdown and upgrades"): SIGQUIT hands the
//! listening sockets to a new process started with `-u`, which waits for
//! them on the upgrade socket (`upgrade_sock` in the Pingora file).
//!
//! Pingora's own signal handling sends them whether or not anyone waits:
//! with no successor, `send_fds_to` tries to connect five times a second
//! apart, logs an error, and `main_loop` then shuts the server down all the
//! same, so the port closes about 11 s after the signal with nobody left to
//! answer (pingora-core 0.9.1 `server/mod.rs` `main_loop`,
//! `server/transfer_fd/mod.rs` `send_fds_to`). [`Signals`] is the watch the
//! server runs with instead: a SIGQUIT reaches Pingora only when a process
//! is listening on the upgrade socket (waited for up to
//! [`SUCCESSOR_WAIT`], so the new binary may also be started just after
//! the signal); otherwise the gateway logs an error and keeps serving.
//! SIGTERM and SIGINT are Pingora's.

use pingora_core::server::{ShutdownSignal, ShutdownSignalWatch};
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};

/// How long a SIGQUIT waits for a successor to listen on the upgrade
/// socket (Pingora's own send tries for about as long).
pub const SUCCESSOR_WAIT: Duration = Duration::from_secs(5);

/// The signal watch that refuses an upgrade with no successor.
pub struct Signals {
    upgrade_sock: String,
    wait: Duration,
}

impl Signals {
    /// Signals for a server whose upgrade socket is `upgrade_sock`.
    pub fn new(upgrade_sock: &str) -> Signals {
        Signals {
            upgrade_sock: upgrade_sock.to_string(),
            wait: SUCCESSOR_WAIT,
        }
    }

    /// Polls for a process listening on the upgrade socket, up to `wait`.
    async fn successor_waiting(&self) -> bool {
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
            if listening_on(&table, &self.upgrade_sock) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[async_trait::async_trait]
impl ShutdownSignalWatch for Signals {
    async fn recv(&self) -> ShutdownSignal {
        let (mut quit, mut term, mut int) = match (
            signal(SignalKind::quit()),
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(q), Ok(t), Ok(i)) => (q, t, i),
            _ => {
                log::error!("cannot watch signals; upgrades are not checked for a successor");
                return pingora_core::server::UnixShutdownSignalWatch.recv().await;
            }
        };
        loop {
            tokio::select! {
                _ = quit.recv() => {
                    log::info!(
                        "SIGQUIT received: looking for the new process on {}",
                        self.upgrade_sock
                    );
                    if self.successor_waiting().await {
                        return ShutdownSignal::GracefulUpgrade;
                    }
                    log::error!(
                        "SIGQUIT: no new process took the listening sockets (none listening on {} \
                         within {} s; start the new binary with -u, then send SIGQUIT); not \
                         upgrading, still serving",
                        self.upgrade_sock,
                        self.wait.as_secs()
                    );
                }
                _ = term.recv() => return ShutdownSignal::GracefulTerminate,
                _ = int.recv() => return ShutdownSignal::FastShutdown,
            }
        }
    }
}

/// Whether `/proc/net/unix` (`table`) lists a listening socket bound to
/// `path`. Its columns: `Num RefCount Protocol Flags Type St Inode Path`;
/// a listening socket has `__SO_ACCEPTCON` (0x10000) in its flags.
pub fn listening_on(table: &str, path: &str) -> bool {
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() >= 8
            && f[7] == path
            && u32::from_str_radix(f[3], 16).is_ok_and(|flags| flags & 0x10000 != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_listening_socket_by_its_path() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 2271 /tmp/up.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 2272 /tmp/other.sock\n\
            0000000000000000: 00000002 00000000 00000000 0001 01 2273 /tmp/bound.sock\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 2274\n";
        assert!(listening_on(table, "/tmp/up.sock"));
        assert!(
            !listening_on(table, "/tmp/other.sock"),
            "connected, not listening"
        );
        assert!(
            !listening_on(table, "/tmp/bound.sock"),
            "bound, not listening"
        );
        assert!(!listening_on(table, "/tmp/none.sock"));
    }

    #[test]
    fn sees_a_real_listener() {
        let dir = std::env::temp_dir().join(format!("sb-upgrade-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("up.sock");
        let _ = std::fs::remove_file(&path);
        let path_s = path.display().to_string();
        let table = || std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
        assert!(!listening_on(&table(), &path_s));
        let listener = std::os::unix::net::UnixListener::bind(&path);
        assert!(listener.is_ok());
        assert!(listening_on(&table(), &path_s));
        drop(listener);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
