//! The console's time series (`GET /admin/usage/series`, docs/operations.md
//! "Console"): requests, errors, mean latency and cost per hour or day, per
//! model, key or team, the top few by cost and the rest summed as one "other"
//! group, so an answer's size is bounded by its buckets and `top`, never by
//! how many keys or models the ledger holds.
//!
//! Hours are read from the rows (an indexed range of `time`, within the
//! retention), days from the daily rollups (which outlive it).

use super::calendar::DAY_MS;
use super::{Bound, Sums};

/// Milliseconds in an hour.
pub const HOUR_MS: i64 = 3_600_000;
/// The most groups a series names (`top`); the rest are "other".
pub const MAX_TOP: usize = 20;
/// The most buckets one answer holds.
pub const MAX_BUCKETS: i64 = 800;

/// A bucket's width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    Hour,
    Day,
}

impl Bucket {
    pub fn parse(s: &str) -> Option<Bucket> {
        match s {
            "hour" => Some(Bucket::Hour),
            "day" => Some(Bucket::Day),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Bucket::Hour => "hour",
            Bucket::Day => "day",
        }
    }

    /// The width in milliseconds.
    pub fn ms(self) -> i64 {
        match self {
            Bucket::Hour => HOUR_MS,
            Bucket::Day => DAY_MS,
        }
    }
}

/// What a series' groups are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesBy {
    Model,
    Key,
    /// The key's team (`""`: keys in none).
    Team,
}

impl SeriesBy {
    pub fn parse(s: &str) -> Option<SeriesBy> {
        match s {
            "model" => Some(SeriesBy::Model),
            "key" => Some(SeriesBy::Key),
            "team" => Some(SeriesBy::Team),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SeriesBy::Model => "model",
            SeriesBy::Key => "key",
            SeriesBy::Team => "team",
        }
    }
}

/// A series query, its range aligned to whole buckets.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesQuery {
    /// The first bucket's start, unix milliseconds (inclusive).
    pub from_ms: i64,
    /// The end of the last bucket (exclusive).
    pub to_ms: i64,
    pub bucket: Bucket,
    pub by: SeriesBy,
    /// Groups named; the rest are summed as "other".
    pub top: usize,
}

impl SeriesQuery {
    /// The query for `from` / `to` (defaults: the last 24 hours by hour, the
    /// last 30 days by day, ending with the current bucket), aligned to
    /// whole buckets. `Err` says what is wrong.
    pub fn new(
        from: Option<Bound>,
        to: Option<Bound>,
        bucket: Bucket,
        by: SeriesBy,
        top: usize,
        now_ms: i64,
    ) -> Result<SeriesQuery, String> {
        let w = bucket.ms();
        let to_ms = match to {
            Some(b) => b.end_ms(),
            None => (now_ms.div_euclid(w) + 1) * w,
        };
        // Rounded up to a whole bucket.
        let to_ms = to_ms.div_euclid(w) * w + if to_ms.rem_euclid(w) == 0 { 0 } else { w };
        let from_ms = match from {
            Some(b) => b.start_ms().div_euclid(w) * w,
            None => to_ms - w * if bucket == Bucket::Hour { 24 } else { 30 },
        };
        if from_ms >= to_ms {
            return Err("from: must be before to".into());
        }
        let buckets = (to_ms - from_ms) / w;
        if buckets > MAX_BUCKETS {
            return Err(format!(
                "the range holds {buckets} {}s, at most {MAX_BUCKETS} are answered (a shorter range, or bucket=day)",
                bucket.name()
            ));
        }
        if top == 0 || top > MAX_TOP {
            return Err(format!("top: expected 1 to {MAX_TOP}, got {top}"));
        }
        Ok(SeriesQuery {
            from_ms,
            to_ms,
            bucket,
            by,
            top,
        })
    }

    /// Each bucket's start, in order.
    pub fn buckets(&self) -> Vec<i64> {
        let w = self.bucket.ms();
        (0..(self.to_ms - self.from_ms) / w)
            .map(|i| self.from_ms + i * w)
            .collect()
    }
}

/// One database answer row: a bucket's start, its group (`None`: "other")
/// and the sums of that cell.
pub type Cell = (i64, Option<String>, Sums);

/// A group's sums per bucket, in the order of [`SeriesQuery::buckets`].
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesGroup {
    /// The key id or `provider/model_id`; `None` for "other".
    pub name: Option<String>,
    pub points: Vec<Sums>,
}

