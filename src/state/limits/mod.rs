//! Per-key and per-team limits that hold exactly (docs/configuration.md
//! "Limits and budgets", "Teams"): requests per minute and tokens per minute
//! over a sliding minute, and budgets in USD per day, month or for the key's
//! (or team's) whole life. A request of a key in a team counts against both,
//! reserved, settled and released together.
//!
//! Reserve, then settle. Before a request goes upstream its worst case (input
//! bound plus output cap, in tokens and at catalog prices) is reserved in one
//! atomic step that also checks rpm, tpm and the remaining budget; when the
//! usage is known the reservation is settled to the real figures; a request
//! that fails releases it (dropping a [`Reservation`] releases it). So N
//! requests in flight can never spend more than the budget between them.
//!
//! The pieces, in the order a request meets them:
//! - [`money`]: integer nano-USD and their rendering (costs come from
//!   `config::Pricing::cost` and `worst_case`);
//! - [`ask`]: what the request asks of its key and its team ([`Ask`]);
//! - [`handle`]: [`Limits::reserve`] checks and reserves it in one step;
//! - [`window`]: the sliding minute of rpm and tpm;
//! - [`budget`]: the budget's UTC period and what is left of it;
//! - [`refusal`]: why a request does not fit, as the client's error;
//! - [`reservation`]: the request's handle until it settles or releases it;
//! - [`held`]: what a reservation holds, as a backend records it;
//! - [`backend`]: the two backends with the same semantics, embedded (rpm and
//!   tpm windows in memory per process, see [`local`]; budgets, their spend
//!   and reservations, in `DATA/limits.sqlite`, shared by the processes on
//!   one data directory, see [`store`]) and fleet (`--redis`: everything in
//!   Redis, each step one Lua script, see [`redis`]).

pub mod ask;
pub mod backend;
pub mod budget;
pub mod handle;
pub mod held;
pub mod local;
pub mod money;
pub mod redis;
pub mod refusal;
pub mod reservation;
pub mod store;
pub mod window;

pub use ask::{Ask, TeamAsk};
pub use backend::{FailMode, LimitsConfig};
pub use budget::{period_at, BudgetState, Period};
pub use handle::{KeyState, Limits};
pub use money::{format_usd, Nanos, NANOS_PER_USD};
pub use refusal::Refusal;
pub use reservation::{Reservation, RESERVATION_LEASE_SECS};
pub use window::{unix_now, Window, WINDOW_SECS};

pub(crate) use held::{least, Held, Part, Reserved};
