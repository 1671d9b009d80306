//! The command line: every flag with its environment variable and default,
//! parsed by clap (derive); the `--help` text is the doc comment of each
//! field. Flags win over variables; a variable set to an empty string is
//! read as given (so an empty optional URL or key means "unset", and an
//! empty number is refused).
//!
//! [`Cli`] turns what was given into the values each part of the gateway
//! takes: [`Settings`] (the proxy), [`ClientLimits`] (each listener),
//! [`LedgerSettings`], [`LimitsConfig`], the stored-responses TTL and limits.
//! The binary (`main.rs`) only starts what these describe.
//!
//! May import: `proxy::Settings`, `listener::{ClientLimits, CertFiles}`,
//! `state::{ledger, limits, responses}` (their settings types and default
//! constants), clap. Nothing imports this module but the binary.

use crate::listener::{CertFiles, ClientLimits};
use crate::proxy::Settings;
use crate::state::ledger::{self, LedgerSettings};
use crate::state::limits::{FailMode, LimitsConfig};
use crate::state::responses;
use clap::{Args, Parser, ValueEnum};
use std::time::Duration;

/// A multi-protocol LLM gateway: OpenAI, Anthropic and Gemini wire protocols
/// under one address.
///
/// Each flag also reads the environment variable shown beside it; a flag
/// given on the command line wins over its variable.
#[derive(Debug, Clone, Parser)]
#[command(name = "switchboard", version, args_override_self = true)]
pub struct Cli {
    #[command(flatten)]
    pub files: Files,
    #[command(flatten)]
    pub listeners: Listeners,
    #[command(flatten)]
    pub server: Server,
    #[command(flatten)]
    pub upstreams: Upstreams,
    #[command(flatten)]
    pub clients: Clients,
    #[command(flatten)]
    pub state: State,
    #[command(flatten)]
    pub admin: Admin,
    #[command(flatten)]
    pub identity: Identity,
}

/// The catalog and keys files.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Configuration")]
pub struct Files {
    /// The catalog file: providers, their upstreams, models (hot-reloaded).
    #[arg(
        long,
        value_name = "PATH",
        env = "SWITCHBOARD_CATALOG",
        default_value = "conf/catalog.json"
    )]
    pub catalog: String,
    /// The keys file: client keys, their models and limits (hot-reloaded).
    #[arg(
        long,
        value_name = "PATH",
        env = "SWITCHBOARD_KEYS",
        default_value = "conf/keys.json"
    )]
    pub keys: String,
    /// Validate the catalog and keys files, print a summary and exit.
    #[arg(long)]
    pub check: bool,
}

/// The two listening addresses.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Listeners")]
pub struct Listeners {
    /// The gateway's listen address.
    #[arg(
        long,
        value_name = "ADDR",
        env = "SWITCHBOARD_LISTEN",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: String,
    /// The Prometheus metrics address (and the admin API, with --admin-key).
    #[arg(
        long,
        value_name = "ADDR",
        env = "SWITCHBOARD_METRICS",
        default_value = "127.0.0.1:9091"
    )]
    pub metrics: String,
    /// TLS for --listen: the certificate chain, PEM (with --tls-key).
    ///
    /// ALPN offers `h2` and `http/1.1`. The files are watched: new ones
    /// serve new connections within a second; open connections keep theirs.
    /// Without TLS the listener takes HTTP/1.1 and h2c (prior knowledge).
    #[arg(
        long,
        value_name = "PATH",
        env = "SWITCHBOARD_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<String>,
    /// TLS for --listen: the certificate's private key, PEM (with --tls-cert).
    #[arg(
        long,
        value_name = "PATH",
        env = "SWITCHBOARD_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<String>,
}

/// Pingora's own flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server (Pingora)")]
pub struct Server {
    /// Pingora's server configuration file.
    ///
    /// Threads, grace periods, the upgrade socket; keys it leaves out get
    /// Switchboard's defaults: `threads` = available cores,
    /// `grace_period_seconds` 30 (the longest a SIGTERM waits for requests in
    /// flight; it exits as soon as none are left), `graceful_shutdown_timeout_seconds` 10.
    #[arg(short = 'c', long = "conf", value_name = "PATH")]
    pub conf: Option<String>,
    /// Run in the background.
    #[arg(short, long)]
    pub daemon: bool,
    /// Take over the listening sockets of a running instance.
    #[arg(short, long)]
    pub upgrade: bool,
    /// Test the Pingora configuration and exit.
    #[arg(short, long)]
    pub test: bool,
}

