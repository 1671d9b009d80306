//! Client connections on both listeners (the gateway's and the metrics /
//! admin one): what a client may hold and for how long.
//!
//! Pingora 0.9.1 bounds each read of a request head or body by itself (60 s)
//! but not the head as a whole, keeps an HTTP/1.1 keep-alive connection for
//! ever, and accepts until the process runs out of descriptors (then logs
//! `Accept() failed … Too many open files` every second while new clients
//! hang). [`Guarded`] runs a listener's HTTP application, and each
//! connection's HTTP/1 loop (or HTTP/2 accept loop), itself:
//!
//! - **connection cap**: past `max_connections` open connections, the
//!   longest-idle keep-alive connection is closed to make room; with none
//!   idle, the new client gets an immediate `503` and the connection is
//!   closed (never a hang). One warning a second at most says so.
//! - **request-head deadline**: the whole head must arrive within
//!   `header_timeout` of the connection's accept (first request) or of its
//!   first byte (later requests), else the connection is closed (nginx's
//!   `client_header_timeout`).
//! - **keep-alive idle timeout**: a connection between requests is closed
//!   after `keepalive_timeout` without a byte (nginx's `keepalive_timeout`).
//! - **graceful shutdown**: a connection that is idle between requests when
//!   the drain starts (SIGTERM, or SIGQUIT to a successor) is kept for
//!   `drain_linger` more: a request its client had already sent (or sends
//!   then) is served and answered with `Connection: close` instead of
//!   finding the connection closed under it; Pingora's own shutdown flag,
//!   which drops a connection whose request head is still on its way, is
//!   raised only once that window (and a second for the head) has passed
//!   ([`Guarded`]'s `cleanup`). [`draining`] tells the application the drain
//!   has started; [`Connections`] lets the shutdown wait until the listener
//!   is done with its connections.
//! - **body deadlines**: once the head is in, [`head_received`] (called
//!   by the application when it starts on a request) sets the session's
//!   per-read timeout and drain timeout to `body_timeout` (nginx's
//!   `client_body_timeout`), and [`body_deadline`] gives the whole body's:
//!   `body_timeout` plus one second per `body_min_rate` bytes received
//!   (Apache's `mod_reqtimeout`, `body=20,MinRate=500`), so a body trickled
//!   a byte at a time ends while a slow but steady upload does not. The
//!   gateway answers `408` when either passes.
//! - **TLS and HTTP/2** (the client listener; docs/operations.md "TLS and
//!   HTTP/2"): with [`Guarded::with_tls`] each connection, once counted,
//!   does its TLS handshake within the head deadline ([`tls`]), then speaks
//!   HTTP/2 if the client chose `h2` by ALPN; without TLS,
//!   [`Guarded::with_h2c`] serves a connection that opens with the HTTP/2
//!   preface as HTTP/2 (`http2.rs`: how each limit applies there).
//! - **HTTP/1 on our own session** (`h1.rs`; HTTP/2 stays on Pingora's):
//!   each write's head, data and end leave in one send through the
//!   connection's buffer (`batch.rs`); [`Session`] is a request as the
//!   applications see it, either kind.
//!
//! [`Served`] is the metrics listener's HTTP application, over a
//! [`Respond`]: like Pingora's `HttpServer`, without its error lines that
//! print the whole request head (a 1 MiB URI made a 1 MiB ERROR line per
//! request).

use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::{Ssl, Stream, ALPN};
use pingora_core::server::ShutdownWatch;
use pingora_core::ErrorType;
use pingora_http::ResponseHeader;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio::time::Instant;

mod accept;
mod batch;
pub mod fdtable;
mod h1;
mod head;
mod http2;
mod placement;
mod session;
pub mod tls;

pub use accept::Listening;
pub use batch::Batched;
pub use head::AnswerHead;
pub use session::Session;

pub use tls::{CertFiles, Tls};

