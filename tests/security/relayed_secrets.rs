//! (filled in by the relayed_secrets work)
