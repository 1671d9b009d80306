//! State kept beyond one request: limits and budgets (embedded or in Redis).

pub mod limits;
pub mod limits_local;
pub mod limits_redis;