/// What one listener allows its clients.
#[derive(Debug, Clone, Copy)]
pub struct ClientLimits {
    /// The whole request head, from accept or from the first byte.
    pub header_timeout: Duration,
    /// The longest wait for any read of a request body.
    pub body_timeout: Duration,
    /// Bytes a second a request body must average (past `body_timeout`).
    pub body_min_rate: u64,
    /// The longest a connection is kept between requests.
    pub keepalive_timeout: Duration,
    /// Open connections at most; past it idle ones are closed, then new ones refused.
    pub max_connections: usize,
    /// How long a connection idle when a graceful shutdown starts still
    /// takes one more request (answered with `Connection: close`).
    pub drain_linger: Duration,
}

impl Default for ClientLimits {
    /// nginx's defaults: `client_header_timeout 60s`, `client_body_timeout
    /// 60s`, `keepalive_timeout 75s`; the connection cap from the
    /// descriptor limit ([`default_max_connections`]).
    fn default() -> Self {
        ClientLimits {
            header_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            body_min_rate: 500,
            keepalive_timeout: Duration::from_secs(75),
            max_connections: default_max_connections(),
            drain_linger: Duration::from_secs(2),
        }
    }
}

/// Descriptors kept out of the client cap for everything else the process
/// opens: listeners, the ledger and limits files, Redis or PostgreSQL,
/// the metrics listener's own clients, DNS.
const RESERVED_FDS: u64 = 256;

/// The client connection cap a descriptor limit allows: half of what is
/// left after [`RESERVED_FDS`], since each client connection may hold one
/// upstream connection; at least 16.
pub fn max_connections_for(nofile: u64) -> usize {
    let n = nofile.saturating_sub(RESERVED_FDS) / 2;
    usize::try_from(n.max(16)).unwrap_or(usize::MAX)
}

/// [`max_connections_for`] the process's soft `RLIMIT_NOFILE` (read from
/// `/proc/self/limits`; 1024, the usual default, where it cannot be read).
pub fn default_max_connections() -> usize {
    max_connections_for(nofile_soft_limit().unwrap_or(1024))
}

fn nofile_soft_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    match soft {
        "unlimited" => Some(1 << 20),
        n => n.parse().ok(),
    }
}

/// A listener's HTTP application: answers the request on `session` and
/// hands an HTTP/1 connection back for the next request (`None`: closed,
/// or an HTTP/2 stream).
///
/// Pingora's `HttpServerApp` without its `async_trait` box: the request's
/// future is a type of its own, boxed once where the connection holds it
/// ([`Guarded`]'s `one`) or held inline by an HTTP/2 stream's task, and an
/// implementation written as a function returning an `async move` block
/// keeps its session once (an `async_trait` body, like an `async fn`,
/// rebinds each argument, so a 680-byte session had two slots for the
/// request's whole life, a stream's included).
pub trait App: Send + Sync + 'static {
    /// One request on `session`.
    fn serve_request(
        self: &Arc<Self>,
        session: Session,
        shutdown: &ShutdownWatch,
    ) -> impl std::future::Future<Output = Option<Box<Batched>>> + Send;
}

/// One connection's state, seen by the application through a task-local.
struct Conn {
    limits: ClientLimits,
    head_done: AtomicBool,
    gate: Arc<Gate>,
    shutdown: ShutdownWatch,
}

tokio::task_local! {
    static CONN: Arc<Conn>;
}

/// Called by the application when a request's head has been read: stops
/// the head deadline and bounds the body's reads (and the drain of an
/// unread body before the connection is reused) by `body_timeout`. Does
/// nothing outside a [`Guarded`] connection (tests of the app alone).
pub fn head_received(session: &mut Session) {
    let _ = CONN.try_with(|c| {
        c.head_done.store(true, Ordering::Release);
        session.set_read_timeout(Some(c.limits.body_timeout));
        session.set_total_drain_timeout(Some(c.limits.body_timeout));
    });
}

