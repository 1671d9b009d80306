//! An HTTP/2 connection on a [`Guarded`] listener (over TLS by ALPN, or h2c
//! with prior knowledge): the connection's accept loop, each stream served by
//! the application in a task of its own under the connection's limits.
//!
//! Pingora's own loop (pingora-core 0.9.1 `apps/mod.rs`, the `ServerApp`
//! impl for every `HttpServerApp`, and `protocols/http/v2/server.rs`
//! `accept_downstream_sessions`, which is `pub(crate)`) spawns each stream
//! without the listener's task-local state, so the body deadlines,
//! `draining()` and the idle eviction would not reach HTTP/2; this loop is
//! the same accept / graceful-shutdown cycle with them.
//!
//! What differs from HTTP/1 (docs/operations.md "TLS and HTTP/2"):
//! - the connection cap counts connections, not streams; a connection
//!   carries at most 100 concurrent streams (pingora-core's default
//!   `max_concurrent_streams`), each a request with its own body deadline
//!   and write timeout;
//! - the head deadline covers the TLS handshake, the client's preface and
//!   the SETTINGS exchange; a stream is handed over only once its HEADERS
//!   are complete (the h2 codec), so a request head has no deadline of its
//!   own past that, and the keep-alive idle timeout is the time with no
//!   stream open;
//! - a connection with no stream open is idle: over the cap, it is the one
//!   closed to make room, like an idle HTTP/1 keep-alive connection;
//! - at a graceful shutdown the client gets a GOAWAY at once (streams in
//!   flight finish, no new ones are taken), not the HTTP/1 linger for one
//!   more request.

use super::Session;
use super::{bounded, App, Conn, Guarded, CONN};
use pingora_core::protocols::http::v2::server::{self, H2Accept, HttpSession};
use pingora_core::protocols::http::ServerSession;
use pingora_core::protocols::{Digest, Stream};
use pingora_core::server::ShutdownWatch;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Streams rejected by the codec (a forbidden byte in the path, a missing
/// authority) before the connection is closed: pingora-core's own budget
/// (`MAX_MALFORMED_STREAMS_PER_CONN`), which only its private loop keeps.
const MAX_REJECTED_STREAMS: usize = 32;

/// The streams open on one connection.
#[derive(Default)]
struct Active {
    count: AtomicUsize,
    none: Notify,
}

/// One open stream, counted until dropped.
struct Open(Arc<Active>);

impl Drop for Open {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none.notify_waiters();
        }
    }
}

impl Active {
    fn open(self: &Arc<Self>) -> Open {
        self.count.fetch_add(1, Ordering::AcqRel);
        Open(self.clone())
    }

    async fn until_none(&self) {
        loop {
            let woken = self.none.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            woken.await;
        }
    }
}

/// A place among the gate's idle connections, left when dropped.
struct Parked<'a>(&'a super::Gate, u64);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.unpark(self.1);
    }
}

impl<A: App> Guarded<A> {
    /// Serves an HTTP/2 connection until it closes; its preface and
    /// SETTINGS are due by `deadline`.
    pub(super) async fn serve_h2(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
        deadline: Instant,
    ) {
        let digest = Arc::new(Digest {
            ssl_digest: stream.get_ssl_digest(),
            timing_digest: stream.get_timing_digest(),
            proxy_digest: stream.get_proxy_digest(),
            socket_digest: stream.get_socket_digest(),
        });
        // h2 writes its frames and flushes: they leave in one send.
        let stream: Stream = Box::new(super::batch::Batched::new(stream));
        let mut conn =
            match tokio::time::timeout_at(deadline, server::handshake(stream, None)).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    log::debug!("{}: HTTP/2 handshake failed: {}", self.name, bounded(&e));
                    return;
                }
                Err(_) => {
                    log::debug!(
                        "{}: HTTP/2 preface not received within {:?}; closing",
                        self.name,
                        self.limits.header_timeout
                    );
                    return;
                }
            };
        // A stream is handed over with its head complete.
        let state = Arc::new(Conn {
            limits: self.limits,
            head_done: AtomicBool::new(true),
            gate: self.gate.clone(),
            shutdown: shutdown.clone(),
        });
        let active = Arc::new(Active::default());
        let mut watch = shutdown.clone();
        let mut closing = false;
        let mut rejected = 0usize;
        loop {
            if !closing && *watch.borrow() {
                // GOAWAY: streams in flight finish, no new ones.
                conn.graceful_shutdown();
                closing = true;
            }
            let next = tokio::select! {
                biased;
                r = watch.changed(), if !closing => {
                    if r.is_err() {
                        conn.graceful_shutdown();
                        closing = true;
                    }
                    continue;
                }
                next = HttpSession::from_h2_conn(&mut conn, digest.clone()) => next,
                () = self.h2_idle(&active), if !closing => return,
            };
            match next {
                Ok(Some(H2Accept::Session(session))) => {
                    let open = active.open();
                    let app = self.app.clone();
                    let shutdown = shutdown.clone();
                    tokio::spawn(CONN.scope(state.clone(), async move {
                        let _open = open;
                        let _ = app
                            .serve_request(
                                Session::H2(Box::new(ServerSession::new_http2(session))),
                                &shutdown,
                            )
                            .await;
                    }));
                }
                Ok(Some(H2Accept::Rejected)) => {
                    rejected += 1;
                    if rejected >= MAX_REJECTED_STREAMS {
                        log::debug!("{}: too many malformed HTTP/2 streams; closing", self.name);
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    // Clients often just close the socket.
                    log::debug!("{}: HTTP/2 connection ended: {}", self.name, bounded(&e));
                    return;
                }
            }
        }
    }

    /// Returns once the connection has had no stream open for the
    /// keep-alive timeout, or was chosen to make room over the cap.
    async fn h2_idle(&self, active: &Active) {
        active.until_none().await;
        let wake = Arc::new(Notify::new());
        let _parked = Parked(&self.gate, self.gate.park(wake.clone()));
        tokio::select! {
            () = tokio::time::sleep(self.limits.keepalive_timeout) => {}
            () = wake.notified() => {}
        }
    }
}