/// Upstream connections and answers.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Upstreams")]
pub struct Upstreams {
    /// Upstream connect timeout (TCP and TLS), in milliseconds.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_CONNECT_TIMEOUT_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ms(Settings::default().connect_timeout))]
    pub connect_timeout_ms: u64,
    /// Longest wait for any read from an upstream (the head or a body
    /// chunk), in milliseconds.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_READ_TIMEOUT_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ms(Settings::default().read_timeout))]
    pub read_timeout_ms: u64,
    /// Largest whole (non-stream) upstream answer, in bytes; then 502.
    ///
    /// An LLM's whole answer is far smaller, and each is held whole in
    /// memory while it is rewritten.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_MAX_RESPONSE_BYTES",
          value_parser = positive::<usize>, allow_negative_numbers = true, default_value_t = Settings::default().max_response_bytes)]
    pub max_response_bytes: usize,
    /// Requests one upstream connection carries, then it is closed.
    ///
    /// nginx's `keepalive_requests`.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_UPSTREAM_KEEPALIVE_REQUESTS",
          value_parser = positive::<u32>, allow_negative_numbers = true, default_value_t = Settings::default().upstream_keepalive_requests)]
    pub upstream_keepalive_requests: u32,
    /// How long an idle upstream connection is kept for reuse, in ms.
    ///
    /// nginx's upstream `keepalive_timeout`.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_UPSTREAM_IDLE_TIMEOUT_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ms(Settings::default().upstream_idle_timeout))]
    pub upstream_idle_timeout_ms: u64,
}

/// What a client may send and hold. The timeouts and the body rate apply to
/// both listeners.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Clients")]
pub struct Clients {
    /// Largest request body accepted, in bytes; above it 413.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_MAX_BODY_BYTES",
          value_parser = positive::<usize>, allow_negative_numbers = true, default_value_t = Settings::default().max_body_bytes)]
    pub max_body_bytes: usize,
    /// Token counts run at once; more wait their turn [default: half the
    /// cores, at least 1].
    #[arg(long, value_name = "N", env = "SWITCHBOARD_TOKEN_WORKERS", value_parser = positive::<usize>, allow_negative_numbers = true)]
    pub token_workers: Option<usize>,
    /// Longest a write to a client may wait for it to read, in ms; then cut.
    ///
    /// nginx's `send_timeout`.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_WRITE_TIMEOUT_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ms(Settings::default().write_timeout))]
    pub write_timeout_ms: u64,
    /// A request head must arrive whole within N ms, else the connection is closed.
    ///
    /// Counted from the connection, or from its first byte on a kept-alive
    /// one (nginx's `client_header_timeout`).
    #[arg(long, value_name = "N", env = "SWITCHBOARD_HEADER_TIMEOUT_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ms(ClientLimits::default().header_timeout))]
    pub header_timeout_ms: u64,
    /// Longest wait for any read of a request body, in ms; then 408.
    ///
    /// nginx's `client_body_timeout`.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_BODY_TIMEOUT_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ms(ClientLimits::default().body_timeout))]
    pub body_timeout_ms: u64,
    /// Bytes a second a request body must average past its timeout, else 408.
    ///
    /// The whole body is due within the body timeout + 1 s per N bytes
    /// (Apache `mod_reqtimeout`'s rate).
    #[arg(long, value_name = "N", env = "SWITCHBOARD_BODY_MIN_RATE",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ClientLimits::default().body_min_rate)]
    pub body_min_rate: u64,
    /// An idle keep-alive connection is closed after N ms.
    ///
    /// nginx's `keepalive_timeout`.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_KEEPALIVE_TIMEOUT_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ms(ClientLimits::default().keepalive_timeout))]
    pub keepalive_timeout_ms: u64,
    /// At a graceful shutdown, a connection idle between requests still
    /// takes one request for N ms.
    ///
    /// Its client may have sent it already, on the word of the last answer's
    /// keep-alive; it is served and answered with `Connection: close`. 0
    /// closes idle connections when the drain starts.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_DRAIN_LINGER_MS",
          default_value_t = ms(ClientLimits::default().drain_linger))]
    pub drain_linger_ms: u64,
    /// Open client connections at most [default: (open-files limit - 256) / 2, at least 16].
    ///
    /// Past it the longest-idle one is closed, or with none idle the new one
    /// gets 503.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_MAX_CONNECTIONS", value_parser = positive::<usize>, allow_negative_numbers = true)]
    pub max_connections: Option<usize>,
    /// The same cap on the metrics / admin listener.
    ///
    /// A scraper or two and an operator's calls; a flood there must not take
    /// descriptors from clients.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_METRICS_MAX_CONNECTIONS",
          value_parser = positive::<usize>, allow_negative_numbers = true, default_value_t = METRICS_MAX_CONNECTIONS)]
    pub metrics_max_connections: usize,
}

