//! The two backends behind one enum (embedded, or Redis for a fleet) and the
//! configuration that picks one.

use super::held::Held;
use super::local::LocalLimits;
use super::redis::RedisLimits;
use super::Nanos;
use std::path::PathBuf;

pub(crate) enum Backend {
    Local(LocalLimits),
    Redis(Box<RedisLimits>),
}

impl Backend {
    pub(super) async fn settle(&self, held: &Held, tokens: u64, cost: Nanos) -> Option<Nanos> {
        match self {
            Backend::Local(l) => l.settle(held, tokens, cost).await,
            Backend::Redis(r) => r.settle(held, tokens, cost).await,
        }
    }
}

/// What to do when the shared store is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Admit requests unchecked (the default).
    Open,
    /// Refuse them with 503.
    Closed,
}

impl FailMode {
    pub fn name(self) -> &'static str {
        match self {
            FailMode::Open => "open",
            FailMode::Closed => "closed",
        }
    }
}

/// Where limits live.
#[derive(Debug, Clone)]
pub struct LimitsConfig {
    /// The data directory (`--data`); `None` keeps budgets in memory only.
    pub data_dir: Option<PathBuf>,
    /// `--redis redis://host:port`: fleet mode.
    pub redis: Option<String>,
    /// Prefix of every Redis key (`--redis-prefix`).
    pub redis_prefix: String,
    /// `--redis-fail`.
    pub fail: FailMode,
}
