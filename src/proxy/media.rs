//! The request `Content-Type` rule of the inference routes: the three vendors'
//! APIs read JSON bodies only, so a declared type that is not JSON (a form
//! post from `curl -d`, `text/plain`) is a 400 in the family's shape rather
//! than a body parsed as if it were JSON. A request without the header is
//! read as JSON, as the body is the only thing these routes accept.

use crate::error::GatewayError;
use pingora_http::RequestHeader;

/// Whether a `Content-Type` value names JSON: `application/json` or a
/// structured `application/<x>+json`, parameters (`; charset=utf-8`) and
/// letter case ignored.
pub fn is_json(value: &[u8]) -> bool {
    let essence = value
        .split(|b| *b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let Some(subtype) = strip_prefix_ignore_case(essence, b"application/") else {
        return false;
    };
    subtype.eq_ignore_ascii_case(b"json")
        || (subtype.len() > 5 && subtype[subtype.len() - 5..].eq_ignore_ascii_case(b"+json"))
}

fn strip_prefix_ignore_case<'a>(s: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// A 400 when the request declares a body type that is not JSON.
pub fn require_json(req: &RequestHeader) -> Result<(), GatewayError> {
    let Some(v) = req.headers.get(http::header::CONTENT_TYPE) else {
        return Ok(());
    };
    if is_json(v.as_bytes()) {
        return Ok(());
    }
    let shown = String::from_utf8_lossy(v.as_bytes());
    Err(GatewayError::invalid_param(
        "content-type",
        format!("content-type: the request body must be JSON (application/json), not {shown:?}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_media_types() {
        for ok in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=UTF-8",
            " application/json ",
            "application/vnd.api+json",
            "application/merge-patch+JSON",
        ] {
            assert!(is_json(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/json",
            "application/jsonx",
            "application/+json",
            "application/x-ndjson",
            "json",
        ] {
            assert!(!is_json(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn missing_header_is_json() {
        let mut h = RequestHeader::build("POST", b"/v1/chat/completions", None).unwrap();
        assert!(require_json(&h).is_ok());
        h.insert_header("content-type", "text/plain").unwrap();
        let e = require_json(&h).unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(e.param.as_deref(), Some("content-type"));
    }
}
