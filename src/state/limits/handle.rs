//! The limits of every key and team: opening the configured backend, the one
//! atomic check-and-reserve step, and a key's or a team's live state for the
//! admin API.

use super::backend::{Backend, LimitsConfig};
use super::local::LocalLimits;
use super::redis::RedisLimits;
use super::{unix_now, Ask, BudgetState, Refusal, Reservation};
use crate::config::{ApiKey, Team};
use crate::obs::metrics::Metrics;
use std::sync::Arc;

/// One key's (or team's) live state, for `GET /admin/keys/{id}` and
/// `GET /admin/teams/{id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// (limit, requests in the current sliding minute).
    pub rpm: Option<(u32, u64)>,
    /// (limit, tokens in the current sliding minute, reservations included).
    pub tpm: Option<(u64, u64)>,
    pub budget: Option<BudgetState>,
}

/// The limits of every key, in one of the two backends.
pub struct Limits {
    backend: Arc<Backend>,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Limits({})", self.backend_name())
    }
}

impl Limits {
    /// Embedded limits kept in memory only (nothing survives a restart).
    pub fn in_memory() -> Limits {
        Limits {
            backend: Arc::new(Backend::Local(LocalLimits::new())),
        }
    }

    /// Opens the configured backend: Redis when `--redis` is given (connected
    /// lazily, so an unreachable Redis does not stop the start), else the
    /// embedded one with its budget store in the data directory (a full disk
    /// does not stop the start either: the store starts degraded).
    pub fn open(cfg: &LimitsConfig, metrics: Arc<Metrics>) -> Result<Limits, String> {
        let backend = match &cfg.redis {
            Some(url) => Backend::Redis(Box::new(RedisLimits::new(
                url,
                &cfg.redis_prefix,
                cfg.fail,
                metrics,
            )?)),
            None => Backend::Local(LocalLimits::open(cfg.data_dir.as_deref(), metrics)?),
        };
        Ok(Limits {
            backend: Arc::new(backend),
        })
    }

    /// `embedded` or `redis`.
    pub fn backend_name(&self) -> &'static str {
        match &*self.backend {
            Backend::Local(_) => "embedded",
            Backend::Redis(_) => "redis",
        }
    }

    /// Checks rpm, tpm and the budget of the key and of its team, and
    /// reserves the ask against both, in one atomic step (all or nothing).
    pub async fn reserve(&self, ask: Ask) -> Result<Reservation, Refusal> {
        if ask.is_free() {
            return Ok(Reservation::none());
        }
        let r = match &*self.backend {
            Backend::Local(l) => l.reserve(&ask, unix_now()).await,
            Backend::Redis(r) => r.reserve(&ask).await,
        }?;
        Ok(match r {
            Some((held, remaining)) => Reservation::new(self.backend.clone(), held, remaining),
            None => Reservation::none(),
        })
    }

    /// The live state of `key`.
    pub async fn state(&self, key: &ApiKey) -> Result<KeyState, String> {
        match &*self.backend {
            Backend::Local(l) => Ok(l.state(key, unix_now()).await),
            Backend::Redis(r) => r.state(key).await,
        }
    }

    /// The live state of `team` (its limits, across all its keys).
    pub async fn team_state(&self, team: &Team) -> Result<KeyState, String> {
        match &*self.backend {
            Backend::Local(l) => Ok(l.team_state(team, unix_now()).await),
            Backend::Redis(r) => r.team_state(team).await,
        }
    }
}
