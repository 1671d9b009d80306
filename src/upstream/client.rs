//! Upstream connections: address resolution off the reactor (cached), TCP and
//! TLS (SNI, certificate verification) from pingora-core's transport
//! connector, our own keep-alive pool of idle connections, and one HTTP/1.1
//! exchange per request over them (`h1`): the head and a small body go out in
//! one write, the answer's head and body are read into one buffer and body
//! chunks are handed on as slices of it.
//!
//! Isolation: idle connections are pooled per upstream identity (provider,
//! base URL, a keyed hash of the credential, resolved address), so two
//! providers at one address never share a connection (and, on
//! single-threaded runtimes, per thread: `reactor`). A connection goes
//! back to the pool only after a clean answer (keep-alive, body read to its
//! declared end and not a byte more, no framing anomaly: content-length
//! with transfer-encoding, framing on a 204/304, a body delimited by close),
//! while it carried fewer than `keepalive_requests` requests; a pooled
//! connection that turned readable while idle (a stray answer, a close) is
//! closed when taken, checked with a non-blocking `MSG_PEEK` on the socket
//! itself, not through the reactor's cached readiness. A request whose
//! pooled connection fails before any byte of the answer is sent once more,
//! on a new connection, and only once (a POST is not idempotent).
//!
//! Why not pingora-core's HTTP session: it writes the head and the body with
//! a flush each (two `sendto` per request where one does), reads the head and
//! the body in separate reads, copies every body chunk out of a 64 KiB buffer
//! it keeps per connection (pingora-core 0.9.1 `protocols/http/v1/body.rs`
//! line 31, `BODY_BUFFER_SIZE`, not configurable), and its pool spawns a task
//! per released connection and asks the kernel for the peer's address
//! (`getpeername`) on every reuse.

use super::h1::{self, Body, RequestHead, ResponseHead, WireError};
use crate::config::{BaseUrl, Scheme};
use crate::error::{ErrorKind, GatewayError};
use bytes::{Bytes, BytesMut};
use pingora_core::connectors::TransportConnector;
use pingora_core::protocols::Stream;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::ErrorType;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a resolved address is reused.
const DNS_TTL: Duration = Duration::from_secs(30);
/// Room for each read: a response head and a small body, or a few frames.
const READ_CHUNK: usize = 4 * 1024;
/// Room for an answer's first read, which waits with no buffer
/// ([`UpstreamClient::read_first`]): a head with a burst of frames or a
/// JSON body of some kilobytes comes in one read, not two.
const FIRST_READ: usize = 16 * 1024;
/// The least room a read asks for: a trickling stream's reads (a frame or
/// two each) come down to it.
const READ_TRICKLE: usize = 1024;
/// The read after a head that came with more body than its read held.
const BURST_READ: usize = 16 * 1024;
/// The most a stream's read takes through the stack when nothing is
/// buffered: such a read waits with no buffer of its own and keeps exactly
/// what came ([`UpstreamClient::read_some`]), however large its room.
const STACK_READ: usize = BURST_READ;
/// The most one read asks for while a long body with a known length comes.
const READ_LARGE: usize = 64 * 1024;
/// A body up to this size goes out in the same write as its head.
pub const JOINED_BODY: usize = 64 * 1024;
/// Idle connections kept per upstream address, at most.
const IDLE_PER_PEER: usize = 256;
/// How often every idle list is swept of connections past the idle timeout.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// An idle connection in the pool.
struct Idle {
    stream: Stream,
    since: Instant,
    /// Requests it has carried.
    uses: u32,
}

/// Idle connections by upstream identity and address, newest last.
struct Pool {
    idle: HashMap<u64, VecDeque<Idle>>,
    swept: Instant,
}

/// A pooled client for all upstreams.
pub struct UpstreamClient {
    connector: TransportConnector,
    pool: Mutex<Pool>,
    /// Resolved addresses by the URL's authority (`host:port`).
    dns: Mutex<HashMap<String, (SocketAddr, Instant)>>,
    connect_timeout: Duration,
    read_timeout: Duration,
    /// How long an idle pooled connection is kept.
    idle_timeout: Duration,
    /// Requests one connection carries at most.
    keepalive_requests: u32,
    /// The keys of the identity hash (random per process): a credential is
    /// never kept, only this hash of it.
    hasher: std::collections::hash_map::RandomState,
}

/// Who a pooled connection belongs to: a keyed hash of the provider, the
/// base URL and the credential (see [`UpstreamClient::identity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity(u64);

/// A request as it goes on the wire: the head (with the body when it is
/// small enough to share its write), and a larger body written after it.
pub struct Message {
    bytes: Vec<u8>,
    body: Option<Bytes>,
}

