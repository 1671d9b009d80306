//! Money as the limits count it: integer nano-USD (1e-9 USD). A request's
//! cost comes from the catalog's one formula (`config::Pricing::cost`,
//! exact in pico-USD, rounded up to the next nano-USD), so sums are exact
//! and never below the true cost.

pub use crate::config::Nanos;

/// Nano-USD per USD.
pub const NANOS_PER_USD: i64 = 1_000_000_000;

/// `n` nano-USD as a decimal USD string with at least two decimals: `50.00`,
/// `0.072`, `0.000000550`-style amounts trimmed to `0.00000055`.
pub fn format_usd(n: Nanos) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let a = n.unsigned_abs();
    let whole = a / NANOS_PER_USD.unsigned_abs();
    let frac = a % NANOS_PER_USD.unsigned_abs();
    let mut f = format!("{frac:09}");
    while f.len() > 2 && f.ends_with('0') {
        f.pop();
    }
    format!("{sign}{whole}.{f}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_renders_as_usd() {
        assert_eq!(format_usd(50 * NANOS_PER_USD), "50.00");
        assert_eq!(format_usd(72_000_000), "0.072");
        assert_eq!(format_usd(550), "0.00000055");
        assert_eq!(format_usd(-10_000_000), "-0.01");
    }
}
