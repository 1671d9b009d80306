//! A model's `pricing` (docs/configuration.md "Pricing", docs/pricing.md):
//! the catalog's decimal strings, validated with their JSON paths, and the
//! one cost formula every figure of the gateway comes from (the access log,
//! the ledger, the metrics and the budgets).
//!
//! Money is exact: a price is kept in integer pico-USD (1e-12 USD) per token,
//! a request's cost is summed in pico-USD and rounded up once to nano-USD
//! (1e-9 USD), so no float ever drifts a figure.

use super::json::Obj;
use super::ConfigError;

/// An amount of money in nano-USD (1e-9 USD).
pub type Nanos = i64;

/// Pico-USD per USD: a price's unit is 1e-12 USD.
const PICOS_PER_USD: i128 = 1_000_000_000_000;
/// The largest price a catalog may set, in USD (per token or per request).
const MAX_PRICE_USD: i128 = 1_000_000;

/// One price: the catalog's decimal string and its value in pico-USD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    pub text: String,
    pub pico: i128,
}

impl Price {
    /// `s` as a price: a decimal string such as `0.0000025` (no sign, no
    /// exponent, at most twelve decimal places, at most 1,000,000 USD).
    pub fn parse(s: &str) -> Result<Price, String> {
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if !digits(int) || (s.contains('.') && !digits(frac)) {
            return Err(format!("{s:?} is not a decimal number"));
        }
        if frac.len() > 12 {
            return Err(format!(
                "{s:?} has more than twelve decimal places (the smallest unit is 1e-12 USD)"
            ));
        }
        let whole: i128 = int
            .parse()
            .ok()
            .filter(|w| *w <= MAX_PRICE_USD)
            .ok_or_else(|| format!("{s:?} is above the largest price, {MAX_PRICE_USD} USD"))?;
        let f = frac
            .bytes()
            .chain(std::iter::repeat(b'0'))
            .take(12)
            .fold(0i128, |acc, b| acc * 10 + i128::from(b - b'0'));
        Ok(Price {
            text: s.to_string(),
            pico: whole * PICOS_PER_USD + f,
        })
    }
}

/// The rates of one pricing level (the base, or a tier), defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rates {
    /// USD per uncached prompt token.
    pub prompt: Price,
    /// USD per output token (reasoning included).
    pub completion: Price,
    /// USD per prompt token read from a cache (default `prompt`).
    pub cache_read: Price,
    /// USD per prompt token written to a cache, 5-minute or unsplit (default `prompt`).
    pub cache_write: Price,
    /// USD per prompt token written to the one-hour cache (default `cache_write`).
    pub cache_write_1h: Price,
    /// USD per request (default 0).
    pub request: Price,
}

/// A tier: the rates of a request whose input tokens exceed `above_input_tokens`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    pub above_input_tokens: u64,
    pub rates: Rates,
}

/// A model's pricing: the base rates and the long-context tiers, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pricing {
    pub base: Rates,
    pub tiers: Vec<Tier>,
}

/// What one upstream request used, as the cost formula reads it.
/// `input` counts every prompt token; `cache_read` and `cache_write` are
/// parts of it, `cache_write_1h` a part of `cache_write`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub cache_write_1h: u64,
    pub output: u64,
}

impl Tokens {
    /// Takes up to `part` out of `self` (field by field, never below zero)
    /// and returns what was taken: an answer's usage shared among its segments.
    pub fn take(&mut self, part: &Tokens) -> Tokens {
        let take = |have: &mut u64, want: u64| {
            let t = want.min(*have);
            *have -= t;
            t
        };
        Tokens {
            input: take(&mut self.input, part.input),
            cache_read: take(&mut self.cache_read, part.cache_read),
            cache_write: take(&mut self.cache_write, part.cache_write),
            cache_write_1h: take(&mut self.cache_write_1h, part.cache_write_1h),
            output: take(&mut self.output, part.output),
        }
    }
}

impl Pricing {
    /// The rates a request of `input` prompt tokens is priced at: the
    /// highest tier it exceeds, else the base.
    pub fn rates_for(&self, input: u64) -> &Rates {
        self.tiers
            .iter()
            .rev()
            .find(|t| input > t.above_input_tokens)
            .map_or(&self.base, |t| &t.rates)
    }

