//! The accept loop of a [`Guarded`] listener, in place of Pingora's
//! `listening::Service`.
//!
//! Pingora's service spawns one task per accepted connection whose future
//! also has room for its own TLS handshake under a 60 s timeout
//! (pingora-core 0.9.1 `services/listening.rs`, `run_endpoint`): about
//! 8.8 KB held by every open connection for the life of the connection,
//! though this listener does its TLS itself (`tls.rs`) and Pingora's
//! handshake is never taken. Its listening sockets cannot be reused
//! without it (`listeners::l4` is private), so this module binds them the
//! way Pingora does (`SO_REUSEADDR`, a 65,535 backlog, a socket in use
//! retried for 30 s, one handed over by a predecessor taken from the
//! upgrade's descriptor table and a new one put in it), and each connection
//! task holds only the connection's own future ([`Guarded::serve`]).
//!
//! An accepted connection has no read or write buffer of Pingora's: its
//! listeners put a 64 KiB zero-filled read buffer in front of every client
//! connection unless told otherwise (pingora-core 0.9.1
//! `protocols/l4/stream.rs`, `DEFAULT_L4_READ_BUFFER_SIZE`). Without it the
//! HTTP/1 parser reads a request head straight into its own 4 KiB head
//! buffer and a body into the body reader's. Writes are batched above this
//! layer, TLS included (`batch.rs`).
//!
//! May import: the parent module, Pingora's server and socket types.

use super::placement::Placement;
use super::{fdtable, App, Guarded, Throttle, RESERVED_FDS};
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::GetSocketDigest;
use pingora_core::protocols::SocketDigest;
use pingora_core::server::{ListenFds, ShutdownWatch};
use std::io::ErrorKind;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpSocket;

/// Pending connections the kernel queues for a listener (Pingora's).
const BACKLOG: u32 = 65535;

/// How long a bind retries an address still in use (a predecessor that
/// has not let go yet), one try a second.
const BIND_TRIES: u32 = 30;

/// A [`Guarded`] application on one TCP address: a Pingora service.
pub struct Listening<A> {
    name: String,
    addr: String,
    guarded: Arc<Guarded<A>>,
    /// The runtime's threads (Pingora's `threads`), for [`Placement`].
    threads: usize,
}

impl<A> Guarded<A> {
    /// This listener as a Pingora service named `name` (its threads' name),
    /// accepting on `addr` (`host:port`) on a runtime of `threads` threads
    /// (Pingora's `threads`).
    pub fn listening(self, name: &str, addr: &str, threads: usize) -> Listening<A> {
        Listening {
            name: name.to_string(),
            addr: addr.to_string(),
            guarded: Arc::new(self),
            threads,
        }
    }
}