impl Message {
    /// The message of `head` and `body`.
    pub fn new(head: RequestHead, body: &Bytes) -> Message {
        let joined = body.len() <= JOINED_BODY;
        Message {
            bytes: head.finish(body, joined),
            body: (!joined).then(|| body.clone()),
        }
    }
}

/// An upstream exchange with its response head read.
pub struct Exchange {
    stream: Stream,
    /// Bytes read and not yet handed on (body data or framing).
    buf: BytesMut,
    head: ResponseHead,
    body: Body,
    key: u64,
    /// Requests this connection has carried, this one included.
    uses: u32,
    /// Whether the answer's framing allows another request on the
    /// connection (keep-alive, no anomaly, not delimited by close).
    reusable: bool,
    read_timeout: Duration,
    /// How much the next read asks for: doubled after a read that filled
    /// its room (a fast upstream, a burst of frames), halved after one that
    /// used little of it (a trickle), between `READ_TRICKLE` and `READ_LARGE`.
    read_size: usize,
    /// The last read filled its room: more was likely on the socket
    /// already ([`UpstreamClient::chunk_at_once`]).
    filled: bool,
}

impl Exchange {
    /// How much the next body read asks for.
    fn next_read(&self) -> usize {
        match self.body {
            Body::Length(n) => (n as usize).clamp(READ_CHUNK, READ_LARGE),
            _ => self.read_size,
        }
    }

    /// The body bytes the relay's batch may still take at once: those
    /// read but not yet handed out, and, when the last read filled its
    /// room (more was likely waiting: `chunk_at_once` takes it into the
    /// same batch), what the next read asks for. The relay makes room for
    /// them all at once, so a batch is not copied to grow as they come;
    /// the sum stays the same as chunks move from here into the batch.
    pub fn waiting(&self) -> usize {
        self.buf.len() + if self.filled { self.next_read() } else { 0 }
    }

    /// The answer's status.
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// The answer's header `name`, when present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    /// The body's declared length still to come (content-length framing).
    pub fn length_left(&self) -> Option<u64> {
        match self.body {
            Body::Length(n) => Some(n),
            _ => None,
        }
    }
}

/// A pooled connection failed before any byte of the answer and the request
/// was sent once more on a new connection: how long the failed send took.
#[derive(Debug, Clone, Copy)]
pub struct Resent {
    pub after: Duration,
}

/// How sending on one connection failed.
enum Fault {
    /// A pooled connection was already dead: the request never got there.
    Stale(GatewayError),
    Other(GatewayError),
}

/// Why reading an upstream body stopped early.
#[derive(Debug)]
pub enum ReadFault {
    /// No chunk within the provider's `idle` timeout.
    Idle(Duration),
    /// The request's `total` deadline passed.
    Deadline,
    /// The connection failed.
    Transport(GatewayError),
}

impl ReadFault {
    /// The error in the client's terms (504 for the deadlines).
    pub fn error(&self) -> GatewayError {
        match self {
            ReadFault::Idle(d) => GatewayError::new(
                ErrorKind::Timeout,
                format!(
                    "the upstream sent nothing for {} ms (the provider's idle timeout)",
                    d.as_millis()
                ),
            ),
            ReadFault::Deadline => deadline_error(),
            ReadFault::Transport(e) => e.clone(),
        }
    }

    /// Whether the upstream is to blame as a timeout (not the connection).
    pub fn is_timeout(&self) -> bool {
        !matches!(self, ReadFault::Transport(e) if e.kind != ErrorKind::Timeout)
    }
}

/// The 504 of a request whose provider's `total` deadline passed.
pub fn deadline_error() -> GatewayError {
    GatewayError::new(
        ErrorKind::Timeout,
        "the request ran past the provider's total deadline",
    )
}

/// The shorter of `limit` and the time left before `deadline`, and whether
/// the deadline is the shorter one.
pub fn bound(limit: Option<Duration>, deadline: Option<Instant>) -> Option<(Duration, bool)> {
    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    match (limit, left) {
        (None, None) => None,
        (Some(l), None) => Some((l, false)),
        (None, Some(r)) => Some((r, true)),
        (Some(l), Some(r)) if r < l => Some((r, true)),
        (Some(l), Some(_)) => Some((l, false)),
    }
}

/// Maps a transport error to a 502 or 504 naming the upstream.
pub fn transport_error(what: &str, e: &pingora_core::Error) -> GatewayError {
    match e.etype() {
        ErrorType::ConnectTimedout
        | ErrorType::ReadTimedout
        | ErrorType::WriteTimedout
        | ErrorType::TLSHandshakeTimedout => GatewayError::new(
            ErrorKind::Timeout,
            format!("upstream {what} timed out ({})", e.etype().as_str()),
        ),
        _ => GatewayError::new(
            ErrorKind::BadGateway,
            format!("upstream {what} unreachable: {}", e.etype().as_str()),
        ),
    }
}

