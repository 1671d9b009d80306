//! The gateway's HTTP application on pingora-core's server sessions: every
//! request is answered here, listings from the snapshot, inference by
//! running the upstream exchange ourselves with pingora-core's pooled
//! connector. Each phase is a short delegation.

pub mod access;
pub mod attempt;
pub mod auth;
pub mod ctx;
pub mod inference;
pub mod listings;
pub mod media;
pub mod relay;
pub mod respond;
pub mod route;
pub mod stored;
pub mod tokenize;

use crate::error::{ErrorKind, GatewayError};
use crate::listener::Session;
use crate::obs::metrics::Metrics;
use crate::runtime::Runtime;
use bytes::Bytes;
use ctx::RequestCtx;
use pingora_core::server::ShutdownWatch;
use pingora_core::{Error, ErrorType, Result};
use route::Endpoint;
use std::sync::Arc;
use std::time::Duration;

/// Tunables of the inference path.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Largest accepted request body; above it 413.
    pub max_body_bytes: usize,
    /// Largest accepted non-stream upstream response body; a larger answer
    /// is refused with a 502 (by its content-length before it is read, or
    /// as soon as a chunked or close-delimited one passes it).
    pub max_response_bytes: usize,
    /// TCP (+TLS) connect timeout to an upstream.
    pub connect_timeout: Duration,
    /// Longest wait for any read from an upstream (headers or a body chunk).
    pub read_timeout: Duration,
    /// Largest SSE frame accepted from an upstream.
    pub max_frame_bytes: usize,
    /// Token counts run at once (the rest wait their turn).
    pub token_workers: usize,
    /// Requests one upstream connection carries before it is closed.
    pub upstream_keepalive_requests: u32,
    /// How long an idle upstream connection is kept in the pool.
    pub upstream_idle_timeout: Duration,
    /// Longest wait for one write to the client to make progress (a client
    /// that stops reading is cut after it).
    pub write_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_body_bytes: 32 * 1024 * 1024,
            max_response_bytes: 32 * 1024 * 1024,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            max_frame_bytes: 16 * 1024 * 1024,
            token_workers: tokenize::default_workers(),
            upstream_keepalive_requests: 1000,
            upstream_idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
        }
    }
}

/// The gateway service.
pub struct Gateway {
    pub rt: Arc<Runtime>,
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
    pub upstream: crate::upstream::client::UpstreamClient,
    /// The cloud upstreams' access tokens (Entra ID, Google OAuth2), cached
    /// per source across requests and reloads.
    pub credentials: crate::upstream::credentials::Credentials,
    /// Slots for token counting (bounded, cancellable).
    pub tokens: tokenize::TokenGate,
    /// The usage ledger: one row per billable request, queued in `logging`.
    pub ledger: Option<Arc<crate::state::ledger::Ledger>>,
    /// Per-key rpm / tpm windows and budgets (docs/configuration.md "Limits and budgets"); in
    /// memory until the binary opens the configured backend.
    pub limits: Arc<crate::state::limits::Limits>,
    /// Stored responses (docs/api.md "Stored responses"); in memory until the binary sets its
    /// store.
    pub responses: Arc<crate::state::responses::ResponseStore>,
    /// OpenTelemetry export (`--otlp-endpoint`); off when `None`.
    pub telemetry: Option<Arc<crate::obs::telemetry::Telemetry>>,
    /// Requests in flight, waited for at shutdown; ends open streams when
    /// the grace period runs out.
    pub drain: Arc<crate::runtime::drain::Drain>,
    /// JWT clients' verifier (`--oidc-issuer` / `--jwks-url`); `None`: keys only.
    pub identity: Option<Arc<crate::identity::Oidc>>,
}

impl Gateway {
    /// A gateway over `rt` with `settings`.
    pub fn new(rt: Arc<Runtime>, settings: Settings) -> Gateway {
        let upstream = crate::upstream::client::UpstreamClient::new(
            &crate::upstream::client::ClientSettings {
                connect_timeout: settings.connect_timeout,
                read_timeout: settings.read_timeout,
                idle_timeout: settings.upstream_idle_timeout,
                keepalive_requests: settings.upstream_keepalive_requests,
            },
        );
        let metrics = Arc::new(Metrics::default());
        let responses = Arc::new(
            crate::state::responses::ResponseStore::memory()
                .count_failures_in(metrics.responses_store_failures.clone()),
        );
        Gateway {
            rt,
            metrics,
            responses,
            tokens: tokenize::TokenGate::new(settings.token_workers),
            limits: Arc::new(crate::state::limits::Limits::in_memory()),
            settings,
            upstream,
            credentials: Default::default(),
            ledger: None,
            telemetry: None,
            drain: Arc::default(),
            identity: None,
        }
    }

