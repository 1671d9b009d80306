//! RFC 3339 UTC timestamps (`2026-01-01T00:00:00Z`, optionally with milliseconds)
//! from unix time and back, without a date crate: the model listings' `created_at`,
//! the access log's `time`, the usage query's bounds and a key's `expires_at`.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A UTC instant that formats as RFC 3339; `Display` writes it without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rfc3339 {
    /// Seconds since the unix epoch (negative before 1970).
    pub secs: i64,
    /// Milliseconds within the second, written when present.
    pub millis: Option<u32>,
}

impl Rfc3339 {
    /// Whole seconds: `YYYY-MM-DDTHH:MM:SSZ`.
    pub fn seconds(secs: i64) -> Rfc3339 {
        Rfc3339 { secs, millis: None }
    }

    /// The current time with milliseconds: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub fn now() -> Rfc3339 {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Rfc3339 {
            secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            millis: Some(d.subsec_millis()),
        }
    }
}

/// The proleptic Gregorian (year, month, day) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are in range by construction; the casts cannot truncate.
    (year, month as u32, day as u32)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of
/// `civil_from_days`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// What [`parse`] read: a whole UTC day or an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// `YYYY-MM-DD`: days since 1970-01-01.
    Day(i64),
    /// `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`: unix milliseconds.
    Millis(i64),
}

/// Parses `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`; `None` for
/// anything else, a date that does not exist (2026-02-30) included.
pub fn parse(s: &str) -> Option<Parsed> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let (mo, d) = (u32::try_from(mo).ok()?, u32::try_from(d).ok()?);
    let days = days_from_civil(y, mo, d);
    if civil_from_days(days) != (y, mo, d) {
        return None;
    }
    if b.len() == 10 {
        return Some(Parsed::Day(days));
    }
    if !matches!(b[10], b'T' | b't' | b' ') || b.len() < 20 || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i.min(start + 3)];
        ms = frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
    }
    let offset_min = match &s[i..] {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(Parsed::Millis(secs * 1000 + ms))
}

/// Unix seconds of an HTTP date in the IMF-fixdate form
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), as `retry-after` may carry one.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let mut it = s.split_ascii_whitespace();
    let _weekday = it.next()?.strip_suffix(',')?;
    let day: u32 = it.next()?.parse().ok()?;
    let month = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = it.next()?.parse().ok()?;
    let mut hms = it.next()?.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if it.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + h * 3600 + mi * 60 + sec;
    u64::try_from(secs).ok()
}

impl Rfc3339 {
    /// The civil year, month, day, hour, minute and second of `secs`.
    fn fields(&self) -> (i64, u32, u32, i64, i64, i64) {
        let (y, mo, d) = civil_from_days(self.secs.div_euclid(86_400));
        let rem = self.secs.rem_euclid(86_400);
        (y, mo, d, rem / 3600, rem % 3600 / 60, rem % 60)
    }
}

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, mo, d, h, mi, s) = self.fields();
        write!(f, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}")?;
        if let Some(ms) = self.millis {
            write!(f, ".{:03}", ms.min(999))?;
        }
        f.write_str("Z")
    }
}

impl Rfc3339 {
    /// Appends what [`fmt::Display`] writes, digit by digit (the access
    /// log's time, once a request): a year outside 0..=9999 goes through
    /// the formatter.
    pub fn push(&self, out: &mut Vec<u8>) {
        let (y, mo, d, h, mi, s) = self.fields();
        let Ok(y @ 0..=9999) = u32::try_from(y) else {
            use std::io::Write as _;
            let _ = write!(out, "{self}");
            return;
        };
        let two = |n: i64| [b'0' + (n / 10) as u8, b'0' + (n % 10) as u8];
        let [y0, y1] = two(i64::from(y / 100));
        let [y2, y3] = two(i64::from(y % 100));
        let [mo0, mo1] = two(i64::from(mo));
        let [d0, d1] = two(i64::from(d));
        let [h0, h1] = two(h);
        let [mi0, mi1] = two(mi);
        let [s0, s1] = two(s);
        out.extend_from_slice(&[
            y0, y1, y2, y3, b'-', mo0, mo1, b'-', d0, d1, b'T', h0, h1, b':', mi0, mi1, b':', s0,
            s1,
        ]);
        if let Some(ms) = self.millis {
            let ms = ms.min(999);
            out.extend_from_slice(&[
                b'.',
                b'0' + (ms / 100) as u8,
                b'0' + (ms / 10 % 10) as u8,
                b'0' + (ms % 10) as u8,
            ]);
        }
        out.push(b'Z');
    }
}

impl serde::Serialize for Rfc3339 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_writes_what_display_writes() {
        let secs = [
            0,
            -1,
            86_399,
            951_782_400,
            1_767_225_600,
            253_402_300_799,
            253_402_300_800,
            -62_167_219_200,
            -62_167_219_201,
            i64::from(i32::MAX) * 40,
        ];
        for s in secs {
            for millis in [None, Some(0), Some(7), Some(999), Some(1500)] {
                let t = Rfc3339 { secs: s, millis };
                let mut out = b"x".to_vec();
                t.push(&mut out);
                assert_eq!(&out[1..], t.to_string().as_bytes(), "{s} {millis:?}");
            }
        }
    }

    fn at(secs: i64) -> String {
        Rfc3339::seconds(secs).to_string()
    }

    #[test]
    fn http_dates_parse_to_unix_seconds() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            at(parse_http_date("Mon, 23 Nov 2026 23:59:59 GMT").unwrap() as i64),
            "2026-11-23T23:59:59Z"
        );
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"), None);
        assert_eq!(parse_http_date("soon"), None);
        for d in [-1000, 0, 59, 60, 365, 10_957, 20_000, 100_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }

    #[test]
    fn known_instants() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(1_767_225_600), "2026-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(at(-1), "1969-12-31T23:59:59Z");
        assert_eq!(at(253_402_300_799), "9999-12-31T23:59:59Z");
        let with_ms = Rfc3339 {
            secs: 1_739_923_200,
            millis: Some(7),
        };
        assert_eq!(with_ms.to_string(), "2025-02-19T00:00:00.007Z");
        assert_eq!(
            serde_json::to_string(&with_ms).unwrap(),
            "\"2025-02-19T00:00:00.007Z\""
        );
    }

    #[test]
    fn every_day_for_four_centuries_round_trips() {
        // Days from civil (the inverse) checked against the forward function.
        let days_from_civil = |y: i64, m: u32, d: u32| {
            let y = if m <= 2 { y - 1 } else { y };
            let era = y.div_euclid(400);
            let yoe = y - era * 400;
            let mp = i64::from((m + 9) % 12);
            let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            era * 146_097 + doe - 719_468
        };
        let mut prev = civil_from_days(-1);
        for days in 0..146_097 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
            assert!((1..=12).contains(&m) && (1..=31).contains(&d));
            assert!((y, m, d) > prev);
            prev = (y, m, d);
        }
    }
}
