//! The access log (docs/operations.md "Access log"): one bare JSON object per request, one per line
//! on stdout, nothing before or after it (diagnostics go to stderr). Serialised
//! from a borrowed view of the request context into a per-thread buffer, then
//! queued whole and written in batches (at most 50 ms late), so that lines
//! never interleave and a request costs no write of its own.

use super::ctx::RequestCtx;
use crate::util::rfc3339::Rfc3339;
use serde::Serialize;
use std::cell::RefCell;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

/// One access-log line. Never the client's key; the path without its query
/// (Gemini clients may carry the key there).
#[derive(Serialize)]
pub struct AccessLine<'a> {
    pub time: Rfc3339,
    pub request_id: &'a str,
    pub key_id: Option<&'a str>,
    /// The key's team; only on the lines of keys in a team.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<&'a str>,
    pub method: &'a str,
    pub path: &'a str,
    /// The client's HTTP version: `1.0`, `1.1` or `2` (TLS or h2c).
    pub http_version: &'static str,
    pub family: &'a str,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
    pub upstream_protocol: Option<&'a str>,
    pub upstream_host: Option<&'a str>,
    pub attempts: u32,
    /// Each upstream attempt: provider, model, upstream id, status or
    /// failure, the cool-down it started, milliseconds.
    pub tried: &'a [super::attempt::AttemptNote],
    /// The model asked for, when a fallback (`model`) answered instead.
    pub fallback_from: Option<&'a str>,
    pub status: u16,
    /// The error kind (`invalid_request`, `authentication`, ...) when the request failed.
    pub error_type: Option<&'a str>,
    /// The error message sent to the client, or why the connection failed.
    pub error: Option<&'a str>,
    /// What the gateway changed in the request (docs/api.md "Adapt or refuse"), as in
    /// `x-switchboard-adjusted`; null when nothing was.
    pub adjusted: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// Input tokens written to a cache (0 when none were reported).
    pub cache_write_tokens: Option<u64>,
    /// Of those, the ones written to a one-hour cache.
    pub cache_write_1h_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// USD, from the catalog's formula (docs/pricing.md), exact to 1e-9.
    pub cost_usd: Option<f64>,
    pub latency_ms: f64,
    pub ttft_ms: Option<f64>,
    /// Unreadable upstream stream frames skipped; null when none.
    pub skipped_frames: Option<u32>,
    /// Continuations of a cut stream the client received; null when none.
    pub continued: Option<u32>,
}

impl<'a> AccessLine<'a> {
    /// The line for a finished request. `failure` is Pingora's error for a
    /// request that failed outside the gateway's own error responses.
    pub fn new(
        ctx: &'a RequestCtx,
        method: &'a str,
        path: &'a str,
        failure: Option<&'a str>,
    ) -> AccessLine<'a> {
        let (error_type, error) = match (&ctx.outcome.error, failure) {
            (Some(n), _) => (Some(n.kind), Some(n.message.as_str())),
            (None, Some(f)) => (Some("connection"), Some(f)),
            (None, None) => (None, None),
        };
        AccessLine {
            time: Rfc3339::now(),
            request_id: &ctx.request_id,
            key_id: ctx.key_id.as_deref(),
            team: ctx.team.as_deref().map(|t| t.id.as_str()),
            method,
            path,
            http_version: "1.1",
            family: ctx.outcome.family.name(),
            provider: ctx.outcome.provider.as_deref(),
            model: ctx.outcome.model.as_deref(),
            upstream_protocol: ctx.outcome.upstream_protocol.map(|f| f.name()),
            upstream_host: ctx.outcome.upstream_host.as_deref(),
            attempts: ctx.outcome.attempts,
            tried: &ctx.outcome.tried,
            fallback_from: ctx.outcome.fallback_from.as_deref(),
            status: ctx.outcome.status,
            error_type,
            error,
            adjusted: (!ctx.outcome.adjusted.is_empty()).then(|| ctx.outcome.adjusted.render()),
            // Written out, not `#[serde(flatten)]`, which makes the line a
            // map serialiser's work (S1 of the load benchmark: about 3% fewer
            // requests per second with it).
            input_tokens: ctx.outcome.usage.input_tokens,
            output_tokens: ctx.outcome.usage.output_tokens,
            cached_tokens: ctx.outcome.usage.cached_tokens,
            cache_write_tokens: ctx.outcome.usage.cache_write_tokens,
            cache_write_1h_tokens: ctx.outcome.usage.cache_write_1h_tokens,
            reasoning_tokens: ctx.outcome.usage.reasoning_tokens,
            cost_usd: ctx.outcome.usage.cost_usd(),
            latency_ms: ctx.started.elapsed().as_secs_f64() * 1000.0,
            ttft_ms: ctx.outcome.ttft.map(|d| d.as_secs_f64() * 1000.0),
            skipped_frames: Some(ctx.outcome.skipped_frames).filter(|n| *n > 0),
            continued: Some(ctx.outcome.continued).filter(|n| *n > 0),
        }
    }
}