    async fn serve(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<()> {
        let req = session.req_header();
        let routed = route::route(req.method.as_str(), req.uri.path(), req.uri.query());
        if !crate::listener::host_ok(req) {
            ctx.outcome.family = match &routed {
                Ok(r) => r.family,
                Err((family, _)) => *family,
            };
            session.set_keepalive(None);
            let e = GatewayError::invalid_param(
                "host",
                "an HTTP/1.1 request needs exactly one Host header",
            );
            return respond::error(session, ctx, ctx.outcome.family, &e).await;
        }
        let r = match routed {
            Ok(r) => r,
            Err((family, e)) => {
                ctx.outcome.family = family;
                return respond::error(session, ctx, family, &e).await;
            }
        };
        ctx.outcome.family = r.family;
        let snap = self.rt.snapshot();
        match &r.endpoint {
            Endpoint::Health => {
                respond::json(
                    session,
                    ctx,
                    200,
                    Bytes::from_static(b"{\"status\":\"ok\"}"),
                )
                .await
            }
            Endpoint::Root => {
                let body = format!("{{\"status\":\"ok\",\"family\":\"{}\"}}", r.family.name());
                respond::json(session, ctx, 200, Bytes::from(body)).await
            }
            Endpoint::Ready => {
                let body = format!(
                    "{{\"status\":\"ready\",\"providers\":{},\"models\":{}}}",
                    snap.catalog.providers.len(),
                    snap.catalog.models.len()
                );
                respond::json(session, ctx, 200, Bytes::from(body)).await
            }
            Endpoint::ListModels | Endpoint::ProviderOrModel(_) | Endpoint::GetModel { .. } => {
                match listings::answer(&snap, r.family, &r.endpoint) {
                    Ok(body) => respond::json(session, ctx, 200, body).await,
                    Err(e) => respond::error(session, ctx, r.family, &e).await,
                }
            }
            _ => {
                let oidc = self.identity.as_deref();
                let key = match auth::authenticate(r.family, session.req_header(), &snap.keys, oidc)
                    .await
                {
                    Ok(k) => k,
                    Err(e) => return respond::error(session, ctx, r.family, &e).await,
                };
                ctx.key_id = Some(key.id.clone());
                ctx.team.clone_from(&key.team);
                ctx.billable = matches!(
                    r.endpoint,
                    Endpoint::ChatCompletions
                        | Endpoint::Messages
                        | Endpoint::GenerateContent { .. }
                        | Endpoint::Responses
                        | Endpoint::Embeddings
                        | Endpoint::EmbedContent { .. }
                        | Endpoint::Rerank
                );
                if let Endpoint::StoredResponse { id, input_items } = &r.endpoint {
                    return Box::pin(stored::serve(self, session, ctx, &key.id, id, *input_items))
                        .await;
                }
                if let Err(e) = media::require_json(session.req_header()) {
                    return respond::error(session, ctx, r.family, &e).await;
                }
                Box::pin(inference::handle(self, session, ctx, &r, &snap, &key)).await
            }
        }
    }
}

/// The client listener's HTTP application (served by `listener::Guarded`,
/// which owns the connection: its deadlines, keep-alive waits, TLS and
/// HTTP/2): reads one request's head, answers it, logs it, and hands the
/// connection back for the next request. pingora-proxy's pipeline is not
/// used: every request is answered by the gateway itself, and that
/// pipeline's per-request state (its cache, retry and upstream phases)
/// cost about 15 KB per open stream (docs/performance.md "Memory per open
/// stream").
impl crate::listener::App for Gateway {
    // A function returning an `async move` block, not an `async fn`: the
    // block captures the session once, for the request's whole life.
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn keeps each argument twice"
    )]
    fn serve_request(
        self: &Arc<Self>,
        mut session: Session,
        _shutdown: &ShutdownWatch,
    ) -> impl std::future::Future<Output = Option<Box<crate::listener::Batched>>> + Send {
        async move {
            // Boxed: the head read's state (the parse and the
            // select with the shutdown's cut) would otherwise size this
            // request's state for its whole life, an open stream's included.
            if !Box::pin(crate::listener::read_head(&mut session, "client listener")).await {
                return None;
            }
            if session.req_header().method == http::Method::CONNECT {
                // No tunnels here, and a CONNECT request's framing differs
                // (RFC 9112 6.3): answered (404 in the family's shape) and closed.
                session.set_keepalive(None);
            }
            let mut ctx = RequestCtx::new();
            let failure = self.request(&mut session, &mut ctx).await.err();
            if let Some(e) = &failure {
                self.fail(&mut session, e, &mut ctx).await;
            }
            self.logging(&session, failure.as_deref(), &mut ctx);
            match failure {
                Some(_) => {
                    // The connection is not reused after a failure (on HTTP/2
                    // the stream is reset when no answer was written): the
                    // session is dropped.
                    None
                }
                None => {
                    // Boxed: the `finish` future (about 1 KB, HTTP/2's
                    // arm boxed in turn) would otherwise size this
                    // request's state for the whole request, a stream's
                    // whole life included.
                    match Box::pin(session.finish()).await {
                        Ok(reused) => reused,
                        Err(e) => {
                            log::debug!("connection not reusable ({})", e.etype().as_str());
                            None
                        }
                    }
                }
            }
        }
    }
}

