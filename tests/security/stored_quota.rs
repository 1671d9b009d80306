//! (filled in by the stored_quota work)
