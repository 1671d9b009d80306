//! (filled in by the malformed_input work)
