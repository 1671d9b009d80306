//! End-to-end: a graceful shutdown (SIGTERM) loses nothing. Requests in
//! flight finish, streams included, up to the grace period, and what is
//! answered meanwhile closes its connection; a stream still open when it
//! ends gets its protocol's error event (never a cut body);
//! every request has its access line; a request sent on a kept-alive
//! connection as the drain begins is still served; and a shutdown with
//! nothing in flight does not wait the grace period out. An upgrade (`-u`,
//! then SIGQUIT) hands the port to the new process; a SIGQUIT with no new
//! process waiting is refused and the gateway keeps serving.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::families::*;
use crate::common::gateway::{catalog, keys, pingora_conf, Gateway, TempDir};
use crate::common::http_client::Connection;
use crate::common::http_client::{self, parse_sse};
use crate::common::mock_upstream::{expected_reply, MockUpstream, Protocol::OpenAi};
use serde_json::Value;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// A Pingora configuration file with a grace period of `seconds`.
fn grace_conf(seconds: u64) -> String {
    let path = std::env::temp_dir().join(format!(
        "switchboard-grace-{}-{seconds}.yaml",
        std::process::id()
    ));
    pingora_conf(&path, &format!("grace_period_seconds: {seconds}\n"))
}

/// A Pingora configuration file whose upgrade socket is in `dir`.
fn upgrade_conf(dir: &std::path::Path) -> String {
    let sock = dir.join("upgrade.sock");
    pingora_conf(
        &dir.join("pingora.yaml"),
        &format!(
            "grace_period_seconds: 30\nupgrade_sock: {}\n",
            sock.display()
        ),
    )
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
    gw.signal("TERM");

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
    gw.signal("TERM");
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

#[tokio::test]
async fn a_sigint_ends_a_gateway_serving_connections_on_every_thread() {
    // Four threads, each with its own event loop (the default runtime),
    // and connections kept open on each: each loop shuts down on its own,
    // and the process still ends. (The benchmark once saw an accept loop
    // run on another loop than the one its listening socket was registered
    // with spin on failed accepts once that one had shut down, holding its
    // thread and the process; the loop now runs on the listener's own
    // loop and ends on such an error. That race is not reproduced here.)
    let mock = MockUpstream::start().await;
    let dir = TempDir::new();
    let conf = pingora_conf(&dir.file("four-threads.yaml"), "threads: 4\n");
    let mut gw = Gateway::start_with(&catalog(&mock), &keys(), &["--conf", &conf]).await;
    let mut kept = Vec::new();
    for i in 0..8 {
        let mut c = Connection::connect(gw.addr).await.unwrap();
        let text = format!("hello {i}");
        let r = c
            .send(&call(
                OpenAi,
                CHAT,
                &openai_body("openai/gpt-5", &text, None, false),
            ))
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        kept.push(c);
    }
    gw.signal("INT");
    let status = gw
        .wait_exit(Duration::from_secs(120))
        .expect("the gateway did not exit after SIGINT");
    assert!(status.success(), "{status:?}");
    drop(kept);
}

#[tokio::test]
async fn a_request_sent_on_a_kept_alive_connection_as_the_drain_begins_is_served() {
    let mock = MockUpstream::start().await;
    // A long window, so the test does not race it on a slow machine.
    let mut gw =
        Gateway::start_with(&catalog(&mock), &keys(), &["--drain-linger-ms", "10000"]).await;
    let prompt = "hello";
    let request = call(
        OpenAi,
        CHAT,
        &openai_body("openai/gpt-5", prompt, None, false),
    );
    let mut kept = Connection::connect(gw.addr).await.unwrap();
    let first = kept.send(&request).await.unwrap();
    assert_eq!(first.status, 200, "{}", first.text());
    assert!(kept.is_open(), "the first answer keeps its connection");
    // Connected before the drain, its first request never sent.
    let mut silent = tokio::net::TcpStream::connect(gw.addr).await.unwrap();

    gw.signal("TERM");
    eventually(Duration::from_secs(30), "the drain to start", || {
        let started = gw.log().contains("shutting down: waiting");
        async move { started.then_some(()) }
    })
    .await;
    // Well into the drain (Pingora alone, or `--drain-linger-ms 0`, has
    // closed the idle connection by now; the window here is 10 s).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The client trusted the last answer's keep-alive: its next request
    // goes out on the same connection, now idle in a draining gateway.
    let second = kept
        .send(&request)
        .await
        .expect("the kept-alive connection was closed under its next request");
    assert_eq!(second.status, 200, "{}", second.text());
    assert_eq!(
        reply_text(OpenAi, &second.json()),
        expected_reply(OpenAi, prompt)
    );
    assert_eq!(second.header("connection"), Some("close"));
    assert!(!kept.is_open());

    // The connection that sent nothing is closed once the window is over,
    // and then the gateway exits.
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(120), silent.read(&mut buf))
        .await
        .expect("the silent connection was never closed");
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    let status = gw
        .wait_exit(Duration::from_secs(120))
        .expect("the gateway did not exit");
    assert!(status.success(), "{status:?}");
    assert_eq!(lines(&gw).len(), 2, "both requests have their access line");
}

