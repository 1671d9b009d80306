//! A client connection's writes, batched: what a session writes stays in
//! one buffer until it flushes, so a response head and its first body
//! bytes, or a stream's frames and the chunked terminator, leave in one
//! send (docs/performance.md "Writes per stream"). The HTTP/1 session
//! (`h1.rs`) stages each call's pieces ([`Batched::stage`]) and flushes
//! once a call; the buffer grows to what is written between flushes (up to
//! [`MAX`]; a larger write goes straight to the connection after it), so
//! one flush is one send. The client listener's L4 write buffer is off
//! (`main.rs`).
//!
//! Reads: the listener waits for a connection's first request, and a
//! keep-alive connection's next one, by reading ahead ([`Batched::read_ahead`]:
//! one read of what the connection has, up to [`READ_AHEAD`]). The bytes
//! go to the next session as the start of its request
//! ([`Batched::take_ahead`]), so the head is read once, and the buffer the
//! session parses and keeps for the whole request (its header values point
//! into it) is exactly what arrived. Bytes a session read past its request
//! (a pipelined one's start) come back the same way ([`Batched::put_ahead`]).
//! Peeks ([`Peek::try_peek`]) read ahead the same way, and reads take what
//! was read ahead first. TLS connections do the same (pingora-core's TLS
//! stream cannot peek: `protocols/tls/rustls/stream.rs`, `impl Peek for
//! TlsStream {}` answers "unsupported").

