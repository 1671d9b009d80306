//! OpenTelemetry traces (docs/operations.md "Traces (OpenTelemetry)"): with `--otlp-endpoint`, one
//! span per inference request (kind server, the GenAI semantic conventions) and a child span per
//! upstream attempt (kind client), exported over OTLP/HTTP (protobuf) in batches by the SDK's own
//! thread, never on the request path. The W3C `traceparent` a client sends is continued (the
//! request span is its child), and each attempt sends its own upstream. Without an endpoint no span
//! is made and a client's valid `traceparent` goes upstream re-written in version 00's form. An
//! invalid one (not `00-<32 hex>-<16 hex>-<2 hex>` with non-zero ids, or longer than
//! [`MAX_TRACEPARENT`]) is never continued nor forwarded: a new trace starts.

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::time::{Duration, SystemTime};

/// The OTLP exporter and the tracer behind it.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Telemetry")
    }
}

/// The traces URL for an OTLP/HTTP endpoint: `{endpoint}/v1/traces`, unless
/// the endpoint names that path already.
pub fn traces_url(endpoint: &str) -> Result<String, String> {
    let base = endpoint.trim_end_matches('/');
    if !base.starts_with("http://") {
        return Err(format!(
            "--otlp-endpoint {endpoint:?}: expected http://host:port (a local collector or agent; OTLP over TLS is not built in)"
        ));
    }
    Ok(if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    })
}

impl Telemetry {
    /// Starts exporting to the OTLP/HTTP `endpoint`. The batch processor reads
    /// the standard `OTEL_BSP_*` variables (schedule delay, queue size).
    pub fn from_endpoint(endpoint: &str) -> Result<Telemetry, String> {
        let url = traces_url(endpoint)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url)
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot set up the OTLP exporter: {e}"))?;
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_service_name("switchboard")
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "switchboard");
        Ok(Telemetry { provider, tracer })
    }

    /// Sends what is queued and stops (graceful shutdown).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            log::warn!("OpenTelemetry: spans not flushed at shutdown: {e}");
        }
    }
}

/// The longest `traceparent` considered: version 00 is 55 characters; a
/// later version may append fields, and W3C's `tracestate` caps a header
/// at 512.
pub const MAX_TRACEPARENT: usize = 512;

/// A W3C `traceparent` value: trace id, parent span id, flags.
pub fn parse_traceparent(v: &str) -> Option<SpanContext> {
    if v.len() > MAX_TRACEPARENT {
        return None;
    }
    let mut parts = v.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    // Version 00 has exactly four fields; later versions may add more.
    if version.len() != 2
        || version == "ff"
        || (version == "00" && parts.next().is_some())
        || trace.len() != 32
        || span.len() != 16
        || flags.len() != 2
    {
        return None;
    }
    let lower_hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if ![version, trace, span, flags].into_iter().all(lower_hex) {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    if trace == TraceId::INVALID || span == SpanId::INVALID {
        return None;
    }
    Some(SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags & 1),
        true,
        TraceState::default(),
    ))
}

/// The `traceparent` value naming `sc` as the parent.
pub fn traceparent(sc: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    )
}

/// One inference request's span.
#[derive(Debug)]
pub struct RequestTrace {
    cx: Context,
}

/// One upstream attempt's span.
#[derive(Debug)]
pub struct AttemptTrace {
    cx: Context,
}

