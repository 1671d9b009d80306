//! Why a request does not fit its key's limits or its team's, and the
//! client error (429, or 503) that says so, naming whose limit refused.

use super::{format_usd, Nanos};
use crate::config::{Budget, BudgetPeriod};
use crate::error::{ErrorKind, GatewayError};

/// Why a request does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Over the requests-per-minute limit; `retry_after` seconds until a slot frees.
    /// `team`: the team whose limit refused (`None`: the key's own).
    Rpm {
        limit: u32,
        retry_after: u64,
        team: Option<String>,
    },
    /// Over the tokens-per-minute limit; `retry_after` is `None` when the
    /// request alone asks more than the limit.
    Tpm {
        limit: u64,
        asked: u64,
        retry_after: Option<u64>,
        team: Option<String>,
    },
    /// The worst case does not fit what is left of the budget.
    Budget {
        budget: Budget,
        period: String,
        remaining: Nanos,
        asked: Nanos,
        team: Option<String>,
    },
    /// The shared store is unreachable and `--redis-fail closed` refuses.
    Unavailable,
}

/// Whose limit refused, as the messages say it: `this key`, or `team ml
/// (this key's team)`.
fn whose(team: &Option<String>) -> String {
    match team {
        None => "this key".to_string(),
        Some(t) => format!("team {} (this key's team)", crate::error::quote(t)),
    }
}

impl Refusal {
    /// The team whose limit refused (`None`: the key's own, or no limit).
    pub fn team(&self) -> Option<&str> {
        match self {
            Refusal::Rpm { team, .. }
            | Refusal::Tpm { team, .. }
            | Refusal::Budget { team, .. } => team.as_deref(),
            Refusal::Unavailable => None,
        }
    }

    /// The client's error (429, or 503 for [`Refusal::Unavailable`]).
    pub fn to_error(&self) -> GatewayError {
        match self {
            Refusal::Rpm {
                limit,
                retry_after,
                team,
            } => GatewayError::new(
                ErrorKind::RateLimited,
                format!(
                    "rate limit of {limit} requests per minute exceeded for {}",
                    whose(team)
                ),
            )
            .with_retry_after(*retry_after),
            Refusal::Tpm {
                limit,
                asked,
                retry_after: Some(s),
                team,
            } => GatewayError::new(
                ErrorKind::RateLimited,
                format!(
                    "rate limit of {limit} tokens per minute exceeded for {} (this request may use up to {asked} tokens: input bound plus output cap)",
                    whose(team)
                ),
            )
            .with_retry_after(*s),
            Refusal::Tpm {
                limit, asked, team, ..
            } => GatewayError::new(
                ErrorKind::RateLimited,
                format!(
                    "this request may use up to {asked} tokens (input bound plus output cap), more than the limit of {limit} tokens per minute of {}: lower max_tokens or shorten the input",
                    whose(team)
                ),
            ),
            Refusal::Budget {
                budget,
                period,
                remaining,
                asked,
                team,
            } => {
                let per = match budget.period {
                    BudgetPeriod::Day => format!("per day ({period} UTC)"),
                    BudgetPeriod::Month => format!("per month ({period} UTC)"),
                    BudgetPeriod::Total => "in total".to_string(),
                };
                GatewayError::new(
                    ErrorKind::RateLimited,
                    format!(
                        "budget of {} USD {per} exhausted for {}: {} USD left, and this request may cost up to {} USD (input bound plus output cap at catalog prices; a lower max_tokens may fit)",
                        format_usd(budget.nanos),
                        whose(team),
                        format_usd((*remaining).max(0)),
                        format_usd(*asked)
                    ),
                )
                .with_code("insufficient_quota")
            }
            Refusal::Unavailable => GatewayError::new(
                ErrorKind::Unavailable,
                "rate limits and budgets cannot be checked (the limits store is unreachable) and this gateway refuses rather than admit unchecked requests (--redis-fail closed)",
            )
            .with_retry_after(1),
        }
    }

    /// What is left of the budget, when the refusal knows.
    pub fn remaining(&self) -> Option<Nanos> {
        match self {
            Refusal::Budget { remaining, .. } => Some(*remaining),
            _ => None,
        }
    }
}