/// Reads a request head; true when there is one to answer. False when the
/// connection is to be closed: the client closed it before a head, the
/// listener's shutdown linger window ended first (Pingora's own
/// applications do the same at their `http_cleanup`; a connection waiting
/// for its client's first request would otherwise hold the shutdown until
/// its head deadline), or the head could not be read: a head that is no
/// HTTP gets a 400 first, and the connection is shut down. `listener` names
/// the listener in the debug line, which gives the error's kind only: its
/// text may quote the head (an Authorization header, a 1 MiB URI).
pub async fn read_head(session: &mut Session, listener: &str) -> bool {
    let read = tokio::select! {
        // Biased: a head already buffered is read, and the wait for the
        // cleanup is polled (and registered) only while the head is on its way.
        biased;
        r = session.read_request() => r,
        () = async {
            match CONN.try_with(|c| c.gate.clone()) {
                Ok(g) => g.heads_cut().await,
                Err(_) => std::future::pending().await,
            }
        } => return false,
    };
    match read {
        Ok(read) => read,
        Err(e) => {
            log::debug!(
                "{listener}: unreadable request head ({})",
                e.etype().as_str()
            );
            if matches!(e.etype(), ErrorType::InvalidHTTPHeader) {
                // Boxed: rare, and HTTP/2's answer would size every
                // request's head read, which is boxed and copied whole.
                let _ = Box::pin(session.respond_error(400)).await;
            }
            session.shutdown().await;
            false
        }
    }
}

/// True once a graceful shutdown has started (SIGTERM, or SIGQUIT once the
/// listeners went to the successor) and the listener has stopped accepting:
/// an answer written now should close its connection. False outside a
/// [`Guarded`] connection.
///
/// Not before the listener has stopped: a client told to close reconnects
/// at once, and a connection that lands in the listen queue of a listener
/// about to close (Pingora ends its accept loop without emptying the queue)
/// is reset with its request.
pub fn draining() -> bool {
    CONN.try_with(|c| c.gate.stopped.load(Ordering::Acquire))
        .unwrap_or(false)
}

/// True between the shutdown signal and the listener's stop (see
/// [`draining`]): the listener turns keep-alive off for a request it
/// starts now (`serve_h1`), though it is still open.
pub fn stopping() -> bool {
    CONN.try_with(|c| *c.shutdown.borrow() && !c.gate.stopped.load(Ordering::Acquire))
        .unwrap_or(false)
}

/// When a request body begun at `started` with `received` bytes so far must
/// be in whole: `body_timeout` plus one second per `body_min_rate` bytes.
/// `None` outside a [`Guarded`] connection.
pub fn body_deadline(started: Instant, received: usize) -> Option<Instant> {
    CONN.try_with(|c| {
        let rate = c.limits.body_min_rate.max(1);
        let earned = Duration::from_secs_f64(received as f64 / rate as f64);
        started + c.limits.body_timeout + earned
    })
    .ok()
}

/// The open connections of one listener and its idle ones, oldest first.
struct Gate {
    max: usize,
    live: AtomicUsize,
    /// True once the listener stopped accepting (its `cleanup` began).
    stopped: AtomicBool,
    /// True once the listener's `cleanup` has run: it stopped accepting,
    /// and every connection it accepted has been counted in `live`.
    finished: AtomicBool,
    /// Woken each time the last open connection closes, and when `finished`
    /// turns true.
    closed: Notify,
    idle: Mutex<BTreeMap<u64, Arc<Notify>>>,
    next_id: AtomicU64,
    /// Connections refused over the cap, warned of once a second.
    refused: Mutex<Throttle>,
}

/// At most one warning a second for an event that, under overload, comes
/// thousands of times a second (a connection refused, an `accept()` that
/// failed): each warning carries how many it stands for.
#[derive(Debug, Default)]
struct Throttle {
    /// Events since the last warning.
    since: u64,
    last: Option<Instant>,
}

