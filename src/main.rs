//! The `switchboard` binary: command line and environment, configuration
//! loading (refusing to start on an invalid file), the Pingora server, run.

use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::Server;
use std::sync::Arc;
use std::time::Duration;
use switchboard::proxy::{Gateway, Settings};
use switchboard::runtime::{ConfigPaths, Runtime, Snapshot};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "\
switchboard: a multi-protocol LLM gateway

USAGE:
  switchboard [--catalog PATH] [--keys PATH] [--listen ADDR] [--metrics ADDR]
              [-c PINGORA_YAML] [--max-body-bytes N] [--connect-timeout-ms N]
              [--read-timeout-ms N] [--data DIR] [--redis URL]
              [--responses-ttl-days N] [--check] [-d] [-u] [-t]
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
  --data DIR              data directory: the embedded store (stored responses in DIR/responses.sqlite) [SWITCHBOARD_DATA] (data/)
  --redis URL             fleet mode: keep stored responses in Redis, redis://host:port [SWITCHBOARD_REDIS]
  --redis-prefix P        prefix of every Redis key [SWITCHBOARD_REDIS_PREFIX] (switchboard:)
  --responses-ttl-days N  how long a stored response is kept [SWITCHBOARD_RESPONSES_TTL_DAYS] (30)
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
    check: bool,
    daemon: bool,
    upgrade: bool,
    test: bool,
    settings: Settings,
    data: String,
    redis: Option<String>,
    redis_prefix: String,
    /// How long stored responses are kept (`--responses-ttl-days`; the
    /// hidden `--responses-ttl-secs` for tests).
    responses_ttl: Duration,
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
        check: false,
        daemon: false,
        upgrade: false,
        test: false,
        settings: Settings::default(),
        data: env_or("SWITCHBOARD_DATA", "data"),
        redis: std::env::var("SWITCHBOARD_REDIS")
            .ok()
            .filter(|v| !v.is_empty()),
        redis_prefix: env_or("SWITCHBOARD_REDIS_PREFIX", "switchboard:"),
        responses_ttl: switchboard::state::responses::DEFAULT_TTL,
    };
    let mut numeric: Vec<(String, String)> = Vec::new();
    for (flag, var) in [
        ("--max-body-bytes", "SWITCHBOARD_MAX_BODY_BYTES"),
        ("--connect-timeout-ms", "SWITCHBOARD_CONNECT_TIMEOUT_MS"),
        ("--read-timeout-ms", "SWITCHBOARD_READ_TIMEOUT_MS"),
        ("--token-workers", "SWITCHBOARD_TOKEN_WORKERS"),
        ("--responses-ttl-days", "SWITCHBOARD_RESPONSES_TTL_DAYS"),
        ("--responses-ttl-secs", "SWITCHBOARD_RESPONSES_TTL_SECS"),
    ] {
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
            "--redis" => a.redis = Some(value(&mut it)?),
            "--redis-prefix" => a.redis_prefix = value(&mut it)?,
            "--max-body-bytes"
            | "--connect-timeout-ms"
            | "--read-timeout-ms"
            | "--token-workers"
            | "--responses-ttl-days"
            | "--responses-ttl-secs" => {
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
            "--responses-ttl-days" => {
                a.responses_ttl = Duration::from_secs(n.saturating_mul(24 * 3600))
            }
            "--responses-ttl-secs" => a.responses_ttl = Duration::from_secs(n),
            _ => settings.read_timeout = Duration::from_millis(n),
        }
    }
    a.settings = settings;
    Ok(a)
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
        "stored responses: {} (kept {}s)",
        match &args.redis {
            Some(_) => "redis".to_string(),
            None => format!("{}/{}", args.data, responses_sqlite::FILE),
        },
        args.responses_ttl.as_secs()
    );
    Ok(responses::ResponseStore::new(backend, args.responses_ttl)
        .count_failures_in(gateway.metrics.responses_store_failures.clone()))
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
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
    match responses_store(&args, &gateway) {
        Ok(store) => gateway.responses = Arc::new(store),
        Err(e) => {
            eprintln!("switchboard: {e}");
            std::process::exit(1);
        }
    }
    let metrics_app = switchboard::metrics::MetricsApp {
        metrics: gateway.metrics.clone(),
        rt,
    };
    let mut metrics_service = pingora_core::services::listening::Service::new(
        "metrics".to_string(),
        pingora_core::apps::http_app::HttpServer::new_app(metrics_app),
    );
    metrics_service.add_tcp(&args.metrics);
    server.add_service(metrics_service);
    let mut service = pingora_proxy::http_proxy_service(&server.configuration, gateway);
    service.add_tcp(&args.listen);
    server.add_service(service);
    log::info!(
        "switchboard listening on {} (catalog {}, keys {}, metrics {})",
        args.listen,
        args.catalog,
        args.keys,
        args.metrics
    );
    server.run_forever();
}
