//! (filled in by the client_resources work)
