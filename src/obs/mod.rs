//! Observability sinks the request path and the stores write into: the
//! record of what a request came to (`outcome`), the metrics registry
//! (`metrics`), OpenTelemetry traces (`telemetry`), and the
//! load benchmark's counting allocator (`alloc_count`, feature `alloc-count`).
//!
//! May import: `adjust`, `error`, `family`, `util`.

#[cfg(feature = "alloc-count")]
pub mod alloc_count;
pub mod metrics;
pub mod outcome;
pub mod telemetry;
