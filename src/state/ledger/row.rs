//! A ledger row (one inference request) and the sums rows add up to: the
//! daily rollups and the groups of the usage API.

use super::calendar::{day_string, DAY_MS};
use crate::obs::outcome::AttemptNote;
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// One inference request, as the ledger keeps it (the access line's figures).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub request_id: String,
    /// When the request finished, unix milliseconds.
    pub time_ms: i64,
    /// The key's id, never the key.
    pub key_id: String,
    /// The key's team, when it is in one (docs/configuration.md "Teams").
    pub team: Option<String>,
    pub family: &'static str,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub upstream_protocol: Option<&'static str>,
    pub upstream_host: Option<String>,
    pub status: u16,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// Input tokens written to a cache (0 when the upstream reported none).
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// USD from the catalog's formula, exact to 1e-9 (docs/pricing.md).
    pub cost_usd: Option<f64>,
    pub latency_ms: f64,
    pub ttft_ms: Option<f64>,
    /// Every upstream attempt, in order (the access line's `tried`), at
    /// most [`MAX_ATTEMPTS`] of them.
    pub tried: Vec<AttemptNote>,
    /// What the gateway changed in the request (`x-switchboard-adjusted`),
    /// at most [`MAX_TEXT`] bytes; `None` when nothing was.
    pub adjusted: Option<String>,
    /// The error sent to the client, `kind: message`, at most [`MAX_TEXT`]
    /// bytes (messages are scrubbed of secrets when made).
    pub error: Option<String>,
}

/// The attempts a row keeps: the first ones (a request makes a handful; a
/// long fallback chain's tail is cut).
pub const MAX_ATTEMPTS: usize = 16;
/// The longest `adjusted` or `error` text a row keeps, in bytes.
pub const MAX_TEXT: usize = 1024;

impl Row {
    /// Sets the attempts, adjustments and error of a finished request within
    /// the row's bounds.
    pub fn with_details(
        mut self,
        mut tried: Vec<AttemptNote>,
        adjusted: Option<String>,
        error: Option<String>,
    ) -> Row {
        tried.truncate(MAX_ATTEMPTS);
        self.tried = tried;
        self.adjusted = adjusted.map(cut);
        self.error = error.map(cut);
        self
    }

    /// The attempts as the JSON array the ledger stores (`[]` when none),
    /// compactly: an attempt's provider and model only when they differ from
    /// the row's (a fallback's), and no null fields; the admin API fills
    /// them back in ([`expand_tried`]). Measured by `ledger::bytes_per_request`
    /// (docs/operations.md "Usage ledger").
    pub fn tried_json(&self) -> String {
        let mut out = Vec::with_capacity(64 * self.tried.len() + 2);
        self.write_tried(&mut out);
        // Always UTF-8: ASCII and whole `str`s are all that is written.
        String::from_utf8(out).unwrap_or_else(|_| "[]".into())
    }

    /// Appends [`Row::tried_json`]'s text to `out`, written by hand (the
    /// ledger's writer reuses one buffer for a batch's rows): the same bytes
    /// serde_json wrote for these fields in this order (a unit test
    /// compares the two), at half the instructions (1,060 → 517 a row).
    pub fn write_tried(&self, out: &mut Vec<u8>) {
        use crate::util::json_write as w;
        fn differs<'b>(v: &'b str, row: &Option<String>) -> Option<&'b str> {
            (row.as_deref() != Some(v)).then_some(v)
        }
        out.push(b'[');
        for (i, a) in self.tried.iter().enumerate() {
            out.extend_from_slice(if i == 0 { b"{" } else { b",{" });
            if let Some(p) = differs(&a.provider, &self.provider) {
                out.extend_from_slice(b"\"provider\":");
                w::string(out, p);
                out.push(b',');
            }
            if let Some(m) = differs(&a.model, &self.model) {
                out.extend_from_slice(b"\"model\":");
                w::string(out, m);
                out.push(b',');
            }
            out.extend_from_slice(b"\"upstream\":");
            w::string(out, &a.upstream);
            if let Some(s) = a.status {
                out.extend_from_slice(b",\"status\":");
                w::u64(out, u64::from(s));
            }
            if let Some(f) = a.failure {
                out.extend_from_slice(b",\"failure\":");
                w::string(out, f);
            }
            if let Some(c) = a.cooled_ms {
                out.extend_from_slice(b",\"cooled_ms\":");
                w::u64(out, c);
            }
            out.extend_from_slice(b",\"ms\":");
            w::u64(out, a.ms);
            out.push(b'}');
        }
        out.push(b']');
    }
}

/// The stored attempts (`tried_json`) in the access log's shape: each with
/// its provider and model (the row's when left out) and every field, null
/// when absent. Anything but an array of objects reads as none.
pub fn expand_tried(
    stored: Option<&str>,
    provider: Option<&str>,
    model: Option<&str>,
) -> serde_json::Value {
    use serde_json::Value;
    let Some(Value::Array(items)) = stored.and_then(|t| serde_json::from_str(t).ok()) else {
        return Value::Array(Vec::new());
    };
    let row = |v: Option<&str>| v.map_or(Value::Null, |s| Value::String(s.to_string()));
    Value::Array(
        items
            .into_iter()
            .filter_map(|item| {
                let Value::Object(mut o) = item else {
                    return None;
                };
                o.entry("provider").or_insert_with(|| row(provider));
                o.entry("model").or_insert_with(|| row(model));
                for field in ["upstream", "status", "failure", "cooled_ms", "ms"] {
                    o.entry(field).or_insert(Value::Null);
                }
                Some(Value::Object(o))
            })
            .collect(),
    )
}

