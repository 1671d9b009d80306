//! Upstream connections: address resolution off the reactor (cached), peers with
//! SNI and certificate verification, pooled HTTP sessions from pingora-core's
//! connector, and sending one request with a retry when a pooled connection
//! turns out to be stale.

use super::Settings;
use crate::config::{BaseUrl, Scheme};
use crate::error::{ErrorKind, GatewayError};
use bytes::Bytes;
use pingora_core::connectors::http::Connector;
use pingora_core::connectors::ConnectorOptions;
use pingora_core::protocols::http::client::HttpSession;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::{ErrorType, RetryType};
use pingora_http::RequestHeader;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a resolved address is reused.
const DNS_TTL: Duration = Duration::from_secs(30);
/// How long an idle pooled connection is kept.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts when a pooled connection fails before any response byte.
const STALE_RETRIES: usize = 2;

/// A pooled client for all upstreams.
pub struct UpstreamClient {
    connector: Connector,
    dns: Mutex<HashMap<(String, u16), (SocketAddr, Instant)>>,
    connect_timeout: Duration,
    read_timeout: Duration,
}

/// An upstream session with its response header read.
pub struct Exchange {
    pub session: HttpSession,
    pub peer: HttpPeer,
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

/// Whether a failure on a pooled connection shows the connection was already dead
/// (closed or reset by the upstream while idle), so the request never got there and
/// sending it again on a new connection is safe. A timeout is not such a failure:
/// the upstream may be working on the request, and resending would run it twice.
fn is_stale(e: &pingora_core::Error) -> bool {
    matches!(e.retry, RetryType::ReusedOnly | RetryType::Decided(true))
        || matches!(e.etype(), ErrorType::WriteError)
}

impl UpstreamClient {
    /// A client using `settings`' timeouts.
    pub fn new(settings: &Settings) -> Self {
        UpstreamClient {
            connector: Connector::new(Some(ConnectorOptions::new(256))),
            dns: Mutex::new(HashMap::new()),
            connect_timeout: settings.connect_timeout,
            read_timeout: settings.read_timeout,
        }
    }

    async fn resolve(&self, url: &BaseUrl) -> Result<SocketAddr, GatewayError> {
        if let Ok(ip) = url.host.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, url.port));
        }
        let key = (url.host.clone(), url.port);
        if let Ok(cache) = self.dns.lock() {
            if let Some((addr, at)) = cache.get(&key) {
                if at.elapsed() < DNS_TTL {
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
            cache.insert(key, (addr, Instant::now()));
        }
        Ok(addr)
    }

    /// A peer for `url`, with SNI, verification and timeouts; `connect`
    /// overrides the gateway's connect timeout (a provider's `timeouts.connect`).
    pub async fn peer(
        &self,
        url: &BaseUrl,
        connect: Option<Duration>,
    ) -> Result<HttpPeer, GatewayError> {
        let addr = self.resolve(url).await?;
        let tls = url.scheme == Scheme::Https;
        let mut peer = HttpPeer::new(addr, tls, url.host.clone());
        let connect = connect.unwrap_or(self.connect_timeout);
        peer.options.connection_timeout = Some(connect);
        peer.options.total_connection_timeout = Some(connect * 2);
        peer.options.read_timeout = Some(self.read_timeout);
        peer.options.write_timeout = Some(self.read_timeout);
        peer.options.idle_timeout = Some(IDLE_TIMEOUT);
        Ok(peer)
    }

    /// Sends `req` with `body` and reads the response header.
    pub async fn send(
        &self,
        peer: HttpPeer,
        req: &RequestHeader,
        body: Bytes,
    ) -> Result<Exchange, GatewayError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (mut session, reused) = self
                .connector
                .get_http_session(&peer)
                .await
                .map_err(|e| transport_error("connection", &e))?;
            session.set_read_timeout(Some(self.read_timeout));
            session.set_write_timeout(Some(self.read_timeout));
            let sent = async {
                session.write_request_header(Box::new(req.clone())).await?;
                session.write_request_body(body.clone(), true).await?;
                session.finish_request_body().await?;
                session.read_response_header().await
            }
            .await;
            match sent {
                Ok(()) => return Ok(Exchange { session, peer }),
                Err(e) if reused && attempt <= STALE_RETRIES && is_stale(&e) => {
                    log::debug!("pooled upstream connection failed ({e}); retrying on a new one");
                    continue;
                }
                Err(e) => return Err(transport_error("request", &e)),
            }
        }
    }

    /// Reads the next body chunk, waiting at most `idle` for it and never past
    /// `deadline`.
    pub async fn read_chunk(
        ex: &mut Exchange,
        idle: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<Bytes>, ReadFault> {
        let wait = bound(idle, deadline);
        let read = ex.session.read_response_body();
        match wait {
            None => read
                .await
                .map_err(|e| ReadFault::Transport(transport_error("response", &e))),
            Some((d, by_deadline)) => match tokio::time::timeout(d, read).await {
                Ok(r) => r.map_err(|e| ReadFault::Transport(transport_error("response", &e))),
                Err(_) if by_deadline => Err(ReadFault::Deadline),
                Err(_) => Err(ReadFault::Idle(d)),
            },
        }
    }

    /// Returns a finished session to the pool.
    pub async fn release(&self, ex: Exchange) {
        self.connector
            .release_http_session(ex.session, &ex.peer, Some(IDLE_TIMEOUT))
            .await;
    }
}
