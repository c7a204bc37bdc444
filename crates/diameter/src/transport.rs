//! Transports: TCP and TLS over TCP (rustls). Everything above this module sees a connection as a
//! byte reader, a byte writer and two addresses, so SCTP can be added as one more [`Transport`]
//! variant (one stream per association is all RFC 6733 needs) without touching peers or routing.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::error::Error;
use crate::header::{frame_len, Header, HEADER_LEN};

pub type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
pub type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// How to reach an outbound peer.
#[derive(Clone, Default)]
pub enum Transport {
    /// Plain TCP (RFC 6733 port 3868).
    #[default]
    Tcp,
    /// TLS from the first byte (RFC 6733 §2.1, port 5658) with the given client configuration
    /// and the name the server certificate must carry.
    Tls { config: Arc<rustls::ClientConfig>, server_name: ServerName<'static> },
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Tcp => f.write_str("Tcp"),
            Transport::Tls { server_name, .. } => write!(f, "Tls({server_name:?})"),
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
}

fn tcp_stream(tcp: TcpStream) -> io::Result<Stream> {
    tcp.set_nodelay(true)?;
    let local = tcp.local_addr()?;
    let peer = tcp.peer_addr()?;
    let (r, w) = tcp.into_split();
    Ok(Stream { reader: Box::new(r), writer: Box::new(w), local, peer, tls: false })
}

/// Connects to `addr` over `transport`.
pub async fn connect(transport: &Transport, addr: SocketAddr) -> io::Result<Stream> {
    let tcp = TcpStream::connect(addr).await?;
    match transport {
        Transport::Tcp => tcp_stream(tcp),
        Transport::Tls { config, server_name } => {
            tcp.set_nodelay(true)?;
            let local = tcp.local_addr()?;
            let peer = tcp.peer_addr()?;
            let tls = TlsConnector::from(config.clone()).connect(server_name.clone(), tcp).await?;
            let (r, w) = tokio::io::split(tls);
            Ok(Stream { reader: Box::new(r), writer: Box::new(w), local, peer, tls: true })
        }
    }
}

/// A listening socket; TLS when a server configuration is given.
pub struct Listener {
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
}

impl Listener {
    pub async fn bind(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> io::Result<Self> {
        Ok(Listener { tcp: TcpListener::bind(addr).await?, tls: tls.map(TlsAcceptor::from) })
    }
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
    /// Accepts one TCP connection; [`Accepted::handshake`] finishes it (TLS) off the accept loop.
    pub async fn accept(&self) -> io::Result<Accepted> {
        let (tcp, _) = self.tcp.accept().await?;
        Ok(Accepted { tcp, tls: self.tls.clone() })
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
    pub async fn handshake(self) -> io::Result<Stream> {
        match self.tls {
            None => tcp_stream(self.tcp),
            Some(acceptor) => {
                self.tcp.set_nodelay(true)?;
                let local = self.tcp.local_addr()?;
                let peer = self.tcp.peer_addr()?;
                let tls = acceptor.accept(self.tcp).await?;
                let (r, w) = tokio::io::split(tls);
                Ok(Stream { reader: Box::new(r), writer: Box::new(w), local, peer, tls: true })
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
pub struct FrameReader {
    reader: BoxRead,
    buf: BytesMut,
}

impl FrameReader {
    pub fn new(reader: BoxRead) -> FrameReader {
        FrameReader { reader, buf: BytesMut::with_capacity(READ_BUF) }
    }

    /// The next whole message, `Ok(None)` at a clean end of stream.
    pub async fn next(&mut self) -> Result<Option<Bytes>, ReadError> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(n)) => {
                    let frame = Bytes::copy_from_slice(&self.buf[..n]);
                    self.buf.advance(n);
                    return Ok(Some(frame));
                }
                Ok(None) => {}
                Err(error) => {
                    let header = if self.buf.len() >= HEADER_LEN {
                        Header::peek(&self.buf).ok().map(|(h, _)| h)
                    } else {
                        None
                    };
                    return Err(ReadError::Framing { error, header });
                }
            }
            if self.buf.capacity() - self.buf.len() < READ_MIN {
                // Unshared, so this moves a partial message to the front instead of allocating
                // (unless the partial message is itself large).
                self.buf.reserve(READ_MIN);
            }
            let n = self.reader.read_buf(&mut self.buf).await.map_err(ReadError::Io)?;
            if n == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()))
                };
            }
        }
    }
}