impl RequestTrace {
    /// Starts the request span `{operation} {model}` at `started`, the
    /// child of the client's `traceparent` when it sent a valid one.
    pub fn start(
        t: &Telemetry,
        client_traceparent: Option<&str>,
        operation: &str,
        model: &str,
        started: SystemTime,
    ) -> RequestTrace {
        let parent = match client_traceparent.and_then(parse_traceparent) {
            Some(sc) => Context::new().with_remote_span_context(sc),
            None => Context::new(),
        };
        let span = t
            .tracer
            .span_builder(format!("{operation} {model}"))
            .with_kind(SpanKind::Server)
            .with_start_time(started)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", operation.to_string()),
                KeyValue::new("gen_ai.request.model", model.to_string()),
            ])
            .start_with_context(&t.tracer, &parent);
        RequestTrace {
            cx: parent.with_span(span),
        }
    }

    /// Sets a string attribute.
    pub fn set(&self, key: &'static str, value: impl Into<String>) {
        self.cx
            .span()
            .set_attribute(KeyValue::new(key, value.into()));
    }

    /// Sets an integer attribute.
    pub fn set_i64(&self, key: &'static str, value: i64) {
        self.cx.span().set_attribute(KeyValue::new(key, value));
    }

    /// Starts the span of attempt `n` at `upstream` (its id, protocol and host).
    pub fn attempt(
        &self,
        t: &Telemetry,
        n: u32,
        provider: &str,
        upstream: &str,
        protocol: &'static str,
        host: &str,
    ) -> AttemptTrace {
        let span = t
            .tracer
            .span_builder(format!("attempt {provider}/{upstream}"))
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("gen_ai.provider.name", provider.to_string()),
                KeyValue::new("switchboard.upstream", upstream.to_string()),
                KeyValue::new("switchboard.upstream.protocol", protocol),
                KeyValue::new("switchboard.attempt", i64::from(n)),
                KeyValue::new("server.address", host.to_string()),
            ])
            .start_with_context(&t.tracer, &self.cx);
        AttemptTrace {
            cx: self.cx.with_span(span),
        }
    }

    /// Ends the span with what the request came to (docs/operations.md
    /// "Traces (OpenTelemetry)": the GenAI attributes: the provider and model
    /// that answered, the usage); `failure` is the connection's error when
    /// the request has no error of its own.
    pub fn finish(&self, o: &crate::obs::outcome::Outcome, failure: Option<&str>) {
        if let Some(p) = &o.provider {
            self.set("gen_ai.provider.name", p.as_str());
        }
        if let Some(m) = &o.answered_by {
            self.set("gen_ai.response.model", m.as_str());
        }
        if let Some(n) = o.usage.input_tokens {
            self.set_i64("gen_ai.usage.input_tokens", n as i64);
        }
        if let Some(n) = o.usage.output_tokens {
            self.set_i64("gen_ai.usage.output_tokens", n as i64);
        }
        if let Some(f) = &o.fallback_from {
            self.set("switchboard.fallback_from", f.as_str());
        }
        self.set_i64("switchboard.attempts", i64::from(o.attempts));
        let error = o.error.as_ref().map(|n| n.message.as_str()).or(failure);
        self.end(o.status, error);
    }

    /// Ends the span with the response's status (an error status from 400 on).
    pub fn end(&self, status: u16, error: Option<&str>) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if status >= 400 || error.is_some() {
            span.set_status(Status::error(error.unwrap_or("error").to_string()));
        }
        span.end();
    }
}

impl AttemptTrace {
    /// The `traceparent` the upstream gets: this attempt as the parent.
    pub fn traceparent(&self) -> String {
        traceparent(self.cx.span().span_context())
    }

    /// Ends the span: the upstream's status when it answered, why it failed.
    pub fn end(self, status: Option<u16>, failure: Option<&str>) {
        let span = self.cx.span();
        if let Some(s) = status {
            span.set_attribute(KeyValue::new("http.response.status_code", i64::from(s)));
        }
        if let Some(f) = failure {
            span.set_attribute(KeyValue::new("error.type", f.to_string()));
            span.set_status(Status::error(f.to_string()));
        }
        span.end();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_parse_and_format() {
        let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = parse_traceparent(v).unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(sc.is_sampled() && sc.is_remote());
        assert_eq!(traceparent(&sc), v);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        // A later version may carry more fields, within the bound.
        assert!(parse_traceparent(&format!("01-{}-x", &v[3..])).is_some());
        let long = format!("01-{}-{}", &v[3..], "a".repeat(MAX_TRACEPARENT));
        assert!(parse_traceparent(&long).is_none());
    }

    #[test]
    fn traces_urls() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://c:4318/v1/traces/").unwrap(),
            "http://c:4318/v1/traces"
        );
        assert!(traces_url("https://c:4318").is_err());
    }
}
