//! The `switchboard` binary: startup only. The command line is parsed by
//! `switchboard::cli` (flags, variables, defaults, help); this file loads the
//! configuration (refusing to start on an invalid file), opens the state
//! stores, builds the Pingora server with its two listeners and runs it.
//!
//! May import: the library's public modules, pingora.

use clap::Parser;
use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::Server;
use std::sync::Arc;
use std::time::Duration;
use switchboard::cli::Cli;
use switchboard::listener::{Guarded, Served};
use switchboard::proxy::Gateway;
use switchboard::runtime::{ConfigPaths, Runtime, Snapshot};
use switchboard::state::ledger;
use switchboard::state::limits::Limits;

#[cfg(not(feature = "alloc-count"))]
#[global_allocator]
static GLOBAL: switchboard::util::allocator::Mimalloc = switchboard::util::allocator::Mimalloc;
#[cfg(feature = "alloc-count")]
#[global_allocator]
static GLOBAL: switchboard::obs::alloc_count::Counting = switchboard::obs::alloc_count::Counting;

/// How long a graceful shutdown waits for the requests in flight (streams
/// included) before it ends what is left with each protocol's error event;
/// a shutdown with nothing in flight ends at once (`DrainService`).
const GRACE_PERIOD_SECONDS: u64 = 30;

/// Ends the process once a graceful shutdown (SIGTERM; SIGQUIT once the
/// listeners went to the successor) has drained: Pingora stops accepting and
/// would sleep its whole grace period; this waits only for the client
/// listener to be done (connections idle when the drain started are kept
/// `--drain-linger-ms` for one more request, Pingora's cleanup runs a
/// second later) with every connection closed, and for the requests in
/// flight, up to the grace period less a second, then ends the
/// streams still open with their protocol's error event (each still gets
/// its access line and ledger row), writes the access log, the stored
/// responses, the ledger and the traces out, and exits.
struct DrainService {
    drain: Arc<switchboard::runtime::drain::Drain>,
    connections: switchboard::listener::Connections,
    grace: Duration,
    ledger: Arc<ledger::Ledger>,
    responses: Arc<switchboard::state::responses::ResponseStore>,
    telemetry: Option<Arc<switchboard::obs::telemetry::Telemetry>>,
}

#[async_trait::async_trait]
impl pingora_core::services::background::BackgroundService for DrainService {
    async fn start(&self, mut shutdown: pingora_core::server::ShutdownWatch) {
        if shutdown.wait_for(|down| *down).await.is_err() {
            return;
        }
        let grace = self.grace.saturating_sub(Duration::from_secs(1));
        log::info!(
            "shutting down: waiting for {} requests in flight and {} client connections (at most {} s)",
            self.drain.in_flight(),
            self.connections.open(),
            grace.as_secs()
        );
        let deadline = tokio::time::Instant::now() + grace;
        // Every request has its connection: once none is open, what is
        // still in flight is only finishing its log lines.
        let closed = self.connections.wait_closed(deadline).await;
        if !(closed && self.drain.wait_idle(deadline).await) {
            log::warn!(
                "shutting down: the grace period ended with {} requests in flight; ending their streams",
                self.drain.in_flight()
            );
            self.drain.cut_streams();
            let settle = tokio::time::Instant::now() + Duration::from_secs(5);
            self.drain.wait_idle(settle).await;
        }
        switchboard::proxy::access::flush();
        self.responses.close(true, Duration::from_secs(5));
        self.ledger.close(Duration::from_secs(10));
        if let Some(t) = &self.telemetry {
            t.shutdown();
        }
        log::info!("shut down");
        std::process::exit(0);
    }
}

/// Starts the key store's watch (docs/keys.md "Propagation") once the
/// server runs: after a `--daemon` fork, which keeps no thread.
struct KeyWatch(Arc<switchboard::state::keys::KeyDb>);

#[async_trait::async_trait]
impl pingora_core::services::background::BackgroundService for KeyWatch {
    async fn start(&self, mut shutdown: pingora_core::server::ShutdownWatch) {
        if let Err(e) = switchboard::state::keys::watch::spawn(self.0.clone()) {
            log::error!("key store: changes made elsewhere are not watched: {e}");
        }
        // Held until shutdown, so the service is not reported as ended.
        let _ = shutdown.wait_for(|down| *down).await;
    }
}