impl AccessLine<'_> {
    /// Appends the line as JSON: byte for byte what serde_json writes for it
    /// (its `Serialize`, which the tests hold this to), without serde's
    /// machinery (about 14,000 instructions a line through serde, most of
    /// it escaping strings a byte at a time; `json_write` escapes them a
    /// word at a time).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        use crate::util::json_write as w;
        let s = |out: &mut Vec<u8>, v: Option<&str>| w::or_null(out, v, w::string);
        let n = |out: &mut Vec<u8>, v: Option<u64>| w::or_null(out, v, w::u64);
        out.extend_from_slice(b"{\"time\":\"");
        self.time.push(out);
        out.extend_from_slice(b"\",\"request_id\":");
        w::string(out, self.request_id);
        out.extend_from_slice(b",\"key_id\":");
        s(out, self.key_id);
        if let Some(team) = self.team {
            out.extend_from_slice(b",\"team\":");
            w::string(out, team);
        }
        out.extend_from_slice(b",\"method\":");
        w::string(out, self.method);
        out.extend_from_slice(b",\"path\":");
        w::string(out, self.path);
        out.extend_from_slice(b",\"http_version\":");
        w::string(out, self.http_version);
        out.extend_from_slice(b",\"family\":");
        w::string(out, self.family);
        out.extend_from_slice(b",\"provider\":");
        s(out, self.provider);
        out.extend_from_slice(b",\"model\":");
        s(out, self.model);
        out.extend_from_slice(b",\"upstream_protocol\":");
        s(out, self.upstream_protocol);
        out.extend_from_slice(b",\"upstream_host\":");
        s(out, self.upstream_host);
        out.extend_from_slice(b",\"attempts\":");
        w::u64(out, u64::from(self.attempts));
        out.extend_from_slice(b",\"tried\":[");
        for (i, t) in self.tried.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"provider\":");
            w::string(out, &t.provider);
            out.extend_from_slice(b",\"model\":");
            w::string(out, &t.model);
            out.extend_from_slice(b",\"upstream\":");
            w::string(out, &t.upstream);
            out.extend_from_slice(b",\"status\":");
            n(out, t.status.map(u64::from));
            out.extend_from_slice(b",\"failure\":");
            s(out, t.failure);
            out.extend_from_slice(b",\"cooled_ms\":");
            n(out, t.cooled_ms);
            out.extend_from_slice(b",\"ms\":");
            w::u64(out, t.ms);
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"fallback_from\":");
        s(out, self.fallback_from);
        out.extend_from_slice(b",\"status\":");
        w::u64(out, u64::from(self.status));
        out.extend_from_slice(b",\"error_type\":");
        s(out, self.error_type);
        out.extend_from_slice(b",\"error\":");
        s(out, self.error);
        out.extend_from_slice(b",\"adjusted\":");
        s(out, self.adjusted.as_deref());
        out.extend_from_slice(b",\"input_tokens\":");
        n(out, self.input_tokens);
        out.extend_from_slice(b",\"output_tokens\":");
        n(out, self.output_tokens);
        out.extend_from_slice(b",\"cached_tokens\":");
        n(out, self.cached_tokens);
        out.extend_from_slice(b",\"cache_write_tokens\":");
        n(out, self.cache_write_tokens);
        out.extend_from_slice(b",\"cache_write_1h_tokens\":");
        n(out, self.cache_write_1h_tokens);
        out.extend_from_slice(b",\"reasoning_tokens\":");
        n(out, self.reasoning_tokens);
        out.extend_from_slice(b",\"cost_usd\":");
        w::or_null(out, self.cost_usd, w::f64);
        out.extend_from_slice(b",\"latency_ms\":");
        w::f64(out, self.latency_ms);
        out.extend_from_slice(b",\"ttft_ms\":");
        w::or_null(out, self.ttft_ms, w::f64);
        out.extend_from_slice(b",\"skipped_frames\":");
        n(out, self.skipped_frames.map(u64::from));
        out.extend_from_slice(b",\"continued\":");
        n(out, self.continued.map(u64::from));
        out.push(b'}');
    }
}

