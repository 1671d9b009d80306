//! The UTC calendar of the ledger: day numbers (days since 1970-01-01) and
//! their `YYYY-MM-DD` names, for the daily rollups and the usage API's bounds.

/// Milliseconds in a day.
pub(super) const DAY_MS: i64 = 86_400_000;

/// `YYYY-MM-DD` of a day count since 1970-01-01.
pub fn day_string(days: i64) -> String {
    let (y, m, d) = crate::util::rfc3339::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`, the inverse of `rfc3339::civil_from_days`).
pub(super) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
