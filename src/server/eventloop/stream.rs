//! The socket of a connection a loop serves: loopback or network TCP, or the Unix socket
//! (`unixsocket`). Both are byte streams the loop reads and writes with the same system calls
//! (`recvfrom`/`sendto` on the descriptor), registers with the same edge-triggered interest,
//! and hands over to tokio as the matching tokio stream; only the types differ, so this is
//! the one place that names them.

use std::os::fd::{AsRawFd, RawFd};

use mio::event::Source;
use mio::{Interest, Registry, Token};

/// An accepted socket on its way to a loop (blocking or not: the loop sets it non-blocking).
#[derive(Debug)]
pub enum Accepted {
    /// A TCP connection.
    Tcp(std::net::TcpStream),
    /// A connection on the Unix socket.
    Unix(std::os::unix::net::UnixStream),
}

impl From<std::net::TcpStream> for Accepted {
    fn from(s: std::net::TcpStream) -> Accepted {
        Accepted::Tcp(s)
    }
}

impl From<std::os::unix::net::UnixStream> for Accepted {
    fn from(s: std::os::unix::net::UnixStream) -> Accepted {
        Accepted::Unix(s)
    }
}

/// A connection's socket, registered with a loop's poll.
#[derive(Debug)]
pub(super) enum Stream {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
}

impl Stream {
    /// The accepted socket, non-blocking, ready to register.
    pub(super) fn from_accepted(accepted: Accepted) -> std::io::Result<Stream> {
        Ok(match accepted {
            Accepted::Tcp(s) => {
                s.set_nonblocking(true)?;
                Stream::Tcp(mio::net::TcpStream::from_std(s))
            }
            Accepted::Unix(s) => {
                s.set_nonblocking(true)?;
                Stream::Unix(mio::net::UnixStream::from_std(s))
            }
        })
    }

    /// Back to the standard library's socket (for a hand-over to tokio).
    pub(super) fn into_accepted(self) -> Accepted {
        match self {
            Stream::Tcp(s) => Accepted::Tcp(std::net::TcpStream::from(s)),
            Stream::Unix(s) => Accepted::Unix(std::os::unix::net::UnixStream::from(s)),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Source for Stream {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(registry, token, interests),
            Stream::Unix(s) => s.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(registry, token, interests),
            Stream::Unix(s) => s.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(registry),
            Stream::Unix(s) => s.deregister(registry),
        }
    }
}
