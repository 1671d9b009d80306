//! The UTC calendar of the ledger: day numbers (days since 1970-01-01) and
//! their `YYYY-MM-DD` names, for the daily rollups and the usage API's bounds.

/// Milliseconds in a day.
pub(super) const DAY_MS: i64 = 86_400_000;

/// `YYYY-MM-DD` of a day count since 1970-01-01.
pub fn day_string(days: i64) -> String {
    let (y, m, d) = crate::util::rfc3339::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}