/// The metrics / admin listener's default connection cap.
pub const METRICS_MAX_CONNECTIONS: usize = 64;

/// State beyond one request: the data directory, the usage ledger, Redis,
/// stored responses.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "State")]
pub struct State {
    /// The data directory, created on first start.
    ///
    /// The usage ledger (DIR/ledger.sqlite), budgets (DIR/limits.sqlite,
    /// shared by every process on the directory), stored responses
    /// (DIR/responses.sqlite).
    #[arg(
        long,
        value_name = "DIR",
        env = "SWITCHBOARD_DATA",
        default_value = "data"
    )]
    pub data: String,
    /// Write the usage ledger to PostgreSQL instead [default: none, the embedded file].
    ///
    /// postgres://user[:password]@host[:port]/db, plain TCP. Several
    /// instances may share one database.
    #[arg(
        long,
        value_name = "URL",
        env = "SWITCHBOARD_DATABASE",
        hide_env_values = true
    )]
    pub database: Option<String>,
    /// Ledger rows older than N days are deleted; the daily rollups are kept.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_LEDGER_RETENTION_DAYS",
          value_parser = positive::<u32>, allow_negative_numbers = true, default_value_t = ledger::DEFAULT_RETENTION_DAYS)]
    pub ledger_retention_days: u32,
    /// Ledger rows queued or held for a retry, at most.
    ///
    /// Past it rows are dropped and counted.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_LEDGER_QUEUE",
          value_parser = positive::<usize>, allow_negative_numbers = true, default_value_t = ledger::DEFAULT_QUEUE)]
    pub ledger_queue: usize,
    /// Ledger rows written per transaction, at most.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_LEDGER_BATCH",
          value_parser = positive::<usize>, allow_negative_numbers = true, default_value_t = ledger::BATCH_ROWS)]
    pub ledger_batch: usize,
    /// The longest a ledger row waits for its batch to fill, in milliseconds.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_LEDGER_FLUSH_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = ms(ledger::FLUSH_EVERY))]
    pub ledger_flush_ms: u64,
    /// Fleet mode: limits and stored responses in Redis [default: none, embedded].
    ///
    /// redis://host:port[/db]: rpm / tpm windows, budgets and stored
    /// responses shared by every instance.
    #[arg(
        long,
        value_name = "URL",
        env = "SWITCHBOARD_REDIS",
        hide_env_values = true
    )]
    pub redis: Option<String>,
    /// Prefix of every Redis key.
    #[arg(
        long,
        value_name = "P",
        env = "SWITCHBOARD_REDIS_PREFIX",
        default_value = "switchboard:"
    )]
    pub redis_prefix: String,
    /// What to do while Redis is unreachable.
    #[arg(long, value_name = "MODE", env = "SWITCHBOARD_REDIS_FAIL", value_enum, default_value_t = RedisFail::Open)]
    pub redis_fail: RedisFail,
    /// How long a stored response is kept, in days.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_RESPONSES_TTL_DAYS",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = responses::DEFAULT_TTL.as_secs() / DAY)]
    pub responses_ttl_days: u64,
    /// How long a stored response is kept, in seconds (tests); wins over
    /// --responses-ttl-days.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_RESPONSES_TTL_SECS",
          value_parser = positive::<u64>, allow_negative_numbers = true, hide = true)]
    pub responses_ttl_secs: Option<u64>,
    /// How long the embedded store's writer gathers stored responses before
    /// it commits them, in milliseconds (tests; each is served from memory
    /// meanwhile, and a graceful shutdown writes what it holds).
    #[arg(long, value_name = "N", env = "SWITCHBOARD_RESPONSES_FLUSH_MS",
          value_parser = positive::<u64>, allow_negative_numbers = true, hide = true,
          default_value_t = ms(responses::sqlite::GATHER))]
    pub responses_flush_ms: u64,
    /// Largest stored response (input, instructions and answer), in bytes.
    ///
    /// A request whose input alone is larger is refused with 400 unless it
    /// sends store: false.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_RESPONSES_MAX_RECORD_BYTES",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = responses::DEFAULT_MAX_RECORD_BYTES)]
    pub responses_max_record_bytes: u64,
    /// What one key's stored responses may hold in all, in bytes.
    ///
    /// Past it a request to store is refused with 429.
    #[arg(long, value_name = "N", env = "SWITCHBOARD_RESPONSES_KEY_QUOTA_BYTES",
          value_parser = positive::<u64>, allow_negative_numbers = true, default_value_t = responses::DEFAULT_KEY_QUOTA_BYTES)]
    pub responses_key_quota_bytes: u64,
}