/// Pingora's configuration: the file's when given, with our defaults for what it leaves unset.
fn server_conf(path: Option<&str>) -> Result<ServerConf, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Some(path) = path else {
        let mut conf = ServerConf::new().ok_or("cannot build the default Pingora configuration")?;
        conf.threads = cores;
        conf.work_stealing = false;
        conf.grace_period_seconds = Some(GRACE_PERIOD_SECONDS);
        conf.graceful_shutdown_timeout_seconds = Some(10);
        return Ok(conf);
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut conf = ServerConf::from_yaml(&text).map_err(|e| format!("{path}: {e}"))?;
    let set = |key: &str| {
        text.lines()
            .any(|l| l.trim_start().starts_with(&format!("{key}:")))
    };
    if !set("threads") {
        conf.threads = cores;
    }
    if !set("work_stealing") {
        conf.work_stealing = false;
    }
    if !set("grace_period_seconds") {
        conf.grace_period_seconds = Some(GRACE_PERIOD_SECONDS);
    }
    if !set("graceful_shutdown_timeout_seconds") {
        conf.graceful_shutdown_timeout_seconds = Some(10);
    }
    Ok(conf)
}

/// The stored-responses store (docs/api.md "Stored responses"): Redis with `--redis`, else
/// `DATA/responses.sqlite`, with its purge thread.
fn responses_store(
    cli: &Cli,
    gateway: &Gateway,
) -> Result<switchboard::state::responses::ResponseStore, String> {
    use switchboard::state::responses;
    let (ttl, data) = (cli.responses_ttl(), &cli.state.data);
    let (max_record, key_quota) = (
        cli.state.responses_max_record_bytes,
        cli.state.responses_key_quota_bytes,
    );
    let backend: Arc<dyn responses::Backend> = match cli.redis() {
        Some(url) => Arc::new(responses::redis::Redis::new(&url, &cli.state.redis_prefix)?),
        None => match responses::sqlite::Sqlite::open_unless_full(
            std::path::Path::new(data),
            Duration::from_millis(cli.state.responses_flush_ms),
        )? {
            Some(db) => {
                db.spawn_purger((ttl / 2).clamp(Duration::from_secs(1), Duration::from_secs(600)));
                Arc::new(db)
            }
            // A start on a full disk: served, from memory until a restart.
            None => {
                log::error!(
                    "stored responses: {data}/{} cannot be made (the disk is full): responses are stored in memory until a restart",
                    responses::sqlite::FILE
                );
                Arc::new(responses::memory::Memory::default())
            }
        },
    };
    log::info!(
        "stored responses: {} (kept {}s, {max_record} bytes a record, {key_quota} bytes a key)",
        match cli.redis() {
            Some(_) => "redis".to_string(),
            None => format!("{data}/{}", responses::sqlite::FILE),
        },
        ttl.as_secs(),
    );
    Ok(responses::ResponseStore::new(backend, ttl)
        .with_limits(max_record, key_quota)
        .count_failures_in(gateway.metrics.responses_store_failures.clone()))
}