/// `s` cut to at most [`MAX_TEXT`] bytes, at a character boundary.
fn cut(mut s: String) -> String {
    if s.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The current time in unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A token count as SQL integer (counts never come near `i64::MAX`).
pub fn sql_int(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// Sums of requests, tokens and cost: a rollup cell, or a group of the usage API.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Sums {
    pub requests: i64,
    /// Requests answered with a status of 400 or more.
    pub errors: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
    pub cost_usd: f64,
    /// Latencies summed, milliseconds (for a mean: over `requests`; rollups
    /// made before it was kept add 0).
    pub latency_ms: f64,
}

impl Sums {
    fn add_row(&mut self, r: &Row) {
        self.requests += 1;
        self.errors += i64::from(r.status >= 400);
        self.input_tokens += sql_int(r.input_tokens).unwrap_or(0);
        self.output_tokens += sql_int(r.output_tokens).unwrap_or(0);
        self.cached_tokens += sql_int(r.cached_tokens).unwrap_or(0);
        self.cache_write_tokens += sql_int(r.cache_write_tokens).unwrap_or(0);
        self.reasoning_tokens += sql_int(r.reasoning_tokens).unwrap_or(0);
        self.cost_usd += r.cost_usd.unwrap_or(0.0);
        self.latency_ms += r.latency_ms;
    }

    /// Adds `o` into these sums.
    pub fn add(&mut self, o: &Sums) {
        self.requests += o.requests;
        self.errors += o.errors;
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cached_tokens += o.cached_tokens;
        self.cache_write_tokens += o.cache_write_tokens;
        self.reasoning_tokens += o.reasoning_tokens;
        self.cost_usd += o.cost_usd;
        self.latency_ms += o.latency_ms;
    }
}

/// A rollup cell's key: UTC day (`YYYY-MM-DD`), key id, provider, model
/// (`""` for a request that failed before its model was known).
pub type DailyKey = (String, String, String, String);

/// A rollup cell's figures: the key's team (`""`: none; a key moved to
/// another team within the day has the day's cell under its latest) and
/// the sums.
pub type DailyCell = (String, Sums);

/// A batch summed per UTC day, key and model: what the batch adds to the rollups.
pub fn rollup(rows: &[Row]) -> BTreeMap<DailyKey, DailyCell> {
    let mut out: BTreeMap<DailyKey, DailyCell> = BTreeMap::new();
    // A batch's rows of one cell mostly come one after another: the cell
    // is looked up (its key made) when the run of rows changes cell, not
    // once a row.
    let mut run: Option<(&Row, i64, &mut DailyCell)> = None;
    for r in rows {
        let day = r.time_ms.div_euclid(DAY_MS);
        let cell = match run {
            Some((first, d, cell)) if d == day && same_cell(first, r) => cell,
            _ => {
                let k = (
                    day_string(day),
                    r.key_id.clone(),
                    r.provider.clone().unwrap_or_default(),
                    r.model.clone().unwrap_or_default(),
                );
                out.entry(k).or_default()
            }
        };
        if let Some(t) = &r.team {
            t.clone_into(&mut cell.0);
        }
        cell.1.add_row(r);
        run = Some((r, day, cell));
    }
    out
}

/// Whether two rows of one day add to one rollup cell (key, provider, model;
/// an absent provider or model is the empty one).
fn same_cell(a: &Row, b: &Row) -> bool {
    a.key_id == b.key_id
        && a.provider.as_deref().unwrap_or("") == b.provider.as_deref().unwrap_or("")
        && a.model.as_deref().unwrap_or("") == b.model.as_deref().unwrap_or("")
}

/// A row with test figures: 10 input, 5 output and 2 reasoning tokens, 0.5 USD.
#[cfg(test)]
pub(super) fn test_row(key: &str, model: &str, time_ms: i64, status: u16) -> Row {
    Row {
        request_id: "r".into(),
        time_ms,
        key_id: key.into(),
        team: None,
        family: "openai",
        provider: Some("openai".into()),
        model: Some(model.into()),
        upstream_protocol: Some("openai"),
        upstream_host: Some("h".into()),
        status,
        input_tokens: Some(10),
        output_tokens: Some(5),
        cached_tokens: None,
        cache_write_tokens: Some(3),
        reasoning_tokens: Some(2),
        cost_usd: Some(0.5),
        latency_ms: 1.0,
        ttft_ms: None,
        tried: Vec::new(),
        adjusted: None,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, model: &str, time_ms: i64, status: u16) -> Row {
        test_row(key, model, time_ms, status)
    }

    #[test]
    fn rollup_sums_per_day_key_model() {
        let rows = [
            row("a", "m", 0, 200),
            row("a", "m", DAY_MS - 1, 500),
            row("a", "m", DAY_MS, 200),
            row("b", "m", 0, 200),
        ];
        let r = rollup(&rows);
        assert_eq!(r.len(), 3);
        let (_, first) = &r[&(
            "1970-01-01".to_string(),
            "a".to_string(),
            "openai".to_string(),
            "m".to_string(),
        )];
        assert_eq!((first.requests, first.errors), (2, 1));
        assert_eq!((first.input_tokens, first.reasoning_tokens), (20, 4));
        assert_eq!(first.cache_write_tokens, 6);
        assert_eq!(first.cost_usd, 1.0);
    }

    fn note_of() -> AttemptNote {
        AttemptNote {
            provider: "p".into(),
            model: "m".into(),
            upstream: "u".into(),
            status: Some(503),
            failure: Some("status_5xx"),
            cooled_ms: Some(1000),
            ms: 7,
        }
    }

    /// The attempts as serde_json writes them (what `tried_json` wrote
    /// before it was written by hand).
    fn tried_by_serde(r: &Row) -> String {
        #[derive(serde::Serialize)]
        struct Stored<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            provider: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            model: Option<&'a str>,
            upstream: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: Option<u16>,
            #[serde(skip_serializing_if = "Option::is_none")]
            failure: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            cooled_ms: Option<u64>,
            ms: u64,
        }
        fn differs<'b>(v: &'b str, row: &Option<String>) -> Option<&'b str> {
            (row.as_deref() != Some(v)).then_some(v)
        }
        let stored: Vec<Stored<'_>> = r
            .tried
            .iter()
            .map(|a| Stored {
                provider: differs(&a.provider, &r.provider),
                model: differs(&a.model, &r.model),
                upstream: &a.upstream,
                status: a.status,
                failure: a.failure,
                cooled_ms: a.cooled_ms,
                ms: a.ms,
            })
            .collect();
        serde_json::to_string(&stored).unwrap()
    }

    #[test]
    fn tried_is_written_as_serde_wrote_it() {
        let mut r = row("a", "m", 0, 200);
        r.provider = Some("p".into());
        assert_eq!(r.tried_json(), tried_by_serde(&r));
        let odd = AttemptNote {
            provider: "q\"\\\u{1}é\n".into(),
            model: "m/\u{7f}\t".into(),
            upstream: "h\u{1f}:443".into(),
            status: None,
            failure: None,
            cooled_ms: Some(u64::MAX),
            ms: 0,
        };
        let plain = AttemptNote {
            status: Some(200),
            failure: None,
            cooled_ms: None,
            provider: "p".into(),
            model: "m".into(),
            ..note_of()
        };
        for tried in [
            vec![note_of()],
            vec![plain.clone()],
            vec![odd.clone(), plain.clone(), note_of()],
            vec![plain, odd],
        ] {
            r.tried = tried;
            let mut buf = b"kept".to_vec();
            r.write_tried(&mut buf);
            assert_eq!(buf[4..], *tried_by_serde(&r).as_bytes());
            assert_eq!(r.tried_json(), tried_by_serde(&r));
        }
    }

    #[test]
    fn details_are_bounded() {
        let note = note_of();
        let r = row("a", "m", 0, 502).with_details(
            vec![note; 40],
            Some("é".repeat(MAX_TEXT)),
            Some("invalid_request: x".into()),
        );
        assert_eq!(r.tried.len(), MAX_ATTEMPTS);
        let adjusted = r.adjusted.as_deref().unwrap();
        assert!(adjusted.len() <= MAX_TEXT && adjusted.len() > MAX_TEXT - 2);
        assert_eq!(r.error.as_deref(), Some("invalid_request: x"));
        // Stored without what the row says; read back whole.
        let stored = r.tried_json();
        assert!(stored.starts_with(r#"[{"provider":"p","upstream":"u","status":503,"failure":"status_5xx","cooled_ms":1000,"ms":7}"#), "{stored}");
        let v = expand_tried(Some(&stored), Some("openai"), Some("m"));
        assert_eq!(v[0]["status"], 503);
        assert_eq!(v[0]["failure"], "status_5xx");
        assert_eq!(v[0]["model"], "m");
        assert_eq!(v[0]["provider"], "p");
        let mut clean = row("a", "m", 0, 200);
        clean.provider = Some("p".into());
        let one = AttemptNote {
            status: Some(200),
            failure: None,
            cooled_ms: None,
            ..note_of()
        };
        clean.tried = vec![one.clone()];
        assert_eq!(
            clean.tried_json(),
            r#"[{"upstream":"u","status":200,"ms":7}]"#
        );
        let back = expand_tried(Some(&clean.tried_json()), Some("p"), Some("m"));
        assert_eq!(back, serde_json::to_value(vec![one]).unwrap());
        assert_eq!(test_row("a", "m", 0, 200).tried_json(), "[]");
        assert_eq!(expand_tried(None, None, None), serde_json::json!([]));
        assert_eq!(expand_tried(Some("{}"), None, None), serde_json::json!([]));
    }
}
