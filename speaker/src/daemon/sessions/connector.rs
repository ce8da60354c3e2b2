//! Active connections: the MD5 key file is read at every attempt (a rotated Secret needs no
//! reload), and an interface peer's scope id is looked up at every attempt (an interface that
//! appears or is recreated later is used).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use bgp_io::driver::{Connector, TcpConnector};
use bgp_io::transport::Md5Key;
use podcidr_config::PeerConfig;
use tokio::net::TcpStream;

pub use crate::daemon::core::errors::{KeyError, KeyProblem};

/// Reads a peer's MD5 key file now (bounded read; see `podcidr_config::load_md5_key`).
pub fn read_key(peer: &str, path: &Path) -> Result<Md5Key, KeyError> {
    let err = |problem: KeyProblem| KeyError {
        peer: peer.to_owned(),
        field: "passwordFile",
        problem,
    };
    let key = podcidr_config::load_md5_key(path).map_err(|e| err(e.into()))?;
    Md5Key::new(key).map_err(|e| err(e.into()))
}

/// Checks every MD5 key file, so a bad key rejects the config before any session changes.
/// Sessions read the file again when they connect: a rotated Secret needs no reload.
pub fn check_keys(peers: &[PeerConfig]) -> Result<(), KeyError> {
    for p in peers {
        if let Some(path) = &p.password_file {
            read_key(&p.name, path)?;
        }
        if let Some(a) = p.bfd.as_ref().and_then(|b| b.authentication.as_ref()) {
            podcidr_config::load_bfd_key(&a.secret_file).map_err(|e| KeyError {
                peer: p.name.clone(),
                field: "bfd.authentication.secretFile",
                problem: KeyProblem::Bfd(e),
            })?;
        }
    }
    Ok(())
}

/// Active connections that read the MD5 key file at every attempt, so the key in use is
/// the one in the file when the session is set up.
#[derive(Debug, Clone)]
pub struct KeyFileConnector {
    pub peer: String,
    pub key_file: Option<PathBuf>,
    /// An interface peer's interface: its index (the scope id) is looked up at every
    /// attempt, so an interface that appears or is recreated later is used.
    pub interface: Option<String>,
    pub tcp: TcpConnector,
}

impl Connector for KeyFileConnector {
    type Stream = TcpStream;

    fn connect(&mut self) -> Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>> {
        if let Some(path) = &self.key_file {
            match read_key(&self.peer, path) {
                Ok(key) => self.tcp.options.md5 = Some(key),
                Err(e) => {
                    let e = io::Error::new(io::ErrorKind::InvalidInput, e);
                    return Box::pin(async move { Err(e) });
                }
            }
        }
        if let (Some(name), SocketAddr::V6(peer)) = (&self.interface, &mut self.tcp.peer) {
            let fail =
                |e: io::Error| -> Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>> {
                    Box::pin(async move { Err(e) })
                };
            let index = match bgp_io::transport::interface_index(name) {
                Ok(index) => index,
                Err(e) => return fail(io::Error::new(e.kind(), format!("interface {name}: {e}"))),
            };
            peer.set_scope_id(index);
        }
        self.tcp.connect()
    }

    fn no_response(&self, after: Duration) -> String {
        self.tcp.no_response(after)
    }
}
