//! What the gateway changed in a request (CONTRACT 5.1): output caps it lowered
//! under the `adapt` policy and fields it dropped (unsupported optional knobs,
//! or fields the upstream protocol cannot carry). Rendered once for the
//! `x-switchboard-adjusted` header, the access log and the adaptations metric.

use std::fmt::Write as _;

/// One output cap lowered: `param=new (was old)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clamp {
    pub param: String,
    pub now: u64,
    pub was: u64,
}

/// Every change made to one request, in the order it was made.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Adjustments {
    pub clamped: Vec<Clamp>,
    /// Dropped fields, by the client's own name for them (`thinking`,
    /// `generationConfig.thinkingConfig`, `context_management`, ...).
    pub dropped: Vec<String>,
}

impl Adjustments {
    /// Records that `param` was lowered from `was` to `now`.
    pub fn clamp(&mut self, param: impl Into<String>, now: u64, was: u64) {
        let param = param.into();
        if let Some(c) = self.clamped.iter_mut().find(|c| c.param == param) {
            c.now = now;
            return;
        }
        self.clamped.push(Clamp { param, now, was });
    }

    /// Records that `field` was dropped (once, however often it is reported).
    pub fn drop_field(&mut self, field: impl Into<String>) {
        let field = field.into();
        if !self.dropped.contains(&field) {
            self.dropped.push(field);
        }
    }

    /// Adds everything `other` recorded.
    pub fn merge(&mut self, other: Adjustments) {
        for c in other.clamped {
            self.clamp(c.param, c.now, c.was);
        }
        for d in other.dropped {
            self.drop_field(d);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.clamped.is_empty() && self.dropped.is_empty()
    }

    /// The header / access-log form:
    /// `max_tokens=16384 (was 32000); dropped=thinking,context_management`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.clamped {
            if !out.is_empty() {
                out.push_str("; ");
            }
            let _ = write!(out, "{}={} (was {})", c.param, c.now, c.was);
        }
        if !self.dropped.is_empty() {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str("dropped=");
            out.push_str(&self.dropped.join(","));
        }
        out
    }

    /// Each adjusted parameter's name, for the metric's `parameter` label.
    pub fn parameters(&self) -> impl Iterator<Item = &str> {
        self.clamped
            .iter()
            .map(|c| c.param.as_str())
            .chain(self.dropped.iter().map(String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_contract_form() {
        let mut a = Adjustments::default();
        assert_eq!(a.render(), "");
        a.clamp("max_tokens", 16384, 32000);
        a.drop_field("thinking");
        a.drop_field("context_management");
        a.drop_field("thinking");
        assert_eq!(
            a.render(),
            "max_tokens=16384 (was 32000); dropped=thinking,context_management"
        );
        assert_eq!(
            a.parameters().collect::<Vec<_>>(),
            ["max_tokens", "thinking", "context_management"]
        );
    }
}
