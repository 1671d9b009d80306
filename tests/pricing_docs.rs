//! docs/pricing.md against the code: the table of the shipped catalog's rates
//! is what `conf/catalog.json` charges (every model, every tier, defaults
//! filled in), and every worked example costs what the formula
//! (`config::Pricing::cost`) says.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use switchboard::config::{Catalog, Price, Rates, Tokens};

fn root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn catalog() -> Catalog {
    let text = std::fs::read_to_string(root().join("conf/catalog.json")).unwrap();
    Catalog::from_str("conf/catalog.json", &text, &|_| None).unwrap()
}

/// The rows of the table between `<!-- name:start -->` and `<!-- name:end -->`
/// (header and rule left out), each split into its cells.
fn table(doc: &str, name: &str) -> Vec<Vec<String>> {
    let start = format!("<!-- {name}:start -->");
    let end = format!("<!-- {name}:end -->");
    let from = doc
        .find(&start)
        .unwrap_or_else(|| panic!("{start} missing"))
        + start.len();
    let to = doc[from..]
        .find(&end)
        .unwrap_or_else(|| panic!("{end} missing"))
        + from;
    doc[from..to]
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// A decimal in units of 1e-18 (exact for USD per token and per million tokens).
fn atto(s: &str, scale_digits: u32) -> i128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 18, "{s}");
    let mut n: i128 = int.parse().unwrap_or_else(|_| panic!("{s:?} is no number"));
    for _ in 0..18 {
        n *= 10;
    }
    let mut f: i128 = 0;
    for (i, b) in frac.bytes().enumerate() {
        f += i128::from(b - b'0') * 10i128.pow(17 - i as u32);
    }
    (n + f) / 10i128.pow(scale_digits)
}

/// A catalog price in 1e-18 USD per token.
fn per_token(p: &Price) -> i128 {
    p.pico * 1_000_000
}

#[test]
fn the_rates_table_is_what_the_catalog_charges() {
    let doc = std::fs::read_to_string(root().join("docs/pricing.md")).unwrap();
    let c = catalog();
    let rows = table(&doc, "rates");
    let mut seen = BTreeSet::new();
    for row in &rows {
        assert_eq!(row.len(), 8, "{row:?}");
        let (m, _) = c
            .lookup(&row[0])
            .unwrap_or_else(|| panic!("{} is not in the catalog", row[0]));
        let above: u64 = row[1].parse().unwrap();
        let rates: &Rates = if above == 0 {
            &m.pricing.base
        } else {
            &m.pricing
                .tiers
                .iter()
                .find(|t| t.above_input_tokens == above)
                .unwrap_or_else(|| panic!("{}: no tier above {above}", row[0]))
                .rates
        };
        // The table is per million tokens: 1e-18 USD per token is 1e-12 per million.
        let per_m = |i: usize| atto(&row[i], 6);
        let want = [
            ("prompt", &rates.prompt),
            ("completion", &rates.completion),
            ("cache_read", &rates.cache_read),
            ("cache_write", &rates.cache_write),
            ("cache_write_1h", &rates.cache_write_1h),
        ];
        for (i, (name, price)) in want.iter().enumerate() {
            assert_eq!(
                per_m(i + 2),
                per_token(price),
                "{} above {above}: {name} is {} per token in the catalog, {} per million in the docs",
                row[0],
                price.text,
                row[i + 2]
            );
        }
        // The request price is USD per request in both.
        assert_eq!(atto(&row[7], 0), per_token(&rates.request), "{}", row[0]);
        seen.insert((m.qualified_id.clone(), above));
    }
    // Every model of the catalog, and every tier, has its row.
    for m in c.models.iter() {
        assert!(
            seen.contains(&(m.qualified_id.clone(), 0)),
            "{} has no row",
            m.qualified_id
        );
        for t in &m.pricing.tiers {
            assert!(
                seen.contains(&(m.qualified_id.clone(), t.above_input_tokens)),
                "{}'s tier above {} has no row",
                m.qualified_id,
                t.above_input_tokens
            );
        }
    }
    assert_eq!(seen.len(), rows.len(), "a row is listed twice");
}

#[test]
fn every_worked_example_costs_what_the_formula_says() {
    let doc = std::fs::read_to_string(root().join("docs/pricing.md")).unwrap();
    let c = catalog();
    let rows = table(&doc, "examples");
    assert!(rows.len() >= 8, "{rows:?}");
    let mut providers = BTreeSet::new();
    for row in rows {
        assert_eq!(row.len(), 7, "{row:?}");
        let (m, _) = c.lookup(&row[0]).unwrap();
        let n = |i: usize| -> u64 { row[i].parse().unwrap() };
        let t = Tokens {
            input: n(1),
            cache_read: n(2),
            cache_write: n(3),
            cache_write_1h: n(4),
            output: n(5),
        };
        let nanos = m.pricing.cost(&t);
        assert_eq!(
            i128::from(nanos) * 1_000_000_000,
            atto(&row[6], 0),
            "{}: {t:?} costs {nanos} nano-USD",
            row[0]
        );
        providers.insert(m.provider.clone());
    }
    // A worked example for every provider of the shipped catalog.
    let all: BTreeSet<String> = c.models.iter().map(|m| m.provider.clone()).collect();
    assert_eq!(providers, all);
}
