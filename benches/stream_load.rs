//! Streams at scale: many concurrent server-sent-event streams, each a slow
//! "token" trickle, through the gateway and straight to the upstream, to
//! measure memory per open stream and the time to first byte the gateway adds.
//!
//! Run by `benches/load/run.sh` (which starts the gateway and reads its memory);
//! `cargo bench` alone only prints the usage. Two roles, one binary:
//!
//! ```text
//! stream_load upstream --listen 127.0.0.1:PORT [--interval-ms 100] [--tokens 50]
//! stream_load client --target 127.0.0.1:PORT --path PATH --body-file FILE
//!             [--header 'name: value']... [--streams 10000] [--ramp-ms 2000]
//!             [--expect-frames N] [--timeout-s 60] [--watch-pid PID] [--out FILE]
//!             [--probes P] [--probe-at-ms MS] [--probe-gap-ms 10]
//! ```
//!
//! `upstream` answers every `POST` (any path) with an OpenAI
//! `chat.completion.chunk` stream in chunked transfer coding: the response head
//! and a role frame at once, then one content frame every `--interval-ms` for
//! `--tokens` frames, then a finish frame, a usage frame and `data: [DONE]`
//! (`tokens + 4` data lines in all, `[DONE]` included). Keep-alive is supported.
//!
//! `client` opens `--streams` connections, spread evenly over `--ramp-ms`, sends
//! one request on each and reads the whole stream: status 200, every data line
//! counted, `[DONE]` seen, the body ended properly (chunked, content-length or
//! close). `--probes` more streams start at `--probe-at-ms` (default: the end of
//! the ramp + 500 ms), one every `--probe-gap-ms`, while the others are all open;
//! their times are reported apart (`PROBE_*`), as the time to first byte at full
//! concurrency, free of the ramp's connection storm. It reports errors by kind, peak concurrently open streams, time to the
//! first response byte (TTFB) and to the first `data:` line (TTFF) as p50/p90/p99
//! from the request write, and, with `--watch-pid`, the highest VmRSS of that
//! process sampled every 50 ms plus its VmHWM at the end. Results go to stdout and,
//! with `--out`, to a file of `KEY=value` lines a shell can source. Every loop is
//! bounded: each stream has `--timeout-s`, the whole run `ramp + timeout + 5 s`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const USAGE: &str = "\
usage:
  stream_load upstream --listen 127.0.0.1:PORT [--interval-ms 100] [--tokens 50]
  stream_load client --target 127.0.0.1:PORT --path PATH --body-file FILE
              [--header 'name: value']... [--streams 10000] [--ramp-ms 2000]
              [--expect-frames N] [--timeout-s 60] [--watch-pid PID] [--out FILE]
              [--probes P] [--probe-at-ms RAMP+500] [--probe-gap-ms 10]
(run by benches/load/run.sh; see the top of benches/stream_load.rs)";

