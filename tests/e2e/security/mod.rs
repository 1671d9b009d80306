//! Adversarial end-to-end tests, one module per threat (issue: isolation and
//! secrets). Each drives the real binary over real sockets, as an attacker
//! or an unlucky operator would: raw-socket clients, scripted upstreams that
//! misbehave on the wire. docs/security.md maps each threat to its defence
//! and setting; the module names here match that table's rows.

/// Shared raw-socket helpers for the threat modules.
mod support;

/// Clients that hold connections, heads or bodies open (item 9).
mod client_resources;
/// The HTTP/1 session's framing: refusals, pipelining, drained bodies,
/// keep-alive (item 11).
mod http1_framing;
/// Secrets and unbounded client strings in the process's logs (items 3 and 8).
mod log_secrets;
/// Malformed client input answered as a client fault, never a server one
/// (item 11).
mod malformed_input;
/// Metric labels a client can grow without bound (item 7).
mod metrics_cardinality;
/// One client's answer reaching another: poisoned pooled connections,
/// resent POSTs (items 1 and 2).
mod pool_isolation;
/// Provider keys echoed by upstreams, relayed to clients or logs (item 4).
mod relayed_secrets;
/// Stored responses without a quota (item 14).
mod stored_quota;
mod stream_utf8;
/// Upstream answers that must not read as the client's fault or reach it
/// raw: 401/403/3xx, anthropic-beta, invalid UTF-8 in streams (items 5, 6, 12).
mod upstream_answers;
/// Upstreams that would make a request outlive its deadline or hold
/// unbounded memory (items 10 and 13).
mod upstream_bounds;
