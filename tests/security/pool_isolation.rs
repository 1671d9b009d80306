//! (filled in by the pool_isolation work)
