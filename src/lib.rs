//! Switchboard: a multi-protocol LLM gateway on Pingora.
//!
//! One base address speaks four client protocols (OpenAI chat-completions and
//! the OpenAI Responses API under `/v1`, Anthropic Messages under
//! `/anthropic/v1`, Gemini generateContent under `/google/v1beta`), serves model listings from a hot-reloadable catalog and
//! forwards inference to upstream providers, translating between protocols.
//!
//! Module map (one concern each; what each may import is in
//! docs/ARCHITECTURE.md and checked by `tests/layout.rs`):
//! - vocabulary: [`family`] (the protocol families), [`adjust`] (what the gateway changed in a
//!   request), [`error`] (the protocol-neutral error), [`secrets`] (every secret held, scrubbed).
//! - [`util`]: leaf helpers (JSON edits and depth, dates, base64, percent-decoding, gathering).
//! - [`config`]: catalog and keys files; [`runtime`]: the live snapshot and its reload.
//! - [`ir`]: the canonical request/response/stream model; [`sse`]: the SSE decoder and encoder;
//!   [`eventstream`]: AWS event-stream messages (Bedrock streams).
//! - [`protocol`]: one spoke per wire protocol (codecs to and from the IR, peeks, HTTP details).
//! - [`admit`]: validation, adapt-or-refuse policy, token counts (before any upstream call).
//! - [`translate`]: same-family pass-through, the client stream, bodies through the IR.
//! - [`upstream`]: the HTTP/1.1 client, its connection pool, each provider's upstream pool.
//! - [`identity`]: JWT callers (OIDC): tokens verified against the provider's keys, claims mapped.
//! - [`obs`]: the outcome record, metrics registry, traces.
//! - [`state`]: the usage ledger, limits and budgets, stored responses.
//! - [`listener`]: what a client connection may hold; [`admin`]: the metrics listener's app.
//! - [`proxy`]: the Pingora service and the request path; [`cli`]: the command line.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod adjust;
pub mod admin;
pub mod admit;
pub mod cli;
pub mod config;
pub mod error;
pub mod eventstream;
pub mod family;
pub mod identity;
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
