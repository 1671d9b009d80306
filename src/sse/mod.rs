//! Incremental SSE decoding and encoding (to be written).