impl Gateway {
    /// One request, its head read: the drain counts it, it gets its id and
    /// the write timeout, and it is answered.
    async fn request(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<()> {
        crate::listener::head_received(session);
        ctx.in_flight = Some(self.drain.enter());
        ctx.request_id = session
            .req_header()
            .headers
            .get(respond::X_REQUEST_ID)
            .and_then(|v| ctx::client_request_id(v.as_bytes()))
            .unwrap_or_else(ctx::new_request_id);
        // Every write to the client (answers, stream frames, errors) must
        // make progress within the write timeout (nginx's `send_timeout`).
        session.set_write_timeout(Some(self.settings.write_timeout));
        self.serve(session, ctx).await
    }

    /// A request that failed before its answer was complete: the client
    /// gets an error in its family's shape when nothing was sent yet (none
    /// when its connection failed), and the operator an ERROR line unless
    /// the fault was the client's.
    async fn fail(&self, session: &mut Session, e: &Error, ctx: &mut RequestCtx) {
        let code = match e.etype() {
            ErrorType::HTTPStatus(c) => *c,
            ErrorType::ReadError | ErrorType::WriteError | ErrorType::ConnectionClosed => 0,
            _ => 500,
        };
        if code > 0 && ctx.outcome.status == 0 {
            let kind = GatewayError::kind_for_status(code);
            let kind = if code >= 500 {
                ErrorKind::Internal
            } else {
                kind
            };
            let ge = GatewayError::new(kind, format!("request failed: {e}")).with_status(code);
            if let Err(we) = respond::error(session, ctx, ctx.outcome.family, &ge).await {
                log::debug!("cannot send error response: {we}");
            }
        }
        if !client_fault(e) {
            log::error!(
                "request failed: {e}, status: {code}, {}",
                summary(session.req_header(), ctx)
            );
        }
    }

    /// The request's access log line, trace, metrics and ledger row.
    fn logging(&self, session: &Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        if log::log_enabled!(target: "access", log::Level::Info) {
            let req = session.req_header();
            let failure = e.map(|e| {
                crate::error::cut(&e.to_string(), crate::error::LOGGED_CHARS).into_owned()
            });
            let method = crate::error::cut(req.method.as_str(), crate::error::LOGGED_CHARS);
            let path = crate::error::cut(req.uri.path(), crate::error::LOGGED_CHARS);
            let mut line = access::AccessLine::new(ctx, &method, &path, failure.as_deref());
            line.http_version = access::version_name(req.version);
            access::write(&line);
        }
        if let Some(t) = ctx.trace.take() {
            t.finish(&ctx.outcome, e.map(ToString::to_string).as_deref());
        }
        self.metrics.observe(&ctx.outcome, ctx.started.elapsed());
        // Last: the row takes the outcome's attempts.
        if let Some(ledger) = &self.ledger {
            if let Some(row) = access::ledger_row(ctx) {
                ledger.record(row);
            }
        }
    }
}

/// What an ERROR line names the request by: the method and the path, cut
/// short (a long URI must not make a long line), without the query
/// (Gemini's `?key=`) and without the Host header.
fn summary(req: &pingora_http::RequestHeader, ctx: &RequestCtx) -> String {
    format!(
        "{} {}, request {}",
        crate::error::cut(req.method.as_str(), crate::error::LOGGED_CHARS),
        crate::error::cut(req.uri.path(), crate::error::LOGGED_CHARS),
        ctx.request_id
    )
}

/// A client's own fault (it went away, stopped reading or sending, sent a
/// broken head) is in the access log line; it is no ERROR for the operator.
fn client_fault(e: &Error) -> bool {
    matches!(
        e.etype(),
        ErrorType::ReadError
            | ErrorType::ReadTimedout
            | ErrorType::WriteError
            | ErrorType::WriteTimedout
            | ErrorType::ConnectionClosed
            | ErrorType::InvalidHTTPHeader
    )
}
