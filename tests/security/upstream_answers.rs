//! (filled in by the upstream_answers work)