impl Throttle {
    /// Counts one event; the count to warn with when a warning is due.
    fn count(&mut self) -> Option<u64> {
        self.since += 1;
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

/// A place in the gate, given back when the connection ends.
struct Slot(Arc<Gate>);

impl Drop for Slot {
    fn drop(&mut self) {
        if self.0.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.closed.notify_waiters();
        }
    }
}

/// The open connections of a [`Guarded`] listener, for the shutdown to
/// wait on.
#[derive(Clone)]
pub struct Connections(Arc<Gate>);

impl Connections {
    /// Connections open now.
    pub fn open(&self) -> usize {
        self.0.live.load(Ordering::Acquire)
    }

    /// Once the shutdown has begun: waits until the listener is done (it
    /// stopped accepting, and the linger window and Pingora's cleanup are
    /// over, so a connection accepted at the last moment has been counted)
    /// and no connection is open, or until `deadline`; true when done.
    pub async fn wait_closed(&self, deadline: Instant) -> bool {
        loop {
            let woken = self.0.closed.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.finished() {
                return true;
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return self.finished();
            }
        }
    }

    fn finished(&self) -> bool {
        self.0.finished.load(Ordering::Acquire) && self.open() == 0
    }
}

impl Gate {
    fn admit(self: &Arc<Gate>) -> Option<Slot> {
        let n = self.live.fetch_add(1, Ordering::AcqRel) + 1;
        let slot = Slot(self.clone());
        if n <= self.max {
            return Some(slot);
        }
        // Over the cap: the longest-idle keep-alive connection makes room.
        let oldest = self.idle.lock().ok().and_then(|mut m| m.pop_first());
        if let Some((_, wake)) = oldest {
            wake.notify_one();
            return Some(slot);
        }
        drop(slot);
        None
    }

    fn park(&self, wake: Arc<Notify>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut m) = self.idle.lock() {
            m.insert(id, wake);
        }
        id
    }

    fn unpark(&self, id: u64) {
        if let Ok(mut m) = self.idle.lock() {
            m.remove(&id);
        }
    }

    /// Returns once the listener's `cleanup` has finished (see
    /// [`Connections::wait_closed`]).
    async fn heads_cut(&self) {
        loop {
            let woken = self.closed.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.finished.load(Ordering::Acquire) {
                return;
            }
            woken.await;
        }
    }

    /// Counts a refused connection; at most one warning a second, with
    /// the count since the last one.
    fn warn_refused(&self, listener: &str) {
        let Some(n) = self.refused.lock().ok().and_then(|mut t| t.count()) else {
            return;
        };
        log::warn!(
            "{listener}: {n} connection(s) refused with 503: {} open, none idle (the cap: \
             --max-connections or --metrics-max-connections, and the open-files limit)",
            self.max
        );
    }
}

/// The answer a client over the cap gets before the connection is closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: 89\r\n\r\n{\"error\":{\"type\":\"overloaded\",\"message\":\"too many open connections; retry in a moment\"}}";

/// A listener's HTTP application under [`ClientLimits`] (see the module doc).
pub struct Guarded<A> {
    app: Arc<A>,
    limits: ClientLimits,
    gate: Arc<Gate>,
    name: &'static str,
    /// TLS on this listener (ALPN `h2` or `http/1.1`).
    tls: Option<Arc<Tls>>,
    /// HTTP/2 with prior knowledge on a plain listener.
    h2c: bool,
}

impl<A> Guarded<A> {
    /// `app` on a listener named `name` (in log lines) under `limits`.
    pub fn new(name: &'static str, app: A, limits: ClientLimits) -> Guarded<A> {
        Guarded {
            app: Arc::new(app),
            gate: Arc::new(Gate {
                max: limits.max_connections.max(1),
                live: AtomicUsize::new(0),
                stopped: AtomicBool::new(false),
                finished: AtomicBool::new(false),
                closed: Notify::new(),
                idle: Mutex::new(BTreeMap::new()),
                next_id: AtomicU64::new(0),
                refused: Mutex::default(),
            }),
            limits,
            name,
            tls: None,
            h2c: false,
        }
    }

