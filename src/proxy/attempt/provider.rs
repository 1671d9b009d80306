//! One provider's upstreams for one request: the pool's pick (healthy, by
//! weight, the client's protocol first; the one recovering first when every
//! upstream of the chain cools), a jittered pause between attempts, one
//! attempt each (`super::exchange`), and what each attempt came to: the
//! upstream's health (succeeded, or cooled and counted), its note, metric and
//! span.

use super::exchange::{attempt, Outcome};
use super::{cool, Answer, AttemptNote, Call, Failed, Tried};
use crate::config::{Affinity, Upstream};
use crate::error::GatewayError;
use crate::obs::telemetry::AttemptTrace;
use crate::proxy::Gateway;
use crate::upstream::client::{deadline_error, Resent};
use crate::upstream::pool::{self, Cause, Member, SessionKey};
use std::time::{Duration, Instant};

/// The pause before the `n`th attempt (n ≥ 2): random, up to 25 ms doubled
/// for each attempt before it, at most 400 ms.
fn backoff(n: u32) -> Duration {
    let cap_ms = (25u64 << n.saturating_sub(2).min(4)).min(400);
    Duration::from_millis(rand::Rng::gen_range(&mut rand::thread_rng(), 0..=cap_ms))
}

/// Calls the provider's upstreams until one answers: each pick is the pool's
/// weighted choice among the untried, healthy upstreams (docs/resilience.md),
/// by the request's session key unless the provider's `affinity` is off. A
/// connect failure, a first-token timeout, a 429 or a 5xx cools the upstream
/// and moves on, while `attempts_left` lasts; `panic` (every upstream of
/// the request's chain is cooling down) tries the one recovering first.
pub async fn call<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    tried: &mut Tried<'s>,
    attempts_left: &mut u32,
    panic: bool,
) -> Result<Answer<'s>, Failed> {
    let ups = &c.provider.upstreams;
    let mut seen = pool::Tried::default();
    let mut last: Option<GatewayError> = None;
    // A lone 5xx gets one retry on the same upstream before it is blamed.
    let mut again: Option<usize> = None;
    let mut retried_here = false;
    let key = || c.client.affinity.get();
    let affinity = (c.provider.affinity == Affinity::Session).then_some(&key as SessionKey<'_>);
    while *attempts_left > 0 {
        let now = Instant::now();
        let pick = match again.take() {
            Some(i) => Some(i),
            None if panic => c.pool.soonest(ups, c.client.family, seen, now),
            None => c.pool.pick(ups, c.client.family, seen, now, affinity),
        };
        let Some(i) = pick else { break };
        seen.insert(i);
        let up = &ups[i];
        if tried.attempts > 0 {
            let pause = backoff(tried.attempts + 1);
            if c.deadline.is_some_and(|d| Instant::now() + pause >= d) {
                // No time for another attempt: the last failure is the answer.
                return Err(Failed::Final(last.unwrap_or_else(deadline_error)));
            }
            tokio::time::sleep(pause).await;
        }
        *attempts_left -= 1;
        tried.attempts += 1;
        tried.last = Some(up);
        let member = c.pool.member(i);
        let started = Instant::now();
        let span = attempt_span(c, tried.attempts, up);
        let parent = span.as_ref().map(|s| s.traceparent());
        let traceparent = parent.as_deref().or(c.client.traceparent);
        let mut resent = None;
        let outcome = attempt(gw, c, up, member.start(), traceparent, &mut resent).await;
        if let Some(r) = resent {
            note_resent(gw, c, up, tried, &r);
        }
        let mut note = super::note_of(c, up);
        let result = match outcome {
            // A 5xx without `retry-after`, the first of this request, with
            // no other upstream of the provider to go to: often transient,
            // so the same upstream gets one more try after the jittered
            // pause, before it is cooled and the request moves on (to the
            // fallbacks). With another upstream open, that one is tried.
            Outcome::Retry(e, Cause::Status(s, None), status)
                if !retried_here
                    && *attempts_left > 0
                    && !c.pool.any_open(ups, seen, Instant::now()) =>
            {
                log::info!(
                    "{}: upstream {} of {} answered {s}; trying it once more",
                    c.client.request_id,
                    up.id,
                    c.provider.id
                );
                retried_here = true;
                again = Some(i);
                note.status = status;
                note.failure = Some(Cause::Status(s, None).label());
                last = Some(e);
                Err(Failed::Exhausted(None))
            }
            other => judge(gw, c, up, member, other, &mut note, &mut last),
        };
        note.ms = started.elapsed().as_millis() as u64;
        gw.metrics.upstream_attempt(
            &c.provider.id,
            &up.id,
            note.failure
                .unwrap_or(if result.is_ok() { "ok" } else { "error" }),
        );
        if let Some(span) = span {
            span.end(note.status, note.failure);
        }
        tried.notes.push(note);
        match result {
            Ok(a) => return Ok(a),
            Err(Failed::Exhausted(_)) => continue,
            Err(stop) => return Err(stop),
        }
    }
    Err(Failed::Exhausted(last))
}