fn io_error(what: &str, e: &std::io::Error) -> GatewayError {
    GatewayError::new(
        ErrorKind::BadGateway,
        format!("upstream {what} unreachable: {}", e.kind()),
    )
}

fn read_timed_out() -> GatewayError {
    GatewayError::new(
        ErrorKind::Timeout,
        "upstream response timed out (ReadTimedout)",
    )
}

fn wire_error(e: WireError) -> GatewayError {
    GatewayError::new(
        ErrorKind::BadGateway,
        format!("upstream answer invalid: {e}"),
    )
}

/// Whether an idle connection is still open and quiet: nothing buffered in
/// the stream's layers (a poll of its read that would block) and nothing on
/// the socket itself (a non-blocking `MSG_PEEK`, which sees bytes and a
/// close that arrived while no task watched the connection, whatever the
/// reactor has noticed). Any byte while idle is an answer to no request: the
/// connection is not used again.
fn still_open(stream: &mut Stream) -> bool {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let mut byte = [0u8; 1];
    let read = tokio::task::unconstrained(stream.read(&mut byte));
    let mut read = std::pin::pin!(read);
    let pending = matches!(
        read.as_mut().poll(&mut Context::from_waker(Waker::noop())),
        Poll::Pending
    );
    pending && socket_quiet(stream)
}

