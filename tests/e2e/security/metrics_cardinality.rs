//! Metric labels a client can grow without bound (item 7). A key holder
//! who sends a new unknown field with every request (a field the
//! translation drops and reports) or names a new unknown model each time
//! must not add a series per request to `/metrics`: every label whose value
//! comes from a request takes its values from a fixed vocabulary, `other`
//! for the rest.

use crate::common::gateway::{authed, Gateway, KEY};
use crate::common::http_client::{self, Request};
use crate::common::mock_upstream::MockUpstream;
use serde_json::json;

/// The metrics page's series (sample lines).
async fn series(gw: &Gateway) -> Vec<String> {
    let page = http_client::send(gw.metrics, &Request::get("/metrics"))
        .await
        .unwrap()
        .text();
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// 300 requests each with a distinct unknown field (dropped by the A → B
/// translation, reported in `x-switchboard-adjusted`), and 300 naming
/// distinct unknown models: the series count stays where a handful of
/// requests left it, and `parameter="other"` carries the 300.
#[tokio::test]
async fn distinct_unknown_fields_and_models_add_no_series() {
    let mock = MockUpstream::start().await;
    let gw = Gateway::start(&mock).await;
    let send = |i: usize, model: String| {
        let body = json!({"model": model, "max_tokens": 20,
            "messages": [{"role": "user", "content": "hi"}],
            format!("x_probe_field_{i}"): i});
        authed("openai", "/v1/chat/completions", KEY, &body)
    };
    // A few first, so every kind of series exists.
    for i in 0..3 {
        let r = gw.send(&send(i, "claude-sonnet-4.7".into())).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let adjusted = r
            .header("x-switchboard-adjusted")
            .unwrap_or_default()
            .to_string();
        assert!(
            adjusted.contains(&format!("x_probe_field_{i}")),
            "{adjusted}"
        );
        let r = gw.send(&send(i, format!("no-such-model-{i}"))).await;
        assert_eq!(r.status, 404, "{}", r.text());
    }
    let before = series(&gw).await.len();
    for batch in (3..300).collect::<Vec<_>>().chunks(10) {
        let mut tasks = Vec::new();
        for &i in batch {
            let (a, b) = (
                send(i, "claude-sonnet-4.7".into()),
                send(i, format!("no-such-model-{i}")),
            );
            let addr = gw.addr;
            tasks.push(tokio::spawn(async move {
                let ra = http_client::send(addr, &a).await.unwrap();
                let rb = http_client::send(addr, &b).await.unwrap();
                (ra.status, rb.status)
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), (200, 404));
        }
    }
    let after = series(&gw).await;
    assert!(
        after.len() <= before + 5,
        "{} series before, {} after:\n{}",
        before,
        after.len(),
        after.join("\n")
    );
    assert!(
        !after
            .iter()
            .any(|l| l.contains("x_probe_field") || l.contains("no-such-model")),
        "a client-chosen name became a label"
    );
    assert!(
        after.iter().any(|l| {
            l
            == "switchboard_adaptations_total{model=\"claude-sonnet-4.7\",parameter=\"other\"} 300"
        }),
        "{}",
        after
            .iter()
            .filter(|l| l.starts_with("switchboard_adaptations_total"))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