/// The span of attempt `n` at `up`, when the request is traced.
fn attempt_span(c: &Call<'_, '_>, n: u32, up: &Upstream) -> Option<AttemptTrace> {
    c.client.trace.map(|(t, tel)| {
        t.attempt(
            tel,
            n,
            &c.provider.id,
            &up.id,
            up.protocol_name,
            &up.url.authority,
        )
    })
}

/// The request went out twice: a pooled connection failed before any byte
/// of the answer and it was sent once more on a new one. Counted as an
/// attempt of its own.
fn note_resent(gw: &Gateway, c: &Call<'_, '_>, up: &Upstream, tried: &mut Tried<'_>, r: &Resent) {
    tried.attempts += 1;
    gw.metrics
        .upstream_attempt(&c.provider.id, &up.id, "stale_connection");
    let mut stale = super::note_of(c, up);
    stale.failure = Some("stale_connection");
    stale.ms = r.after.as_millis() as u64;
    tried.notes.push(stale);
}

/// What one attempt's outcome means for the upstream's health, the
/// attempt's note and the provider loop: an answer, a stop, or a failure
/// (kept in `last`) to move on from.
fn judge<'s>(
    gw: &Gateway,
    c: &Call<'_, 's>,
    up: &Upstream,
    member: &Member,
    outcome: Outcome<'s>,
    note: &mut AttemptNote,
    last: &mut Option<GatewayError>,
) -> Result<Answer<'s>, Failed> {
    match outcome {
        Outcome::Answer(a) => {
            member.succeeded();
            note.status = Some(a.status);
            Ok(*a)
        }
        Outcome::Final(e, Some(status)) => {
            // The upstream is alive: it judged the request.
            member.succeeded();
            note.status = Some(status);
            Err(Failed::Final(e))
        }
        Outcome::Final(e, None) => Err(Failed::Final(e)),
        Outcome::Overflow(e, status) => {
            member.succeeded();
            note.status = Some(status);
            note.failure = Some("context_overflow");
            Err(Failed::Overflow(e))
        }
        Outcome::Expired(e) => {
            // The total deadline passed while this upstream was silent.
            let cooled = cool(gw, &c.provider.id, up, member, Cause::Timeout);
            note.failure = Some(Cause::Timeout.label());
            note.cooled_ms = Some(cooled.as_millis() as u64);
            Err(Failed::Final(e))
        }
        Outcome::Unfit(e) => {
            note.failure = Some("unfit");
            Err(Failed::Unfit(e))
        }
        Outcome::Skip(e) => {
            log::warn!(
                "{}: upstream {} of {} skipped ({e})",
                c.client.request_id,
                up.id,
                c.provider.id
            );
            note.failure = Some("skipped");
            *last = Some(e);
            Err(Failed::Exhausted(None))
        }
        Outcome::Retry(e, cause, status) => {
            let cooled = cool(gw, &c.provider.id, up, member, cause);
            log::warn!(
                "{}: upstream {} of {} failed ({e}); cooled for {} ms",
                c.client.request_id,
                up.id,
                c.provider.id,
                cooled.as_millis()
            );
            note.status = status;
            note.failure = Some(cause.label());
            note.cooled_ms = Some(cooled.as_millis() as u64);
            *last = Some(e);
            Err(Failed::Exhausted(None))
        }
    }
}
