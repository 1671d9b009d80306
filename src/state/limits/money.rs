//! Money as the limits count it: integer nano-USD (1e-9 USD). A request's
//! cost is `tokens × price` computed exactly in pico-USD and rounded up to the
//! next nano-USD, so sums are exact and never below the true cost.

use crate::config::Pricing;

/// An amount of money in nano-USD (1e-9 USD).
pub type Nanos = i64;

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

/// A catalog price (a validated decimal string, USD per token) in pico-USD
/// (1e-12 USD) per token; digits past the twelfth decimal round up.
pub fn price_pico(s: &str) -> i128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let whole: i128 = int.parse().unwrap_or(0);
    let mut f: i128 = 0;
    for b in frac.bytes().chain(std::iter::repeat(b'0')).take(12) {
        f = f * 10 + i128::from(b.saturating_sub(b'0'));
    }
    let rest_nonzero = frac.bytes().skip(12).any(|b| b != b'0');
    whole * 1_000_000_000_000 + f + i128::from(rest_nonzero)
}

/// The cost of `input` prompt tokens and `output` completion tokens at
/// `pricing`, exact in pico-USD, rounded up to nano-USD.
pub fn cost_nanos(pricing: &Pricing, input: u64, output: u64) -> Nanos {
    let pico = i128::from(input) * price_pico(&pricing.prompt)
        + i128::from(output) * price_pico(&pricing.completion);
    let nanos = (pico + 999) / 1000;
    Nanos::try_from(nanos).unwrap_or(Nanos::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pricing(p: &str, c: &str) -> Pricing {
        Pricing {
            prompt: p.into(),
            completion: c.into(),
            prompt_usd: 0.0,
            completion_usd: 0.0,
        }
    }

    #[test]
    fn money_is_exact_and_rounds_up() {
        assert_eq!(price_pico("0.00000055"), 550_000);
        assert_eq!(price_pico("2"), 2_000_000_000_000);
        assert_eq!(price_pico("0.0000000000001"), 1);
        let p = pricing("0.00000055", "0.0000022");
        assert_eq!(cost_nanos(&p, 1000, 100), 550_000 + 220_000);
        assert_eq!(cost_nanos(&pricing("0.0000000375", "0"), 1, 0), 38);
        assert_eq!(cost_nanos(&pricing("0", "0.001"), 0, 8), 8_000_000);
        assert_eq!(format_usd(50 * NANOS_PER_USD), "50.00");
        assert_eq!(format_usd(72_000_000), "0.072");
        assert_eq!(format_usd(550), "0.00000055");
        assert_eq!(format_usd(-10_000_000), "-0.01");
    }
}
