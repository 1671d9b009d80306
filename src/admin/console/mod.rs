//! The web console (docs/operations.md "Console"): `GET /admin/ui/` on the
//! metrics listener, one HTML shell, one script and one stylesheet, compiled
//! into the binary (`assets/`), nothing fetched from anywhere else.
//!
//! The assets hold no data, so they are served without the admin key; every
//! figure the pages show comes from the admin JSON API, which the script
//! calls with the key typed into the sign-in field as
//! `Authorization: Bearer` (kept in the tab's `sessionStorage`, never in a
//! URL). Every answer carries `Content-Security-Policy: default-src 'self'`
//! (no inline script or style, no other origin, no framing, no form
//! submission) and `X-Frame-Options: DENY`. The shell names the script and
//! stylesheet with a hash of their bytes (`app.js?v=…`), so those are cached
//! for good and a new binary's assets are fetched afresh; the shell itself
//! is revalidated each time.

use http::{header, HeaderValue, Method, Response, StatusCode};
use std::sync::OnceLock;

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// Where the console lives.
pub const ROOT: &str = "/admin/ui/";

/// The policy every console answer carries.
pub const CSP: &str =
    "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Whether `path` is the console's.
pub fn owns(path: &str) -> bool {
    path == "/admin/ui" || path.starts_with(ROOT)
}

/// The shell with the assets' version in their URLs, made once.
fn index() -> &'static (String, String) {
    static INDEX_HTML: OnceLock<(String, String)> = OnceLock::new();
    INDEX_HTML.get_or_init(|| {
        let mut h = crate::util::hash::Hasher::new();
        h.piece(APP_JS.as_bytes());
        h.piece(APP_CSS.as_bytes());
        let version = format!("{:016x}", h.finish());
        (INDEX.replace("{{VERSION}}", &version), version)
    })
}

/// An answer with the console's headers.
fn answer(
    status: StatusCode,
    content_type: &'static str,
    cache: &'static str,
    body: Vec<u8>,
) -> Response<Vec<u8>> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// Answers a console request (`owns(path)` holds).
pub fn respond(method: &Method, path: &str, query: Option<&str>) -> Response<Vec<u8>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if method != Method::GET {
        let mut r = answer(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "no-store",
            b"use GET\n".to_vec(),
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return r;
    }
    let (html, version) = index();
    // Cached for good only under the version this binary serves.
    let asset_cache = if query.is_some_and(|q| {
        q.split('&')
            .any(|p| p.strip_prefix("v=") == Some(version.as_str()))
    }) {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    match path {
        "/admin/ui" => {
            let mut r = answer(StatusCode::PERMANENT_REDIRECT, TEXT, "no-cache", Vec::new());
            r.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static(ROOT));
            r
        }
        "/admin/ui/" | "/admin/ui/index.html" => answer(
            StatusCode::OK,
            "text/html; charset=utf-8",
            "no-cache",
            html.as_bytes().to_vec(),
        ),
        "/admin/ui/app.js" => answer(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            asset_cache,
            APP_JS.as_bytes().to_vec(),
        ),
        "/admin/ui/app.css" => answer(
            StatusCode::OK,
            "text/css; charset=utf-8",
            asset_cache,
            APP_CSS.as_bytes().to_vec(),
        ),
        _ => answer(
            StatusCode::NOT_FOUND,
            TEXT,
            "no-store",
            b"not found\n".to_vec(),
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_names_its_assets_by_version_and_has_no_inline_script() {
        let r = respond(&Method::GET, "/admin/ui/", None);
        assert_eq!(r.status(), 200);
        let html = String::from_utf8(r.body().clone()).unwrap();
        let (_, version) = index();
        assert!(html.contains(&format!("app.js?v={version}")), "{html}");
        assert!(html.contains(&format!("app.css?v={version}")), "{html}");
        assert!(!html.contains("{{VERSION}}"));
        // Every script is a file of ours; no inline handler or style.
        assert_eq!(html.matches("<script").count(), 1);
        assert!(
            !html.contains("onclick") && !html.contains("style="),
            "{html}"
        );
        assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CSP);
        assert_eq!(r.headers()[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-cache");
        let js = respond(
            &Method::GET,
            "/admin/ui/app.js",
            Some(&format!("v={version}")),
        );
        assert_eq!(
            js.headers()[header::CACHE_CONTROL],
            "public, max-age=31536000, immutable"
        );
        let stale = respond(&Method::GET, "/admin/ui/app.js", Some("v=old"));
        assert_eq!(stale.headers()[header::CACHE_CONTROL], "no-cache");
        assert_eq!(
            respond(&Method::GET, "/admin/ui/nothing", None).status(),
            404
        );
        assert_eq!(respond(&Method::POST, "/admin/ui/", None).status(), 405);
        let redirect = respond(&Method::GET, "/admin/ui", None);
        assert_eq!(redirect.status(), 308);
        assert_eq!(redirect.headers()[header::LOCATION], ROOT);
    }

    #[test]
    fn the_script_keeps_the_key_out_of_urls_and_local_storage() {
        assert!(!APP_JS.contains("localStorage"));
        assert!(APP_JS.contains("sessionStorage"));
        // No framework or remote origin: every URL the script names is ours
        // (SVG's namespace is a name, never fetched).
        let js = APP_JS.replace("http://www.w3.org/2000/svg", "");
        assert!(!js.contains("http://") && !js.contains("https://"));
        assert!(!APP_CSS.contains("http://") && !APP_CSS.contains("https://"));
        for name in [
            "Overview",
            "Keys",
            "Teams",
            "Usage",
            "Upstreams",
            "Requests",
        ] {
            assert!(INDEX.contains(&format!(">{name}</a>")), "{name}");
        }
    }
}