    /// The cost of one upstream request (docs/pricing.md "The formula"):
    /// uncached input × prompt, plus cache reads × cache_read, plus cache
    /// writes × cache_write (the one-hour part × cache_write_1h), plus output
    /// × completion, plus request, at the rates of the tier `t.input`
    /// reaches; exact in pico-USD, rounded up to nano-USD.
    pub fn cost(&self, t: &Tokens) -> Nanos {
        let r = self.rates_for(t.input);
        let write_1h = t.cache_write_1h.min(t.cache_write);
        let write_5m = t.cache_write - write_1h;
        let uncached = t
            .input
            .saturating_sub(t.cache_read)
            .saturating_sub(t.cache_write);
        let pico = i128::from(uncached) * r.prompt.pico
            + i128::from(t.cache_read) * r.cache_read.pico
            + i128::from(write_5m) * r.cache_write.pico
            + i128::from(write_1h) * r.cache_write_1h.pico
            + i128::from(t.output) * r.completion.pico
            + r.request.pico;
        to_nanos(pico)
    }

    /// The most a request of at most `input` prompt tokens and `output`
    /// output tokens can cost: at every level it may reach (the base and
    /// each tier below `input`), every input token at the dearest rate an
    /// input token is billed at there, plus the request price; the largest.
    pub fn worst_case(&self, input: u64, output: u64) -> Nanos {
        let reachable = self
            .tiers
            .iter()
            .filter(|t| input > t.above_input_tokens)
            .map(|t| &t.rates);
        std::iter::once(&self.base)
            .chain(reachable)
            .map(|r| {
                let dearest = [&r.prompt, &r.cache_read, &r.cache_write, &r.cache_write_1h]
                    .iter()
                    .map(|p| p.pico)
                    .max()
                    .unwrap_or(0);
                to_nanos(
                    i128::from(input) * dearest
                        + i128::from(output) * r.completion.pico
                        + r.request.pico,
                )
            })
            .max()
            .unwrap_or(0)
    }
}

/// Pico-USD rounded up to nano-USD (saturating).
fn to_nanos(pico: i128) -> Nanos {
    Nanos::try_from((pico + 999) / 1000).unwrap_or(Nanos::MAX)
}

const RATE_FIELDS: [&str; 6] = [
    "prompt",
    "completion",
    "cache_read",
    "cache_write",
    "cache_write_1h",
    "request",
];

/// A price field of `o`, if present.
fn opt_price(o: &Obj<'_>, key: &str) -> Result<Option<Price>, ConfigError> {
    match o.map.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Price::parse(s).map(Some).map_err(|e| o.err(key, e)),
        Some(_) => Err(o.err(
            key,
            "expected a decimal string such as \"0.000003\" (USD per token)",
        )),
    }
}

/// The rates of `o`, each left out taken from `base` (a tier) or from the
/// defaults (the base itself: `prompt` and `completion` required).
fn rates(o: &Obj<'_>, base: Option<&Rates>) -> Result<Rates, ConfigError> {
    let required = |key: &str, inherited: Option<&Price>| -> Result<Price, ConfigError> {
        match (opt_price(o, key)?, inherited) {
            (Some(p), _) => Ok(p),
            (None, Some(p)) => Ok(p.clone()),
            (None, None) => Err(o.err(key, "missing required field")),
        }
    };
    let prompt = required("prompt", base.map(|b| &b.prompt))?;
    let completion = required("completion", base.map(|b| &b.completion))?;
    let cache_read = opt_price(o, "cache_read")?
        .or_else(|| base.map(|b| b.cache_read.clone()))
        .unwrap_or_else(|| prompt.clone());
    let cache_write = opt_price(o, "cache_write")?
        .or_else(|| base.map(|b| b.cache_write.clone()))
        .unwrap_or_else(|| prompt.clone());
    let cache_write_1h = opt_price(o, "cache_write_1h")?
        .or_else(|| base.map(|b| b.cache_write_1h.clone()))
        .unwrap_or_else(|| cache_write.clone());
    let request = opt_price(o, "request")?
        .or_else(|| base.map(|b| b.request.clone()))
        .unwrap_or(Price {
            text: "0".into(),
            pico: 0,
        });
    Ok(Rates {
        prompt,
        completion,
        cache_read,
        cache_write,
        cache_write_1h,
        request,
    })
}

