//! State the gateway keeps beyond one request: stored responses (CONTRACT
//! 5.3), embedded in the data directory or shared through Redis.

pub mod responses;
pub mod responses_redis;
pub mod responses_sqlite;