/// `--redis-fail`: what a request meets while Redis is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RedisFail {
    /// Admit requests unchecked.
    Open,
    /// Refuse them with 503.
    Closed,
}

/// The operator's side: the admin API and traces.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Admin and telemetry")]
pub struct Admin {
    /// Turns the admin API on [default: none, admin routes answer 404].
    ///
    /// /admin/* on the metrics listener, `Authorization: Bearer KEY`. Prefer
    /// the variable: a flag shows in ps.
    #[arg(
        long,
        value_name = "KEY",
        env = "SWITCHBOARD_ADMIN_KEY",
        hide_env_values = true
    )]
    pub admin_key: Option<String>,
    /// Export OpenTelemetry traces over OTLP/HTTP [default: none, no traces].
    ///
    /// URL is the collector, http://host:4318; /v1/traces is appended.
    #[arg(
        long,
        value_name = "URL",
        env = "SWITCHBOARD_OTLP_ENDPOINT",
        hide_env_values = true
    )]
    pub otlp_endpoint: Option<String>,
}

/// JWT clients: the identity provider (OIDC) whose tokens the gateway
/// takes beside API keys (docs/configuration.md "JWT clients (OIDC)").
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "JWT clients (OIDC)")]
pub struct Identity {
    /// The identity provider's issuer URL [default: none, no JWT clients].
    ///
    /// Tokens' `iss` must equal it; its signing keys are read from the
    /// `jwks_uri` of `URL/.well-known/openid-configuration` (unless
    /// `--jwks-url` is given). Needs `--jwt-audience`.
    #[arg(long, value_name = "URL", env = "SWITCHBOARD_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// The identity provider's JWK Set URL, without discovery.
    ///
    /// Alone, tokens' `iss` is not checked; with `--oidc-issuer`, it is.
    /// Needs `--jwt-audience`.
    #[arg(long, value_name = "URL", env = "SWITCHBOARD_JWKS_URL")]
    pub jwks_url: Option<String>,
    /// What tokens' `aud` must hold (the gateway's client id at the provider).
    #[arg(long, value_name = "AUD", env = "SWITCHBOARD_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
}

const DAY: u64 = 24 * 3600;

/// A duration as whole milliseconds (the flags' unit).
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A number flag's value: a positive integer that fits `T`.
fn positive<T: TryFrom<u64>>(v: &str) -> Result<T, String> {
    let n = v
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or("expected a positive integer")?;
    T::try_from(n).map_err(|_| "too large".to_string())
}

/// `Some(v)` unless `v` is empty: an empty URL or key is no URL or key.
fn given(v: &Option<String>) -> Option<String> {
    v.clone().filter(|v| !v.is_empty())
}

impl Cli {
    /// The proxy's settings: the flags given, the library's defaults for the rest.
    pub fn settings(&self) -> Settings {
        let (u, c) = (&self.upstreams, &self.clients);
        let mut s = Settings {
            max_body_bytes: c.max_body_bytes,
            max_response_bytes: u.max_response_bytes,
            connect_timeout: Duration::from_millis(u.connect_timeout_ms),
            read_timeout: Duration::from_millis(u.read_timeout_ms),
            upstream_keepalive_requests: u.upstream_keepalive_requests,
            upstream_idle_timeout: Duration::from_millis(u.upstream_idle_timeout_ms),
            write_timeout: Duration::from_millis(c.write_timeout_ms),
            ..Settings::default()
        };
        if let Some(n) = c.token_workers {
            s.token_workers = n;
        }
        s
    }