#[async_trait::async_trait]
impl<A: App> pingora_core::services::Service for Listening<A> {
    async fn start_service(
        &mut self,
        fds: Option<ListenFds>,
        shutdown: ShutdownWatch,
        listeners_per_fd: usize,
    ) {
        let listener = match bind(&self.addr, fds).await {
            Ok(l) => Arc::new(l),
            Err(e) => {
                // As Pingora's own service: a listener that cannot bind ends the process.
                log::error!("{}: cannot listen on {}: {e}", self.guarded.name, self.addr);
                std::process::exit(1);
            }
        };
        // Room for every connection the cap allows and its upstream, so
        // no worker sleeps on the table's growth under load (fdtable.rs).
        let entries = self.guarded.limits.max_connections.saturating_mul(2) + RESERVED_FDS as usize;
        if let Some(size) = fdtable::reserve(listener.as_raw_fd(), entries) {
            log::debug!("descriptor table: {size} entries");
        }
        let placement = Arc::new(Placement::new(self.threads));
        let loops: Vec<_> = (0..listeners_per_fd.max(1))
            .map(|_| {
                let accepting = accept_loop(
                    listener.clone(),
                    self.guarded.clone(),
                    placement.clone(),
                    shutdown.clone(),
                );
                // On the listener's own runtime, whose event loop it is
                // registered with (each connection is then placed).
                tokio::spawn(accepting)
            })
            .collect();
        for l in loops {
            let _ = l.await;
        }
        // Every accept loop has ended; the socket closes with the last of them.
        drop(listener);
        self.guarded.cleanup().await;
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn listen_addresses(&self) -> Option<Vec<String>> {
        Some(vec![self.addr.clone()])
    }
}

/// Accepts until the shutdown, each connection on a task of its own,
/// placed by `placement`.
async fn accept_loop<A: App>(
    listener: Arc<tokio::net::TcpListener>,
    guarded: Arc<Guarded<A>>,
    placement: Arc<Placement>,
    mut shutdown: ShutdownWatch,
) {
    // At EMFILE every accept fails: one warning a second carries the count.
    let mut failed = Throttle::default();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            changed = shutdown.changed() => match changed {
                Ok(()) if !*shutdown.borrow() => continue,
                _ => return,
            },
        };
        match accepted {
            Ok((tcp, peer)) => {
                // As Pingora's accept: no Nagle delay on a client connection.
                if let Err(e) = tcp.set_nodelay(true) {
                    log::debug!("{}: TCP_NODELAY not set: {e}", guarded.name);
                }
                let guarded = guarded.clone();
                let shutdown = shutdown.clone();
                placement.spawn(tcp, move |tcp| async move {
                    // Pingora's stream with the peer's address noted, as
                    // its own listener makes it.
                    let mut stream = L4Stream::from(tcp);
                    let digest = SocketDigest::from_raw_fd(stream.as_raw_fd());
                    let _ = digest.peer_addr.set(Some(peer.into()));
                    stream.set_socket_digest(digest);
                    guarded.serve(Box::new(stream), &shutdown).await;
                });
            }
            // Not the system's error: the event loop the socket is
            // registered with is gone (its runtime is shutting down), and
            // every accept would fail at once from now on.
            Err(e) if e.raw_os_error().is_none() => {
                log::debug!("{}: accepting ends: {e}", guarded.name);
                return;
            }
            Err(e) => {
                // Out of descriptors or memory: accept() would fail again at
                // once, so the loop waits a moment (the connection cap keeps
                // this rare). A client that gave up in the queue is skipped.
                let pause = matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                );
                if let Some(n) = failed.count() {
                    log::warn!(
                        "{}: {n} accept(s) failed since the last warning, the last: {e}",
                        guarded.name
                    );
                }
                if pause {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// The listening socket for `addr`: the predecessor's when the upgrade
/// handed one over, else a new one (recorded for a successor).
#[allow(unsafe_code)]
async fn bind(addr: &str, fds: Option<ListenFds>) -> std::io::Result<tokio::net::TcpListener> {
    let inherited = fds.as_ref().and_then(|t| t.lock().get(addr).copied());
    if let Some(fd) = inherited {
        // SAFETY: the descriptor table holds listening sockets Pingora
        // received from the predecessor for this address, owned by none else.
        let std = unsafe { std::net::TcpStream::from_raw_fd(fd) };
        return TcpSocket::from_std_stream(std).listen(BACKLOG);
    }
    let listener = bind_new(addr).await?;
    if let Some(t) = fds {
        t.lock().add(addr.to_string(), listener.as_raw_fd());
    }
    Ok(listener)
}

async fn bind_new(addr: &str) -> std::io::Result<tokio::net::TcpListener> {
    let sock_addr: SocketAddr = addr.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(ErrorKind::InvalidInput, "the address resolves to nothing")
    })?;
    let mut tries = 0;
    loop {
        let socket = match sock_addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(sock_addr) {
            Ok(()) => return socket.listen(BACKLOG),
            Err(e) if e.kind() == ErrorKind::AddrInUse && tries + 1 < BIND_TRIES => {
                tries += 1;
                log::warn!("{addr} is in use, will try again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
