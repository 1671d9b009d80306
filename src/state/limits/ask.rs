//! What one request asks of its key's limits and of its team's: a request
//! slot, and its worst case in tokens and cost.

use super::Nanos;
use crate::config::{ApiKey, Budget, Team};

/// What one request asks of its key's limits (and of its team's, when the
/// key is in a team: both must fit, docs/configuration.md "Teams").
#[derive(Debug, Clone)]
pub struct Ask {
    pub key_id: String,
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub budget: Option<Budget>,
    /// The team's limits, when the key is in a team that has any.
    pub team: Option<TeamAsk>,
    /// Worst-case tokens (input bound plus output cap).
    pub tokens: u64,
    /// Worst-case cost.
    pub cost: Nanos,
}

/// The limits of the key's team that one request counts against.
#[derive(Debug, Clone)]
pub struct TeamAsk {
    pub id: String,
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub budget: Option<Budget>,
}

impl TeamAsk {
    /// The team's part of an ask: `None` when it limits nothing asked.
    fn of(team: &Team, rpm: bool, tpm: bool, budget: bool) -> Option<TeamAsk> {
        let t = TeamAsk {
            id: String::new(),
            rpm: team.rpm.filter(|_| rpm),
            tpm: team.tpm.filter(|_| tpm),
            budget: team.budget.clone().filter(|_| budget),
        };
        (t.rpm.is_some() || t.tpm.is_some() || t.budget.is_some()).then(|| TeamAsk {
            id: team.id.clone(),
            ..t
        })
    }
}

impl Ask {
    /// The request-count-only ask of a route that spends nothing (count tokens).
    pub fn request_only(key: &ApiKey) -> Ask {
        Ask {
            key_id: key.id.clone(),
            rpm: key.rpm,
            tpm: None,
            budget: None,
            team: key
                .team
                .as_deref()
                .and_then(|t| TeamAsk::of(t, true, false, false)),
            tokens: 0,
            cost: 0,
        }
    }

    /// The full ask of an inference request.
    pub fn inference(key: &ApiKey, tokens: u64, cost: Nanos) -> Ask {
        Ask {
            key_id: key.id.clone(),
            rpm: key.rpm,
            tpm: key.tpm,
            budget: key.budget.clone(),
            team: key
                .team
                .as_deref()
                .and_then(|t| TeamAsk::of(t, true, true, true)),
            tokens,
            cost,
        }
    }

    /// Whether the key's own limits count nothing.
    pub fn key_free(&self) -> bool {
        self.rpm.is_none() && self.tpm.is_none() && self.budget.is_none()
    }

    /// Whether nothing needs to be counted (no limit on this key or its team).
    pub fn is_free(&self) -> bool {
        self.key_free() && self.team.is_none()
    }

    /// Whether anything is held until the request settles (tokens or cost,
    /// of the key or of its team).
    pub fn holds(&self) -> bool {
        self.tpm.is_some()
            || self.budget.is_some()
            || self
                .team
                .as_ref()
                .is_some_and(|t| t.tpm.is_some() || t.budget.is_some())
    }
}