#[tokio::test]
async fn an_upgrade_hands_the_port_to_the_new_process() {
    let mock = MockUpstream::start().await;
    let dir = crate::common::gateway::TempDir::new();
    let conf = upgrade_conf(&dir.0);
    let mut old = Gateway::start_with(&catalog(&mock), &keys(), &["--conf", &conf]).await;
    let request = call(
        OpenAi,
        CHAT,
        &openai_body("openai/gpt-5", "before", None, false),
    );
    assert_eq!(old.send(&request).await.status, 200);

    // The new process waits for the sockets; the old one, told to hand
    // them over, waits for it.
    let new = old.spawn_successor(&["--conf", &conf]);
    old.signal("QUIT");
    eventually(Duration::from_secs(60), "the new process to listen", || {
        let listening = new.log().contains("switchboard listening");
        async move { listening.then_some(()) }
    })
    .await;
    let status = old
        .wait_exit(Duration::from_secs(120))
        .expect("the old process did not exit");
    assert!(status.success(), "{status:?}\n{}", old.log());
    // The port stayed open: the new process answers on it.
    let after = call(
        OpenAi,
        CHAT,
        &openai_body("openai/gpt-5", "after", None, false),
    );
    let r = new.send(&after).await;
    assert_eq!(r.status, 200, "{}", r.text());
    eventually(
        Duration::from_secs(30),
        "the new process's access line",
        || {
            let n = lines(&new).len();
            async move { (n == 1).then_some(()) }
        },
    )
    .await;
}

#[tokio::test]
async fn a_sigquit_with_no_new_process_waiting_keeps_serving() {
    let mock = MockUpstream::start().await;
    let dir = crate::common::gateway::TempDir::new();
    let conf = upgrade_conf(&dir.0);
    let mut gw = Gateway::start_with(&catalog(&mock), &keys(), &["--conf", &conf]).await;
    gw.signal("QUIT");
    // Pingora alone would try to send the sockets, give up, and close the
    // port all the same.
    eventually(Duration::from_secs(60), "the refusal", || {
        let refused = gw
            .log()
            .contains("no new process took the listening sockets");
        async move { refused.then_some(()) }
    })
    .await;
    let request = call(
        OpenAi,
        CHAT,
        &openai_body("openai/gpt-5", "still here", None, false),
    );
    let r = gw.send(&request).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_ne!(r.header("connection"), Some("close"), "not draining");
    assert!(
        !gw.log().contains("Broadcasting graceful shutdown"),
        "{}",
        gw.log()
    );
    assert!(
        gw.wait_exit(Duration::from_millis(1)).is_none(),
        "it exited"
    );
    // An upgrade still works afterwards.
    let new = gw.spawn_successor(&["--conf", &conf]);
    gw.signal("QUIT");
    let status = gw
        .wait_exit(Duration::from_secs(120))
        .expect("the old process did not exit");
    assert!(status.success(), "{status:?}");
    let r = new.send(&request).await;
    assert_eq!(r.status, 200, "{}", r.text());
}
