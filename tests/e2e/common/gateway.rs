//! Starts the real `switchboard` binary on an ephemeral loopback port with a
//! test catalog and keys written to a fresh directory, and stops it on drop.

use super::http_client::{self, Request, Response};
use super::mock_upstream::{MockUpstream, Protocol};
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The client key every test catalog accepts.
pub const KEY: &str = "sk-test-key";
/// A key limited to `openai/*` models.
pub const LIMITED_KEY: &str = "sk-limited";
/// A key allowed two requests per minute.
pub const RPM_KEY: &str = "sk-rpm";
/// The provider key the test catalog's upstreams expect, per protocol.
pub fn provider_key(p: &str) -> String {
    format!("upstream-key-{p}")
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A scratch directory for one test, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let n = DIRS.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("switchboard-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

/// Writes a Pingora configuration file (`-c`) at `path`: its `version`,
/// then `settings` (YAML lines). Its path, as an argument.
pub fn pingora_conf(path: &std::path::Path, settings: &str) -> String {
    std::fs::write(path, format!("version: 1\n{settings}")).unwrap();
    path.display().to_string()
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free loopback port (bound then released), for a gateway to listen on.
///
/// Taken below the kernel's ephemeral range (32768+), where no outgoing
/// connection's source port and no other `bind(0)` lands, and never twice in
/// one test process: a port handed out here stays free until its gateway
/// binds it, so two gateways started side by side cannot meet on one port.
/// Each process starts at its own offset (from its pid) in the range.
pub fn free_port() -> u16 {
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicUsize = AtomicUsize::new(usize::MAX);
    let start = (std::process::id().wrapping_mul(7919)) % SPAN;
    let _ = NEXT.compare_exchange(
        usize::MAX,
        start as usize,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::SeqCst) as u32;
        let port = (LOW + n % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A catalog model entry with test defaults, `extra` merged over them.
pub fn model(id: &str, provider: &str, extra: Value) -> Value {
    let mut m = json!({
        "id": id, "provider": provider, "display_name": format!("Test {id}"),
        "description": format!("{id} for tests"), "created": 1767225600, "version": "1.0",
        "architecture": "decoder", "context_length": 200000, "max_output_tokens": 8192,
        "pricing": {"prompt": "0.000001", "completion": "0.000002"},
        "supported_parameters": ["temperature","top_p","top_k","max_tokens","stream","stop","tools","tool_choice","response_format","seed","reasoning",
            "frequency_penalty","presence_penalty","logit_bias","logprobs","n","metadata","service_tier","parallel_tool_calls","context_management","cache_control"],
        "supported_features": {"vision": true, "tool_use": true, "streaming": true},
        "supported_actions": ["complete"],
        "supported_generation_methods": ["generateContent","countTokens"],
        "defaults": {"temperature": 1.0, "top_p": 0.95, "top_k": 40},
        "protocols": ["openai","anthropic","gemini"]
    });
    if let (Some(m), Some(e)) = (m.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    m
}

/// A catalog whose providers all point at `mock`:
/// `openai` (openai), `anthropic` (anthropic), `google` (gemini), `deepseek` (openai+anthropic),
/// `nokey` (openai, key variable unset), `down` (openai, nothing listening),
/// `kimi` (anthropic only, accepted by family C), `flaky` (a dead openai
/// upstream first, then anthropic: failover).
///
/// Cross-protocol cells (client → upstream): A→B `claude-sonnet-4.7`, A→C
/// `gemini-3.1-pro`, B→A `gpt-5-any`, B→C `gemini-any`, C→A `deepseek/deepseek-v4-pro`,
/// C→B `kimi/kimi-2.6`.
pub fn catalog(mock: &MockUpstream) -> Value {
    let up = |p: Protocol| json!({"protocol": p.name(), "base_url": mock.base_url(p), "api_key_env": format!("SB_TEST_KEY_{}", p.name().to_uppercase())});
    let dead = format!("http://127.0.0.1:{}/v1", free_port());
    json!({
        "providers": [
            {"id": "openai", "families": ["openai"], "upstreams": [up(Protocol::OpenAi)]},
            {"id": "anthropic", "families": ["openai","anthropic"], "upstreams": [up(Protocol::Anthropic)]},
            {"id": "google", "families": ["openai","gemini"], "upstreams": [up(Protocol::Gemini)]},
            {"id": "deepseek", "families": ["openai","gemini"], "upstreams": [up(Protocol::OpenAi), up(Protocol::Anthropic)]},
            {"id": "nokey", "families": ["openai"], "upstreams": [{"protocol":"openai","base_url": mock.base_url(Protocol::OpenAi), "api_key_env": "SB_TEST_UNSET_KEY"}]},
            {"id": "down", "families": ["openai"], "upstreams": [{"protocol":"openai","base_url": dead, "api_key_env": "SB_TEST_KEY_OPENAI"}]},
            {"id": "kimi", "families": ["openai","gemini"], "upstreams": [up(Protocol::Anthropic)]},
            {"id": "flaky", "families": ["openai"], "upstreams": [
                {"protocol":"openai","base_url": format!("http://127.0.0.1:{}/v1", free_port()), "api_key_env": "SB_TEST_KEY_OPENAI"},
                up(Protocol::Anthropic)]}
        ],
        "models": [
            model("gpt-5", "openai", json!({"upstream_model": "gpt-5-2025-08-07", "protocols": ["openai"]})),
            model("claude-sonnet-4.7", "anthropic", json!({"upstream_model": "claude-sonnet-4-7", "protocols": ["openai","anthropic"]})),
            model("gemini-3.1-pro", "google", json!({"protocols": ["openai","gemini"]})),
            model("deepseek-v4-pro", "deepseek", json!({})),
            model("tiny", "openai", json!({"context_length": 1000, "max_output_tokens": 100,
                "supported_parameters": ["max_tokens","stream"], "supported_features": {"vision": false, "tool_use": false, "streaming": true}})),
            model("tiny-claude", "anthropic", json!({"context_length": 1000, "max_output_tokens": 100,
                "supported_parameters": ["max_tokens","stream"], "protocols": ["anthropic"]})),
            model("tiny-gemini", "google", json!({"context_length": 1000, "max_output_tokens": 100,
                "supported_parameters": ["max_tokens","stream"], "protocols": ["gemini"]})),
            model("orphan-key", "nokey", json!({})),
            model("offline", "down", json!({})),
            model("gpt-5-any", "openai", json!({})),
            model("gemini-any", "google", json!({})),
            model("kimi-2.6", "kimi", json!({})),
            model("flaky-model", "flaky", json!({}))
        ]
    })
}

/// The test keys file.
pub fn keys() -> Value {
    json!({"keys": [
        {"id": "test", "key": KEY},
        {"id": "limited", "key": LIMITED_KEY, "models": ["openai/*"]},
        {"id": "metered", "key": RPM_KEY, "rpm": 2},
        {"id": "hashed", "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
    ]})
}

/// A running gateway process.
pub struct Gateway {
    child: Child,
    pub addr: SocketAddr,
    pub metrics: SocketAddr,
    pub dir: TempDir,
}

impl Gateway {
    /// Starts the gateway with these files and extra arguments; waits until it answers.
    pub async fn start_with(catalog: &Value, keys: &Value, args: &[&str]) -> Gateway {
        Gateway::start_with_env(catalog, keys, args, &[]).await
    }

    /// As [`Gateway::start_with`], with extra environment variables.
    pub async fn start_with_env(
        catalog: &Value,
        keys: &Value,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Gateway {
        let gw = Gateway::launch(catalog, keys, args, env);
        gw.wait_ready(true).await;
        gw
    }

    /// As [`Gateway::start_with`] for a listener a plain HTTP/1.1 client
    /// cannot talk to (TLS): waits only until both listeners accept
    /// connections; the test checks the answers with its own client.
    pub async fn start_tls(catalog: &Value, keys: &Value, args: &[&str]) -> Gateway {
        let gw = Gateway::launch(catalog, keys, args, &[]);
        gw.wait_ready(false).await;
        gw
    }

    /// The process on these files, on free ports; not waited for.
    fn launch(catalog: &Value, keys: &Value, args: &[&str], env: &[(&str, &str)]) -> Gateway {
        let dir = TempDir::new();
        std::fs::write(
            dir.file("catalog.json"),
            serde_json::to_vec_pretty(catalog).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.file("keys.json"),
            serde_json::to_vec_pretty(keys).unwrap(),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Gateway::spawn(&dir, &dir, addr, metrics, args, env);
        Gateway {
            child,
            addr,
            metrics,
            dir,
        }
    }

    /// Waits until the client listener answers `/healthz` (or, unless
    /// `plain`, accepts a connection) and the metrics listener accepts.
    async fn wait_ready(&self, plain: bool) {
        let gw = self;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let up = if plain {
                http_client::send(gw.addr, &Request::get("/healthz"))
                    .await
                    .is_ok_and(|r| r.status == 200)
            } else {
                tokio::net::TcpStream::connect(gw.addr).await.is_ok()
            };
            if up {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "gateway did not start:\n{}",
                gw.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The metrics listener starts beside the client one: a test may
        // call it at once (on a loaded machine it came up a moment later).
        while tokio::net::TcpStream::connect(gw.metrics).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the metrics listener did not start:\n{}",
                gw.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts a new process with `-u` to take over this one's listening
    /// sockets (an upgrade): the same catalog, keys and addresses, its own
    /// directory (logs, data). Returns at once: the new process waits on
    /// the upgrade socket (`upgrade_sock`, from a `--conf` in `args`) until
    /// this one is sent SIGQUIT.
    pub fn spawn_successor(&self, args: &[&str]) -> Gateway {
        let dir = TempDir::new();
        let mut with_u = vec!["-u"];
        with_u.extend_from_slice(args);
        let child = Gateway::spawn(&self.dir, &dir, self.addr, self.metrics, &with_u, &[]);
        Gateway {
            child,
            addr: self.addr,
            metrics: self.metrics,
            dir,
        }
    }

    /// The gateway process on the files in `files`, logging into `dir`.
    fn spawn(
        files: &TempDir,
        dir: &TempDir,
        addr: SocketAddr,
        metrics: SocketAddr,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Child {
        let log = std::fs::File::create(dir.file("gateway.log")).unwrap();
        let access = std::fs::File::create(dir.file("access.log")).unwrap();
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("--catalog")
            .arg(files.file("catalog.json"))
            .arg("--keys")
            .arg(files.file("keys.json"))
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--metrics")
            .arg(metrics.to_string())
            // The test's own data directory (a later `--data` in `args` wins).
            .arg("--data")
            .arg(dir.file("data"))
            .args(args)
            .env("SB_TEST_KEY_OPENAI", provider_key("openai"))
            .env("SB_TEST_KEY_ANTHROPIC", provider_key("anthropic"))
            .env("SB_TEST_KEY_GEMINI", provider_key("gemini"))
            .env("SB_TEST_KEY_RESPONSES", provider_key("responses"))
            .env_remove("SB_TEST_UNSET_KEY")
            // The embedded store in the test's own directory (a `--data`
            // argument still wins), never the working directory's `data/`.
            .env("SWITCHBOARD_DATA", dir.file("data"))
            .env_remove("SWITCHBOARD_REDIS")
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(access)
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// Starts the gateway on the test catalog for `mock`.
    pub async fn start(mock: &MockUpstream) -> Gateway {
        Gateway::start_with(&catalog(mock), &keys(), &[]).await
    }

    /// Sends `req`, which must be refused with a 400; its error message
    /// (OpenAI's, Gemini's and Anthropic's shapes all carry `error.message`).
    pub async fn refused(&self, req: &Request) -> String {
        let r = self.send(req).await;
        assert_eq!(r.status, 400, "{}", r.text());
        r.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The access line of the request `id`, once written.
    pub async fn access_line(&self, id: &str) -> Value {
        super::families::eventually(Duration::from_secs(10), "the access-log line", || async {
            self.access_log()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["request_id"] == id)
        })
        .await
    }

    /// The gateway's diagnostic log (stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.file("gateway.log")).unwrap_or_default()
    }

    /// The gateway's access log (stdout) so far: one JSON object per line.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.file("access.log")).unwrap_or_default()
    }

    /// Sends one request on a new connection.
    pub async fn send(&self, req: &Request) -> Response {
        http_client::send(self.addr, req).await.unwrap()
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> Response {
        self.send(&Request::get(path)).await
    }

    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The number the process's `/proc/{pid}/{file}` shows first after
    /// `label` (`("status", "VmHWM:")` in kB, `("limits", "Max open files")`).
    pub fn proc_number(&self, file: &str, label: &str) -> u64 {
        let path = format!("/proc/{}/{file}", self.pid());
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text.lines().find(|l| l.starts_with(label)).unwrap();
        line[label.len()..]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no number in {path}: {line:?}"))
    }

    /// Sends the process `SIG{name}` (`TERM`, `INT`, `QUIT`, `HUP`).
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }

    /// Sends `SIG{name}` and waits (up to 30 s) for the process to exit
    /// cleanly.
    pub fn stop(&mut self, name: &str) {
        self.signal(name);
        let exit = self.wait_exit(Duration::from_secs(30));
        assert!(
            exit.is_some_and(|s| s.success()),
            "SIG{name}: {exit:?}\n{}",
            self.log()
        );
    }

    /// Waits up to `within` for the process to exit (after a signal): its status.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Rewrites the catalog file.
    pub fn write_catalog(&self, v: &Value) {
        write_atomically(
            &self.dir.file("catalog.json"),
            &serde_json::to_vec_pretty(v).unwrap(),
        );
    }

    /// Rewrites the keys file.
    pub fn write_keys(&self, v: &Value) {
        write_atomically(
            &self.dir.file("keys.json"),
            &serde_json::to_vec_pretty(v).unwrap(),
        );
    }
}

/// Replaces a file by renaming a sibling into place.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An authenticated request for `family` ("openai", "anthropic", "gemini") with `key`.
pub fn authed(family: &str, method_path: &str, key: &str, body: &Value) -> Request {
    let r = Request::post(method_path).json(body);
    match family {
        "openai" | "responses" => r.header("authorization", &format!("Bearer {key}")),
        "anthropic" => r
            .header("x-api-key", key)
            .header("anthropic-version", "2023-06-01"),
        _ => r.header("x-goog-api-key", key),
    }
}
