//! Transports: TCP and TLS over TCP (rustls). Everything above this module sees a connection as a
//! byte reader, a byte writer and two addresses, so SCTP can be added as one more [`Transport`]
//! variant (one stream per association is all RFC 6733 needs) without touching peers or routing.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::error::Error;
use crate::header::{frame_len, Header, HEADER_LEN};
use crate::tls::TlsCredentials;

pub type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
pub type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// How to reach an outbound peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// Plain TCP (RFC 6733 port 3868).
    #[default]
    Tcp,
    /// TLS from the first byte (RFC 6733 §2.1, port 5658) with the node's credentials
    /// (`NodeConfig::tls`); the server certificate must name the peer's Diameter identity.
    Tls,
}

impl Transport {
    /// TLS when a peer's configuration says `tls = true`, else TCP.
    pub fn tls_if(tls: bool) -> Transport {
        if tls {
            Transport::Tls
        } else {
            Transport::Tcp
        }
    }
}

/// An established connection, split for the reader and writer tasks.
pub struct Stream {
    pub reader: BoxRead,
    pub writer: BoxWrite,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub tls: bool,
    /// The peer's leaf certificate (TLS, verified by the handshake against the CA).
    pub peer_cert: Option<CertificateDer<'static>>,
}

fn tcp_stream(tcp: TcpStream) -> io::Result<Stream> {
    tcp.set_nodelay(true)?;
    let local = tcp.local_addr()?;
    let peer = tcp.peer_addr()?;
    let (r, w) = tcp.into_split();
    Ok(Stream {
        reader: Box::new(r),
        writer: Box::new(w),
        local,
        peer,
        tls: false,
        peer_cert: None,
    })
}

fn leaf(certs: Option<&[CertificateDer<'_>]>) -> Option<CertificateDer<'static>> {
    certs.and_then(|c| c.first()).map(|c| c.clone().into_owned())
}

/// Connects to `addr` over `transport`; with TLS, `host` (the peer's Diameter identity) is the
/// name its certificate must carry.
pub async fn connect(
    transport: Transport,
    addr: SocketAddr,
    tls: Option<&TlsCredentials>,
    host: &str,
) -> io::Result<Stream> {
    let tcp = TcpStream::connect(addr).await?;
    match transport {
        Transport::Tcp => tcp_stream(tcp),
        Transport::Tls => {
            let creds = tls.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a TLS peer needs the node's TLS credentials",
                )
            })?;
            let name = ServerName::try_from(host.to_owned())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            tcp.set_nodelay(true)?;
            let local = tcp.local_addr()?;
            let peer = tcp.peer_addr()?;
            let tls = TlsConnector::from(creds.client_config()).connect(name, tcp).await?;
            let peer_cert = leaf(tls.get_ref().1.peer_certificates());
            let (r, w) = tokio::io::split(tls);
            Ok(Stream {
                reader: Box::new(r),
                writer: Box::new(w),
                local,
                peer,
                tls: true,
                peer_cert,
            })
        }
    }
}

/// A listening socket; TLS from the first byte when credentials are given.
pub struct Listener {
    tcp: TcpListener,
    tls: Option<Arc<TlsCredentials>>,
}

impl Listener {
    pub async fn bind(addr: SocketAddr, tls: Option<Arc<TlsCredentials>>) -> io::Result<Self> {
        Ok(Listener { tcp: TcpListener::bind(addr).await?, tls })
    }
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
    /// Accepts one TCP connection; [`Accepted::handshake`] finishes it (TLS) off the accept loop.
    /// A TLS connection takes the server configuration in force at its accept.
    pub async fn accept(&self) -> io::Result<Accepted> {
        let (tcp, _) = self.tcp.accept().await?;
        let tls = self.tls.as_ref().map(|c| TlsAcceptor::from(c.server_config()));
        Ok(Accepted { tcp, tls })
    }
}

/// An accepted TCP connection not yet upgraded to TLS.
pub struct Accepted {
    tcp: TcpStream,
    tls: Option<TlsAcceptor>,
}

impl Accepted {
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.tcp.peer_addr().ok()
    }
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
    pub async fn handshake(self) -> io::Result<Stream> {
        match self.tls {
            None => tcp_stream(self.tcp),
            Some(acceptor) => {
                self.tcp.set_nodelay(true)?;
                let local = self.tcp.local_addr()?;
                let peer = self.tcp.peer_addr()?;
                let tls = acceptor.accept(self.tcp).await?;
                let peer_cert = leaf(tls.get_ref().1.peer_certificates());
                let (r, w) = tokio::io::split(tls);
                Ok(Stream {
                    reader: Box::new(r),
                    writer: Box::new(w),
                    local,
                    peer,
                    tls: true,
                    peer_cert,
                })
            }
        }
    }
}

