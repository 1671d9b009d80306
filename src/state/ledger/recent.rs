//! The console's request list (`GET /admin/requests`, docs/operations.md
//! "Console"): the latest ledger rows, newest first, a page at a time. Pages
//! are keyset-paginated on (time, request id): the next page starts strictly
//! after the last row of this one, read from the time index (or the key's
//! (key, time) index), so a page costs the same on the first day and the
//! ninetieth, and rows written meanwhile never shift a page.

/// Rows a page holds unless `limit` says otherwise, and at most.
pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 200;

/// Where a page starts: strictly before this row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub time_ms: i64,
    pub request_id: String,
}

impl Cursor {
    /// `TIME_MS:REQUEST_ID`, as [`Cursor::render`] writes it.
    pub fn parse(s: &str) -> Option<Cursor> {
        let (t, id) = s.split_once(':')?;
        Some(Cursor {
            time_ms: t.parse().ok()?,
            request_id: id.to_string(),
        })
    }

    pub fn render(&self) -> String {
        format!("{}:{}", self.time_ms, self.request_id)
    }
}

/// Which statuses a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// Below 400.
    Ok,
    /// 400 or more.
    Error,
    Exactly(u16),
}

impl StatusFilter {
    /// `ok`, `error` or a status code.
    pub fn parse(s: &str) -> Option<StatusFilter> {
        match s {
            "ok" => Some(StatusFilter::Ok),
            "error" => Some(StatusFilter::Error),
            n => n
                .parse::<u16>()
                .ok()
                .filter(|n| (100..=599).contains(n))
                .map(StatusFilter::Exactly),
        }
    }

    /// The SQL condition on `status` (no parameter: the values are ours).
    pub fn sql(self) -> String {
        match self {
            StatusFilter::Ok => "status < 400".into(),
            StatusFilter::Error => "status >= 400".into(),
            StatusFilter::Exactly(n) => format!("status = {n}"),
        }
    }
}

/// A `GET /admin/requests` query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestsQuery {
    pub limit: usize,
    pub before: Option<Cursor>,
    /// Key id.
    pub key: Option<String>,
    /// `model_id` or `provider/model_id`.
    pub model: Option<String>,
    pub status: Option<StatusFilter>,
}

impl Default for RequestsQuery {
    fn default() -> Self {
        RequestsQuery {
            limit: DEFAULT_LIMIT,
            before: None,
            key: None,
            model: None,
            status: None,
        }
    }
}

/// One request as the list shows it: the ledger row's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRow {
    pub request_id: String,
    pub time_ms: i64,
    pub key_id: String,
    pub family: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub upstream_protocol: Option<String>,
    pub upstream_host: Option<String>,
    pub status: u16,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub reasoning_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub latency_ms: f64,
    pub ttft_ms: Option<f64>,
    /// The attempts as stored (a JSON array; null in rows written before it was kept).
    pub tried: Option<String>,
    pub adjusted: Option<String>,
    pub error: Option<String>,
}

impl RequestRow {
    /// The cursor of the page after this row.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            time_ms: self.time_ms,
            request_id: self.request_id.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_and_status_filters_parse() {
        let c = Cursor::parse("1764201234567:req_0a:b").unwrap();
        assert_eq!(c.time_ms, 1_764_201_234_567);
        assert_eq!(c.request_id, "req_0a:b");
        assert_eq!(Cursor::parse(&c.render()), Some(c));
        assert_eq!(Cursor::parse("x:req"), None);
        assert_eq!(Cursor::parse("12"), None);
        assert_eq!(StatusFilter::parse("error"), Some(StatusFilter::Error));
        assert_eq!(StatusFilter::parse("429"), Some(StatusFilter::Exactly(429)));
        assert_eq!(StatusFilter::parse("42"), None);
        assert_eq!(StatusFilter::parse("bad"), None);
        assert_eq!(StatusFilter::Exactly(502).sql(), "status = 502");
    }
}