/// Whether the connection's socket has nothing to read and is not closed.
#[cfg(unix)]
#[allow(unsafe_code)]
fn socket_quiet(stream: &Stream) -> bool {
    // pingora-core's TCP and TLS streams identify themselves by their
    // socket's file descriptor.
    let fd: libc::c_int = stream.id();
    let mut byte = 0u8;
    // SAFETY: `fd` is the socket `stream` owns, open for this call (we hold
    // the stream); `recv` writes at most 1 byte into `byte`, and with
    // MSG_PEEK | MSG_DONTWAIT it neither consumes data nor blocks.
    let n = unsafe {
        libc::recv(
            fd,
            std::ptr::addr_of_mut!(byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
}

#[cfg(not(unix))]
fn socket_quiet(_stream: &Stream) -> bool {
    true
}

/// The pool's key for a connection of `identity` to `addr`, taken on the
/// current thread's reactor ([`reactor`]).
fn pool_key(identity: Identity, addr: SocketAddr) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    identity.hash(&mut h);
    addr.hash(&mut h);
    reactor().hash(&mut h);
    h.finish()
}

/// Which I/O driver a connection made on this thread is registered with: 0
/// for a multi-threaded runtime (its workers share one), else a number of
/// this thread's own. On a single-threaded runtime (Pingora's `NoSteal`
/// flavour with `work_stealing: false`, one per worker thread) a socket only
/// becomes ready when its own runtime polls for events: a connection used
/// by another thread's task would wait for that runtime and cost a
/// cross-thread wake for every read. So each such thread keeps its own idle
/// connections.
fn reactor() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    thread_local! {
        static REACTOR: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
    }
    REACTOR.with(|r| {
        if let Some(n) = r.get() {
            return n;
        }
        let own = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        let n = if own {
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        } else {
            0
        };
        r.set(Some(n));
        n
    })
}

/// What bounds the client's connections (from the command line).
#[derive(Debug, Clone, Copy)]
pub struct ClientSettings {
    /// TCP (+TLS) connect timeout.
    pub connect_timeout: Duration,
    /// Longest wait for any read (a head or a body chunk) without a tighter bound.
    pub read_timeout: Duration,
    /// How long an idle connection is kept in the pool.
    pub idle_timeout: Duration,
    /// Requests one connection carries before it is closed.
    pub keepalive_requests: u32,
}

impl UpstreamClient {
    /// A client bound by `settings`.
    pub fn new(settings: &ClientSettings) -> Self {
        UpstreamClient {
            connector: TransportConnector::new(None),
            pool: Mutex::new(Pool {
                idle: HashMap::new(),
                swept: Instant::now(),
            }),
            dns: Mutex::new(HashMap::new()),
            connect_timeout: settings.connect_timeout,
            read_timeout: settings.read_timeout,
            idle_timeout: settings.idle_timeout,
            keepalive_requests: settings.keepalive_requests.max(1),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// The identity of `provider`'s upstream at `url` called with
    /// `credential`: connections are pooled per identity, never shared
    /// across providers, base URLs or credentials. The credential goes into
    /// a hash keyed at random per process and is not kept.
    pub fn identity(&self, provider: &str, url: &BaseUrl, credential: &str) -> Identity {
        use std::hash::BuildHasher;
        let mut h = self.hasher.build_hasher();
        provider.hash(&mut h);
        (url.scheme == Scheme::Https).hash(&mut h);
        url.host.hash(&mut h);
        url.port.hash(&mut h);
        url.path.hash(&mut h);
        credential.hash(&mut h);
        Identity(h.finish())
    }

    async fn resolve(&self, url: &BaseUrl) -> Result<SocketAddr, GatewayError> {
        if let Some(ip) = url.ip {
            return Ok(SocketAddr::new(ip, url.port));
        }
        if let Ok(cache) = self.dns.lock() {
            if let Some((addr, at)) = cache.get(url.authority.as_str()) {
                if at.elapsed() < DNS_TTL && addr.port() == url.port {
                    return Ok(*addr);
                }
            }
        }
        let lookup = tokio::time::timeout(
            self.connect_timeout,
            tokio::net::lookup_host((url.host.as_str(), url.port)),
        )
        .await
        .map_err(|_| {
            GatewayError::new(
                ErrorKind::Timeout,
                format!("resolving {} timed out", url.host),
            )
        })?;
        let addr = lookup.ok().and_then(|mut it| it.next()).ok_or_else(|| {
            GatewayError::new(
                ErrorKind::BadGateway,
                format!("cannot resolve upstream host {}", url.host),
            )
        })?;
        if let Ok(mut cache) = self.dns.lock() {
            cache.insert(url.authority.clone(), (addr, Instant::now()));
        }
        Ok(addr)
    }

    /// A new connection to `addr` for `url` (TLS with SNI and verification),
    /// within `connect` (the provider's `timeouts.connect`) or the gateway's
    /// connect timeout.
    async fn connect(
        &self,
        url: &BaseUrl,
        addr: SocketAddr,
        connect: Option<Duration>,
    ) -> Result<Stream, GatewayError> {
        let tls = url.scheme == Scheme::Https;
        let mut peer = HttpPeer::new(addr, tls, url.host.clone());
        let connect = connect.unwrap_or(self.connect_timeout);
        peer.options.connection_timeout = Some(connect);
        peer.options.total_connection_timeout = Some(connect * 2);
        // Boxed: Pingora's connect (its TLS handshake included) is an
        // 8.3 KB future, which in place sized every upstream call for as
        // long as it waits for the answer's head, pooled connection or not.
        Box::pin(self.connector.new_stream(&peer))
            .await
            .map_err(|e| transport_error("connection", &e))
    }

    /// The newest idle connection for `key` that is still open and quiet,
    /// with the requests it has carried.
    fn take_idle(&self, key: u64) -> Option<(Stream, u32)> {
        loop {
            let idle = {
                let mut pool = self.pool.lock().ok()?;
                pool.idle.get_mut(&key)?.pop_back()?
            };
            let mut stream = idle.stream;
            if idle.since.elapsed() < self.idle_timeout && still_open(&mut stream) {
                return Some((stream, idle.uses));
            }
        }
    }

    /// Sends `msg` to `url` for `identity` and reads the response head.
    /// A pooled connection that fails before any byte of the answer (closed
    /// or reset by the upstream while idle) is replaced by a new one and the
    /// request sent once more, at most once: `resent` says so. A new
    /// connection that fails is never resent. `connect` bounds a new
    /// connection.
    pub async fn send(
        &self,
        url: &BaseUrl,
        identity: Identity,
        connect: Option<Duration>,
        msg: &Message,
        resent: &mut Option<Resent>,
    ) -> Result<Exchange, GatewayError> {
        let addr = self.resolve(url).await?;
        let key = pool_key(identity, addr);
        let started = Instant::now();
        if let Some((stream, uses)) = self.take_idle(key) {
            match self.exchange(stream, msg, key, uses + 1, true).await {
                Ok(ex) => return Ok(ex),
                Err(Fault::Stale(e)) => {
                    log::debug!(
                        "pooled upstream connection failed ({e}); sending once more on a new one"
                    );
                    *resent = Some(Resent {
                        after: started.elapsed(),
                    });
                }
                Err(Fault::Other(e)) => return Err(e),
            }
        }
        // Boxed: most requests go out on a pooled connection, and a new
        // one's connect (and TLS handshake) would size every request's future.
        let stream = Box::pin(self.connect(url, addr, connect)).await?;
        match self.exchange(stream, msg, key, 1, false).await {
            Ok(ex) => Ok(ex),
            Err(Fault::Stale(e) | Fault::Other(e)) => Err(e),
        }
    }

    /// Writes `msg` on `stream` and reads the answer's head.
    async fn exchange(
        &self,
        mut stream: Stream,
        msg: &Message,
        key: u64,
        uses: u32,
        reused: bool,
    ) -> Result<Exchange, Fault> {
        // Only a pooled connection that fails before the answer starts is
        // stale; a new one that fails is the upstream's fault.
        let fault = |e: GatewayError, nothing_read: bool| {
            if reused && nothing_read {
                Fault::Stale(e)
            } else {
                Fault::Other(e)
            }
        };
        let write = async {
            stream.write_all(&msg.bytes).await?;
            if let Some(body) = &msg.body {
                stream.write_all(body).await?;
            }
            stream.flush().await
        };
        match tokio::time::timeout(self.read_timeout, write).await {
            Err(_) => {
                return Err(Fault::Other(GatewayError::new(
                    ErrorKind::Timeout,
                    "upstream request timed out (WriteTimedout)",
                )))
            }
            Ok(Err(e)) => return Err(fault(io_error("request", &e), true)),
            Ok(Ok(())) => {}
        }
        let mut buf = BytesMut::new();
        // Whether the last read filled its room: more is waiting.
        let mut filled = false;
        let head = loop {
            if let Some(head) =
                h1::take_response_head(&mut buf).map_err(|e| Fault::Other(wire_error(e)))?
            {
                break head;
            }
            let read = async {
                if buf.capacity() == 0 {
                    return Self::read_first(&mut stream, &mut buf)
                        .await
                        .map(|n| (n, FIRST_READ));
                }
                buf.reserve(READ_CHUNK);
                let room = buf.capacity() - buf.len();
                stream.read_buf(&mut buf).await.map(|n| (n, room))
            };
            let (n, room) = match tokio::time::timeout(self.read_timeout, read).await {
                Err(_) => return Err(Fault::Other(read_timed_out())),
                Ok(Err(e)) => return Err(fault(io_error("response", &e), buf.is_empty())),
                Ok(Ok(n)) => n,
            };
            if n == 0 {
                let e = GatewayError::new(
                    ErrorKind::BadGateway,
                    "upstream response unreachable: the connection closed before the answer",
                );
                return Err(fault(e, buf.is_empty()));
            }
            filled = n == room;
        };
        let body = head.body().map_err(|e| Fault::Other(wire_error(e)))?;
        let reusable = head.reusable() && body != Body::UntilClose;
        Ok(Exchange {
            stream,
            buf,
            head,
            body,
            key,
            uses,
            reusable,
            read_timeout: self.read_timeout,
            // A head read that filled its room came with a burst of body
            // (a stream's first frames): the next read takes the rest of
            // it at once, so it reaches the client in one write. One that
            // did not got all the upstream had: the rest comes as it is
            // made (a stream's frames), so reads start at the trickle's
            // size and the first one gives back the head's buffer (a body
            // of known length sizes its reads by its length instead).
            read_size: if filled { BURST_READ } else { READ_TRICKLE },
            filled,
        })
    }

    /// The next body chunk among the bytes already read, without reading:
    /// `Some(Some(data))`, `Some(None)` when the body is complete, `None`
    /// when the next chunk is still to be read. The relay gathers what one
    /// read brought (a burst of frames) into one write to the client.
    pub fn buffered_chunk(ex: &mut Exchange) -> Result<Option<Option<Bytes>>, ReadFault> {
        if let Some(data) = ex
            .body
            .decode(&mut ex.buf)
            .map_err(|e| ReadFault::Transport(wire_error(e)))?
        {
            return Ok(Some(Some(data)));
        }
        Ok(ex.body.is_done().then_some(None))
    }

    /// Reads the next body chunk, waiting at most `idle` for it (and never
    /// longer than the gateway's read timeout) and never past `deadline`.
    /// `None`: the body is complete.
    pub async fn read_chunk(
        ex: &mut Exchange,
        idle: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<Bytes>, ReadFault> {
        loop {
            if let Some(ready) = Self::buffered_chunk(ex)? {
                return Ok(ready);
            }
            let room = Self::make_room(ex);
            let n = Self::fill(ex, idle, deadline).await?;
            if let Some(end) = Self::count_read(ex, n, room) {
                return end;
            }
        }
    }

    /// The next body chunk, when the last read filled its room (so more
    /// was likely waiting on the socket) and the connection has it now:
    /// one read that does not wait. `None` when there is nothing to take
    /// at once (the bytes a read brought that end no chunk stay for the
    /// next read). The relay adds what it finds to the batch it is about
    /// to write: a burst larger than one read leaves in one write.
    pub async fn chunk_at_once(ex: &mut Exchange) -> Option<Result<Option<Bytes>, ReadFault>> {
        use std::future::Future;
        use std::task::Poll;
        if !std::mem::take(&mut ex.filled) {
            return None;
        }
        let room = Self::make_room(ex);
        let n = {
            let mut read = std::pin::pin!(Self::read_some(ex));
            match std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
                Poll::Pending => return None,
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => {
                    return Some(Err(ReadFault::Transport(io_error("response", &e))))
                }
            }
        };
        if let Some(end) = Self::count_read(ex, n, room) {
            return Some(end);
        }
        Self::buffered_chunk(ex).transpose()
    }

    /// An answer's first read: waits for the upstream with no buffer (an
    /// upstream slow to answer holds none), then reads up to
    /// [`FIRST_READ`] bytes into a new `buf`. The bytes read.
    async fn read_first(stream: &mut Stream, buf: &mut BytesMut) -> std::io::Result<usize> {
        use std::future::Future;
        std::future::poll_fn(|cx| {
            // Dropped unused while the upstream has nothing yet.
            let mut room = BytesMut::with_capacity(FIRST_READ);
            let n = std::task::ready!(std::pin::pin!(stream.read_buf(&mut room)).poll(cx))?;
            *buf = room;
            std::task::Poll::Ready(Ok(n))
        })
        .await
    }

    /// Room in the exchange's buffer for the next body read; the room.
    fn make_room(ex: &mut Exchange) -> usize {
        let want = ex.next_read();
        if ex.buf.is_empty() && !matches!(ex.body, Body::Length(_)) && want <= STACK_READ {
            // A stream with nothing buffered: the next read waits with no
            // buffer (`read_some`), and the head stops sharing the old one.
            // On a busy machine a stream's reads find several frames each
            // and grow; a buffer of that size kept between them was 2.3 KB
            // per open stream (docs/performance.md "Issue 28, eighth pass").
            if ex.buf.capacity() > 0 {
                ex.buf = BytesMut::new();
                ex.head.detach();
            }
            return want;
        }
        if ex.buf.is_empty() && ex.buf.capacity() > 2 * want {
            // A burst is over: an idle stream does not keep its large
            // buffer, nor the head that shares its allocation.
            ex.buf = BytesMut::with_capacity(want);
            ex.head.detach();
        } else if ex.buf.capacity() - ex.buf.len() < want / 2 {
            ex.buf.reserve(want);
        }
        ex.buf.capacity() - ex.buf.len()
    }

    /// A body read of `n` bytes into `room`: the next read's size follows
    /// it; at end of input, the body's end (delimited by close) or the
    /// fault of a body cut short.
    fn count_read(
        ex: &mut Exchange,
        n: usize,
        room: usize,
    ) -> Option<Result<Option<Bytes>, ReadFault>> {
        ex.filled = n == room;
        ex.read_size = if ex.filled {
            (ex.read_size * 2).min(READ_LARGE)
        } else if n < ex.read_size / 4 {
            (ex.read_size / 2).max(READ_TRICKLE)
        } else {
            ex.read_size
        };
        if n > 0 {
            return None;
        }
        if ex.body == Body::UntilClose {
            ex.body = Body::Done;
            return Some(Ok(None));
        }
        Some(Err(ReadFault::Transport(GatewayError::new(
            ErrorKind::BadGateway,
            "upstream response unreachable: the connection closed mid-body",
        ))))
    }

    /// Reads a body of declared length (content-length) whole into one
    /// buffer sized for it: no doubling, no joining of pieces; the caller
    /// checks the length against its limit first. Each read waits at most
    /// `idle`, all of them end by `deadline`.
    pub async fn read_sized(
        ex: &mut Exchange,
        idle: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Bytes, ReadFault> {
        let Body::Length(left) = ex.body else {
            return Err(ReadFault::Transport(GatewayError::new(
                ErrorKind::Internal,
                "read_sized on a body without a length",
            )));
        };
        let left = usize::try_from(left).unwrap_or(usize::MAX);
        ex.buf.reserve(left.saturating_sub(ex.buf.len()));
        while ex.buf.len() < left {
            if Self::fill(ex, idle, deadline).await? == 0 {
                return Err(ReadFault::Transport(GatewayError::new(
                    ErrorKind::BadGateway,
                    "upstream response unreachable: the connection closed mid-body",
                )));
            }
        }
        let body = ex
            .body
            .decode(&mut ex.buf)
            .map_err(|e| ReadFault::Transport(wire_error(e)))?;
        Ok(body.unwrap_or_default())
    }

    /// One read into the exchange's buffer (its spare room), waiting at most
    /// `idle` (never longer than the gateway's read timeout) and never past
    /// `deadline`: the bytes read, 0 at end of input.
    async fn fill(
        ex: &mut Exchange,
        idle: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<usize, ReadFault> {
        let per_read = idle.map_or(ex.read_timeout, |i| i.min(ex.read_timeout));
        let idle_rules = idle.is_some_and(|i| i <= ex.read_timeout);
        let (wait, by_deadline) = bound(Some(per_read), deadline).unwrap_or((per_read, false));
        match tokio::time::timeout(wait, Self::read_some(ex)).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(ReadFault::Transport(io_error("response", &e))),
            Err(_) if by_deadline => Err(ReadFault::Deadline),
            Err(_) if idle_rules => Err(ReadFault::Idle(wait)),
            Err(_) => Err(ReadFault::Transport(read_timed_out())),
        }
    }

    /// One read into the exchange's buffer; into a buffer of exactly what
    /// came when it has none ([`make_room`](Self::make_room) took it from a
    /// stream between reads), read through the read's room (at most
    /// [`STACK_READ`] bytes) on the stack.
    async fn read_some(ex: &mut Exchange) -> std::io::Result<usize> {
        use std::task::Poll;
        use tokio::io::AsyncRead;
        if ex.buf.capacity() > 0 {
            return ex.stream.read_buf(&mut ex.buf).await;
        }
        let size = ex.read_size.min(STACK_READ);
        std::future::poll_fn(|cx| {
            let mut room = [std::mem::MaybeUninit::<u8>::uninit(); STACK_READ];
            let mut room = tokio::io::ReadBuf::uninit(&mut room[..size]);
            std::task::ready!(std::pin::Pin::new(&mut ex.stream).poll_read(cx, &mut room))?;
            ex.buf = BytesMut::from(room.filled());
            Poll::Ready(Ok(room.filled().len()))
        })
        .await
    }

    /// Returns a finished exchange's connection to the pool when it can
    /// carry another request: a clean answer (keep-alive, no framing
    /// anomaly), its body read to its declared end and not a byte more in
    /// the buffer, fewer than `keepalive_requests` carried. Otherwise the
    /// connection is closed. A byte more still on the socket is found when
    /// the connection is taken ([`still_open`] looks at the socket itself):
    /// one look per reuse, not one here and one there.
    pub fn release(&self, ex: Exchange) {
        if !ex.reusable
            || !ex.body.is_done()
            || !ex.buf.is_empty()
            || ex.uses >= self.keepalive_requests
        {
            return;
        }
        let Ok(mut pool) = self.pool.lock() else {
            return;
        };
        let now = Instant::now();
        let idle_timeout = self.idle_timeout;
        let list = pool.idle.entry(ex.key).or_default();
        while list
            .front()
            .is_some_and(|i| now.duration_since(i.since) >= idle_timeout)
            || list.len() >= IDLE_PER_PEER
        {
            list.pop_front();
        }
        list.push_back(Idle {
            stream: ex.stream,
            since: now,
            uses: ex.uses,
        });
        if now.duration_since(pool.swept) >= SWEEP_EVERY {
            pool.swept = now;
            pool.idle.retain(|_, list| {
                list.retain(|i| now.duration_since(i.since) < idle_timeout);
                !list.is_empty()
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn each_single_threaded_runtime_pools_apart_and_a_shared_one_together() {
        let on_own_runtime = || {
            std::thread::spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async { (reactor(), reactor()) })
            })
            .join()
            .unwrap()
        };
        let (a, a_again) = on_own_runtime();
        let (b, _) = on_own_runtime();
        assert_eq!(a, a_again);
        assert!(a != 0 && b != 0 && a != b, "{a} {b}");
        let shared = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let workers: Vec<u64> = (0..8)
            .map(|_| shared.block_on(shared.spawn(async { reactor() })).unwrap())
            .collect();
        assert!(workers.iter().all(|&r| r == 0), "{workers:?}");
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let id = Identity(7);
        let key_on = |rt: &tokio::runtime::Runtime| rt.block_on(async { pool_key(id, addr) });
        assert_eq!(key_on(&shared), key_on(&shared));
    }

    /// A connected pair: the gateway's side as pingora-core's stream, the
    /// upstream's as a blocking std socket (its writes need no reactor).
    async fn pair() -> (Stream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().unwrap();
        let stream: Stream = Box::new(pingora_core::protocols::l4::stream::Stream::from(client));
        (stream, server)
    }

    fn test_client() -> UpstreamClient {
        UpstreamClient::new(&ClientSettings {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            keepalive_requests: 100,
        })
    }

    #[tokio::test(flavor = "current_thread")]
    async fn bytes_or_a_close_while_idle_are_seen_without_the_reactor() {
        // No await between the upstream's write and the check: the reactor
        // has not seen the bytes, only the socket has.
        let (mut stream, mut server) = pair().await;
        assert!(still_open(&mut stream));
        server.write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
        assert!(!socket_quiet(&stream));
        assert!(!still_open(&mut stream));

        let (mut stream, server) = pair().await;
        assert!(still_open(&mut stream));
        drop(server);
        assert!(!still_open(&mut stream));
    }

    /// 1 KB SSE frames.
    fn kilobyte_frame() -> String {
        format!("data: {}\n\n", "x".repeat(1000))
    }

    /// An exchange whose upstream wrote a stream's head and `frames`
    /// [`kilobyte_frame`]s in one write and keeps the stream open (its
    /// side of the connection is returned).
    async fn burst(frames: usize) -> (Exchange, std::net::TcpStream) {
        let (stream, mut server) = pair().await;
        let client = test_client();
        let frame = kilobyte_frame();
        let mut wire = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
            transfer-encoding: chunked\r\n\r\n"
            .to_vec();
        for _ in 0..frames {
            wire.extend(format!("{:x}\r\n{frame}\r\n", frame.len()).as_bytes());
        }
        server.write_all(&wire).unwrap();
        let msg = Message {
            bytes: b"POST /v1/chat/completions HTTP/1.1\r\nhost: a\r\n\r\n".to_vec(),
            body: None,
        };
        let Ok(ex) = client.exchange(stream, &msg, 0, 1, false).await else {
            panic!("the exchange failed");
        };
        (ex, server)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_burst_larger_than_a_read_is_taken_at_once_and_nothing_more_is_waited_for() {
        // A quarter more than the first read's room.
        let frame = kilobyte_frame();
        let frames = (FIRST_READ + FIRST_READ / 4) / frame.len();
        let (mut ex, mut server) = burst(frames).await;
        // What the relay does before a write: the chunks read, then those
        // waiting on the socket, until there are none to take at once.
        let (mut from_head, mut at_once) = (0, 0);
        let gathered = async {
            loop {
                match UpstreamClient::buffered_chunk(&mut ex).unwrap() {
                    Some(Some(c)) if at_once == 0 => from_head += c.len(),
                    Some(Some(c)) => at_once += c.len(),
                    Some(None) => panic!("the body is not complete"),
                    None => match UpstreamClient::chunk_at_once(&mut ex).await {
                        Some(Ok(Some(c))) => at_once += c.len(),
                        Some(other) => panic!("unexpected {:?}", other.map(|_| ())),
                        None => break,
                    },
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), gathered)
            .await
            .expect("waited for bytes the upstream never sent");
        assert!(from_head > 0 && from_head < FIRST_READ, "{from_head}");
        assert_eq!(from_head + at_once, frames * frame.len());
        // A read that did not fill its room: nothing is tried at once.
        assert!(UpstreamClient::chunk_at_once(&mut ex).await.is_none());
        // The burst made the reads larger, but waiting for the next frame
        // holds no buffer of that size: none at all.
        assert!(ex.read_size > READ_TRICKLE, "{}", ex.read_size);
        let wait = UpstreamClient::read_chunk(&mut ex, None, None);
        assert!(tokio::time::timeout(Duration::from_millis(20), wait)
            .await
            .is_err());
        assert_eq!(ex.buf.capacity(), 0);
        let last = "data: {\"n\":1}\n\n";
        server
            .write_all(format!("{:x}\r\n{last}\r\n", last.len()).as_bytes())
            .unwrap();
        let got = UpstreamClient::read_chunk(&mut ex, None, None)
            .await
            .unwrap();
        assert_eq!(got.as_deref(), Some(last.as_bytes()));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_head_with_twelve_kilobytes_of_frames_is_one_read() {
        // Three times the room the head read used to have.
        let (mut ex, _server) = burst(12).await;
        let frame = kilobyte_frame();
        // Every frame is in the buffer the head came in: none is left to
        // a second read, and none is tried at once.
        let mut got = 0;
        while let Some(Some(c)) = UpstreamClient::buffered_chunk(&mut ex).unwrap() {
            got += c.len();
        }
        assert_eq!(got, 12 * frame.len());
        assert!(UpstreamClient::chunk_at_once(&mut ex).await.is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_trickling_stream_holds_no_read_buffer_between_frames() {
        let (stream, mut server) = pair().await;
        let client = test_client();
        server
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                transfer-encoding: chunked\r\n\r\n",
            )
            .unwrap();
        let msg = Message {
            bytes: b"POST /v1/chat/completions HTTP/1.1\r\nhost: a\r\n\r\n".to_vec(),
            body: None,
        };
        let Ok(mut ex) = client.exchange(stream, &msg, 0, 1, false).await else {
            panic!("the exchange failed");
        };
        // One frame at a time, each read before the next is sent: every
        // frame arrives whole, and once it is taken nothing is held.
        for i in 0..4 {
            let frame = format!("data: {{\"n\":{i}}}\n\n");
            server
                .write_all(format!("{:x}\r\n{frame}\r\n", frame.len()).as_bytes())
                .unwrap();
            let got = UpstreamClient::read_chunk(&mut ex, None, None)
                .await
                .unwrap();
            assert_eq!(got.as_deref(), Some(frame.as_bytes()));
            drop(got);
            assert_eq!(ex.buf.capacity(), 0, "frame {i}: a buffer is held");
        }
        // The stream's end still reads as the end.
        server.write_all(b"0\r\n\r\n").unwrap();
        assert_eq!(
            UpstreamClient::read_chunk(&mut ex, None, None)
                .await
                .unwrap(),
            None
        );
        assert_eq!(ex.status(), 200);
    }
}