/// mimalloc's `mi_option_arena_eager_commit` (index 4 in the v3 `mi_option_e`
/// enum of libmimalloc-sys 0.1.49's bundled mimalloc; the crate's own
/// constants follow v2's numbering).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Allocator settings, set before the first allocation (a constructor in
/// `.init_array`, run by the loader before `main` and before anything has
/// allocated): arenas are committed as they are used rather than all at
/// once, which kept ~10 MB resident at idle.
#[allow(unsafe_code)]
extern "C" fn tune_allocator() {
    // SAFETY: sets one of mimalloc's documented options to a valid value;
    // no memory is touched, and options may be set at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[link_section = ".init_array"]
static TUNE_ALLOCATOR: extern "C" fn() = tune_allocator;

fn main() {
    // Pingora's debug and trace lines print whole request heads and bodies
    // (a Gemini `?key=`, an Authorization header): never above info.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .filter_module("pingora_core", log::LevelFilter::Info)
        .init();
    // A parse error, `--help` and `--version` exit here (2 on an error).
    let cli = Cli::parse();
    if let Err(e) = run(&cli) {
        eprintln!("switchboard: {e}");
        std::process::exit(1);
    }
    std::process::exit(0);
}

/// Loads, starts and runs the gateway `cli` describes; returns once Pingora
/// has shut down, or at once for `--check`.
fn run(cli: &Cli) -> Result<(), String> {
    let (catalog, keys) = (&cli.files.catalog, &cli.files.keys);
    let snapshot =
        Snapshot::load(catalog, keys).map_err(|e| format!("invalid configuration: {e}"))?;
    // Before anything starts (and under --check): a certificate that does not load stops here.
    let tls = match cli.tls() {
        Some(files) => Some(Arc::new(
            switchboard::listener::Tls::load(files).map_err(|e| format!("TLS: {e}"))?,
        )),
        None => None,
    };
    if cli.files.check {
        println!(
            "ok: {} providers, {} models, {} keys{}",
            snapshot.catalog.providers.len(),
            snapshot.catalog.models.len(),
            snapshot.keys.len(),
            if tls.is_some() {
                ", TLS certificate"
            } else {
                ""
            }
        );
        return Ok(());
    }
    let conf = server_conf(cli.server.conf.as_deref())
        .map_err(|e| format!("invalid Pingora configuration: {e}"))?;
    let opt = Opt {
        upgrade: cli.server.upgrade,
        daemon: cli.server.daemon,
        nocapture: false,
        test: cli.server.test,
        conf: None,
    };
    let grace = Duration::from_secs(conf.grace_period_seconds.unwrap_or(GRACE_PERIOD_SECONDS));
    let threads = conf.threads;
    let mut server = Server::new_with_opt_and_conf(opt, conf);
    let admin_key = cli.admin_key();
    if let Some(k) = &admin_key {
        // Scrubbed from everything relayed or logged, like the configured keys.
        switchboard::secrets::hold_process_secret(k);
    }
    let paths = ConfigPaths {
        catalog: catalog.clone(),
        keys: keys.clone(),
    };
    let data = std::path::Path::new(&cli.state.data);
    let database = cli.database();
    // The keys and teams made through the admin API, merged with the file's
    // (docs/keys.md); a stored id the file also has stops the start here. A
    // store that cannot be opened or read (a full disk, PostgreSQL down) is
    // logged and the gateway serves the file's keys: an unreachable database
    // is read once it answers (the watch), an unopenable file after a restart.
    let key_db = match switchboard::state::keys::KeyDb::open(data, database.as_deref()) {
        Ok(db) => Some(Arc::new(db)),
        Err(e) => {
            log::error!("key store: {e}: serving the keys file's keys only; keys and teams cannot be changed through the API until a restart");
            None
        }
    };
    let stored = match &key_db {
        Some(db) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start: {e}"))?
            .block_on(db.load())
            .inspect(|s| {
                log::info!(
                    "key store: {}, {} keys and {} teams made through the admin API",
                    db.describe(),
                    s.keys.len(),
                    s.teams.len()
                )
            })
            .unwrap_or_else(|e| {
                log::error!("key store: {e}: serving the keys file's keys until it can be read");
                Arc::default()
            }),
        None => Arc::default(),
    };
    let rt = Arc::new(
        Runtime::with_stored(snapshot, paths, stored)
            .map_err(|e| format!("invalid configuration: {e}"))?,
    );
    if let Some(db) = &key_db {
        let rt = rt.clone();
        db.on_change(Box::new(move |stored| rt.set_stored(stored)));
    }
    if let Err(e) = switchboard::runtime::reload::spawn(rt.clone()) {
        log::error!("hot reload disabled: {e}");
    }
    let mut gateway = Gateway::new(rt.clone(), cli.settings());
    // JWT clients: the verifier is made here (a bad URL stops the start);
    // its keys are fetched in the background, so the gateway starts even
    // while the identity provider does not answer.
    let oidc = match cli.oidc()? {
        Some(settings) => Some(Arc::new(switchboard::identity::Oidc::new(settings)?)),
        None => None,
    };
    if let Some(oidc) = &oidc {
        log::info!("JWT clients: {}", oidc.describe());
        if rt.snapshot().keys.jwt().is_none() {
            log::warn!(
                "JWT clients: {keys} has no jwt block: verified tokens are refused (403) until it maps them to teams"
            );
        }
        server.add_service(pingora_core::services::background::background_service(
            "identity provider keys",
            switchboard::identity::KeyRefresh(oidc.clone()),
        ));
        gateway.identity = Some(oidc.clone());
    }
    let (usage_ledger, ledger_reader) = ledger::open(
        data,
        database.as_deref(),
        cli.ledger(),
        gateway.metrics.clone(),
    )
    .map_err(|e| format!("cannot open the usage ledger: {e}"))?;
    let usage_ledger = Arc::new(usage_ledger);
    gateway.ledger = Some(usage_ledger.clone());
    if let Some(db) = &key_db {
        server.add_service(pingora_core::services::background::background_service(
            "key store watch",
            KeyWatch(db.clone()),
        ));
    }
    server.add_service(pingora_core::services::background::background_service(
        "usage ledger",
        ledger::LedgerService(usage_ledger.clone()),
    ));
    let limits = Limits::open(&cli.limits(), gateway.metrics.clone())
        .map_err(|e| format!("cannot open the limits store: {e}"))?;
    gateway.limits = Arc::new(limits);
    if let Some(endpoint) = cli.otlp_endpoint() {
        let t = switchboard::obs::telemetry::Telemetry::from_endpoint(&endpoint)?;
        gateway.telemetry = Some(Arc::new(t));
    }
    let telemetry = gateway.telemetry.clone();
    let drain = gateway.drain.clone();
    gateway.responses = Arc::new(responses_store(cli, &gateway)?);
    let responses = gateway.responses.clone();
    let mut admin = switchboard::admin::Admin::new(admin_key.as_deref(), Some(ledger_reader))
        .with_limits(gateway.limits.clone(), rt.clone());
    if let Some(oidc) = oidc {
        admin = admin.with_identity(oidc, rt.clone());
    }
    if let Some(db) = key_db {
        admin = admin.with_key_db(db);
    }
    let metrics_app = switchboard::admin::server::MetricsApp {
        metrics: gateway.metrics.clone(),
        rt,
        admin: Arc::new(admin),
    };
    let metrics_listener = Guarded::new(
        "metrics listener",
        Served(metrics_app),
        cli.metrics_clients(),
    );
    server.add_service(metrics_listener.listening("metrics", &cli.listeners.metrics, threads));
    let client_listener_app = Guarded::new("client listener", gateway, cli.clients());
    // HTTPS (ALPN h2 or http/1.1), the certificate reloaded when its files
    // change; else HTTP/1.1 and h2c.
    let client_listener_app = match tls {
        Some(tls) => {
            tls.watch()
                .map_err(|e| format!("TLS: cannot start the certificate watch: {e}"))?;
            client_listener_app.with_tls(tls)
        }
        None => client_listener_app.with_h2c(),
    };
    server.add_service(pingora_core::services::background::background_service(
        "shutdown drain",
        DrainService {
            drain,
            connections: client_listener_app.connections(),
            grace,
            ledger: usage_ledger.clone(),
            responses: responses.clone(),
            telemetry: telemetry.clone(),
        },
    ));
    server.add_service(client_listener_app.listening(
        "switchboard",
        &cli.listeners.listen,
        threads,
    ));
    // Last, once everything that can fail has been opened: with `-u` this
    // takes the running instance's listening sockets, and a new process
    // that failed after taking them would leave nobody on the port.
    if cli.server.upgrade {
        log::info!(
            "upgrade: waiting for the running instance's listening sockets on {} (send it SIGQUIT)",
            server.configuration.upgrade_sock
        );
    }
    server.bootstrap();
    log_start(cli);
    // `run` returns once Pingora has shut down (SIGTERM: after the grace
    // period and the drain; SIGINT: at once), every request logged: then what
    // the ledger still holds is written before the process exits.
    // SIGQUIT with no successor waiting on the upgrade socket is refused
    // (the port would close with nobody left to answer).
    let upgrade = switchboard::runtime::upgrade::Signals::new(&server.configuration.upgrade_sock);
    server.run(pingora_core::server::RunArgs {
        shutdown_signal: Box::new(upgrade),
    });
    switchboard::proxy::access::flush();
    responses.close(false, Duration::from_secs(5));
    usage_ledger.close(Duration::from_secs(10));
    if let Some(t) = telemetry {
        t.shutdown();
    }
    Ok(())
}

/// The start line: addresses, files, the admin API, where limits live (a
/// Redis URL without its credentials).
fn log_start(cli: &Cli) {
    log::info!(
        "switchboard listening on {} ({}; catalog {}, keys {}, metrics {}, admin API {}, limits {})",
        cli.listeners.listen,
        match &cli.listeners.tls_cert {
            Some(cert) => format!("TLS with {cert}, HTTP/2 and HTTP/1.1"),
            None => "plain HTTP/1.1 and h2c".to_string(),
        },
        cli.files.catalog,
        cli.files.keys,
        cli.listeners.metrics,
        match (cli.admin_key().is_some(), matches!(cli.oidc(), Ok(Some(_)))) {
            (true, true) => "on (admin key, admin JWTs)",
            (true, false) => "on",
            (false, true) => "on (admin JWTs)",
            (false, false) => "off",
        },
        match cli.redis() {
            Some(url) => format!(
                "in Redis {}, failing {}",
                url.rsplit_once('@').map_or(url.as_str(), |(_, host)| host),
                cli.limits().fail.name()
            ),
            None => format!("embedded, spend in {}/limits.sqlite", cli.state.data),
        }
    );
}
