//! The end-to-end tests, one binary (one link of the gateway instead of one
//! per file), a module per feature. Each module starts the real binary
//! (`CARGO_BIN_EXE_switchboard`) on loopback against the mock upstream in
//! `common/` (or a scripted one); `security` holds the adversarial suite, a
//! module per threat. Modules import `crate::common` and the `switchboard`
//! library, never each other. One module: `cargo test --test e2e limits::`.
//! Tests needing Redis or PostgreSQL sit in modules `needs_redis` /
//! `needs_postgres`, ignored by a plain `cargo test` (see common/servers.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod access_log;
mod admin_keys;
mod affinity;
mod agent_requests;
mod aliases;
mod auth_reload;
mod bedrock_client;
mod bedrock_upstream;
mod clouds;
mod console;
mod embeddings;
mod hostile_input;
mod inference;
mod inference_failures;
mod jwt_auth;
mod ledger;
mod limits;
mod listings;
mod mock_selftest;
mod otel;
mod policy;
mod pricing;
mod rerank;
mod resilience;
mod responses;
mod responses_store;
mod security;
mod shutdown;
mod structured_output;
mod tls_listener;
mod tls_upstream;
mod translation;
mod upstream_wire;
