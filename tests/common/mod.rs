//! Shared test support: the mock upstream and the HTTP/1.1 test client.
// Each test binary uses a different part of this support code.
#![allow(dead_code)]

pub mod families;
pub mod gateway;
pub mod http_client;
pub mod mock_upstream;
pub mod servers;
