//! Raw-socket helpers shared by the threat modules.
#![allow(dead_code)]
