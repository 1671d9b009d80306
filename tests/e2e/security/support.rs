//! Raw-socket helpers shared by the threat modules: a scripted upstream's
//! reading of one HTTP/1.1 request off its socket.
#![allow(dead_code)]

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// One request as a scripted upstream read it.
pub struct UpstreamRequest {
    /// The request line and headers, without the blank line.
    pub head: String,
    pub body: Vec<u8>,
}

impl UpstreamRequest {
    /// Header `name`'s value (any case), trimmed; empty when absent.
    pub fn header(&self, name: &str) -> &str {
        self.head
            .lines()
            .skip(1)
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
            })
            .unwrap_or_default()
    }

    /// The body as text (lossy).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one request (head, then a `content-length` body): `None` at end of
/// input or on a read error.
pub async fn read_request(s: &mut TcpStream) -> Option<UpstreamRequest> {
    let mut buf = Vec::new();
    let mut piece = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let mut req = UpstreamRequest {
                head: String::from_utf8_lossy(&buf[..end]).into_owned(),
                body: Vec::new(),
            };
            let len: usize = req.header("content-length").parse().unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut piece).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&piece[..n]);
            }
            req.body = buf[end + 4..end + 4 + len].to_vec();
            return Some(req);
        }
        let n = s.read(&mut piece).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&piece[..n]);
    }
}
