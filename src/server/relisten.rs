//! CONFIG SET `port` and `bind` while serving: the plain TCP listeners are replaced, as Redis
//! 7.0's `changeListenPort` and `changeBindAddr` do.
//!
//! The server installs, once it serves, what starting an accept loop takes
//! ([`Relisten::install`]), with a copy (`try_clone`) of each listening socket and the token
//! that stops their accept loops. A new port is bound first, on every address, and only then
//! are the old loops stopped (their sockets close when the loops drop them): a port that is
//! taken leaves everything as it was ("Unable to listen on this port. Check server logs.").
//! New addresses on the same port may overlap the old ones: if binding them (with
//! `SO_REUSEADDR`, as Redis binds) fails, the old sockets stop listening (`shutdown`) and it
//! is tried again; if that fails too, new sockets listen where the old ones did ("Failed to
//! bind to specified addresses."). TLS and the Unix socket are not affected.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

/// Starts an accept loop for each listener, stopped by the token.
pub(crate) type SpawnAccepts = Box<dyn Fn(Vec<TcpListener>, CancellationToken) + Send + Sync>;

/// The listen backlog of a socket bound here (Redis's `tcp-backlog` default).
const BACKLOG: i32 = 511;

/// The running plain TCP listeners and how to replace them.
#[derive(Default)]
pub struct Relisten {
    inner: Mutex<Option<Current>>,
}

struct Current {
    spawn: SpawnAccepts,
    /// Copies of the listening sockets (the accept loops own the originals).
    sockets: Vec<TcpListener>,
    /// Stops the accept loops of `sockets`.
    stop: CancellationToken,
}

impl std::fmt::Debug for Relisten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self
            .inner
            .lock()
            .map(|c| c.as_ref().map_or(0, |c| c.sockets.len()))
            .unwrap_or(0);
        f.debug_struct("Relisten").field("sockets", &n).finish()
    }
}

impl Relisten {
    /// Called once the accept loops of `sockets` (copies) run, stopped by `stop`.
    pub fn install(&self, spawn: SpawnAccepts, sockets: Vec<TcpListener>, stop: CancellationToken) {
        if let Ok(mut inner) = self.inner.lock() {
            *inner = Some(Current {
                spawn,
                sockets,
                stop,
            });
        }
    }

    /// Listens on `port` at `hosts` instead (a port of 0: a free one); `port_changed` says
    /// which of the two changed. Returns the port now listened on, or Redis's error text.
    pub fn change(
        &self,
        hosts: &[String],
        port: u16,
        port_changed: bool,
    ) -> Result<u16, &'static str> {
        let failure = if port_changed {
            "Unable to listen on this port. Check server logs."
        } else {
            "Failed to bind to specified addresses."
        };
        let Ok(mut guard) = self.inner.lock() else {
            return Err(failure);
        };
        let Some(current) = guard.as_mut() else {
            return Err(failure);
        };
        let bound = if port_changed {
            bind_all(hosts, port, true).map_err(|_| failure)?
        } else {
            // Every address must at least be one, before anything stops listening.
            if hosts.iter().any(|h| {
                h.trim_start_matches('-')
                    .parse::<std::net::IpAddr>()
                    .is_err()
            }) {
                return Err(failure);
            }
            match bind_all(hosts, port, true) {
                Ok(b) => b,
                Err(_) => {
                    // Addresses the old sockets listen on: they stop listening first.
                    let old: Vec<std::net::SocketAddr> = current
                        .sockets
                        .iter()
                        .filter_map(|s| s.local_addr().ok())
                        .collect();
                    for s in &current.sockets {
                        // SAFETY: shutdown on a socket this process owns; no memory involved.
                        unsafe { libc::shutdown(s.as_raw_fd(), libc::SHUT_RDWR) };
                    }
                    match bind_all(hosts, port, true) {
                        Ok(b) => b,
                        Err(_) => {
                            // Listen where it listened before, on new sockets.
                            let again: Vec<TcpListener> = old
                                .iter()
                                .filter_map(|a| listen_on(*a, true).ok())
                                .collect();
                            current.replace(again);
                            return Err(failure);
                        }
                    }
                }
            }
        };
        let actual = bound
            .first()
            .and_then(|l| l.local_addr().ok())
            .map_or(port, |a| a.port());
        current.replace(bound);
        Ok(actual)
    }
}

impl Current {
    /// Stops the accept loops of the current sockets and starts them on `bound`.
    fn replace(&mut self, bound: Vec<TcpListener>) {
        let copies: Vec<TcpListener> = bound.iter().filter_map(|l| l.try_clone().ok()).collect();
        self.stop.cancel();
        self.stop = CancellationToken::new();
        self.sockets = copies;
        (self.spawn)(bound, self.stop.clone());
    }
}

/// Binds and listens on `port` at every host (a leading `-` marks an optional address, as
/// at start); non-blocking, ready for an accept loop. A port of 0 becomes the first socket's.
fn bind_all(hosts: &[String], mut port: u16, reuse: bool) -> std::io::Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    for written in hosts {
        let host = written.trim_start_matches('-');
        let optional = host.len() != written.len();
        let ip: std::net::IpAddr = host
            .parse()
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        match listen_on(std::net::SocketAddr::new(ip, port), reuse) {
            Ok(l) => {
                if port == 0 {
                    port = l.local_addr()?.port();
                }
                out.push(l);
            }
            Err(e)
                if optional
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT)
                    ) => {}
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        return Err(std::io::ErrorKind::AddrNotAvailable.into());
    }
    Ok(out)
}

/// One listening socket at `addr`.
fn listen_on(addr: std::net::SocketAddr, reuse: bool) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(reuse)?;
    socket.bind(addr)?;
    let fd = socket.into_raw_fd();
    // SAFETY: `fd` is the socket just bound, whose ownership `into_raw_fd` gave up; the
    // listener built from it is its only owner.
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    // SAFETY: listen on a socket this process owns.
    if unsafe { libc::listen(listener.as_raw_fd(), BACKLOG) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    listener.set_nonblocking(true)?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_new_port_listens_and_a_taken_one_changes_nothing() {
        let first = bind_all(&["127.0.0.1".into()], 0, false).unwrap();
        let port = first[0].local_addr().unwrap().port();
        let spawned = Arc::new(Mutex::new(Vec::new()));
        let seen = spawned.clone();
        let r = Relisten::default();
        r.install(
            Box::new(move |ls, _| {
                seen.lock().unwrap().extend(
                    ls.iter()
                        .map(|l: &TcpListener| l.local_addr().unwrap().port()),
                )
            }),
            first.iter().map(|l| l.try_clone().unwrap()).collect(),
            CancellationToken::new(),
        );
        // Taken: `first` still listens on `port`.
        assert_eq!(
            r.change(&["127.0.0.1".into()], port, true),
            Err("Unable to listen on this port. Check server logs.")
        );
        assert!(spawned.lock().unwrap().is_empty());
        let new = r.change(&["127.0.0.1".into()], 0, true).unwrap();
        assert_ne!(new, port);
        assert_eq!(*spawned.lock().unwrap(), vec![new]);
        // A bad address leaves the old sockets listening.
        assert_eq!(
            r.change(&["999.999.999.999".into()], new, false),
            Err("Failed to bind to specified addresses.")
        );
        assert!(std::net::TcpStream::connect(("127.0.0.1", new)).is_ok());
    }
}