type Res<T> = Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` runs every bench target with `--bench`: nothing to do alone.
    let role = args.first().filter(|a| !a.starts_with("--")).cloned();
    let code = match role.as_deref() {
        Some("upstream") => run(upstream_main(&args[1..])),
        Some("client") => run(client_main(&args[1..])),
        _ => {
            println!("stream_load: needs a gateway; run benches/load/run.sh\n{USAGE}");
            0
        }
    };
    std::process::exit(code);
}

fn run(fut: impl std::future::Future<Output = Res<()>>) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stream_load: cannot start tokio: {e}");
            return 1;
        }
    };
    match rt.block_on(fut) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("stream_load: {e}\n{USAGE}");
            2
        }
    }
}

/// `--name value` options; `--header` may repeat.
struct Opts(Vec<(String, String)>);

impl Opts {
    fn parse(args: &[String]) -> Res<Opts> {
        let mut out = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let name = a
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {a:?}"))?;
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => (
                    name.to_string(),
                    it.next()
                        .ok_or_else(|| format!("--{name} needs a value"))?
                        .clone(),
                ),
            };
            out.push((name, value));
        }
        Ok(Opts(out))
    }
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
    fn num(&self, name: &str, default: u64) -> Res<u64> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name}: not a number: {v:?}")),
        }
    }
    fn req(&self, name: &str) -> Res<&str> {
        self.get(name)
            .ok_or_else(|| format!("--{name} is required"))
    }
}

// ---------------------------------------------------------------- upstream

const MODEL: &str = "gpt-5-mini-2025-08-07";

fn chunk(frame: &str) -> Vec<u8> {
    let mut v = format!("{:x}\r\n", frame.len()).into_bytes();
    v.extend_from_slice(frame.as_bytes());
    v.extend_from_slice(b"\r\n");
    v
}

fn oa_frame(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-trickle\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\
\"model\":\"{MODEL}\",\"system_fingerprint\":null,\"choices\":[{{\"index\":0,\"delta\":{delta},\
\"logprobs\":null,\"finish_reason\":{finish}}}]}}\n\n"
    )
}

async fn upstream_main(args: &[String]) -> Res<()> {
    let o = Opts::parse(args)?;
    let listen: SocketAddr = o
        .req("listen")?
        .parse()
        .map_err(|e| format!("--listen: {e}"))?;
    let interval = Duration::from_millis(o.num("interval-ms", 100)?);
    let tokens = o.num("tokens", 50)? as usize;
    grow_fd_table(65_536);
    let sock = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    sock.set_reuseaddr(true).map_err(|e| e.to_string())?;
    sock.bind(listen)
        .map_err(|e| format!("bind {listen}: {e}"))?;
    let listener = sock.listen(8192).map_err(|e| e.to_string())?;
    println!("listening on {listen}");
    let served = Arc::new(AtomicU64::new(0));
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                eprintln!("stream_load upstream: accept: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let served = served.clone();
        tokio::spawn(async move {
            let _ = serve_conn(stream, interval, tokens, served).await;
        });
    }
}

/// Reads one request (head and content-length body); false on a clean EOF.
async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let head_end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > 64 << 10 {
            return Err(std::io::Error::other("request head too large"));
        }
        let mut tmp = [0u8; 4096];
        let n = s.read(&mut tmp).await?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(false)
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            };
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut tmp = [0u8; 8192];
    while buf.len() < head_end + len {
        let n = s.read(&mut tmp).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    buf.drain(..head_end + len);
    Ok(true)
}

async fn serve_conn(
    mut s: TcpStream,
    interval: Duration,
    tokens: usize,
    served: Arc<AtomicU64>,
) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut buf = Vec::new();
    while read_request(&mut s, &mut buf).await? {
        let start = tokio::time::Instant::now();
        let mut out =
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
transfer-encoding: chunked\r\n\r\n"
                .to_vec();
        out.extend(chunk(&oa_frame(
            r#"{"role":"assistant","content":""}"#,
            "null",
        )));
        s.write_all(&out).await?;
        for i in 0..tokens {
            tokio::time::sleep_until(start + interval * (i as u32 + 1)).await;
            let delta = format!(r#"{{"content":" tok{i}"}}"#);
            s.write_all(&chunk(&oa_frame(&delta, "null"))).await?;
        }
        let mut tail = chunk(&oa_frame("{}", r#""stop""#));
        tail.extend(chunk(&format!(
            "data: {{\"id\":\"chatcmpl-trickle\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\
\"model\":\"{MODEL}\",\"choices\":[],\"usage\":{{\"prompt_tokens\":42,\"completion_tokens\":{tokens},\
\"total_tokens\":{}}}}}\n\n",
            42 + tokens
        )));
        tail.extend(chunk("data: [DONE]\n\n"));
        tail.extend_from_slice(b"0\r\n\r\n");
        s.write_all(&tail).await?;
        served.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------- client

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Fail {
    Connect,
    Write,
    Status,
    Read,
    Truncated,
    Frames,
    Timeout,
}

impl Fail {
    fn name(self) -> &'static str {
        match self {
            Fail::Connect => "connect",
            Fail::Write => "write",
            Fail::Status => "status",
            Fail::Read => "read",
            Fail::Truncated => "truncated",
            Fail::Frames => "frames",
            Fail::Timeout => "timeout",
        }
    }
}

struct Outcome {
    ttfb_us: u64,
    ttff_us: u64,
}

#[derive(Default)]
struct Shared {
    open: AtomicUsize,
    peak_open: AtomicUsize,
    done: AtomicUsize,
    failures: Mutex<Vec<(Fail, String)>>,
    /// (is a probe, outcome) per finished stream.
    ok: Mutex<Vec<(bool, Outcome)>>,
}

/// Incremental body reader: chunked, content-length or until close.
enum Body {
    Chunked(ChunkState),
    Length(usize),
    Close,
}

enum ChunkState {
    Size(Vec<u8>),
    Data(usize),
    DataEnd(usize),
    Trailer(Vec<u8>),
    Done,
}

/// Counts SSE `data:` lines across arbitrary splits.
#[derive(Default)]
struct SseCount {
    line: Vec<u8>,
    data_lines: usize,
    done: bool,
}

impl SseCount {
    fn push(&mut self, mut b: &[u8]) -> bool {
        let mut first_data = false;
        while let Some(p) = b.iter().position(|&c| c == b'\n') {
            self.line.extend_from_slice(&b[..p]);
            let l = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
            if let Some(d) = l.strip_prefix(b"data:") {
                self.data_lines += 1;
                first_data |= self.data_lines == 1;
                if d.trim_ascii() == b"[DONE]" {
                    self.done = true;
                }
            }
            self.line.clear();
            b = &b[p + 1..];
        }
        if self.line.len() < 1 << 20 {
            self.line.extend_from_slice(b);
        }
        first_data
    }
}

impl Body {
    /// Feeds raw bytes; returns decoded payload bytes and whether the body is complete.
    fn feed(&mut self, mut raw: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        match self {
            Body::Close => {
                out.extend_from_slice(raw);
                Ok(false)
            }
            Body::Length(left) => {
                let n = raw.len().min(*left);
                out.extend_from_slice(&raw[..n]);
                *left -= n;
                Ok(*left == 0)
            }
            Body::Chunked(st) => {
                while !raw.is_empty() {
                    match st {
                        ChunkState::Size(line) => {
                            let p = raw.iter().position(|&c| c == b'\n');
                            let take = p.map_or(raw.len(), |p| p + 1);
                            line.extend_from_slice(&raw[..take]);
                            raw = &raw[take..];
                            if p.is_some() {
                                let text = String::from_utf8_lossy(line);
                                let hex = text.trim().split(';').next().unwrap_or("");
                                let size = usize::from_str_radix(hex.trim(), 16)
                                    .map_err(|_| format!("bad chunk size {text:?}"))?;
                                *st = if size == 0 {
                                    ChunkState::Trailer(Vec::new())
                                } else {
                                    ChunkState::Data(size)
                                };
                            } else if line.len() > 1024 {
                                return Err("chunk size line too long".into());
                            }
                        }
                        ChunkState::Data(left) => {
                            let n = raw.len().min(*left);
                            out.extend_from_slice(&raw[..n]);
                            raw = &raw[n..];
                            *left -= n;
                            if *left == 0 {
                                *st = ChunkState::DataEnd(2);
                            }
                        }
                        ChunkState::DataEnd(left) => {
                            let n = raw.len().min(*left);
                            raw = &raw[n..];
                            *left -= n;
                            if *left == 0 {
                                *st = ChunkState::Size(Vec::new());
                            }
                        }
                        ChunkState::Trailer(line) => {
                            let p = raw.iter().position(|&c| c == b'\n');
                            let take = p.map_or(raw.len(), |p| p + 1);
                            line.extend_from_slice(&raw[..take]);
                            raw = &raw[take..];
                            if p.is_some() {
                                if line.trim_ascii().is_empty() {
                                    *st = ChunkState::Done;
                                    return Ok(true);
                                }
                                line.clear();
                            }
                        }
                        ChunkState::Done => return Ok(true),
                    }
                }
                Ok(matches!(st, ChunkState::Done))
            }
        }
    }
}

struct Request {
    target: SocketAddr,
    bytes: Vec<u8>,
    expect_frames: Option<usize>,
}

async fn one_stream(req: &Request, sh: &Shared) -> Result<Outcome, (Fail, String)> {
    let mut s = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(req.target))
        .await
        .map_err(|_| (Fail::Connect, "connect timed out".to_string()))?
        .map_err(|e| (Fail::Connect, e.to_string()))?;
    let _ = s.set_nodelay(true);
    let open = sh.open.fetch_add(1, Ordering::SeqCst) + 1;
    sh.peak_open.fetch_max(open, Ordering::SeqCst);
    // Decrements on every exit, including a timeout dropping this future.
    struct Open<'a>(&'a AtomicUsize);
    impl Drop for Open<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let _open = Open(&sh.open);
    exchange(&mut s, req).await
}

async fn exchange(s: &mut TcpStream, req: &Request) -> Result<Outcome, (Fail, String)> {
    let sent = Instant::now();
    s.write_all(&req.bytes)
        .await
        .map_err(|e| (Fail::Write, e.to_string()))?;
    let mut buf = vec![0u8; 4096];
    let mut head = Vec::new();
    let mut ttfb = None;
    let (mut body, mut rest) = loop {
        let n = s
            .read(&mut buf)
            .await
            .map_err(|e| (Fail::Read, e.to_string()))?;
        if n == 0 {
            return Err((Fail::Truncated, "connection closed before the head".into()));
        }
        ttfb.get_or_insert_with(|| sent.elapsed());
        head.extend_from_slice(&buf[..n]);
        if let Some(p) = find(&head, b"\r\n\r\n") {
            let rest = head.split_off(p + 4);
            let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let status = text.get(9..12).unwrap_or("");
            if status != "200" {
                let mut msg = String::from_utf8_lossy(&rest).into_owned();
                msg.truncate(300);
                return Err((Fail::Status, format!("status {status}: {msg}")));
            }
            let has = |name: &str| text.lines().find_map(|l| l.strip_prefix(name));
            let body = if has("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
                Body::Chunked(ChunkState::Size(Vec::new()))
            } else if let Some(n) = has("content-length:").and_then(|v| v.trim().parse().ok()) {
                Body::Length(n)
            } else {
                Body::Close
            };
            break (body, rest);
        }
        if head.len() > 64 << 10 {
            return Err((Fail::Read, "response head too large".into()));
        }
    };
    let ttfb = ttfb.unwrap_or_default();
    let mut sse = SseCount::default();
    let mut ttff = None;
    let mut payload = Vec::new();
    loop {
        payload.clear();
        let complete = body
            .feed(&rest, &mut payload)
            .map_err(|e| (Fail::Read, e))?;
        if sse.push(&payload) && ttff.is_none() {
            ttff = Some(sent.elapsed());
        }
        if complete {
            break;
        }
        let n = s
            .read(&mut buf)
            .await
            .map_err(|e| (Fail::Read, e.to_string()))?;
        if n == 0 {
            if matches!(body, Body::Close) {
                break;
            }
            return Err((
                Fail::Truncated,
                format!(
                    "connection closed mid-body after {} data lines",
                    sse.data_lines
                ),
            ));
        }
        rest.clear();
        rest.extend_from_slice(&buf[..n]);
    }
    if !sse.done {
        return Err((
            Fail::Frames,
            format!("no data: [DONE] after {} data lines", sse.data_lines),
        ));
    }
    if let Some(want) = req.expect_frames {
        if sse.data_lines != want {
            return Err((
                Fail::Frames,
                format!("{} data lines, expected {want}", sse.data_lines),
            ));
        }
    }
    Ok(Outcome {
        ttfb_us: ttfb.as_micros() as u64,
        ttff_us: ttff.unwrap_or(ttfb).as_micros() as u64,
    })
}

/// Grows this process's descriptor table to `entries` up front, as the
/// gateway does (`src/listener/fdtable.rs`): a multi-threaded process that
/// grows it under load waits milliseconds each time it doubles, and the
/// streams measured would carry this tool's stalls. Best effort.
fn grow_fd_table(entries: usize) {
    // Any open descriptor serves to duplicate: stderr.
    let _ = switchboard::listener::fdtable::reserve(2, entries);
}

fn proc_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn client_main(args: &[String]) -> Res<()> {
    let o = Opts::parse(args)?;
    let target: SocketAddr = o
        .req("target")?
        .parse()
        .map_err(|e| format!("--target: {e}"))?;
    let path = o.req("path")?;
    let body_file = o.req("body-file")?;
    let body = std::fs::read(body_file).map_err(|e| format!("{body_file}: {e}"))?;
    let streams = o.num("streams", 10_000)? as usize;
    let ramp = Duration::from_millis(o.num("ramp-ms", 2000)?);
    let timeout = Duration::from_secs(o.num("timeout-s", 60)?);
    let expect_frames = o
        .get("expect-frames")
        .map(|_| o.num("expect-frames", 0))
        .transpose()?;
    let watch = o
        .get("watch-pid")
        .map(|_| o.num("watch-pid", 0))
        .transpose()?;
    let probes = o.num("probes", 0)? as usize;
    let probe_at = Duration::from_millis(o.num("probe-at-ms", ramp.as_millis() as u64 + 500)?);
    let probe_gap = Duration::from_millis(o.num("probe-gap-ms", 10)?);
    grow_fd_table(streams + probes + 64);
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: {target}\r\ncontent-type: application/json\r\n\
content-length: {}\r\n",
        body.len()
    );
    for h in o.all("header") {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    let req = Arc::new(Request {
        target,
        bytes,
        expect_frames: expect_frames.map(|n| n as usize),
    });
    let sh = Arc::new(Shared::default());
    let peak_rss = Arc::new(AtomicU64::new(0));
    let rss_at_peak_open = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let sampler = watch.map(|pid| {
        let (sh, peak_rss, at_peak, stop) = (
            sh.clone(),
            peak_rss.clone(),
            rss_at_peak_open.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut best_open = 0;
            loop {
                if let Some(kb) = proc_kb(pid as u32, "VmRSS:") {
                    peak_rss.fetch_max(kb, Ordering::Relaxed);
                    let open = sh.open.load(Ordering::Relaxed);
                    if open >= best_open {
                        best_open = open;
                        at_peak.store(kb, Ordering::Relaxed);
                    }
                }
                tokio::select! {
                    _ = stop.notified() => break,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        })
    });

    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..streams + probes {
        let (req, sh) = (req.clone(), sh.clone());
        let probe = i >= streams;
        let at = tokio::time::Instant::from_std(t0)
            + if probe {
                probe_at + probe_gap * (i - streams) as u32
            } else {
                ramp.mul_f64(i as f64 / streams.max(1) as f64)
            };
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            let r = match tokio::time::timeout(timeout, one_stream(&req, &sh)).await {
                Ok(r) => r,
                Err(_) => Err((Fail::Timeout, format!("stream not done in {timeout:?}"))),
            };
            match r {
                Ok(out) => {
                    if let Ok(mut v) = sh.ok.lock() {
                        v.push((probe, out));
                    }
                }
                Err((kind, msg)) => {
                    let msg = if probe { format!("probe: {msg}") } else { msg };
                    if let Ok(mut v) = sh.failures.lock() {
                        v.push((kind, msg));
                    }
                }
            }
            sh.done.fetch_add(1, Ordering::Relaxed);
        });
    }
    let deadline =
        ramp.max(probe_at + probe_gap * probes as u32) + timeout + Duration::from_secs(5);
    let all = async { while tasks.join_next().await.is_some() {} };
    let finished = tokio::time::timeout(deadline, all).await.is_ok();
    let elapsed = t0.elapsed();
    stop.notify_one();
    if let Some(h) = sampler {
        let _ = h.await;
    }

    let oks = sh
        .ok
        .lock()
        .map(|mut v| std::mem::take(&mut *v))
        .unwrap_or_default();
    let sorted = |probe: bool, f: fn(&Outcome) -> u64| {
        let mut v: Vec<u64> = oks
            .iter()
            .filter(|(p, _)| *p == probe)
            .map(|(_, o)| f(o))
            .collect();
        v.sort_unstable();
        v
    };
    let ttfb = sorted(false, |o| o.ttfb_us);
    let ttff = sorted(false, |o| o.ttff_us);
    let probe_ttfb = sorted(true, |o| o.ttfb_us);
    let probe_ttff = sorted(true, |o| o.ttff_us);
    let failures = sh.failures.lock().map(|v| v.clone()).unwrap_or_default();
    let unfinished = streams + probes - sh.done.load(Ordering::Relaxed);
    let mut by_kind = std::collections::BTreeMap::new();
    for (k, _) in &failures {
        *by_kind.entry(k.name()).or_insert(0usize) += 1;
    }
    let errors = failures.len() + unfinished;
    let ms = |us: u64| us as f64 / 1000.0;
    let mut kv = vec![
        ("STREAMS", (streams + probes).to_string()),
        ("OK", (ttfb.len() + probe_ttfb.len()).to_string()),
        ("ERRORS", errors.to_string()),
        ("UNFINISHED", unfinished.to_string()),
        ("PEAK_OPEN", sh.peak_open.load(Ordering::SeqCst).to_string()),
        ("ELAPSED_S", format!("{:.2}", elapsed.as_secs_f64())),
        ("TTFB_P50_MS", format!("{:.3}", ms(pct(&ttfb, 50.0)))),
        ("TTFB_P90_MS", format!("{:.3}", ms(pct(&ttfb, 90.0)))),
        ("TTFB_P99_MS", format!("{:.3}", ms(pct(&ttfb, 99.0)))),
        (
            "TTFB_MAX_MS",
            format!("{:.3}", ms(ttfb.last().copied().unwrap_or(0))),
        ),
        ("TTFF_P50_MS", format!("{:.3}", ms(pct(&ttff, 50.0)))),
        ("TTFF_P99_MS", format!("{:.3}", ms(pct(&ttff, 99.0)))),
        ("PROBES", probes.to_string()),
        ("PROBE_OK", probe_ttfb.len().to_string()),
        (
            "PROBE_TTFB_P50_MS",
            format!("{:.3}", ms(pct(&probe_ttfb, 50.0))),
        ),
        (
            "PROBE_TTFB_P90_MS",
            format!("{:.3}", ms(pct(&probe_ttfb, 90.0))),
        ),
        (
            "PROBE_TTFB_P99_MS",
            format!("{:.3}", ms(pct(&probe_ttfb, 99.0))),
        ),
        (
            "PROBE_TTFB_MAX_MS",
            format!("{:.3}", ms(probe_ttfb.last().copied().unwrap_or(0))),
        ),
        (
            "PROBE_TTFF_P50_MS",
            format!("{:.3}", ms(pct(&probe_ttff, 50.0))),
        ),
        (
            "PROBE_TTFF_P99_MS",
            format!("{:.3}", ms(pct(&probe_ttff, 99.0))),
        ),
        (
            "ERROR_KINDS",
            format!(
                "'{}'",
                by_kind
                    .iter()
                    .map(|(k, n)| format!("{k}:{n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        ),
    ];
    if let Some(pid) = watch {
        kv.push(("PEAK_RSS_KB", peak_rss.load(Ordering::Relaxed).to_string()));
        kv.push((
            "RSS_AT_PEAK_OPEN_KB",
            rss_at_peak_open.load(Ordering::Relaxed).to_string(),
        ));
        kv.push((
            "HWM_KB",
            proc_kb(pid as u32, "VmHWM:").unwrap_or(0).to_string(),
        ));
    }
    for (k, v) in &kv {
        println!("{k}={v}");
    }
    if !failures.is_empty() {
        eprintln!("first errors:");
        for (k, m) in failures.iter().take(5) {
            eprintln!("  {}: {m}", k.name());
        }
    }
    if !finished {
        eprintln!("stream_load: gave up waiting after {deadline:?}");
    }
    if let Some(out) = o.get("out") {
        let text: String = kv.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        std::fs::write(out, text).map_err(|e| format!("{out}: {e}"))?;
    }
    Ok(())
}