use async_trait::async_trait;
use bytes::{Buf, BytesMut};
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::tls::{SslDigest, TlsRef};
use pingora_core::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Writes at least this large go straight to the connection (after what
/// the buffer holds): copying them would cost more than the send saved.
pub(super) const MAX: usize = 64 * 1024;
/// Capacity the buffer keeps between responses; a larger one (a burst, a
/// whole answer) is given back once sent, so an idle or trickling
/// connection holds little.
const KEEP: usize = 4 * 1024;
/// Room left after a write that makes the buffer grow: a body's last chunk
/// (`0\r\n\r\n`, written on its own) then fits without the buffer being
/// moved (a reallocation copies the whole burst written before it).
const SLACK: usize = 64;
/// The most one peek reads ahead: as much as the HTTP/1 session's head
/// read asks room for (`h1.rs`, `HEAD_READ`).
const READ_AHEAD: usize = 4 * 1024;

/// A client connection whose writes wait in one buffer for the flush, and
/// whose peeks read ahead.
#[derive(Debug)]
pub struct Batched {
    inner: Stream,
    buf: Vec<u8>,
    /// Bytes of `buf` already written to `inner`.
    sent: usize,
    /// The next flush gives the buffer back ([`Batched::shed_next`]).
    shed: bool,
    /// Bytes a peek read from `inner` that no read has taken yet; freed
    /// once taken.
    ahead: BytesMut,
}

impl Batched {
    /// `inner` with its writes batched.
    pub fn new(inner: Stream) -> Batched {
        Batched {
            inner,
            buf: Vec::new(),
            sent: 0,
            shed: false,
            ahead: BytesMut::new(),
        }
    }

    /// Waits until at least `n` bytes (at most [`READ_AHEAD`]) have been
    /// read ahead, and gives the first `n`. End of input is an error.
    pub async fn read_ahead(&mut self, n: usize) -> io::Result<&[u8]> {
        while self.ahead.len() < n {
            std::future::poll_fn(|cx| self.poll_read_ahead(cx)).await?;
        }
        Ok(&self.ahead[..n])
    }

    /// The bytes read ahead, for the next session to parse as its request's
    /// start: a buffer of exactly what arrived, not a 4 KiB one however
    /// short the head, since it is kept as long as the request (its header
    /// values point into it).
    pub fn take_ahead(&mut self) -> BytesMut {
        std::mem::take(&mut self.ahead)
    }

    /// One read of what `inner` has (up to [`READ_AHEAD`], through a stack
    /// buffer: a connection waiting for its next request holds none), added
    /// to the bytes read ahead. End of input is an error: no request comes.
    fn poll_read_ahead(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut room = [std::mem::MaybeUninit::<u8>::uninit(); READ_AHEAD];
        let mut room = ReadBuf::uninit(&mut room);
        ready!(Pin::new(&mut self.inner).poll_read(cx, &mut room))?;
        if room.filled().is_empty() {
            return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
        }
        if self.ahead.is_empty() {
            // One allocation of exactly what came.
            self.ahead = BytesMut::from(room.filled());
        } else {
            self.ahead.extend_from_slice(room.filled());
        }
        Poll::Ready(Ok(()))
    }

    /// Bytes a session parsed past its request, given back for the next
    /// one: they come before anything read after them.
    pub fn put_ahead(&mut self, mut rest: BytesMut) {
        if rest.is_empty() {
            return;
        }
        if !self.ahead.is_empty() {
            rest.extend_from_slice(&self.ahead);
        }
        self.ahead = rest;
    }

    /// Puts `data` in the write buffer, for the next flush to send.
    pub fn stage(&mut self, data: &[u8]) {
        self.reserve(data.len());
        self.buf.extend_from_slice(data);
    }

    /// Lets `write` put up to about `room` bytes in the write buffer (more
    /// grows it), for the next flush to send.
    pub fn stage_with(&mut self, room: usize, write: impl FnOnce(&mut Vec<u8>)) {
        self.reserve(room);
        write(&mut self.buf);
    }

    /// The next flush gives the write buffer back, whatever its size. The
    /// stream relay waits for its upstream between writes: a buffer kept
    /// for the next one was 2 KB per open stream on a busy machine, where
    /// each write carries several frames (docs/performance.md "Issue 28,
    /// eighth pass"). Other answers keep a small buffer between responses.
    pub fn shed_next(&mut self) {
        self.shed = true;
    }

    /// Sends what the buffer holds, then `data`, then `suffix`, in one
    /// vectored write: `data` is not copied when the connection takes it
    /// all. What the write leaves is buffered (copied) for the next flush.
    /// A connection whose writes are not vectored (TLS) takes the buffer
    /// alone, and the rest is copied as a plain write would.
    pub async fn write_through(&mut self, data: &[u8], suffix: &[u8]) -> io::Result<()> {
        let n = std::future::poll_fn(|cx| {
            let parts = [
                io::IoSlice::new(&self.buf[self.sent..]),
                io::IoSlice::new(data),
                io::IoSlice::new(suffix),
            ];
            Pin::new(&mut self.inner).poll_write_vectored(cx, &parts)
        })
        .await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let held = self.buf.len() - self.sent;
        if n < held {
            self.sent += n;
            self.stage(data);
            self.stage(suffix);
            return Ok(());
        }
        self.sent = 0;
        self.buf.clear();
        let n = n - held;
        if n < data.len() {
            self.stage(&data[n..]);
            self.stage(suffix);
        } else {
            self.stage(&suffix[n - data.len()..]);
        }
        Ok(())
    }

    /// Room for `n` more bytes, and [`SLACK`] after them when the buffer
    /// has to grow.
    fn reserve(&mut self, n: usize) {
        if self.buf.capacity() - self.buf.len() < n {
            self.buf.reserve(n + SLACK);
        }
    }

    /// Writes out what the buffer holds.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.sent = 0;
        if self.buf.capacity() > KEEP {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Batched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.ahead.is_empty() {
            let n = this.ahead.len().min(buf.remaining());
            buf.put_slice(&this.ahead[..n]);
            this.ahead.advance(n);
            if this.ahead.is_empty() {
                this.ahead = BytesMut::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Batched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.buf.len() + data.len() > MAX {
            ready!(this.poll_send(cx))?;
        }
        if data.len() >= MAX {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        this.reserve(data.len());
        this.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if this.buf.len() + total > MAX {
            ready!(this.poll_send(cx))?;
        }
        if total >= MAX {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        this.reserve(total);
        for b in bufs {
            this.buf.extend_from_slice(b);
        }
        Poll::Ready(Ok(total))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_send(cx))?;
        if std::mem::take(&mut this.shed) {
            this.buf = Vec::new();
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[async_trait]
impl Peek for Batched {
    /// Fills `buf` with the next bytes without consuming them, reading
    /// ahead as much as the connection has.
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        buf.copy_from_slice(self.read_ahead(buf.len()).await?);
        Ok(true)
    }
}

#[async_trait]
impl Shutdown for Batched {
    async fn shutdown(&mut self) {
        // What is buffered goes out first.
        let _ = self.flush().await;
        Shutdown::shutdown(&mut *self.inner).await;
    }
}

impl UniqueID for Batched {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for Batched {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl GetTimingDigest for Batched {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for Batched {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: ProxyDigest) {
        self.inner.set_proxy_digest(digest);
    }
}

impl GetSocketDigest for Batched {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        self.inner.set_socket_digest(digest);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A TCP pair: the Batched server end and the client end.
    async fn pair() -> (Batched, tokio::net::TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        let s: pingora_core::protocols::l4::stream::Stream = server.into();
        (Batched::new(Box::new(s)), client)
    }

    #[tokio::test]
    async fn nothing_leaves_before_the_flush_then_all_in_one_send() {
        let (mut b, mut client) = pair().await;
        b.stage(b"head ");
        b.write_all(b"body").await.unwrap();
        assert_eq!(b.buf, b"head body");
        b.flush().await.unwrap();
        assert!(b.buf.is_empty());
        let mut got = [0u8; 9];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"head body");
    }

    #[tokio::test]
    async fn a_shed_flush_gives_the_buffer_back_once_sent_and_only_that_one() {
        let (mut b, mut client) = pair().await;
        b.shed_next();
        b.stage(b"head ");
        b.stage(b"frame");
        b.flush().await.unwrap();
        assert_eq!(b.buf.capacity(), 0);
        let mut got = [0u8; 10];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"head frame");
        // The next flush is a plain one again: a small buffer is kept.
        b.stage(b"next");
        b.flush().await.unwrap();
        assert!(b.buf.is_empty() && b.buf.capacity() > 0);
        client.read_exact(&mut got[..4]).await.unwrap();
        assert_eq!(&got[..4], b"next");
    }

    #[tokio::test]
    async fn written_through_data_follows_the_buffer_and_is_not_copied() {
        let (mut b, mut client) = pair().await;
        b.stage(b"head ");
        let data = vec![b'x'; 10_000];
        b.write_through(&data, b" end").await.unwrap();
        // All taken by the socket: nothing was copied into the buffer.
        assert!(b.buf.is_empty(), "{}", b.buf.len());
        b.flush().await.unwrap();
        let mut got = vec![0u8; 5 + data.len() + 4];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..5], b"head ");
        assert!(got[5..5 + data.len()].iter().all(|&c| c == b'x'));
        assert_eq!(&got[5 + data.len()..], b" end");
    }

    #[tokio::test]
    async fn what_a_full_socket_leaves_of_a_write_through_is_sent_in_order() {
        let (mut b, mut client) = pair().await;
        // More than the socket buffers take at once, while nobody reads.
        let data: Vec<u8> = (0..8_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = {
            let mut e = b"head ".to_vec();
            e.extend_from_slice(&data);
            e.extend_from_slice(b" end");
            e
        };
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            client.read_to_end(&mut got).await.unwrap();
            assert!(got == expected, "the bytes arrived out of order or cut");
        });
        b.stage(b"head ");
        b.write_through(&data, b" end").await.unwrap();
        b.flush().await.unwrap();
        Shutdown::shutdown(&mut b).await;
        reader.await.unwrap();
    }

    #[tokio::test]
    async fn bytes_put_back_come_before_those_read_ahead_after_them() {
        use tokio::io::AsyncWriteExt as _;
        let (mut b, mut client) = pair().await;
        client.write_all(b"later").await.unwrap();
        b.read_ahead(5).await.unwrap();
        b.put_ahead(BytesMut::from(&b"first "[..]));
        assert_eq!(b.read_ahead(11).await.unwrap(), b"first later");
    }

    #[tokio::test]
    async fn a_chunked_body_s_last_chunk_fits_without_moving_the_burst() {
        let (mut b, mut client) = pair().await;
        b.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        // A burst written as a chunk (size line, data, CRLF in one
        // vectored write), then the last chunk on its own.
        let burst = vec![b'x'; 15_000];
        let parts = [
            io::IoSlice::new(b"3A98\r\n"),
            io::IoSlice::new(&burst),
            io::IoSlice::new(b"\r\n"),
        ];
        let n = std::future::poll_fn(|cx| Pin::new(&mut b).poll_write_vectored(cx, &parts))
            .await
            .unwrap();
        assert_eq!(n, 6 + burst.len() + 2);
        let at = b.buf.as_ptr();
        b.write_all(b"0\r\n\r\n").await.unwrap();
        assert_eq!(
            b.buf.as_ptr(),
            at,
            "the buffer was moved for the last chunk"
        );
        b.flush().await.unwrap();
        let mut got = vec![0u8; 19 + n + 5];
        client.read_exact(&mut got).await.unwrap();
        assert!(got.ends_with(b"x\r\n0\r\n\r\n"));
    }

    #[tokio::test]
    async fn a_large_write_goes_straight_out_after_what_is_buffered() {
        let (mut b, mut client) = pair().await;
        b.write_all(b"small").await.unwrap();
        let big = vec![b'x'; MAX];
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; 5 + MAX];
            client.read_exact(&mut got).await.unwrap();
            got
        });
        b.write_all(&big).await.unwrap();
        b.flush().await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(&got[..5], b"small");
        assert!(got[5..].iter().all(|&c| c == b'x'));
        // A large buffer is not kept.
        assert!(b.buf.capacity() <= KEEP);
    }

    #[tokio::test]
    async fn what_was_read_ahead_is_taken_whole_in_a_buffer_of_its_size() {
        use tokio::io::AsyncWriteExt as _;
        let (mut b, mut client) = pair().await;
        let head = b"GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n";
        client.write_all(head).await.unwrap();
        assert_eq!(b.read_ahead(head.len()).await.unwrap(), head);
        let taken = b.take_ahead();
        assert_eq!(&taken[..], head);
        // Not a 4 KiB head buffer: what came (in one read, or a few).
        assert!(taken.capacity() < 2 * head.len(), "{}", taken.capacity());
        assert!(b.ahead.is_empty());
        // Taken is gone from the connection: the next read is the socket's.
        client.write_all(b"next").await.unwrap();
        let mut next = [0u8; 4];
        b.read_exact(&mut next).await.unwrap();
        assert_eq!(&next, b"next");
    }

    #[tokio::test]
    async fn a_peek_reads_what_came_and_the_session_reads_it_first() {
        use tokio::io::AsyncWriteExt as _;
        let (mut b, mut client) = pair().await;
        let head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n\r\n";
        client.write_all(head).await.unwrap();
        // The head arrived whole: one peek takes all of it off the socket.
        let mut probe = [0u8; 1];
        assert!(b.try_peek(&mut probe).await.unwrap());
        assert_eq!(&probe, b"P");
        while b.ahead.len() < head.len() {
            // Only if the kernel split the bytes: peeking for more reads on.
            let mut more = vec![0u8; b.ahead.len() + 1];
            b.try_peek(&mut more).await.unwrap();
        }
        assert_eq!(&b.ahead[..], head);
        // A second peek reads nothing new; reads take the bytes in order,
        // in pieces of any size, then read from the connection again.
        let mut again = [0u8; 4];
        b.try_peek(&mut again).await.unwrap();
        assert_eq!(&again, b"POST");
        let mut got = vec![0u8; 7];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"POST /v");
        let mut rest = vec![0u8; head.len() - 7];
        b.read_exact(&mut rest).await.unwrap();
        assert_eq!(rest, head[7..]);
        assert_eq!(b.ahead.capacity(), 0, "taken bytes are freed");
        client.write_all(b"next").await.unwrap();
        let mut next = [0u8; 4];
        b.read_exact(&mut next).await.unwrap();
        assert_eq!(&next, b"next");
        // A client that closes instead of sending is no request.
        drop(client);
        assert!(b.try_peek(&mut probe).await.is_err());
    }
}
