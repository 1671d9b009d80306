//! Upstream connections (placeholder).
use super::Settings;

/// Pooled upstream client.
pub struct UpstreamClient;

impl UpstreamClient {
    /// New client.
    pub fn new(_s: &Settings) -> Self {
        UpstreamClient
    }
}
