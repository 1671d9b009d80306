//! End-to-end: a graceful shutdown (SIGTERM) loses nothing. Requests in
//! flight finish, streams included, up to the grace period, and what is
//! answered meanwhile closes its connection; a stream still open when it
//! ends gets its protocol's error event (never a cut body);
//! every request has its access line; and a shutdown with nothing in flight
//! does not wait the grace period out.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{catalog, keys, Gateway};
use crate::common::http_client::{self, parse_sse};
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol::OpenAi};
use serde_json::Value;
use std::time::Duration;

/// A Pingora configuration file with a grace period of `seconds`.
fn grace_conf(seconds: u64) -> String {
    let path = std::env::temp_dir().join(format!(
        "switchboard-grace-{}-{seconds}.yaml",
        std::process::id()
    ));
    std::fs::write(
        &path,
        format!("version: 1\ngrace_period_seconds: {seconds}\n"),
    )
    .unwrap();
    path.display().to_string()
}

fn sigterm(gw: &Gateway) {
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(gw.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// The access lines of inference requests (the harness's own health probe left out).
fn lines(gw: &Gateway) -> Vec<Value> {
    gw.access_log()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["path"] == CHAT)
        .collect()
}

#[tokio::test]
async fn a_sigterm_lets_streams_finish_and_ends_the_rest_with_the_error_event() {
    let mock = MockUpstream::start().await;
    let conf = grace_conf(4);
    let mut gw = Gateway::start_with(&catalog(&mock), &keys(), &["--conf", &conf]).await;
    let addr = gw.addr;
    let (short_prompt, long_prompt) = ("short [[stall:1000]]", "long [[stall:600000]]");
    let short = call(
        OpenAi,
        CHAT,
        &openai_body("openai/gpt-5", short_prompt, None, true),
    );
    let long = call(
        OpenAi,
        CHAT,
        &openai_body("openai/gpt-5", long_prompt, None, true),
    );
    // A whole answer whose head the upstream sends only after the SIGTERM.
    let slow_prompt = "slow [[slow:1500]]";
    let slow = call(
        OpenAi,
        CHAT,
        &openai_body("openai/gpt-5", slow_prompt, None, false),
    );
    let short = tokio::spawn(async move { http_client::send(addr, &short).await.unwrap() });
    let long = tokio::spawn(async move { http_client::send(addr, &long).await.unwrap() });
    let slow = tokio::spawn(async move { http_client::send(addr, &slow).await.unwrap() });
    eventually(Duration::from_secs(20), "the requests upstream", || {
        let n = mock.requests().len();
        async move { (n == 3).then_some(()) }
    })
    .await;
    sigterm(&gw);

    // Answered during the drain: whole, and its connection is not kept.
    let slow = slow.await.unwrap();
    assert_eq!(slow.status, 200, "{}", slow.text());
    assert_eq!(
        reply_text(OpenAi, &slow.json()),
        expected_reply(OpenAi, slow_prompt)
    );
    assert_eq!(slow.header("connection"), Some("close"));

    // The stream that ends within the grace period is whole.
    let short = short.await.unwrap();
    assert_eq!(short.status, 200);
    let events = parse_sse(&short.body);
    assert_eq!(
        stream_text(OpenAi, &event_json(&events)),
        expected_reply(OpenAi, short_prompt)
    );
    assert_eq!(events.last().unwrap().data, "[DONE]");
    // The one still open when it ends gets the error event, not a cut body.
    let long = long.await.unwrap();
    let e = stream_error(OpenAi, CHAT, &long);
    assert!(
        e["message"].as_str().unwrap().contains("shutting down"),
        "{e}"
    );
    let status = gw
        .wait_exit(Duration::from_secs(60))
        .expect("the gateway did not exit");
    assert!(status.success(), "{status:?}");
    // Both have their access line, the cut one with its error.
    let log = lines(&gw);
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(log.iter().all(|l| l["status"] == 200), "{log:?}");
    let cut: Vec<&Value> = log.iter().filter(|l| l["error"] != Value::Null).collect();
    assert_eq!(cut.len(), 1, "{log:?}");
    assert!(cut[0]["error"].as_str().unwrap().contains("shutting down"));
    assert_eq!(cut[0]["error_type"], "unavailable");
}

#[tokio::test]
async fn a_sigterm_with_nothing_in_flight_does_not_wait_the_grace_period_out() {
    let mock = MockUpstream::start().await;
    // Ten minutes: the test would time out waiting for Pingora's own sleep.
    let conf = grace_conf(600);
    let mut gw = Gateway::start_with(&catalog(&mock), &keys(), &["--conf", &conf]).await;
    let r = gw
        .send(&call(
            OpenAi,
            CHAT,
            &openai_body("openai/gpt-5", "hello", None, false),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    sigterm(&gw);
    let status = gw
        .wait_exit(Duration::from_secs(120))
        .expect("the gateway waited its whole grace period with nothing in flight");
    assert!(status.success(), "{status:?}");
    assert_eq!(
        lines(&gw).len(),
        1,
        "the request's access line was written out"
    );
}
