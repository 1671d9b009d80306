//! The `switchboard` binary: command line and environment, configuration
//! loading (refusing to start on an invalid file), the Pingora server, run.

use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::Server;
use std::sync::Arc;
use std::time::Duration;
use switchboard::listener::{ClientLimits, Guarded, Served};
use switchboard::proxy::{Gateway, Settings};
use switchboard::runtime::{ConfigPaths, Runtime, Snapshot};
use switchboard::state::ledger::{self, LedgerSettings};
use switchboard::state::limits::{FailMode, Limits, LimitsConfig};

#[cfg(not(feature = "alloc-count"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(feature = "alloc-count")]
#[global_allocator]
static GLOBAL: switchboard::alloc_count::Counting = switchboard::alloc_count::Counting;

/// The client listener, with its per-connection buffers sized on purpose.
///
/// Read: none. Pingora's default puts a 64 KiB zero-filled read buffer in
/// front of every client connection (pingora-core 0.9.1
/// `protocols/l4/stream.rs`, `DEFAULT_L4_READ_BUFFER_SIZE`), most of a
/// stream's memory. Without it the HTTP/1 parser reads the request head
/// straight into its own 4 KiB head buffer and the body into the body
/// reader's, so nothing is lost but a copy.
///
/// Write: 4 KiB, so a whole answer's head and body (most JSON answers) leave
/// in one write; Pingora's default (1460 bytes) splits any answer longer
/// than one segment into two. Larger answers go out in two writes; a
/// bigger buffer would be held by every open stream.
fn client_listener(addr: &str) -> pingora_core::listeners::ListenerConfig {
    use pingora_core::listeners::{L4BufferSettings, ListenerConfig};
    ListenerConfig::tcp(addr).l4_buffer(L4BufferSettings::new(0, 4 * 1024))
}

const USAGE: &str = "\
switchboard: a multi-protocol LLM gateway

USAGE:
  switchboard [--catalog PATH] [--keys PATH] [--listen ADDR] [--metrics ADDR]
              [-c PINGORA_YAML] [--max-body-bytes N] [--connect-timeout-ms N]
              [--read-timeout-ms N] [--data DIR] [--database URL] [--admin-key KEY]
              [--ledger-retention-days N] [--ledger-queue N] [--ledger-batch N]
              [--ledger-flush-ms N] [--redis URL] [--redis-prefix P]
              [--redis-fail open|closed] [--responses-ttl-days N]
              [--responses-max-record-bytes N] [--responses-key-quota-bytes N]
              [--otlp-endpoint URL] [--max-response-bytes N] [--write-timeout-ms N]
              [--upstream-keepalive-requests N] [--upstream-idle-timeout-ms N]
              [--header-timeout-ms N] [--body-timeout-ms N] [--body-min-rate N]
              [--keepalive-timeout-ms N] [--max-connections N] [--metrics-max-connections N]
              [--check] [-d] [-u] [-t]
  switchboard --version