/// Why reading the next message failed.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// The stream lost sync (bad version or length). `header` is set when 20 bytes were there
    /// to answer a request with; the connection must be closed after answering.
    Framing {
        error: Error,
        header: Option<Header>,
    },
    /// The header declares a message longer than the reader's [`SizeLimits`] allow for its
    /// application. Nothing of it was buffered beyond what one read brought: the reader skips
    /// the declared length as it arrives, so the stream stays in sync and the caller may answer
    /// (5015) and read on, or close.
    TooLong {
        header: Header,
        declared: usize,
        limit: usize,
    },
}

/// The largest message the 24-bit Message Length field can declare.
pub const MAX_MESSAGE_LEN: usize = 0x00ff_ffff;

/// Largest message a [`FrameReader`] takes, by the Application-Id in its header, checked when the
/// header arrives (before the buffer grows for the body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeLimits {
    default: usize,
    per_app: Vec<(u32, usize)>,
    /// The smallest limit: a message up to it is taken without looking its application up.
    floor: usize,
}

impl SizeLimits {
    /// `default` for every application.
    pub fn new(default: usize) -> SizeLimits {
        SizeLimits { default, per_app: Vec::new(), floor: default }
    }
    /// No limit but the header's own (16 MiB).
    pub fn unlimited() -> SizeLimits {
        SizeLimits::new(MAX_MESSAGE_LEN)
    }
    /// `max` for the messages of `application_id` (header Application-Id) instead of the default.
    pub fn application(mut self, application_id: u32, max: usize) -> SizeLimits {
        self.per_app.retain(|(a, _)| *a != application_id);
        self.per_app.push((application_id, max));
        self.floor = self.per_app.iter().map(|(_, m)| *m).fold(self.default, usize::min);
        self
    }
    /// The limit of an application's messages.
    pub fn max_for(&self, application_id: u32) -> usize {
        self.per_app.iter().find(|(a, _)| *a == application_id).map_or(self.default, |(_, m)| *m)
    }
}

impl Default for SizeLimits {
    fn default() -> Self {
        SizeLimits::unlimited()
    }
}

/// The read buffer's size; a read asks for at least [`READ_MIN`] bytes of room.
const READ_BUF: usize = 64 * 1024;
const READ_MIN: usize = 16 * 1024;

/// Cuts a byte stream into whole Diameter messages with [`frame_len`].
///
/// Each message is copied out of the read buffer into its own exactly sized `Bytes`, so the
/// buffer is never shared with messages still in processing and is reused for every read.
/// (Handing out slices of it instead made every read with a message in flight allocate a new
/// 64 KiB buffer, which cost more than the copy.)
///
/// The buffer only grows past its 64 KiB for a message longer than that, and only after the
/// message's header passed the [`SizeLimits`]: a peer cannot make it hold more than its limit.
pub struct FrameReader {
    reader: BoxRead,
    buf: BytesMut,
    limits: Arc<SizeLimits>,
    /// Bytes of a refused message still to drop as they arrive.
    skip: usize,
}

impl FrameReader {
    /// A reader with no limit but the header's (16 MiB).
    pub fn new(reader: BoxRead) -> FrameReader {
        FrameReader::with_limits(reader, Arc::new(SizeLimits::unlimited()))
    }

    pub fn with_limits(reader: BoxRead, limits: Arc<SizeLimits>) -> FrameReader {
        FrameReader { reader, buf: BytesMut::with_capacity(READ_BUF), limits, skip: 0 }
    }

    /// Changes the limits from the next message on (e.g. after the capabilities exchange).
    pub fn set_limits(&mut self, limits: Arc<SizeLimits>) {
        self.limits = limits;
    }

    /// A [`ReadError::TooLong`] when the message whose header starts the buffer (20 bytes
    /// present), declaring `declared` bytes, is over its application's limit; the reader then
    /// skips it.
    fn refuse(&mut self, declared: usize) -> Option<ReadError> {
        let (header, _) = Header::peek(&self.buf).ok()?;
        let limit = self.limits.max_for(header.application_id);
        if declared <= limit {
            return None;
        }
        self.skip = declared;
        self.drop_skipped();
        Some(ReadError::TooLong { header, declared, limit })
    }

