//! (filled in by the metrics_cardinality work)
