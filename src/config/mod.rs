//! Configuration files: the catalog (providers, upstreams, models) and the API keys.
//!
//! Each file is parsed into `serde_json::Value` first, then validated field by
//! field into typed structures, so every error names the file, the JSON path and
//! the reason. Loading is all-or-nothing: an invalid file yields an error and no
//! partial configuration.

mod catalog;
mod cloud;
mod error;
mod json;
mod keys;
mod pricing;
mod url;

pub use catalog::{
    Affinity, Catalog, Continuation, Defaults, Features, Model, Policy, Prefill, Provider, Upstream,
};
pub use cloud::{
    Auth, AwsAuth, Cloud, Deployment, Entra, GoogleAuth, BEDROCK_KEY_ENV, ENTRA_AUTHORITY,
};
pub use error::ConfigError;
pub use keys::{
    now_secs, parse_usd_nanos, stored_key, stored_team, ApiKey, Budget, BudgetPeriod, Conflict,
    JwtMapping, KeyStore, ModelPattern, Source, Status, StoredKey, StoredKeys, Team,
    STORED_KEY_FIELDS,
};
pub use pricing::{Nanos, Price, Pricing, Rates, Tier, Tokens};
pub use url::{BaseUrl, Scheme};
