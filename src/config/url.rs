//! An upstream's base URL (`http(s)://host[:port][/path]`), parsed once at load.

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// A parsed upstream base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    pub scheme: Scheme,
    /// Host name or IP literal (without brackets).
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash (may be empty).
    pub path: String,
    /// The `Host` header value (host, plus `:port` when not the scheme default).
    pub authority: String,
    /// The host when it is an IP literal (parsed once here, not at every
    /// request: such a host is never resolved).
    pub ip: Option<std::net::IpAddr>,
}

impl BaseUrl {
    /// Parses `http(s)://host[:port][/path]`.
    pub fn parse(s: &str) -> Result<BaseUrl, String> {
        let (scheme, rest) = if let Some(r) = s.strip_prefix("https://") {
            (Scheme::Https, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (Scheme::Http, r)
        } else {
            return Err("must start with http:// or https://".into());
        };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if path.contains(['?', '#']) {
            return Err("must not carry a query or fragment".into());
        }
        let default_port = match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or("unclosed IPv6 bracket")?;
            let host = &v6[..end];
            let after = &v6[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse::<u16>().map_err(|_| "invalid port")?,
                None if after.is_empty() => default_port,
                None => return Err("invalid authority".into()),
            };
            (host.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse::<u16>().map_err(|_| "invalid port")?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() || authority.contains('@') {
            return Err("missing or invalid host".into());
        }
        Ok(BaseUrl {
            scheme,
            ip: host.parse().ok(),
            host,
            port,
            path: path.trim_end_matches('/').to_string(),
            authority: authority.to_string(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_base_urls() {
        let u = BaseUrl::parse("https://api.example.com").unwrap();
        assert_eq!(
            (u.port, u.path.as_str(), u.authority.as_str()),
            (443, "", "api.example.com")
        );
        assert_eq!(u.ip, None);
        let u = BaseUrl::parse("http://[::1]:8080/x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 8080, "/x")
        );
        assert_eq!(u.ip, Some(std::net::IpAddr::from([0, 0, 0, 0, 0, 0, 0, 1])));
        let u = BaseUrl::parse("http://127.0.0.1:9").unwrap();
        assert_eq!(u.ip, Some(std::net::IpAddr::from([127, 0, 0, 1])));
        assert!(BaseUrl::parse("http://h:99999").is_err());
        assert!(BaseUrl::parse("http://u@h").is_err());
    }
}