    /// TLS on this listener: every connection starts with a handshake (within
    /// the head deadline), and HTTP/2 is served to a client choosing `h2`.
    pub fn with_tls(mut self, tls: Arc<Tls>) -> Guarded<A> {
        self.tls = Some(tls);
        self
    }

    /// HTTP/2 with prior knowledge (h2c) beside HTTP/1 on a plain listener.
    pub fn with_h2c(mut self) -> Guarded<A> {
        self.h2c = true;
        self
    }

    /// This listener's open connections (for the shutdown to wait on).
    pub fn connections(&self) -> Connections {
        Connections(self.gate.clone())
    }
}

/// How a keep-alive wait ended.
enum Idle {
    /// The next request's first byte is here.
    Request,
    /// Timed out, evicted, shut down, or the client closed.
    Close,
}

impl<A: App> Guarded<A> {
    /// One request, its head bounded by `deadline`.
    async fn one(
        &self,
        session: Session,
        shutdown: &ShutdownWatch,
        deadline: Instant,
    ) -> Option<Box<Batched>> {
        let conn = Arc::new(Conn {
            limits: self.limits,
            head_done: AtomicBool::new(false),
            gate: self.gate.clone(),
            shutdown: shutdown.clone(),
        });
        let head_timer = async {
            tokio::time::sleep_until(deadline).await;
            if conn.head_done.load(Ordering::Acquire) {
                std::future::pending::<()>().await;
            }
        };
        // Boxed: the connection's task, which an idle keep-alive connection
        // keeps too, holds the request's state only while there is one.
        let request = CONN.scope(
            conn.clone(),
            Box::pin(self.app.serve_request(session, shutdown)),
        );
        tokio::select! {
            r = request => r,
            () = head_timer => {
                log::debug!("{}: request head not received within {:?}; closing", self.name, self.limits.header_timeout);
                None
            }
        }
    }

    /// Waits between requests for the next one's first byte.
    async fn idle(&self, conn: &mut batch::Batched, shutdown: &ShutdownWatch) -> Idle {
        if *shutdown.borrow() {
            return self.linger(conn).await;
        }
        let wake = Arc::new(Notify::new());
        let id = self.gate.park(wake.clone());
        let mut shutdown = shutdown.clone();
        let outcome = tokio::select! {
            r = conn.read_ahead(1) => if r.is_ok() { Some(Idle::Request) } else { Some(Idle::Close) },
            () = tokio::time::sleep(self.limits.keepalive_timeout) => Some(Idle::Close),
            () = wake.notified() => Some(Idle::Close),
            _ = shutdown.changed() => None,
        };
        self.gate.unpark(id);
        match outcome {
            Some(o) => o,
            None => self.linger(conn).await,
        }
    }

    /// The drain started while the connection was idle: its client may
    /// have sent its next request already (the last answer said
    /// keep-alive). It is served if its first byte arrives within
    /// `drain_linger` (and answered with `Connection: close`); else the
    /// connection is closed.
    async fn linger(&self, conn: &mut batch::Batched) -> Idle {
        match tokio::time::timeout(self.limits.drain_linger, conn.read_ahead(1)).await {
            Ok(Ok(_)) => Idle::Request,
            _ => Idle::Close,
        }
    }
}

impl<A: App> Guarded<A> {
    /// The TLS handshake, within `deadline`; `None` (closed) when it fails.
    async fn handshake(
        &self,
        tls: &Tls,
        stream: Stream,
        deadline: Instant,
    ) -> Option<Box<pingora_core::protocols::tls::TlsStream<L4Stream>>> {
        // The listener is plain TCP (tls.rs says why): its streams are L4.
        let Ok(l4) = stream.into_any().downcast::<L4Stream>() else {
            log::error!("{}: not a TCP connection; closing", self.name);
            return None;
        };
        match tokio::time::timeout_at(deadline, tls.handshake(*l4)).await {
            // Boxed here: a TLS stream by value is about 3 KB, and a slot
            // for it would be in every connection's state (plain ones too).
            Ok(Ok(s)) => Some(Box::new(s)),
            Ok(Err(e)) => {
                log::debug!("{}: TLS handshake failed: {}", self.name, bounded(&e));
                None
            }
            Err(_) => {
                log::debug!(
                    "{}: TLS handshake not done within {:?}; closing",
                    self.name,
                    self.limits.header_timeout
                );
                None
            }
        }
    }

