//! Proxy (to be written).
