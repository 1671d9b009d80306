//! (filled in by the upstream_bounds work)
