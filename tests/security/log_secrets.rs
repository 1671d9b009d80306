//! (filled in by the log_secrets work)
