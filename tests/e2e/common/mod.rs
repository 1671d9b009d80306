//! Shared support of the end-to-end tests: the mock upstream, the HTTP/1.1
//! test client, the gateway process, per-family helpers and the servers
//! (Redis, PostgreSQL) some tests need. Imports the `switchboard` library
//! and its dependencies, never a test module.
// The example `mock_upstream` (tests/mock/server.rs) uses part of this.
#![allow(dead_code)]

pub mod families;
pub mod gateway;
pub mod http_client;
pub mod mock_upstream;
pub mod servers;