    fn drop_skipped(&mut self) {
        let k = self.skip.min(self.buf.len());
        self.buf.advance(k);
        self.skip -= k;
    }

    /// The next whole message, `Ok(None)` at a clean end of stream.
    pub async fn next(&mut self) -> Result<Option<Bytes>, ReadError> {
        loop {
            if self.skip > 0 {
                self.drop_skipped();
            }
            if self.skip == 0 {
                match frame_len(&self.buf) {
                    Ok(Some(n)) => {
                        if n > self.limits.floor {
                            if let Some(e) = self.refuse(n) {
                                return Err(e);
                            }
                        }
                        let frame = Bytes::copy_from_slice(&self.buf[..n]);
                        self.buf.advance(n);
                        return Ok(Some(frame));
                    }
                    Ok(None) => {
                        // A partial message: judged on its header, before reading the body.
                        if self.buf.len() >= HEADER_LEN {
                            let declared =
                                u32::from_be_bytes([0, self.buf[1], self.buf[2], self.buf[3]])
                                    as usize;
                            if declared > self.limits.floor {
                                if let Some(e) = self.refuse(declared) {
                                    return Err(e);
                                }
                            }
                        }
                    }
                    Err(error) => {
                        let header = if self.buf.len() >= HEADER_LEN {
                            Header::peek(&self.buf).ok().map(|(h, _)| h)
                        } else {
                            None
                        };
                        return Err(ReadError::Framing { error, header });
                    }
                }
            }
            if self.buf.capacity() - self.buf.len() < READ_MIN {
                // Unshared, so this moves a partial message to the front instead of allocating
                // (unless the partial message is itself large).
                self.buf.reserve(READ_MIN);
            }
            let n = self.reader.read_buf(&mut self.buf).await.map_err(ReadError::Io)?;
            if n == 0 {
                return if self.buf.is_empty() && self.skip == 0 {
                    Ok(None)
                } else {
                    Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()))
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(app: u32, len: usize, fill: u8) -> Vec<u8> {
        let mut m = vec![fill; len];
        m[..4].copy_from_slice(&(0x0100_0000 | len as u32).to_be_bytes());
        m[4..8].copy_from_slice(&0x8000_0110u32.to_be_bytes());
        m[8..12].copy_from_slice(&app.to_be_bytes());
        m
    }

    fn reader(bytes: Vec<u8>, limits: SizeLimits) -> FrameReader {
        FrameReader::with_limits(Box::new(std::io::Cursor::new(bytes)), Arc::new(limits))
    }

    #[tokio::test]
    async fn a_message_over_its_application_limit_is_skipped_and_the_stream_goes_on() {
        let limits = SizeLimits::new(1024).application(7, 200_000);
        assert_eq!((limits.max_for(7), limits.max_for(8)), (200_000, 1024));
        let mut wire = msg(8, 2048, 0xaa); // over the default
        wire.extend(msg(8, 64, 1));
        wire.extend(msg(7, 150_000, 2)); // under application 7's limit
        wire.extend(msg(7, 300_000, 3)); // over it, longer than the read buffer
        wire.extend(msg(8, 1024, 4));
        let mut r = reader(wire, limits);
        match r.next().await {
            Err(ReadError::TooLong { header, declared: 2048, limit: 1024 }) => {
                assert_eq!(header.application_id, 8)
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.next().await.unwrap().unwrap().len(), 64);
        assert_eq!(r.next().await.unwrap().unwrap().len(), 150_000);
        assert!(matches!(
            r.next().await,
            Err(ReadError::TooLong { declared: 300_000, limit: 200_000, .. })
        ));
        // the refused message was dropped as it came, never held whole
        assert!(r.buf.capacity() < 300_000, "{}", r.buf.capacity());
        let last = r.next().await.unwrap().unwrap();
        assert_eq!((last.len(), last[20]), (1024, 4));
        assert!(r.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_declared_length_is_judged_before_the_body_arrives() {
        // Only the header of a 16 MiB message: refused at once, nothing read for its body.
        let mut wire = msg(0, 20, 0);
        wire[1..4].copy_from_slice(&[0xff, 0xff, 0xfc]);
        let mut r = reader(wire, SizeLimits::new(65_536));
        assert!(matches!(r.next().await, Err(ReadError::TooLong { declared: 0xff_fffc, .. })));
        // the stream ends inside the skipped message: an unexpected end, not a clean one
        assert!(matches!(r.next().await, Err(ReadError::Io(_))));
    }
}