/// A request's HTTP version as the access log names it.
pub fn version_name(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_09 => "0.9",
        http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

/// The usage-ledger row of a finished request (docs/operations.md "Usage ledger"): the access
/// line's figures, for billable requests only (authenticated inference, not
/// listings or local token counts). The attempts, the request's id, key id
/// and the outcome's provider, model and upstream host are moved into the
/// row, not copied (the request is over: this is their last reader), so the
/// row costs the worker no allocation of its own but its error and
/// adjustments.
pub fn ledger_row(ctx: &mut RequestCtx) -> Option<crate::state::ledger::Row> {
    if !ctx.billable {
        return None;
    }
    let adjusted = (!ctx.outcome.adjusted.is_empty()).then(|| ctx.outcome.adjusted.render());
    let error = ctx
        .outcome
        .error
        .as_ref()
        .map(|e| format!("{}: {}", e.kind, e.message));
    let key_id = ctx.key_id.take()?;
    let tried = std::mem::take(&mut ctx.outcome.tried);
    let row = crate::state::ledger::Row {
        request_id: std::mem::take(&mut ctx.request_id),
        time_ms: crate::state::ledger::now_ms(),
        key_id,
        team: ctx.team.as_ref().map(|t| t.id.clone()),
        family: ctx.outcome.family.name(),
        provider: ctx.outcome.provider.take(),
        model: ctx.outcome.model.take(),
        upstream_protocol: ctx.outcome.upstream_protocol.map(|f| f.name()),
        upstream_host: ctx.outcome.upstream_host.take(),
        status: ctx.outcome.status,
        input_tokens: ctx.outcome.usage.input_tokens,
        output_tokens: ctx.outcome.usage.output_tokens,
        cached_tokens: ctx.outcome.usage.cached_tokens,
        cache_write_tokens: ctx.outcome.usage.cache_write_tokens,
        reasoning_tokens: ctx.outcome.usage.reasoning_tokens,
        cost_usd: ctx.outcome.usage.cost_usd(),
        latency_ms: ctx.started.elapsed().as_secs_f64() * 1000.0,
        ttft_ms: ctx.outcome.ttft.map(|d| d.as_secs_f64() * 1000.0),
        tried: Vec::new(),
        adjusted: None,
        error: None,
    };
    Some(row.with_details(tried, adjusted, error))
}

thread_local! {
    static LINE: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(1024));
}

/// Lines gathered past this many bytes are written at once.
const FLUSH_BYTES: usize = 32 * 1024;
/// The longest a line waits for its write.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// Lines waiting for their write, whole lines only.
static PENDING: Mutex<Vec<u8>> = Mutex::new(Vec::new());
/// Held while pending lines are written, so batches leave in order.
static WRITING: Mutex<()> = Mutex::new(());
static FLUSHER: Once = Once::new();
/// Whether the flusher thread runs (else every line is written at once).
static FLUSHING: AtomicBool = AtomicBool::new(false);

/// Queues `line` for stdout as one JSON line. Lines are written in batches
/// (every [`FLUSH_EVERY`], or as soon as 32 KiB gather), so a request costs
/// no write of its own: under load a write per request was ~5% of the
/// gateway's CPU. A line is never split across writes. [`flush`] writes what
/// is pending (the binary calls it after a graceful shutdown).
pub fn write(line: &AccessLine<'_>) {
    let full = LINE.with(|cell| {
        let Ok(mut buf) = cell.try_borrow_mut() else {
            return false;
        };
        buf.clear();
        line.write_json(&mut buf);
        buf.push(b'\n');
        let full = match PENDING.lock() {
            Ok(mut p) => {
                p.extend_from_slice(&buf);
                p.len() >= FLUSH_BYTES
            }
            Err(_) => false,
        };
        // A rare huge line (a long error message) does not pin its buffer.
        if buf.capacity() > 64 * 1024 {
            *buf = Vec::with_capacity(1024);
        }
        full
    });
    FLUSHER.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(|| loop {
                std::thread::sleep(FLUSH_EVERY);
                flush();
            });
        match spawned {
            Ok(_) => FLUSHING.store(true, Ordering::Release),
            Err(e) => {
                log::warn!("access log flusher not started ({e}); lines are written as they come")
            }
        }
    });
    if full || !FLUSHING.load(Ordering::Acquire) {
        flush();
    }
}

