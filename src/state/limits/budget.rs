//! Budgets over UTC calendar periods (a day, a month, or the key's whole
//! life): which period an instant falls in, and a budget's state in it.

use super::Nanos;
use crate::config::{Budget, BudgetPeriod};

/// One budget period: its id (`2026-11-23`, `2026-11`, `total`) and bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    pub id: String,
    /// Unix seconds the period started (0 for `total`).
    pub start: i64,
    /// Unix seconds the next period starts (`None` for `total`).
    pub end: Option<i64>,
}

/// The period of kind `kind` that contains `unix_secs` (UTC calendar).
pub fn period_at(kind: BudgetPeriod, unix_secs: i64) -> Period {
    let days = unix_secs.div_euclid(86_400);
    let (y, m, d) = crate::util::rfc3339::civil_from_days(days);
    match kind {
        BudgetPeriod::Day => Period {
            id: format!("{y:04}-{m:02}-{d:02}"),
            start: days * 86_400,
            end: Some((days + 1) * 86_400),
        },
        BudgetPeriod::Month => {
            let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
            Period {
                id: format!("{y:04}-{m:02}"),
                start: crate::util::rfc3339::days_from_civil(y, m, 1) * 86_400,
                end: Some(crate::util::rfc3339::days_from_civil(ny, nm, 1) * 86_400),
            }
        }
        BudgetPeriod::Total => Period {
            id: "total".into(),
            start: 0,
            end: None,
        },
    }
}

/// A budget's state in its current period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetState {
    pub budget: Budget,
    pub period: Period,
    /// Settled spend in this period.
    pub spent: Nanos,
    /// Held by requests in flight.
    pub reserved: Nanos,
}

impl BudgetState {
    /// What a new request could still reserve.
    pub fn remaining(&self) -> Nanos {
        self.budget.nanos - self.spent - self.reserved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_follow_the_utc_calendar() {
        // 2026-11-23T21:34:23Z
        let t = 1_795_469_663;
        let d = period_at(BudgetPeriod::Day, t);
        assert_eq!(d.id, "2026-11-23");
        assert_eq!(d.end.unwrap() - d.start, 86_400);
        assert!(d.start <= t && t < d.end.unwrap());
        let m = period_at(BudgetPeriod::Month, t);
        assert_eq!(m.id, "2026-11");
        assert_eq!(
            crate::util::rfc3339::Rfc3339::seconds(m.start).to_string(),
            "2026-11-01T00:00:00Z"
        );
        assert_eq!(
            crate::util::rfc3339::Rfc3339::seconds(m.end.unwrap()).to_string(),
            "2026-12-01T00:00:00Z"
        );
        let dec = period_at(BudgetPeriod::Month, m.end.unwrap() + 31 * 86_400 - 1);
        assert_eq!(dec.id, "2026-12");
        assert_eq!(
            crate::util::rfc3339::Rfc3339::seconds(dec.end.unwrap()).to_string(),
            "2027-01-01T00:00:00Z"
        );
        assert_eq!(period_at(BudgetPeriod::Total, t).id, "total");
        // The last second of a day is still that day.
        assert_eq!(
            period_at(BudgetPeriod::Day, d.end.unwrap() - 1).id,
            "2026-11-23"
        );
        assert_eq!(
            period_at(BudgetPeriod::Day, d.end.unwrap()).id,
            "2026-11-24"
        );
    }
}