    /// The client listener's certificate and key files, when TLS is on.
    pub fn tls(&self) -> Option<CertFiles> {
        let l = &self.listeners;
        match (&l.tls_cert, &l.tls_key) {
            (Some(cert), Some(key)) => Some(CertFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        }
    }

    /// What a connection to the gateway's listener may hold.
    pub fn clients(&self) -> ClientLimits {
        let c = &self.clients;
        ClientLimits {
            header_timeout: Duration::from_millis(c.header_timeout_ms),
            body_timeout: Duration::from_millis(c.body_timeout_ms),
            body_min_rate: c.body_min_rate,
            keepalive_timeout: Duration::from_millis(c.keepalive_timeout_ms),
            drain_linger: Duration::from_millis(c.drain_linger_ms),
            max_connections: c
                .max_connections
                .unwrap_or_else(crate::listener::default_max_connections),
        }
    }

    /// What a connection to the metrics / admin listener may hold: the same
    /// timeouts, its own cap.
    pub fn metrics_clients(&self) -> ClientLimits {
        ClientLimits {
            max_connections: self.clients.metrics_max_connections,
            ..self.clients()
        }
    }

    /// The usage ledger writer's tunables.
    pub fn ledger(&self) -> LedgerSettings {
        let s = &self.state;
        LedgerSettings {
            queue: s.ledger_queue,
            batch_rows: s.ledger_batch,
            flush_every: Duration::from_millis(s.ledger_flush_ms),
            retention_days: s.ledger_retention_days,
        }
    }

    /// Where limits and budgets live.
    pub fn limits(&self) -> LimitsConfig {
        LimitsConfig {
            data_dir: Some(self.state.data.clone().into()),
            redis: self.redis(),
            redis_prefix: self.state.redis_prefix.clone(),
            fail: match self.state.redis_fail {
                RedisFail::Open => FailMode::Open,
                RedisFail::Closed => FailMode::Closed,
            },
        }
    }

    /// `--redis`, unless empty.
    pub fn redis(&self) -> Option<String> {
        given(&self.state.redis)
    }

    /// `--database`, unless empty.
    pub fn database(&self) -> Option<String> {
        given(&self.state.database)
    }

    /// `--admin-key`, unless empty.
    pub fn admin_key(&self) -> Option<String> {
        given(&self.admin.admin_key)
    }

    /// The identity provider for JWT clients, when `--oidc-issuer` or
    /// `--jwks-url` is given; `Err` when `--jwt-audience` is missing, or is
    /// given alone.
    pub fn oidc(&self) -> Result<Option<crate::identity::OidcSettings>, String> {
        let i = &self.identity;
        let (issuer, jwks_url) = (given(&i.oidc_issuer), given(&i.jwks_url));
        match (issuer.is_some() || jwks_url.is_some(), given(&i.jwt_audience)) {
            (false, None) => Ok(None),
            (false, Some(_)) => Err(
                "--jwt-audience is given without --oidc-issuer or --jwks-url: give the identity provider"
                    .into(),
            ),
            (true, None) => Err(
                "--oidc-issuer and --jwks-url need --jwt-audience: the audience (aud) tokens must be for"
                    .into(),
            ),
            (true, Some(audience)) => Ok(Some(crate::identity::OidcSettings {
                issuer,
                jwks_url,
                audience,
            })),
        }
    }

    /// `--otlp-endpoint`, unless empty.
    pub fn otlp_endpoint(&self) -> Option<String> {
        given(&self.admin.otlp_endpoint)
    }

    /// How long stored responses are kept: `--responses-ttl-secs` when
    /// given, else `--responses-ttl-days`.
    pub fn responses_ttl(&self) -> Duration {
        let s = &self.state;
        match s.responses_ttl_secs {
            Some(secs) => Duration::from_secs(secs),
            None => Duration::from_secs(s.responses_ttl_days.saturating_mul(DAY)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Tests that set `SWITCHBOARD_*` variables run one at a time, and every
    /// test parses with none of them set but its own.
    static ENV: Mutex<()> = Mutex::new(());

    /// Parses `args` (after the program name) with exactly `vars` set among
    /// the flags' variables.
    fn parse(args: &[&str], vars: &[(&str, &str)]) -> Result<Cli, clap::Error> {
        let _held = ENV.lock().unwrap_or_else(|e| e.into_inner());
        use clap::CommandFactory;
        let names: Vec<String> = Cli::command()
            .get_arguments()
            .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .collect();
        for n in &names {
            std::env::remove_var(n);
        }
        for (k, v) in vars {
            std::env::set_var(k, v);
        }
        let r = Cli::try_parse_from(std::iter::once("switchboard").chain(args.iter().copied()));
        for (k, _) in vars {
            std::env::remove_var(k);
        }
        r
    }

    #[test]
    fn every_default() {
        let cli = parse(&[], &[]).unwrap();
        assert_eq!(cli.files.catalog, "conf/catalog.json");
        assert_eq!(cli.files.keys, "conf/keys.json");
        assert_eq!(cli.listeners.listen, "127.0.0.1:8080");
        assert_eq!(cli.listeners.metrics, "127.0.0.1:9091");
        assert_eq!(cli.state.data, "data");
        assert_eq!(cli.state.redis_prefix, "switchboard:");
        assert_eq!(cli.state.redis_fail, RedisFail::Open);
        assert_eq!(cli.server.conf, None);
        assert!(!cli.files.check && !cli.server.daemon && !cli.server.upgrade && !cli.server.test);
        assert_eq!(
            (
                cli.redis(),
                cli.database(),
                cli.admin_key(),
                cli.otlp_endpoint()
            ),
            (None, None, None, None)
        );

        let s = cli.settings();
        assert_eq!(s.max_body_bytes, 33_554_432);
        assert_eq!(s.max_response_bytes, 33_554_432);
        assert_eq!(s.connect_timeout, Duration::from_millis(10_000));
        assert_eq!(s.read_timeout, Duration::from_millis(300_000));
        assert_eq!(s.write_timeout, Duration::from_millis(60_000));
        assert_eq!(s.upstream_keepalive_requests, 1000);
        assert_eq!(s.upstream_idle_timeout, Duration::from_millis(60_000));
        assert_eq!(s.token_workers, crate::proxy::tokenize::default_workers());
        assert_eq!(s.max_frame_bytes, Settings::default().max_frame_bytes);

        let c = cli.clients();
        assert_eq!(c.header_timeout, Duration::from_millis(60_000));
        assert_eq!(c.body_timeout, Duration::from_millis(60_000));
        assert_eq!(c.body_min_rate, 500);
        assert_eq!(c.keepalive_timeout, Duration::from_millis(75_000));
        assert_eq!(c.drain_linger, Duration::from_millis(2_000));
        assert_eq!(
            c.max_connections,
            crate::listener::default_max_connections()
        );
        let m = cli.metrics_clients();
        assert_eq!(m.max_connections, 64);
        assert_eq!(
            (
                m.header_timeout,
                m.body_timeout,
                m.body_min_rate,
                m.keepalive_timeout
            ),
            (
                c.header_timeout,
                c.body_timeout,
                c.body_min_rate,
                c.keepalive_timeout
            )
        );

        let l = cli.ledger();
        assert_eq!(
            (l.retention_days, l.queue, l.batch_rows, l.flush_every),
            (90, 10_000, 256, Duration::from_millis(200))
        );
        assert_eq!(cli.responses_ttl(), Duration::from_secs(30 * 24 * 3600));
        assert_eq!(cli.state.responses_max_record_bytes, 8_388_608);
        assert_eq!(cli.state.responses_key_quota_bytes, 67_108_864);
        let limits = cli.limits();
        assert_eq!(limits.fail, FailMode::Open);
        assert_eq!(limits.data_dir, Some("data".into()));
        assert_eq!(limits.redis, None);
    }

    /// Every flag's value reaches the setting it names (a catch-all once
    /// sent unmatched numbers to the read timeout).
    #[test]
    fn each_flag_sets_its_own_setting() {
        let cli = parse(
            &[
                "--catalog=c.json",
                "--keys",
                "k.json",
                "--listen",
                "0.0.0.0:1",
                "--metrics",
                "0.0.0.0:2",
                "-c",
                "p.yaml",
                "-d",
                "-u",
                "-t",
                "--check",
                "--connect-timeout-ms",
                "1",
                "--read-timeout-ms",
                "2",
                "--max-response-bytes",
                "3",
                "--upstream-keepalive-requests",
                "4",
                "--upstream-idle-timeout-ms",
                "5",
                "--max-body-bytes",
                "6",
                "--token-workers",
                "7",
                "--write-timeout-ms",
                "8",
                "--header-timeout-ms",
                "9",
                "--body-timeout-ms",
                "10",
                "--body-min-rate",
                "11",
                "--keepalive-timeout-ms",
                "12",
                "--drain-linger-ms",
                "0",
                "--max-connections",
                "13",
                "--metrics-max-connections",
                "14",
                "--data",
                "d",
                "--database",
                "postgres://db",
                "--ledger-retention-days",
                "15",
                "--ledger-queue",
                "16",
                "--ledger-batch",
                "17",
                "--ledger-flush-ms",
                "18",
                "--redis",
                "redis://r",
                "--redis-prefix",
                "p:",
                "--redis-fail",
                "closed",
                "--responses-ttl-days",
                "19",
                "--responses-max-record-bytes",
                "20",
                "--responses-key-quota-bytes",
                "21",
                "--admin-key",
                "ak",
                "--otlp-endpoint",
                "http://o",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(
            (cli.files.catalog.as_str(), cli.files.keys.as_str()),
            ("c.json", "k.json")
        );
        assert_eq!(
            (
                cli.listeners.listen.as_str(),
                cli.listeners.metrics.as_str()
            ),
            ("0.0.0.0:1", "0.0.0.0:2")
        );
        assert_eq!(cli.server.conf.as_deref(), Some("p.yaml"));
        assert!(cli.files.check && cli.server.daemon && cli.server.upgrade && cli.server.test);
        let s = cli.settings();
        let ms = Duration::from_millis;
        assert_eq!(
            (
                s.connect_timeout,
                s.read_timeout,
                s.max_response_bytes,
                s.upstream_keepalive_requests
            ),
            (ms(1), ms(2), 3, 4)
        );
        assert_eq!(
            (
                s.upstream_idle_timeout,
                s.max_body_bytes,
                s.token_workers,
                s.write_timeout
            ),
            (ms(5), 6, 7, ms(8))
        );
        let c = cli.clients();
        assert_eq!(
            (
                c.header_timeout,
                c.body_timeout,
                c.body_min_rate,
                c.keepalive_timeout,
                c.max_connections
            ),
            (ms(9), ms(10), 11, ms(12), 13)
        );
        assert_eq!(c.drain_linger, ms(0), "0 is allowed: no window");
        assert_eq!(cli.metrics_clients().max_connections, 14);
        assert_eq!(cli.metrics_clients().header_timeout, ms(9));
        let l = cli.ledger();
        assert_eq!(
            (l.retention_days, l.queue, l.batch_rows, l.flush_every),
            (15, 16, 17, ms(18))
        );
        assert_eq!(cli.database().as_deref(), Some("postgres://db"));
        let limits = cli.limits();
        assert_eq!(limits.data_dir, Some("d".into()));
        assert_eq!(limits.redis.as_deref(), Some("redis://r"));
        assert_eq!(limits.redis_prefix, "p:");
        assert_eq!(limits.fail, FailMode::Closed);
        assert_eq!(cli.responses_ttl(), Duration::from_secs(19 * 24 * 3600));
        assert_eq!(
            (
                cli.state.responses_max_record_bytes,
                cli.state.responses_key_quota_bytes
            ),
            (20, 21)
        );
        assert_eq!(cli.admin_key().as_deref(), Some("ak"));
        assert_eq!(cli.otlp_endpoint().as_deref(), Some("http://o"));
    }

    #[test]
    fn variables_are_read_and_flags_win() {
        let vars = [
            ("SWITCHBOARD_READ_TIMEOUT_MS", "1234"),
            ("SWITCHBOARD_CONNECT_TIMEOUT_MS", "99"),
            ("SWITCHBOARD_LISTEN", "127.0.0.1:1"),
            ("SWITCHBOARD_REDIS_FAIL", "closed"),
            ("SWITCHBOARD_MAX_CONNECTIONS", "5"),
            ("SWITCHBOARD_ADMIN_KEY", "from-env"),
        ];
        let cli = parse(&[], &vars).unwrap();
        assert_eq!(cli.settings().read_timeout, Duration::from_millis(1234));
        assert_eq!(cli.settings().connect_timeout, Duration::from_millis(99));
        assert_eq!(cli.listeners.listen, "127.0.0.1:1");
        assert_eq!(cli.limits().fail, FailMode::Closed);
        assert_eq!(cli.clients().max_connections, 5);
        assert_eq!(cli.admin_key().as_deref(), Some("from-env"));

        let cli = parse(
            &[
                "--read-timeout-ms",
                "7",
                "--listen",
                "127.0.0.1:2",
                "--redis-fail",
                "open",
                "--admin-key",
                "flag",
            ],
            &vars,
        )
        .unwrap();
        assert_eq!(cli.settings().read_timeout, Duration::from_millis(7));
        assert_eq!(cli.settings().connect_timeout, Duration::from_millis(99));
        assert_eq!(cli.listeners.listen, "127.0.0.1:2");
        assert_eq!(cli.limits().fail, FailMode::Open);
        assert_eq!(cli.admin_key().as_deref(), Some("flag"));
    }

    #[test]
    fn empty_urls_and_keys_are_unset() {
        let vars = [
            ("SWITCHBOARD_REDIS", ""),
            ("SWITCHBOARD_DATABASE", ""),
            ("SWITCHBOARD_ADMIN_KEY", ""),
            ("SWITCHBOARD_OTLP_ENDPOINT", ""),
        ];
        let cli = parse(&[], &vars).unwrap();
        assert_eq!(
            (
                cli.redis(),
                cli.database(),
                cli.admin_key(),
                cli.otlp_endpoint()
            ),
            (None, None, None, None)
        );
        assert_eq!(cli.limits().redis, None);
        let cli = parse(
            &[
                "--redis",
                "",
                "--database=",
                "--admin-key",
                "",
                "--otlp-endpoint",
                "",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(
            (
                cli.redis(),
                cli.database(),
                cli.admin_key(),
                cli.otlp_endpoint()
            ),
            (None, None, None, None)
        );
    }

    #[test]
    fn the_identity_provider_needs_an_audience() {
        assert_eq!(parse(&[], &[]).unwrap().oidc(), Ok(None));
        let cli = parse(
            &[
                "--oidc-issuer",
                "https://idp.example",
                "--jwt-audience",
                "sb",
            ],
            &[],
        )
        .unwrap();
        let o = cli.oidc().unwrap().unwrap();
        assert_eq!(
            (o.issuer.as_deref(), o.jwks_url, o.audience.as_str()),
            (Some("https://idp.example"), None, "sb")
        );
        let cli = parse(
            &[],
            &[
                ("SWITCHBOARD_JWKS_URL", "https://idp.example/keys"),
                ("SWITCHBOARD_JWT_AUDIENCE", "sb"),
            ],
        )
        .unwrap();
        let o = cli.oidc().unwrap().unwrap();
        assert_eq!(
            (o.issuer, o.jwks_url.as_deref()),
            (None, Some("https://idp.example/keys"))
        );
        let e = parse(&["--oidc-issuer", "https://idp.example"], &[])
            .unwrap()
            .oidc()
            .unwrap_err();
        assert!(e.contains("need --jwt-audience"), "{e}");
        let e = parse(&["--jwt-audience", "sb"], &[])
            .unwrap()
            .oidc()
            .unwrap_err();
        assert!(e.contains("without --oidc-issuer or --jwks-url"), "{e}");
        // Empty is unset, like every URL.
        let cli = parse(&["--oidc-issuer", "", "--jwt-audience", ""], &[]).unwrap();
        assert_eq!(cli.oidc(), Ok(None));
    }

    /// Repeating a flag is not an error: the last one wins (the tests pass
    /// `--data` after their own default one).
    #[test]
    fn a_repeated_flag_takes_the_last_value() {
        let cli = parse(
            &[
                "--data",
                "a",
                "--data",
                "b",
                "--read-timeout-ms",
                "1",
                "--read-timeout-ms",
                "2",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(cli.state.data, "b");
        assert_eq!(cli.settings().read_timeout, Duration::from_millis(2));
    }

    #[test]
    fn the_hidden_ttl_in_seconds_wins_over_days() {
        let cli = parse(
            &["--responses-ttl-secs", "1", "--responses-ttl-days", "3"],
            &[],
        )
        .unwrap();
        assert_eq!(cli.responses_ttl(), Duration::from_secs(1));
        let cli = parse(&[], &[("SWITCHBOARD_RESPONSES_TTL_SECS", "2")]).unwrap();
        assert_eq!(cli.responses_ttl(), Duration::from_secs(2));
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        assert!(!help.contains("responses-ttl-secs"), "{help}");
    }

    #[test]
    fn zero_and_non_numbers_are_refused() {
        for (flag, bad) in [
            ("--read-timeout-ms", "0"),
            ("--read-timeout-ms", "soon"),
            ("--max-body-bytes", "-1"),
            ("--ledger-retention-days", "0"),
            ("--max-connections", "1.5"),
            ("--responses-ttl-secs", "0"),
        ] {
            let e = parse(&[flag, bad], &[]).unwrap_err().to_string();
            assert!(
                e.contains("expected a positive integer"),
                "{flag} {bad}: {e}"
            );
            assert!(e.contains(flag), "{flag} {bad}: {e}");
        }
        let e = parse(&[], &[("SWITCHBOARD_LEDGER_BATCH", "0")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a positive integer"), "{e}");
        let e = parse(&[], &[("SWITCHBOARD_BODY_MIN_RATE", "")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a positive integer"), "{e}");
        let e = parse(&["--ledger-retention-days", "4294967296"], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("too large"), "{e}");
    }

    #[test]
    fn unknown_flags_and_values_are_refused() {
        let e = parse(&["--read-timeout", "5"], &[]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{e}");
        // Once mapped to the read timeout by a catch-all arm.
        let e = parse(&["--keepalive-ms", "5"], &[]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{e}");
        let e = parse(&["--redis-fail", "sometimes"], &[]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue, "{e}");
        assert!(e.to_string().contains("--redis-fail"), "{e}");
        let e = parse(&["--listen"], &[]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue, "{e}");
        let e = parse(&["stray"], &[]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{e}");
    }

    #[test]
    fn the_command_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
