//! What the binary owes whoever supervises it: the pidfile, and systemd's readiness protocol
//! (`supervised systemd`: READY=1 once listening, STOPPING=1 when shutting down, sent as a
//! datagram to `$NOTIFY_SOCKET`, as sd_notify(3) does). Uses `config` only.
//!
//! Both are best effort, as in redis-server: a pidfile that cannot be written or a notify
//! socket that is missing is logged, and the server serves anyway.

use std::os::unix::net::UnixDatagram;

use crate::config::Supervised;

/// Sends readiness notifications to systemd, or does nothing.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, std::os::unix::net::SocketAddr)>,
}

impl Notifier {
    /// A notifier for `mode`, reading `$NOTIFY_SOCKET`; the warning says why it is inactive
    /// when systemd supervision was asked for but cannot be done.
    pub fn new(mode: Supervised) -> (Notifier, Option<String>) {
        let path = std::env::var_os("NOTIFY_SOCKET").filter(|p| !p.is_empty());
        let none = Notifier { target: None };
        match (mode, path) {
            (Supervised::No, _) | (Supervised::Auto, None) => (none, None),
            (Supervised::Systemd, None) => (
                none,
                Some(
                    "systemd supervision requested, but NOTIFY_SOCKET is not set; not notifying"
                        .into(),
                ),
            ),
            (_, Some(path)) => match connect(&path) {
                Ok(target) => (
                    Notifier {
                        target: Some(target),
                    },
                    None,
                ),
                Err(e) => (
                    none,
                    Some(format!(
                        "cannot use NOTIFY_SOCKET {}: {e}; not notifying",
                        path.to_string_lossy()
                    )),
                ),
            },
        }
    }

    /// Whether notifications are sent.
    pub fn active(&self) -> bool {
        self.target.is_some()
    }

    /// Sends `state` (`READY=1`, `STOPPING=1`, …); errors are ignored, as sd_notify's are.
    pub fn notify(&self, state: &str) {
        if let Some((socket, addr)) = &self.target {
            let _ = socket.send_to_addr(state.as_bytes(), addr);
        }
    }
}

fn connect(
    path: &std::ffi::OsStr,
) -> std::io::Result<(UnixDatagram, std::os::unix::net::SocketAddr)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        // An abstract socket (Linux): systemd passes these with a leading '@'.
        #[cfg(target_os = "linux")]
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)?
        }
        #[cfg(not(target_os = "linux"))]
        Some(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "abstract sockets need Linux",
            ));
        }
        None => std::os::unix::net::SocketAddr::from_pathname(path)?,
    };
    Ok((UnixDatagram::unbound()?, addr))
}

/// The pidfile: written at start, removed when dropped (at exit).
#[derive(Debug)]
pub struct PidFile {
    path: String,
}

impl PidFile {
    /// Writes this process's id to `path`.
    pub fn write(path: &str) -> std::io::Result<PidFile> {
        std::fs::write(path, format!("{}\n", std::process::id()))?;
        Ok(PidFile { path: path.into() })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifies_a_path_socket() {
        let dir = std::env::temp_dir().join(format!("sluice-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let listener = UnixDatagram::bind(&path).unwrap();
        let (target, addr) = connect(path.as_os_str()).unwrap();
        let n = Notifier {
            target: Some((target, addr)),
        };
        n.notify("READY=1");
        let mut buf = [0u8; 64];
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pidfile_is_written_and_removed() {
        let path = std::env::temp_dir().join(format!("sluice-pid-{}.pid", std::process::id()));
        let p = path.to_string_lossy().into_owned();
        let pf = PidFile::write(&p).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(pf);
        assert!(!path.exists());
    }
}