OPTIONS (environment variable in brackets):
  --catalog PATH          catalog file [SWITCHBOARD_CATALOG] (conf/catalog.json)
  --keys PATH             keys file [SWITCHBOARD_KEYS] (conf/keys.json)
  --listen ADDR           listen address [SWITCHBOARD_LISTEN] (127.0.0.1:8080)
  --metrics ADDR          Prometheus metrics address [SWITCHBOARD_METRICS] (127.0.0.1:9091)
  -c, --conf PATH         Pingora server configuration (threads, grace periods, upgrade socket)
  --max-body-bytes N      largest request body accepted [SWITCHBOARD_MAX_BODY_BYTES] (33554432)
  --connect-timeout-ms N  upstream connect timeout [SWITCHBOARD_CONNECT_TIMEOUT_MS] (10000)
  --read-timeout-ms N     upstream read timeout [SWITCHBOARD_READ_TIMEOUT_MS] (300000)
  --token-workers N       token counts run at once; more wait [SWITCHBOARD_TOKEN_WORKERS] (half the cores, at least 1)
  --data DIR              data directory: the usage ledger (DIR/ledger.sqlite), budget spend
                          (DIR/limits.sqlite), stored responses (DIR/responses.sqlite)
                          [SWITCHBOARD_DATA] (data/)
  --database URL          write the usage ledger to PostgreSQL instead, postgres://user@host:port/db
                          [SWITCHBOARD_DATABASE] (none: the embedded file)
  --admin-key KEY         turns the admin API on (/admin/* on the metrics listener, Bearer KEY)
                          [SWITCHBOARD_ADMIN_KEY] (none: admin routes answer 404)
  --ledger-retention-days N  ledger rows older than this are deleted, daily rollups kept
                          [SWITCHBOARD_LEDGER_RETENTION_DAYS] (90)
  --ledger-queue N        ledger rows queued or held for a retry; past it rows are dropped and counted
                          [SWITCHBOARD_LEDGER_QUEUE] (10000)
  --ledger-batch N        ledger rows written per transaction, at most [SWITCHBOARD_LEDGER_BATCH] (256)
  --ledger-flush-ms N     the longest a ledger row waits for its batch to fill [SWITCHBOARD_LEDGER_FLUSH_MS] (200)
  --redis URL             fleet mode: rpm / tpm windows, budgets and stored responses in Redis,
                          redis://host:port[/db]
                          [SWITCHBOARD_REDIS] (none: embedded, one instance)
  --redis-prefix P        prefix of every Redis key [SWITCHBOARD_REDIS_PREFIX] (switchboard:)
  --redis-fail MODE       Redis unreachable: open admits unchecked, closed refuses with 503
                          [SWITCHBOARD_REDIS_FAIL] (open)
  --responses-ttl-days N  how long a stored response is kept [SWITCHBOARD_RESPONSES_TTL_DAYS] (30)
  --responses-max-record-bytes N  largest stored response (its input, instructions and answer);
                          a request whose input alone is larger is refused with 400 unless it sends
                          store: false [SWITCHBOARD_RESPONSES_MAX_RECORD_BYTES] (8388608)
  --responses-key-quota-bytes N  what one key's stored responses may hold in all; past it a request
                          to store is refused with 429 [SWITCHBOARD_RESPONSES_KEY_QUOTA_BYTES] (67108864)
  --otlp-endpoint URL     export OpenTelemetry traces over OTLP/HTTP to URL (http://host:4318;
                          /v1/traces is appended) [SWITCHBOARD_OTLP_ENDPOINT] (none: no traces)
  --max-response-bytes N  largest whole (non-stream) upstream answer; a larger one is a 502
                          [SWITCHBOARD_MAX_RESPONSE_BYTES] (33554432)
  --write-timeout-ms N    longest a write to a client may wait for it to read; then it is cut
                          [SWITCHBOARD_WRITE_TIMEOUT_MS] (60000)
  --upstream-keepalive-requests N  requests one upstream connection carries, then it is closed
                          [SWITCHBOARD_UPSTREAM_KEEPALIVE_REQUESTS] (1000)
  --upstream-idle-timeout-ms N  how long an idle upstream connection is kept for reuse
                          [SWITCHBOARD_UPSTREAM_IDLE_TIMEOUT_MS] (60000)
  --header-timeout-ms N   a request head must arrive whole within N ms of the
                          connection (or of its first byte on a kept-alive one), else the
                          connection is closed [SWITCHBOARD_HEADER_TIMEOUT_MS] (60000)
  --body-timeout-ms N     longest wait for any read of a request body; then 408
                          [SWITCHBOARD_BODY_TIMEOUT_MS] (60000)
  --body-min-rate N       bytes a second a request body must average past its body timeout
                          (the whole body is due within the timeout + 1 s per N bytes), else 408
                          [SWITCHBOARD_BODY_MIN_RATE] (500)
  --keepalive-timeout-ms N  an idle keep-alive connection is closed after N ms
                          [SWITCHBOARD_KEEPALIVE_TIMEOUT_MS] (75000)
  --max-connections N     open client connections at most; past it the longest-idle one
                          is closed, or with none idle the new one gets 503
                          [SWITCHBOARD_MAX_CONNECTIONS] ((open-files limit - 256) / 2)
  --metrics-max-connections N  the same cap on the metrics / admin listener
                          [SWITCHBOARD_METRICS_MAX_CONNECTIONS] (64)
  --check                 validate the catalog and keys files, print a summary and exit
  -d, --daemon            run in the background (Pingora)
  -u, --upgrade           take over the listening sockets of a running instance (Pingora)
  -t, --test              test the Pingora configuration and exit
  -V, --version           print the version and exit
  -h, --help              print this help
";

struct Args {
    catalog: String,
    keys: String,
    listen: String,
    metrics: String,
    conf: Option<String>,
    data: String,
    redis: Option<String>,
    redis_prefix: String,
    redis_fail: String,
    check: bool,
    daemon: bool,
    upgrade: bool,
    test: bool,
    settings: Settings,
    database: Option<String>,
    admin_key: Option<String>,
    otlp_endpoint: Option<String>,
    ledger: LedgerSettings,
    /// Client connection limits of the gateway's listener and the metrics one.
    clients: ClientLimits,
    metrics_clients: ClientLimits,
    /// How long stored responses are kept (`--responses-ttl-days`; the
    /// hidden `--responses-ttl-secs` for tests).
    responses_ttl: Duration,
    /// `--responses-max-record-bytes`, `--responses-key-quota-bytes`.
    responses_max_record_bytes: u64,
    responses_key_quota_bytes: u64,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn parse_num(flag: &str, v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{flag}: expected a positive integer, got {v:?}"))
}

fn parse_args() -> Result<Args, String> {
    let mut settings = Settings::default();
    let mut a = Args {
        catalog: env_or("SWITCHBOARD_CATALOG", "conf/catalog.json"),
        keys: env_or("SWITCHBOARD_KEYS", "conf/keys.json"),
        listen: env_or("SWITCHBOARD_LISTEN", "127.0.0.1:8080"),
        metrics: env_or("SWITCHBOARD_METRICS", "127.0.0.1:9091"),
        conf: None,
        data: env_or("SWITCHBOARD_DATA", "data"),
        redis: std::env::var("SWITCHBOARD_REDIS")
            .ok()
            .filter(|v| !v.is_empty()),
        redis_prefix: env_or("SWITCHBOARD_REDIS_PREFIX", "switchboard:"),
        redis_fail: env_or("SWITCHBOARD_REDIS_FAIL", "open"),
        check: false,
        daemon: false,
        upgrade: false,
        test: false,
        settings: Settings::default(),
        database: std::env::var("SWITCHBOARD_DATABASE")
            .ok()
            .filter(|v| !v.is_empty()),
        admin_key: std::env::var("SWITCHBOARD_ADMIN_KEY")
            .ok()
            .filter(|v| !v.is_empty()),
        otlp_endpoint: std::env::var("SWITCHBOARD_OTLP_ENDPOINT")
            .ok()
            .filter(|v| !v.is_empty()),
        ledger: LedgerSettings::default(),
        clients: ClientLimits::default(),
        metrics_clients: ClientLimits {
            max_connections: METRICS_MAX_CONNECTIONS,
            ..ClientLimits::default()
        },
        responses_ttl: switchboard::state::responses::DEFAULT_TTL,
        // Why these defaults: `state::responses::DEFAULT_MAX_RECORD_BYTES`
        // and `DEFAULT_KEY_QUOTA_BYTES`.
        responses_max_record_bytes: switchboard::state::responses::DEFAULT_MAX_RECORD_BYTES,
        responses_key_quota_bytes: switchboard::state::responses::DEFAULT_KEY_QUOTA_BYTES,
    };
    let mut numeric: Vec<(String, String)> = Vec::new();
    for (flag, var) in [
        ("--max-body-bytes", "SWITCHBOARD_MAX_BODY_BYTES"),
        ("--connect-timeout-ms", "SWITCHBOARD_CONNECT_TIMEOUT_MS"),
        ("--read-timeout-ms", "SWITCHBOARD_READ_TIMEOUT_MS"),
        ("--token-workers", "SWITCHBOARD_TOKEN_WORKERS"),
        (
            "--ledger-retention-days",
            "SWITCHBOARD_LEDGER_RETENTION_DAYS",
        ),
        ("--ledger-queue", "SWITCHBOARD_LEDGER_QUEUE"),
        ("--ledger-batch", "SWITCHBOARD_LEDGER_BATCH"),
        ("--ledger-flush-ms", "SWITCHBOARD_LEDGER_FLUSH_MS"),
        ("--responses-ttl-days", "SWITCHBOARD_RESPONSES_TTL_DAYS"),
        ("--responses-ttl-secs", "SWITCHBOARD_RESPONSES_TTL_SECS"),
        (
            "--responses-max-record-bytes",
            "SWITCHBOARD_RESPONSES_MAX_RECORD_BYTES",
        ),
        (
            "--responses-key-quota-bytes",
            "SWITCHBOARD_RESPONSES_KEY_QUOTA_BYTES",
        ),
        // Upstream answers and connections, client writes (see `upstream_flag`).
        ("--max-response-bytes", "SWITCHBOARD_MAX_RESPONSE_BYTES"),
        ("--write-timeout-ms", "SWITCHBOARD_WRITE_TIMEOUT_MS"),
        (
            "--upstream-keepalive-requests",
            "SWITCHBOARD_UPSTREAM_KEEPALIVE_REQUESTS",
        ),
        (
            "--upstream-idle-timeout-ms",
            "SWITCHBOARD_UPSTREAM_IDLE_TIMEOUT_MS",
        ),
    ] {
        if let Ok(v) = std::env::var(var) {
            numeric.push((flag.to_string(), v));
        }
    }
    for (flag, var) in CLIENT_FLAGS {
        if let Ok(v) = std::env::var(var) {
            numeric.push((flag.to_string(), v));
        }
    }
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let value = |it: &mut std::iter::Skip<std::env::Args>| {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--catalog" => a.catalog = value(&mut it)?,
            "--keys" => a.keys = value(&mut it)?,
            "--listen" => a.listen = value(&mut it)?,
            "--metrics" => a.metrics = value(&mut it)?,
            "-c" | "--conf" => a.conf = Some(value(&mut it)?),
            "--data" => a.data = value(&mut it)?,
            "--database" => a.database = Some(value(&mut it)?).filter(|v| !v.is_empty()),
            "--admin-key" => a.admin_key = Some(value(&mut it)?).filter(|v| !v.is_empty()),
            "--otlp-endpoint" => a.otlp_endpoint = Some(value(&mut it)?).filter(|v| !v.is_empty()),
            "--redis" => a.redis = Some(value(&mut it)?).filter(|v| !v.is_empty()),
            "--redis-prefix" => a.redis_prefix = value(&mut it)?,
            "--redis-fail" => a.redis_fail = value(&mut it)?,
            "--max-body-bytes"
            | "--connect-timeout-ms"
            | "--read-timeout-ms"
            | "--token-workers"
            | "--ledger-retention-days"
            | "--ledger-queue"
            | "--ledger-batch"
            | "--ledger-flush-ms"
            | "--responses-ttl-days"
            | "--responses-ttl-secs"
            | "--responses-max-record-bytes"
            | "--responses-key-quota-bytes"
            | "--max-response-bytes"
            | "--write-timeout-ms"
            | "--upstream-keepalive-requests"
            | "--upstream-idle-timeout-ms" => {
                let v = value(&mut it)?;
                numeric.push((flag.clone(), v));
            }
            f if CLIENT_FLAGS.iter().any(|(c, _)| *c == f) => {
                let v = value(&mut it)?;
                numeric.push((flag.clone(), v));
            }
            "--check" => a.check = true,
            "-d" | "--daemon" => a.daemon = true,
            "-u" | "--upgrade" => a.upgrade = true,
            "-t" | "--test" => a.test = true,
            "-V" | "--version" => {
                println!("switchboard {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}\n\n{USAGE}")),
        }
    }
    for (flag, v) in numeric {
        let n = parse_num(&flag, &v)?;
        if upstream_flag(&mut settings, &flag, n)? || client_flag(&mut a, &flag, n)? {
            continue;
        }
        match flag.as_str() {
            "--max-body-bytes" => {
                settings.max_body_bytes =
                    usize::try_from(n).map_err(|_| "--max-body-bytes too large")?
            }
            "--connect-timeout-ms" => settings.connect_timeout = Duration::from_millis(n),
            "--token-workers" => {
                settings.token_workers =
                    usize::try_from(n).map_err(|_| "--token-workers too large")?
            }
            "--ledger-retention-days" => {
                a.ledger.retention_days =
                    u32::try_from(n).map_err(|_| "--ledger-retention-days too large")?
            }
            "--ledger-queue" => {
                a.ledger.queue = usize::try_from(n).map_err(|_| "--ledger-queue too large")?
            }
            "--ledger-batch" => {
                a.ledger.batch_rows = usize::try_from(n).map_err(|_| "--ledger-batch too large")?
            }
            "--ledger-flush-ms" => a.ledger.flush_every = Duration::from_millis(n),
            "--responses-ttl-days" => {
                a.responses_ttl = Duration::from_secs(n.saturating_mul(24 * 3600))
            }
            "--responses-ttl-secs" => a.responses_ttl = Duration::from_secs(n),
            "--responses-max-record-bytes" => a.responses_max_record_bytes = n,
            "--responses-key-quota-bytes" => a.responses_key_quota_bytes = n,
            _ => settings.read_timeout = Duration::from_millis(n),
        }
    }
    if !matches!(a.redis_fail.as_str(), "open" | "closed") {
        return Err(format!(
            "--redis-fail: expected open or closed, got {:?}",
            a.redis_fail
        ));
    }
    a.settings = settings;
    Ok(a)
}

/// Sets the upstream-side setting `flag` to `n`: false when `flag` is not one.
///
/// Defaults, as a production proxy ships them:
/// - `--max-response-bytes` 32 MiB, the request cap's size: an LLM's whole
///   JSON answer (even several generated images in base64) is far smaller,
///   and each answer is held whole in memory while it is rewritten.
/// - `--write-timeout-ms` 60 s, nginx's `send_timeout`: the longest one write
///   to a client may wait for it to read.
/// - `--upstream-keepalive-requests` 1000, nginx's `keepalive_requests`.
/// - `--upstream-idle-timeout-ms` 60 s, nginx's upstream `keepalive_timeout`.
fn upstream_flag(settings: &mut Settings, flag: &str, n: u64) -> Result<bool, String> {
    let too_large = || format!("{flag} too large");
    match flag {
        "--max-response-bytes" => {
            settings.max_response_bytes = usize::try_from(n).map_err(|_| too_large())?
        }
        "--write-timeout-ms" => settings.write_timeout = Duration::from_millis(n),
        "--upstream-keepalive-requests" => {
            settings.upstream_keepalive_requests = u32::try_from(n).map_err(|_| too_large())?
        }
        "--upstream-idle-timeout-ms" => settings.upstream_idle_timeout = Duration::from_millis(n),
        _ => return Ok(false),
    }
    Ok(true)
}

/// The client-connection flags (`listener::ClientLimits`), with their
/// environment variables. Defaults are nginx's: `client_header_timeout`
/// and `client_body_timeout` 60 s, `keepalive_timeout` 75 s; a body's
/// minimum rate is Apache `mod_reqtimeout`'s (500 bytes/s); the connection
/// cap follows the open-files limit (`listener::default_max_connections`).
const CLIENT_FLAGS: [(&str, &str); 6] = [
    ("--header-timeout-ms", "SWITCHBOARD_HEADER_TIMEOUT_MS"),
    ("--body-timeout-ms", "SWITCHBOARD_BODY_TIMEOUT_MS"),
    ("--body-min-rate", "SWITCHBOARD_BODY_MIN_RATE"),
    ("--keepalive-timeout-ms", "SWITCHBOARD_KEEPALIVE_TIMEOUT_MS"),
    ("--max-connections", "SWITCHBOARD_MAX_CONNECTIONS"),
    (
        "--metrics-max-connections",
        "SWITCHBOARD_METRICS_MAX_CONNECTIONS",
    ),
];

/// The metrics / admin listener's connection cap: a scraper or two and an
/// operator's calls; a flood there must not take descriptors from clients.
const METRICS_MAX_CONNECTIONS: usize = 64;

/// Applies one of [`CLIENT_FLAGS`]; false for any other flag. The
/// timeouts apply to both listeners.
fn client_flag(a: &mut Args, flag: &str, n: u64) -> Result<bool, String> {
    let ms = Duration::from_millis(n);
    let count = || usize::try_from(n).map_err(|_| format!("{flag} too large"));
    match flag {
        "--header-timeout-ms" => {
            a.clients.header_timeout = ms;
            a.metrics_clients.header_timeout = ms;
        }
        "--body-timeout-ms" => {
            a.clients.body_timeout = ms;
            a.metrics_clients.body_timeout = ms;
        }
        "--body-min-rate" => {
            a.clients.body_min_rate = n;
            a.metrics_clients.body_min_rate = n;
        }
        "--keepalive-timeout-ms" => {
            a.clients.keepalive_timeout = ms;
            a.metrics_clients.keepalive_timeout = ms;
        }
        "--max-connections" => a.clients.max_connections = count()?,
        "--metrics-max-connections" => a.metrics_clients.max_connections = count()?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// Pingora's configuration: the file's when given, with our defaults for what it leaves unset.
fn server_conf(path: Option<&str>) -> Result<ServerConf, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Some(path) = path else {
        let mut conf = ServerConf::new().ok_or("cannot build the default Pingora configuration")?;
        conf.threads = cores;
        conf.grace_period_seconds = Some(1);
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
    if !set("grace_period_seconds") {
        conf.grace_period_seconds = Some(1);
    }
    if !set("graceful_shutdown_timeout_seconds") {
        conf.graceful_shutdown_timeout_seconds = Some(10);
    }
    Ok(conf)
}

/// The stored-responses store (CONTRACT 5.3): Redis with `--redis`, else
/// `DATA/responses.sqlite`, with its purge thread.
fn responses_store(
    args: &Args,
    gateway: &Gateway,
) -> Result<switchboard::state::responses::ResponseStore, String> {
    use switchboard::state::{responses, responses_redis, responses_sqlite};
    let backend: Arc<dyn responses::Backend> = match &args.redis {
        Some(url) => Arc::new(responses_redis::Redis::new(url, &args.redis_prefix)?),
        None => {
            let db = responses_sqlite::Sqlite::open(std::path::Path::new(&args.data))?;
            let every =
                (args.responses_ttl / 2).clamp(Duration::from_secs(1), Duration::from_secs(600));
            db.spawn_purger(every);
            Arc::new(db)
        }
    };
    log::info!(
        "stored responses: {} (kept {}s, {} bytes a record, {} bytes a key)",
        match &args.redis {
            Some(_) => "redis".to_string(),
            None => format!("{}/{}", args.data, responses_sqlite::FILE),
        },
        args.responses_ttl.as_secs(),
        args.responses_max_record_bytes,
        args.responses_key_quota_bytes
    );
    Ok(responses::ResponseStore::new(backend, args.responses_ttl)
        .with_limits(
            args.responses_max_record_bytes,
            args.responses_key_quota_bytes,
        )
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
    // (a family C `?key=`, an Authorization header): never above info.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .filter_module("pingora_core", log::LevelFilter::Info)
        .filter_module("pingora_proxy", log::LevelFilter::Info)
        .init();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("switchboard: {e}");
            std::process::exit(2);
        }
    };
    let snapshot = match Snapshot::load(&args.catalog, &args.keys) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("switchboard: invalid configuration: {e}");
            std::process::exit(1);
        }
    };
    if args.check {
        println!(
            "ok: {} providers, {} models, {} keys",
            snapshot.catalog.providers.len(),
            snapshot.catalog.models.len(),
            snapshot.keys.len()
        );
        return;
    }
    let conf = match server_conf(args.conf.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("switchboard: invalid Pingora configuration: {e}");
            std::process::exit(1);
        }
    };
    let opt = Opt {
        upgrade: args.upgrade,
        daemon: args.daemon,
        nocapture: false,
        test: args.test,
        conf: None,
    };
    let mut server = Server::new_with_opt_and_conf(opt, conf);
    server.bootstrap();
    if let Some(k) = &args.admin_key {
        // Scrubbed from everything relayed or logged, like the configured keys.
        switchboard::secrets::hold_process_secret(k);
    }
    let rt = Arc::new(Runtime::new(
        snapshot,
        ConfigPaths {
            catalog: args.catalog.clone(),
            keys: args.keys.clone(),
        },
    ));
    if let Err(e) = switchboard::reload::spawn(rt.clone()) {
        log::error!("hot reload disabled: {e}");
    }
    let mut gateway = Gateway::new(rt.clone(), args.settings.clone());
    let (usage_ledger, ledger_reader) = match ledger::open(
        std::path::Path::new(&args.data),
        args.database.as_deref(),
        args.ledger.clone(),
        gateway.metrics.clone(),
    ) {
        Ok((l, r)) => (Arc::new(l), r),
        Err(e) => {
            eprintln!("switchboard: cannot open the usage ledger: {e}");
            std::process::exit(1);
        }
    };
    gateway.ledger = Some(usage_ledger.clone());
    server.add_service(pingora_core::services::background::background_service(
        "usage ledger",
        ledger::LedgerService(usage_ledger.clone()),
    ));
    let limits_cfg = LimitsConfig {
        data_dir: Some(args.data.clone().into()),
        redis: args.redis.clone(),
        redis_prefix: args.redis_prefix.clone(),
        fail: if args.redis_fail == "closed" {
            FailMode::Closed
        } else {
            FailMode::Open
        },
    };
    match Limits::open(&limits_cfg, gateway.metrics.clone()) {
        Ok(l) => gateway.limits = Arc::new(l),
        Err(e) => {
            eprintln!("switchboard: cannot open the limits store: {e}");
            std::process::exit(1);
        }
    }
    if let Some(endpoint) = &args.otlp_endpoint {
        match switchboard::telemetry::Telemetry::from_endpoint(endpoint) {
            Ok(t) => gateway.telemetry = Some(Arc::new(t)),
            Err(e) => {
                eprintln!("switchboard: {e}");
                std::process::exit(1);
            }
        }
    }
    let telemetry = gateway.telemetry.clone();
    match responses_store(&args, &gateway) {
        Ok(store) => gateway.responses = Arc::new(store),
        Err(e) => {
            eprintln!("switchboard: {e}");
            std::process::exit(1);
        }
    }
    let metrics_app = switchboard::metrics::MetricsApp {
        metrics: gateway.metrics.clone(),
        rt: rt.clone(),
        admin: Arc::new(
            switchboard::admin::Admin::new(args.admin_key.as_deref(), Some(ledger_reader))
                .with_limits(gateway.limits.clone(), rt),
        ),
    };
    let mut metrics_service = pingora_core::services::listening::Service::new(
        "metrics".to_string(),
        Guarded::new(
            "metrics listener",
            Served(metrics_app),
            args.metrics_clients,
        ),
    );
    metrics_service.add_tcp(&args.metrics);
    server.add_service(metrics_service);
    let mut service = pingora_core::services::listening::Service::new(
        "switchboard".to_string(),
        Guarded::new(
            "client listener",
            pingora_proxy::http_proxy(&server.configuration, gateway),
            args.clients,
        ),
    );
    service.add_listener(client_listener(&args.listen));
    server.add_service(service);
    log::info!(
        "switchboard listening on {} (catalog {}, keys {}, metrics {}, admin API {}, limits {})",
        args.listen,
        args.catalog,
        args.keys,
        args.metrics,
        if args.admin_key.is_some() {
            "on"
        } else {
            "off"
        },
        match &args.redis {
            Some(url) => format!(
                "in Redis {}, failing {}",
                url.rsplit_once('@').map_or(url.as_str(), |(_, host)| host),
                args.redis_fail
            ),
            None => format!("embedded, spend in {}/limits.sqlite", args.data),
        }
    );
    // `run` returns once Pingora has shut down (SIGTERM: after the grace
    // period and the drain; SIGINT: at once), every request logged: then what
    // the ledger still holds is written before the process exits.
    server.run(pingora_core::server::RunArgs::default());
    switchboard::proxy::access::flush();
    usage_ledger.close(Duration::from_secs(10));
    if let Some(t) = telemetry {
        t.shutdown();
    }
    std::process::exit(0);
}
