//! Talking to upstreams, knowing no protocol family's wire format: the
//! HTTP/1.1 codec without I/O (`h1`), connections, their idle pool and one
//! exchange (`client`), each provider's pool of upstreams with its passive
//! health and weighted pick (`pool`), the cloud upstreams' access tokens
//! (`credentials`: Entra ID, Google OAuth2; cached, refreshed, never logged).
//!
//! May import: `config`, `error`, `family`, `util`.

pub mod client;
pub mod credentials;
pub mod h1;
pub mod pool;