    /// An HTTP/1 connection whose first bytes have been read ahead: one
    /// request after another, each head within its deadline, the
    /// keep-alive waits between them bounded. Each session starts with
    /// the bytes read ahead (or left by the last request) as its
    /// request's start.
    async fn serve_h1(
        &self,
        mut conn: Box<batch::Batched>,
        shutdown: &ShutdownWatch,
        mut deadline: Instant,
    ) {
        loop {
            let mut session = h1::Http1::new(conn);
            if *shutdown.borrow() {
                session.set_keepalive(None);
            }
            let session = Session::H1(Box::new(session));
            let Some(reused) = self.one(session, shutdown, deadline).await else {
                return;
            };
            conn = reused;
            if let Idle::Close = self.idle(&mut conn, shutdown).await {
                return;
            }
            deadline = Instant::now() + self.limits.header_timeout;
        }
    }

    /// Waits for a new connection's first `n` bytes, read ahead: until the
    /// head deadline, or the listener's cleanup (as [`read_head`] does).
    async fn first_bytes(&self, conn: &mut batch::Batched, n: usize, deadline: Instant) -> bool {
        let arrived = tokio::select! {
            biased;
            r = tokio::time::timeout_at(deadline, conn.read_ahead(n)) => r,
            () = self.gate.heads_cut() => return false,
        };
        match arrived {
            Ok(r) => r.is_ok(),
            Err(_) => {
                log::debug!(
                    "{}: request head not received within {:?}; closing",
                    self.name,
                    self.limits.header_timeout
                );
                false
            }
        }
    }
}

impl<A: App> Guarded<A> {
    /// One accepted connection, until it closes ([`accept`] spawns it).
    async fn serve(self: &Arc<Self>, mut stream: Stream, shutdown: &ShutdownWatch) {
        let Some(_slot) = self.gate.admit() else {
            self.gate.warn_refused(self.name);
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                // A TLS client could not read a plain answer: it is only closed.
                if self.tls.is_none() {
                    let _ = stream.write_all(REFUSAL).await;
                    let _ = stream.flush().await;
                }
                let _ = stream.shutdown().await;
            })
            .await;
            return;
        };
        // The first request's head (after the TLS handshake, the HTTP/2
        // preface and settings) is due within header_timeout of the accept.
        let deadline = Instant::now() + self.limits.header_timeout;
        let stream = match &self.tls {
            Some(tls) => {
                // Boxed, like the HTTP/2 loop: a connection's task holds
                // the state of the branch it is in, not the largest one's
                // (an HTTP/1 stream's task would carry the handshake's).
                let Some(stream) = Box::pin(self.handshake(tls, stream, deadline)).await else {
                    return;
                };
                if matches!(stream.selected_alpn_proto(), Some(ALPN::H2)) {
                    Box::pin(self.serve_h2(stream, shutdown, deadline)).await;
                    return;
                }
                stream
            }
            None => stream,
        };
        let mut conn = Box::new(batch::Batched::new(stream));
        // HTTP/2 with prior knowledge: its preface starts `PRI`, which no
        // HTTP/1 request line does (Pingora's own check waits for the
        // whole 24-byte preface, longer than a short HTTP/1.0 request).
        let h2c = self.tls.is_none() && self.h2c;
        if !self
            .first_bytes(&mut conn, if h2c { 3 } else { 1 }, deadline)
            .await
        {
            return;
        }
        if h2c && conn.read_ahead(3).await.is_ok_and(|b| b == b"PRI") {
            Box::pin(self.serve_h2(conn, shutdown, deadline)).await;
            return;
        }
        self.serve_h1(conn, shutdown, deadline).await;
    }

    /// Called once the listener stopped accepting (the drain
    /// started). Every connection still waiting for a request head is
    /// closed ([`read_head`]) once the linger window has passed and a
    /// second more for a head already on its way:
    /// a request sent on a kept connection just as the drain began, or on a
    /// connection accepted just before it, is served rather than dropped.
    async fn cleanup(&self) {
        // Every accept loop of this listener has ended (its sockets closed, or
        // open only in the successor).
        self.gate.stopped.store(true, Ordering::Release);
        tokio::time::sleep(self.limits.drain_linger + Duration::from_secs(1)).await;
        self.gate.finished.store(true, Ordering::Release);
        self.gate.closed.notify_waiters();
    }
}