/// Reads and validates a model's `pricing` object (docs/configuration.md "Pricing").
pub(crate) fn pricing(p: &Obj<'_>) -> Result<Pricing, ConfigError> {
    let mut known = RATE_FIELDS.to_vec();
    known.push("tiers");
    p.only(&known)?;
    let base = rates(p, None)?;
    let mut tiers: Vec<Tier> = Vec::new();
    for (path, v) in p.opt_array("tiers")?.unwrap_or_default() {
        let t = Obj::new(p.file, path, v)?;
        let mut known = RATE_FIELDS.to_vec();
        known.push("above_input_tokens");
        t.only(&known)?;
        let above = match t.opt_u64("above_input_tokens")? {
            Some(n) => n,
            None => return Err(t.err("above_input_tokens", "missing required field")),
        };
        if let Some(prev) = tiers.last() {
            if above <= prev.above_input_tokens {
                return Err(t.err(
                    "above_input_tokens",
                    format!(
                        "must be greater than the previous tier's ({}): tiers ascend",
                        prev.above_input_tokens
                    ),
                ));
            }
        }
        if t.map.len() == 1 {
            return Err(t.err("above_input_tokens", "a tier must set at least one rate"));
        }
        tiers.push(Tier {
            above_input_tokens: above,
            rates: rates(&t, Some(&base))?,
        });
    }
    Ok(Pricing { base, tiers })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(s: &str) -> Price {
        Price::parse(s).unwrap()
    }

    fn load(json: &str) -> Result<Pricing, ConfigError> {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        pricing(&Obj::new("c.json", "$.models[0].pricing".into(), &v).unwrap())
    }

    /// Claude Sonnet's published rates (docs/pricing.md), with its
    /// long-context tier.
    fn sonnet() -> Pricing {
        load(
            r#"{"prompt":"0.000003","completion":"0.000015","cache_read":"0.0000003",
                "cache_write":"0.00000375","cache_write_1h":"0.000006",
                "tiers":[{"above_input_tokens":200000,"prompt":"0.000006","completion":"0.0000225",
                  "cache_read":"0.0000006","cache_write":"0.0000075","cache_write_1h":"0.000012"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn prices_are_exact_pico_usd() {
        assert_eq!(price("0.00000055").pico, 550_000);
        assert_eq!(price("2").pico, 2_000_000_000_000);
        assert_eq!(price("0.000000000001").pico, 1);
        assert_eq!(price("0.03").pico, 30_000_000_000);
        for bad in [
            "",
            "-1",
            "1e-6",
            ".5",
            "5.",
            "0.0000000000001",
            "1000001",
            "0x1",
        ] {
            assert!(Price::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn defaults_follow_the_contract() {
        let p = load(r#"{"prompt":"0.000002","completion":"0.00001","cache_write":"0.0000025"}"#)
            .unwrap();
        assert_eq!(p.base.cache_read, price("0.000002"));
        assert_eq!(p.base.cache_write, price("0.0000025"));
        assert_eq!(p.base.cache_write_1h, price("0.0000025"));
        assert_eq!(p.base.request.pico, 0);
        let p = load(r#"{"prompt":"0.000002","completion":"0.00001"}"#).unwrap();
        assert_eq!(p.base.cache_write, price("0.000002"));
        assert_eq!(p.base.cache_write_1h, price("0.000002"));
    }

    #[test]
    fn the_formula_prices_each_kind_of_token_at_its_rate() {
        let p = sonnet();
        // 1,000 uncached, 8,000 read, 500 written (200 of them for an hour), 300 out.
        let t = Tokens {
            input: 9_500,
            cache_read: 8_000,
            cache_write: 500,
            cache_write_1h: 200,
            output: 300,
        };
        // 1000×3e-6 + 8000×3e-7 + 300×3.75e-6 + 200×6e-6 + 300×1.5e-5
        // = 0.003 + 0.0024 + 0.001125 + 0.0012 + 0.0045 = 0.012225 USD.
        assert_eq!(p.cost(&t), 12_225_000);
        // Without a cache it is input × prompt + output × completion.
        let plain = Tokens {
            input: 1000,
            output: 100,
            ..Tokens::default()
        };
        assert_eq!(p.cost(&plain), 3_000_000 + 1_500_000);
        // Rounded up once, to the next nano-USD.
        let p = load(r#"{"prompt":"0.0000000375","completion":"0"}"#).unwrap();
        let one = Tokens {
            input: 1,
            ..Tokens::default()
        };
        assert_eq!(p.cost(&one), 38);
        // The request price is added once.
        let p = load(r#"{"prompt":"0","completion":"0","request":"0.005"}"#).unwrap();
        assert_eq!(p.cost(&one), 5_000_000);
    }

    #[test]
    fn a_tier_prices_the_whole_request() {
        let p = sonnet();
        let at = |input: u64| Tokens {
            input,
            cache_read: 100_000,
            output: 1_000,
            ..Tokens::default()
        };
        // 200,000 is not above 200,000: base rates.
        // 100000×3e-6 + 100000×3e-7 + 1000×1.5e-5 = 0.3 + 0.03 + 0.015
        assert_eq!(p.cost(&at(200_000)), 345_000_000);
        // 200,001: every token at the tier's rates.
        // 100001×6e-6 + 100000×6e-7 + 1000×2.25e-5 = 0.600006 + 0.06 + 0.0225
        assert_eq!(p.cost(&at(200_001)), 682_506_000);
        // The highest tier reached wins; a rate a tier leaves out is the base's.
        let p = load(
            r#"{"prompt":"1","completion":"10","cache_read":"0.5","tiers":[
                {"above_input_tokens":10,"prompt":"2"},{"above_input_tokens":20,"prompt":"3"}]}"#,
        )
        .unwrap();
        assert_eq!(p.rates_for(10).prompt, price("1"));
        assert_eq!(p.rates_for(11).prompt, price("2"));
        assert_eq!(p.rates_for(21).prompt, price("3"));
        assert_eq!(p.rates_for(21).cache_read, price("0.5"));
        assert_eq!(p.rates_for(21).completion, price("10"));
    }

    #[test]
    fn the_worst_case_is_at_the_dearest_rate_that_can_apply() {
        let p = sonnet();
        // Up to 1,000 input tokens: base; the dearest input rate is the 1h write.
        assert_eq!(p.worst_case(1_000, 100), 6_000_000 + 1_500_000);
        // Up to 300,000: the tier can be reached.
        assert_eq!(
            p.worst_case(300_000, 1_000),
            300_000 * 12_000 + 1_000 * 22_500
        );
        // A tier cheaper than the base never lowers the worst case.
        let p = load(
            r#"{"prompt":"2","completion":"0","tiers":[{"above_input_tokens":5,"prompt":"1"}]}"#,
        )
        .unwrap();
        assert_eq!(p.worst_case(10, 0), 20_000_000_000);
        // Every worst case covers every cost it bounds.
        let p = sonnet();
        for input in [0, 1, 199_999, 200_000, 200_001, 250_000] {
            for (read, write, h) in [(0, 0, 0), (input, 0, 0), (0, input, input / 2)] {
                let t = Tokens {
                    input,
                    cache_read: read,
                    cache_write: write,
                    cache_write_1h: h,
                    output: 10,
                };
                assert!(p.cost(&t) <= p.worst_case(250_000, 10), "{t:?}");
            }
        }
    }

    #[test]
    fn tokens_are_shared_among_segments() {
        let mut left = Tokens {
            input: 10,
            cache_read: 4,
            cache_write: 2,
            cache_write_1h: 1,
            output: 5,
        };
        let first = left.take(&Tokens {
            input: 6,
            cache_read: 6,
            cache_write: 0,
            cache_write_1h: 0,
            output: 2,
        });
        assert_eq!((first.input, first.cache_read, first.output), (6, 4, 2));
        assert_eq!((left.input, left.cache_read, left.output), (4, 0, 3));
    }

    #[test]
    fn validation_names_the_path() {
        let e = load(r#"{"prompt":"0.1","completion":"x"}"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.completion");
        let e = load(r#"{"prompt":"0.1"}"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.completion");
        let e = load(r#"{"prompt":"0.1","completion":"1","cache_read":0.1}"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.cache_read");
        let e = load(r#"{"prompt":"0.1","completion":"1","cache_write_1h":"-1"}"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.cache_write_1h");
        let e = load(r#"{"prompt":"0.1","completion":"1","cache":"1"}"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.cache");
        let tiers = |t: &str| load(&format!(r#"{{"prompt":"1","completion":"1","tiers":{t}}}"#));
        let e = tiers(r#"[{"prompt":"2"}]"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.tiers[0].above_input_tokens");
        let e = tiers(r#"[{"above_input_tokens":-5,"prompt":"2"}]"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.tiers[0].above_input_tokens");
        let e = tiers(
            r#"[{"above_input_tokens":9,"prompt":"2"},{"above_input_tokens":9,"prompt":"3"}]"#,
        )
        .unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.tiers[1].above_input_tokens");
        assert!(e.reason.contains("ascend"), "{e}");
        let e = tiers(r#"[{"above_input_tokens":9}]"#).unwrap_err();
        assert!(e.reason.contains("at least one rate"), "{e}");
        let e = tiers(r#"[{"above_input_tokens":9,"request":"x"}]"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.tiers[0].request");
        let e = tiers(r#"[{"above_input_tokens":9,"tiers":[]}]"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.tiers[0].tiers");
        let e = tiers(r#"{"above_input_tokens":9}"#).unwrap_err();
        assert_eq!(e.path, "$.models[0].pricing.tiers");
    }
}
