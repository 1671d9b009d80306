//! `GET /admin/usage?…&format=csv` (docs/operations.md "Console"): the usage
//! answer as CSV (RFC 4180: comma-separated, CRLF line ends, a field quoted
//! when it holds a comma, a quote or a line break, its quotes doubled). A
//! text field that a spreadsheet would read as a formula (starting with
//! `=`, `+`, `-`, `@`, a tab or a carriage return) is prefixed with `'`.

use crate::state::ledger::Sums;
use std::fmt::Write as _;

/// The header line's figures, in column order.
const FIGURES: [&str; 9] = [
    "requests",
    "errors",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost_usd",
    "mean_latency_ms",
];

/// Appends `text` as one CSV field.
pub fn field(out: &mut String, text: &str) {
    let guarded = matches!(
        text.as_bytes().first(),
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r')
    );
    if guarded || text.contains([',', '"', '\n', '\r']) {
        out.push('"');
        if guarded {
            out.push('\'');
        }
        for c in text.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(text);
    }
}

/// The CSV of usage groups: a header (`group`, then the figures), one line per group.
pub fn render<'a>(group: &str, rows: impl Iterator<Item = (&'a str, &'a Sums)>) -> String {
    let mut out = String::with_capacity(256);
    field(&mut out, group);
    for f in FIGURES {
        out.push(',');
        out.push_str(f);
    }
    out.push_str("\r\n");
    for (name, s) in rows {
        field(&mut out, name);
        let mean = if s.requests > 0 && s.latency_ms > 0.0 {
            format!("{:.1}", s.latency_ms / s.requests as f64)
        } else {
            String::new()
        };
        let _ = write!(
            out,
            ",{},{},{},{},{},{},{},{},{}\r\n",
            s.requests,
            s.errors,
            s.input_tokens,
            s.output_tokens,
            s.cached_tokens,
            s.cache_write_tokens,
            s.reasoning_tokens,
            (s.cost_usd * 1e9).round() / 1e9,
            mean
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_and_formulas_defused() {
        let cases = [
            ("plain", "plain"),
            ("a,b", "\"a,b\""),
            ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("two\nlines", "\"two\nlines\""),
            ("=HYPERLINK(1)", "\"'=HYPERLINK(1)\""),
            ("-1+1", "\"'-1+1\""),
            ("", ""),
        ];
        for (input, want) in cases {
            let mut out = String::new();
            field(&mut out, input);
            assert_eq!(out, want, "{input}");
        }
        let s = Sums {
            requests: 2,
            errors: 1,
            cost_usd: 0.1 + 0.2,
            latency_ms: 30.0,
            ..Sums::default()
        };
        let csv = render("model", [("openai/gpt-5", &s), ("a,b", &s)].into_iter());
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "model,requests,errors,input_tokens,output_tokens,cached_tokens,cache_write_tokens,reasoning_tokens,cost_usd,mean_latency_ms"
        );
        assert_eq!(lines[1], "openai/gpt-5,2,1,0,0,0,0,0,0.3,15.0");
        assert!(lines[2].starts_with("\"a,b\",2,"));
        assert_eq!(lines[3], "");
    }
}