/// A Pingora error for a log line, cut like every logged client string
/// (`error::cut`). Use only for errors that carry no request data.
fn bounded(e: &pingora_core::Error) -> String {
    crate::error::cut(&e.to_string(), crate::error::LOGGED_CHARS).into_owned()
}

/// What the metrics listener's application answers a request with (its
/// body read from `session` when it has one).
#[async_trait::async_trait]
pub trait Respond {
    async fn response(&self, session: &mut Session) -> http::Response<Vec<u8>>;
}

/// A [`Respond`] application as a listener's [`App`], logging only the
/// kind of a client's fault (never the head it could not parse).
pub struct Served<S>(pub S);

impl<S: Respond + Send + Sync + 'static> App for Served<S> {
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn keeps each argument twice"
    )]
    fn serve_request(
        self: &Arc<Self>,
        mut http: Session,
        shutdown: &ShutdownWatch,
    ) -> impl std::future::Future<Output = Option<Box<Batched>>> + Send {
        async move {
            if !read_head(&mut http, "metrics listener").await {
                return None;
            }
            head_received(&mut http);
            if !host_ok(http.req_header()) {
                let _ = http.respond_error(400).await;
                return None;
            }
            if *shutdown.borrow() {
                http.set_keepalive(None);
            }
            let (parts, body) = self.0.response(&mut http).await.into_parts();
            let mut head: ResponseHeader = parts.into();
            // A length, so the connection can be kept alive (without one the
            // body is delimited by closing the connection).
            if !head.headers.contains_key(http::header::CONTENT_LENGTH) {
                let _ = head.insert_header(http::header::CONTENT_LENGTH, body.len());
            }
            let data = (!body.is_empty()).then(|| body.into());
            if let Err(e) = http.write_response(Some(Box::new(head)), data, true).await {
                log::debug!("metrics listener: answer not written: {}", bounded(&e));
                return None;
            }
            match http.finish().await {
                Ok(reused) => reused,
                Err(e) => {
                    log::debug!("metrics listener: connection not reusable: {}", bounded(&e));
                    None
                }
            }
        }
    }
}

/// RFC 9112 §3.2: an HTTP/1.1 request has exactly one `Host`; HTTP/1.0 may have none.
pub fn host_ok(req: &pingora_http::RequestHeader) -> bool {
    let hosts = req.headers.get_all(http::header::HOST).iter().count();
    match hosts {
        0 => req.version != http::Version::HTTP_11,
        1 => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_throttle_warns_once_a_second_with_the_count() {
        let mut t = Throttle::default();
        assert_eq!(t.count(), Some(1));
        for _ in 0..4 {
            assert_eq!(t.count(), None);
        }
        tokio::time::advance(Duration::from_millis(999)).await;
        assert_eq!(t.count(), None);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(t.count(), Some(6));
        assert_eq!(t.count(), None);
    }

    #[test]
    fn connection_cap_follows_the_descriptor_limit() {
        assert_eq!(max_connections_for(1024), 384);
        assert_eq!(max_connections_for(65536), 32640);
        assert_eq!(max_connections_for(100), 16);
    }
}
