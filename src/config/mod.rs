//! Configuration files: the catalog (providers, upstreams, models) and the API keys.
//!
//! Each file is parsed into `serde_json::Value` first, then validated field by
//! field into typed structures, so every error names the file, the JSON path and
//! the reason. Loading is all-or-nothing: an invalid file yields an error and no
//! partial configuration.

mod catalog;
mod error;
mod json;
mod keys;
mod pricing;

pub use catalog::{
    Affinity, BaseUrl, Catalog, Continuation, Defaults, Features, Model, Policy, Prefill, Provider,
    Scheme, Upstream,
};
pub use error::ConfigError;
pub use keys::{parse_usd_nanos, ApiKey, Budget, BudgetPeriod, KeyStore, ModelPattern};
pub use pricing::{Nanos, Price, Pricing, Rates, Tier, Tokens};
