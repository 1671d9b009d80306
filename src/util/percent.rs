//! Percent-decoding of URL components (RFC 3986 `%XX` escapes; in a query
//! component, `+` is a space as HTML forms send it): one loop for the path
//! segments the router reads, the queries the Responses and admin routes
//! read.

/// Where a component comes from: `+` means a space only in a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    Path,
    Query,
}

/// `s` decoded, or `None` when an escape is malformed or the result is not UTF-8.
pub fn decode_strict(s: &str, c: Component) -> Option<String> {
    String::from_utf8(decode(s, c, true)?).ok()
}

/// `s` decoded as bytes, a malformed escape kept as it is (callers choose
/// how to read bytes that are not UTF-8).
pub fn decode_lenient(s: &str, c: Component) -> Vec<u8> {
    decode(s, c, false).unwrap_or_default()
}

fn decode(s: &str, c: Component, strict: bool) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => match (b.get(i + 1).and_then(hex), b.get(i + 2).and_then(hex)) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ if strict => return None,
                _ => out.push(b'%'),
            },
            b'+' if c == Component::Query => out.push(b' '),
            other => out.push(other),
        }
        i += 1;
    }
    Some(out)
}

fn hex(c: &u8) -> Option<u8> {
    (*c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_plus_by_component() {
        assert_eq!(decode_strict("a%2Fb+c", Component::Query).unwrap(), "a/b c");
        assert_eq!(decode_lenient("a%2fb+c", Component::Path), b"a/b+c");
    }

    #[test]
    fn malformed_escapes_are_refused_or_kept() {
        for bad in ["%", "%4", "%zz", "a%4g"] {
            assert_eq!(decode_strict(bad, Component::Query), None, "{bad}");
            assert_eq!(
                decode_lenient(bad, Component::Path),
                bad.as_bytes(),
                "{bad}"
            );
        }
        assert_eq!(decode_strict("%ff", Component::Query), None);
        assert_eq!(decode_lenient("%ff", Component::Query), [0xff]);
    }
}
