//! What one request asks of its key's limits: a request slot, and its worst
//! case in tokens and cost.

use super::Nanos;
use crate::config::{ApiKey, Budget};

/// What one request asks of its key's limits.
#[derive(Debug, Clone)]
pub struct Ask {
    pub key_id: String,
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub budget: Option<Budget>,
    /// Worst-case tokens (input bound plus output cap).
    pub tokens: u64,
    /// Worst-case cost.
    pub cost: Nanos,
}

impl Ask {
    /// The request-count-only ask of a route that spends nothing (count tokens).
    pub fn request_only(key: &ApiKey) -> Ask {
        Ask {
            key_id: key.id.clone(),
            rpm: key.rpm,
            tpm: None,
            budget: None,
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
            tokens,
            cost,
        }
    }

    /// Whether nothing needs to be counted (no limit on this key).
    pub fn is_free(&self) -> bool {
        self.rpm.is_none() && self.tpm.is_none() && self.budget.is_none()
    }
}