/// A series answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// `rows` (hours) or `rollups` (days).
    pub source: &'static str,
    pub buckets: Vec<i64>,
    /// The top groups by cost (then requests), then "other" when it has any request.
    pub groups: Vec<SeriesGroup>,
}

impl Series {
    /// Lays `cells` out on the query's buckets, the groups in `top` order
    /// (the database's ranking), "other" last.
    pub fn assemble(
        q: &SeriesQuery,
        source: &'static str,
        top: &[String],
        cells: Vec<Cell>,
    ) -> Series {
        let buckets = q.buckets();
        let w = q.bucket.ms();
        let mut groups: Vec<SeriesGroup> = top
            .iter()
            .map(|n| SeriesGroup {
                name: Some(n.clone()),
                points: vec![Sums::default(); buckets.len()],
            })
            .collect();
        let mut other = SeriesGroup {
            name: None,
            points: vec![Sums::default(); buckets.len()],
        };
        for (start, name, sums) in cells {
            let Ok(i) = usize::try_from((start - q.from_ms).div_euclid(w)) else {
                continue;
            };
            let group = match &name {
                Some(n) => match groups.iter_mut().find(|g| g.name.as_deref() == Some(n)) {
                    Some(g) => g,
                    None => &mut other,
                },
                None => &mut other,
            };
            if let Some(p) = group.points.get_mut(i) {
                p.add(&sums);
            }
        }
        if other.points.iter().any(|p| p.requests > 0) {
            groups.push(other);
        }
        Series {
            source,
            buckets,
            groups,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_align_to_buckets_and_are_bounded() {
        let now = 10 * DAY_MS + 5 * HOUR_MS + 17;
        let q = SeriesQuery::new(None, None, Bucket::Hour, SeriesBy::Model, 5, now).unwrap();
        assert_eq!(q.to_ms, 10 * DAY_MS + 6 * HOUR_MS);
        assert_eq!(q.buckets().len(), 24);
        let q = SeriesQuery::new(None, None, Bucket::Day, SeriesBy::Key, 5, now).unwrap();
        assert_eq!((q.from_ms, q.to_ms), (-19 * DAY_MS, 11 * DAY_MS));
        let q = SeriesQuery::new(
            Bound::parse("1970-01-02"),
            Bound::parse("1970-01-02"),
            Bucket::Hour,
            SeriesBy::Model,
            3,
            now,
        )
        .unwrap();
        assert_eq!((q.from_ms, q.to_ms), (DAY_MS, 2 * DAY_MS));
        let long = SeriesQuery::new(
            Bound::parse("1970-01-01"),
            Bound::parse("1970-03-01"),
            Bucket::Hour,
            SeriesBy::Model,
            5,
            now,
        )
        .unwrap_err();
        assert!(long.contains("bucket=day"), "{long}");
        for top in [0, MAX_TOP + 1] {
            let e = SeriesQuery::new(None, None, Bucket::Day, SeriesBy::Key, top, now).unwrap_err();
            assert!(e.starts_with("top"), "{e}");
        }
    }

    #[test]
    fn cells_land_in_their_bucket_and_group_and_the_rest_is_other() {
        let q = SeriesQuery::new(None, None, Bucket::Hour, SeriesBy::Key, 1, 3 * HOUR_MS).unwrap();
        let sums = |n: i64| Sums {
            requests: n,
            cost_usd: n as f64,
            ..Sums::default()
        };
        let s = Series::assemble(
            &q,
            "rows",
            &["a".to_string()],
            vec![
                (q.from_ms, Some("a".into()), sums(2)),
                (q.from_ms + HOUR_MS, None, sums(3)),
                (q.to_ms - HOUR_MS, Some("a".into()), sums(1)),
            ],
        );
        assert_eq!(s.groups.len(), 2);
        assert_eq!(s.groups[0].name.as_deref(), Some("a"));
        assert_eq!(s.groups[0].points[0].requests, 2);
        assert_eq!(s.groups[0].points[23].requests, 1);
        assert_eq!(s.groups[1].name, None);
        assert_eq!(s.groups[1].points[1].requests, 3);
        // No "other" when the top groups hold every request.
        let s = Series::assemble(
            &q,
            "rows",
            &["a".to_string()],
            vec![(q.from_ms, Some("a".into()), sums(1))],
        );
        assert_eq!(s.groups.len(), 1);
    }
}
