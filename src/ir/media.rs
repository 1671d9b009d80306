//! Media helpers shared by the codecs: `data:` URLs and media types from file extensions.

/// Splits a `data:<media type>;base64,<data>` URL. `None` when `url` is not a
/// `data:` URL; `Some(Err(reason))` when it is one this gateway cannot carry
/// as base64 (no media type, or not base64-encoded).
pub fn parse_data_url(url: &str) -> Option<Result<(String, String), &'static str>> {
    let rest = url.strip_prefix("data:")?;
    let Some((header, data)) = rest.split_once(',') else {
        return Some(Err("the data: URL has no comma separating header and data"));
    };
    let mut params = header.split(';');
    let media_type = params
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Some(Err("only base64-encoded data: URLs are supported"));
    }
    if media_type.is_empty() {
        return Some(Err("the data: URL does not say its media type"));
    }
    Some(Ok((media_type, data.to_string())))
}

/// Builds a `data:` URL from a media type and base64 data.
pub fn data_url(media_type: &str, data: &str) -> String {
    format!("data:{media_type};base64,{data}")
}

/// Guesses an image media type from a URL's file extension (query and
/// fragment ignored). `None` when the extension is missing or unknown.
pub fn guess_media_type(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let last = path.rsplit('/').next().unwrap_or(path);
    let (_, ext) = last.rsplit_once('.')?;
    match ext.to_ascii_lowercase().as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" | "jpe" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        "heic" => Some("image/heic"),
        "heif" => Some("image/heif"),
        "bmp" => Some("image/bmp"),
        "pdf" => Some("application/pdf"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls() {
        assert_eq!(
            parse_data_url("data:image/png;base64,AAAA"),
            Some(Ok(("image/png".into(), "AAAA".into())))
        );
        assert!(matches!(
            parse_data_url("data:image/svg+xml,<svg/>"),
            Some(Err(_))
        ));
        assert!(matches!(parse_data_url("data:;base64,AAAA"), Some(Err(_))));
        assert_eq!(parse_data_url("https://x/y.png"), None);
        assert_eq!(data_url("image/png", "AA"), "data:image/png;base64,AA");
    }

    #[test]
    fn media_type_guess() {
        assert_eq!(
            guess_media_type("https://a.b/c/d.JPG?x=1"),
            Some("image/jpeg")
        );
        assert_eq!(
            guess_media_type("https://a.b/c/d.webp#f"),
            Some("image/webp")
        );
        assert_eq!(guess_media_type("https://a.b/c/d"), None);
        assert_eq!(guess_media_type("https://a.b/c.d/e"), None);
    }
}
