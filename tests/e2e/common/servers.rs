//! The servers some end-to-end tests need beside the gateway: Redis (fleet
//! mode) and PostgreSQL (the ledger). Tests that need one sit in a module
//! named `needs_redis` or `needs_postgres` and are `#[ignore]`d, so a plain
//! `cargo test` passes on a machine without them; tests/run.sh starts both
//! servers and runs them with `-- --ignored needs_redis:: needs_postgres::`.
//! Imports std only.

use std::time::Duration;

/// The Redis the tests use: `SWITCHBOARD_TEST_REDIS`, else the local default.
pub fn redis_url() -> String {
    std::env::var("SWITCHBOARD_TEST_REDIS").unwrap_or_else(|_| {
        ensure_redis();
        "redis://127.0.0.1:6379".to_string()
    })
}

/// Makes sure a Redis answers on 127.0.0.1:6379, starting `redis-server` if
/// none does; panics, naming tests/run.sh, when it cannot.
pub fn ensure_redis() {
    let up = || std::net::TcpStream::connect("127.0.0.1:6379").is_ok();
    if up() {
        return;
    }
    let started = std::process::Command::new("redis-server")
        .args(["--daemonize", "yes", "--save", "", "--appendonly", "no"])
        .status();
    assert!(
        matches!(started, Ok(s) if s.success()),
        "no Redis on 127.0.0.1:6379 and redis-server cannot be started ({started:?}): run tests/run.sh, which installs it"
    );
    for _ in 0..100 {
        if up() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("redis-server did not start");
}
