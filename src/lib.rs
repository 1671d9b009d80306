//! Switchboard: a multi-protocol LLM gateway on Pingora.
//!
//! One base address speaks four client protocols (OpenAI chat-completions and
//! the OpenAI Responses API under `/v1`, Anthropic Messages under
//! `/anthropic/v1`, Gemini generateContent under `/google/v1beta`), serves model listings from a hot-reloadable catalog and
//! forwards inference to upstream providers, translating between protocols.
//!
//! Module map (one responsibility each):
//! - `alloc_count` (feature `alloc-count`): the counting allocator of the load benchmark.
//! - [`adjust`]: what the gateway changed in a request (adapt policy, fields a protocol cannot carry).
//! - [`family`]: the three protocol families and their names.
//! - [`cli`]: the command line (clap): flags, their variables and defaults, the help text; the
//!   settings each part takes, built from them (used by the binary only).
//! - [`config`]: catalog and keys files: serde mirror, validation with JSON paths, queries.
//! - [`runtime`]: the live snapshot (catalog + keys) behind an atomic pointer swap.
//! - [`rfc3339`]: RFC 3339 UTC timestamps from unix time (listings' `created_at`, the access log).
//! - [`reload`]: file watching and SIGHUP: prepare a new snapshot, then swap it in.
//! - [`error`]: the gateway's error value (status, kind, message, param) independent of HTTP types.
//! - [`json_depth`]: a linear scan refusing JSON nested deeper than the parser's limit.
//! - [`metrics`]: Prometheus counters and histograms, served on `--metrics`.
//! - [`proxy`]: the Pingora `ProxyHttp` service: routing, auth, listings, inference exchange.
//! - [`ir`]: the neutral canonical request/response/stream model (hub of the translation).
//! - [`protocol`]: per-family wire types, codecs to and from the IR, listings and error shapes.
//! - [`sse`]: incremental server-sent-events decoder and encoder.
//! - [`passthrough`]: same-family body and SSE rewriting (model name splice, usage, completeness).
//! - [`stream`]: the per-request stream translator (passthrough rewrite or IR translation).
//! - [`tokens`]: the o200k token counter and the context-length estimate.
//! - [`validate`]: request validation against model metadata.
//! - [`policy`]: adapt or refuse what a model cannot take (docs/api.md "Adapt or refuse"): the plan
//!   and its report.
//! - [`state`]: state beyond one request: the usage ledger (embedded SQLite or PostgreSQL,
//!   written off the request path), per-key rpm / tpm windows and budgets (reserve, then
//!   settle; embedded or in Redis), stored responses.
//! - [`admin`]: the admin API (`/admin/*` on the metrics listener, behind `--admin-key`).
//! - [`admin_keys`]: `GET /admin/keys/{id}`: a key's limits and their live use.
//! - [`secrets`]: every secret the gateway holds, scrubbed from what it relays and logs.
//! - [`jsonedit`]: surgical edits of raw JSON (remove members, set values) keeping every other byte.
//! - [`listener`]: what a client connection may hold on either listener (head, body and keep-alive
//!   deadlines, the connection cap).

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod adjust;
pub mod admin;
pub mod admit;
pub mod cli;
pub mod config;
pub mod error;
pub mod family;
pub mod ir;
pub mod listener;
pub mod obs;
pub mod protocol;
pub mod proxy;
pub mod runtime;
pub mod secrets;
pub mod sse;
pub mod state;
pub mod translate;
pub mod upstream;
pub mod util;