/// Writes every pending access line to stdout, in order.
pub fn flush() {
    let Ok(_writing) = WRITING.lock() else {
        return;
    };
    let out = match PENDING.lock() {
        Ok(mut p) if !p.is_empty() => std::mem::replace(&mut *p, Vec::with_capacity(4096)),
        _ => return,
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(&out).and_then(|()| stdout.flush()) {
        log::debug!("access log lines not written: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::obs::outcome::ErrorNote;

    #[test]
    fn a_line_is_one_json_object() {
        let mut ctx = RequestCtx::new();
        ctx.request_id = "req_1".into();
        ctx.outcome.status = 400;
        ctx.outcome.error = Some(ErrorNote {
            kind: "invalid_request",
            message: "temperature: \"2.5\"\nis out of range".into(),
        });
        ctx.outcome.adjusted.drop_field("thinking");
        let line = AccessLine::new(&ctx, "POST", "/v1/chat/completions", None);
        let text = serde_json::to_string(&line).unwrap();
        assert!(!text.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error_type"], "invalid_request");
        assert_eq!(v["error"], "temperature: \"2.5\"\nis out of range");
        assert_eq!(v["adjusted"], "dropped=thinking");
        assert_eq!(v["attempts"], 0);
        assert_eq!(v["http_version"], "1.1");
        assert!(v["time"].as_str().unwrap().ends_with('Z'));
        let ok = RequestCtx::new();
        let v = serde_json::to_value(AccessLine::new(&ok, "GET", "/v1/models", None)).unwrap();
        assert!(v["error"].is_null() && v["adjusted"].is_null());
        let v = serde_json::to_value(AccessLine::new(&ok, "GET", "/", Some("reset"))).unwrap();
        assert_eq!(v["error_type"], "connection");
    }

    fn written(line: &AccessLine<'_>) -> String {
        let mut out = b"x".to_vec();
        line.write_json(&mut out);
        String::from_utf8(out.split_off(1)).unwrap()
    }

    /// Texts with what JSON escapes (quotes, backslashes, control
    /// characters), non-ASCII and plain runs longer than a word.
    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        "[a-z\"\\\u{0}-\u{1f}\u{7f}é€😀/ ]{0,24}"
    }

    fn float() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            any::<f64>(),
            (0u32..100_000).prop_map(|n| f64::from(n) / 1000.0),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(1e-9),
            Just(1.5e300),
        ]
    }

    proptest::proptest! {
        /// The hand-written line is serde_json's, byte for byte, whatever
        /// its strings, numbers and absent members.
        #[test]
        fn a_written_line_is_serde_jsons(
            strings in proptest::collection::vec(proptest::option::of(text()), 12),
            counts in proptest::collection::vec(proptest::option::of(proptest::num::u64::ANY), 8),
            floats in proptest::collection::vec(float(), 3),
            secs in -70_000_000_000i64..300_000_000_000,
            tried in proptest::collection::vec((text(), proptest::option::of(100u16..600), proptest::bool::ANY, proptest::num::u64::ANY), 0..3),
            small in proptest::collection::vec(proptest::num::u32::ANY, 3),
        ) {
            let tried: Vec<crate::obs::outcome::AttemptNote> = tried
                .into_iter()
                .map(|(t, status, failed, ms)| crate::obs::outcome::AttemptNote {
                    provider: t.clone(),
                    model: format!("m{t}"),
                    upstream: "u".into(),
                    status,
                    failure: failed.then_some("timeout"),
                    cooled_ms: failed.then_some(ms / 2),
                    ms,
                })
                .collect();
            let st = |i: usize| strings[i].as_deref();
            let line = AccessLine {
                time: Rfc3339 { secs, millis: counts[0].map(|n| (n % 1200) as u32) },
                request_id: st(0).unwrap_or("req_1"),
                key_id: st(1),
                team: st(2),
                method: st(3).unwrap_or("POST"),
                path: st(4).unwrap_or("/"),
                http_version: "2",
                family: st(5).unwrap_or("openai"),
                provider: st(6),
                model: st(7),
                upstream_protocol: st(8),
                upstream_host: st(9),
                attempts: small[0],
                tried: &tried,
                fallback_from: st(10),
                status: small[1] as u16,
                error_type: st(11),
                error: st(0),
                adjusted: strings[1].clone(),
                input_tokens: counts[1],
                output_tokens: counts[2],
                cached_tokens: counts[3],
                cache_write_tokens: counts[4],
                cache_write_1h_tokens: counts[5],
                reasoning_tokens: counts[6],
                cost_usd: counts[7].map(|_| floats[0]),
                latency_ms: floats[1],
                ttft_ms: counts[7].is_none().then_some(floats[2]),
                skipped_frames: Some(small[2]).filter(|n| n % 2 == 0),
                continued: Some(small[2]).filter(|n| n % 3 == 0),
            };
            proptest::prop_assert_eq!(written(&line), serde_json::to_string(&line).unwrap());
        }
    }
}
