//! TLS on the client listener (`--tls-cert`, `--tls-key`; README
//! "Security", docs/operations.md "TLS and HTTP/2").
//!
//! The certificate chain and key are PEM files, read at startup (a file
//! that cannot be read or parsed stops the start) and watched: when either
//! changes, both are read again and the new pair serves the connections
//! accepted from then on; connections already open keep the session they
//! negotiated. A pair that does not load (unreadable, not PEM, a key that
//! does not match the certificate) is logged and the previous one stays.
//!
//! Why not pingora-core's `TlsSettings` (pingora-core 0.9.1):
//! - `listeners/tls/rustls/mod.rs`, `TlsSettings::build`: the files are
//!   read once, when the listener is built, and a file that does not load
//!   panics there (after the server has started) instead of refusing the start;
//! - `services/listening.rs`, `run_endpoint`: the handshake runs before the
//!   application sees the connection, under a fixed 60 s timeout: neither
//!   the connection cap nor `--header-timeout-ms` could bound it, and each
//!   failed handshake (a port scanner, a plain-HTTP client) is an ERROR line.
//!
//! So the listener is plain TCP to Pingora, and [`Guarded`](super::Guarded)
//! runs the handshake itself, after the connection is counted and within
//! the head deadline, with pingora-core's rustls `Acceptor` built from our
//! own `ServerConfig` (`Acceptor::from_server_config`) whose certificate
//! comes from [`Reloading`], a `ResolvesServerCert` over an `ArcSwap`.

use arc_swap::ArcSwap;
use pingora_core::listeners::tls::Acceptor;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::tls::TlsStream;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How often the certificate files are checked for changes (new
/// connections get a new certificate within this, well under 10 s).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The certificate and key files of the client listener.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: String,
    pub key: String,
}

/// The client listener's TLS: the acceptor every handshake uses and the
/// certificate it serves.
pub struct Tls {
    acceptor: Acceptor,
    resolver: Arc<Reloading>,
    files: CertFiles,
}

impl Tls {
    /// Loads `files` (an error names the file and what is wrong with it,
    /// never its content) and builds the acceptor, offering ALPN `h2` and
    /// `http/1.1`.
    pub fn load(files: CertFiles) -> Result<Tls, String> {
        let key = load_pair(&files)?;
        let resolver = Arc::new(Reloading {
            current: ArcSwap::from_pointee(key),
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("TLS configuration: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: Acceptor::from_server_config(Arc::new(config)),
            resolver,
            files,
        })
    }

    /// Starts the thread that reloads the certificate when its files change.
    pub fn watch(self: &Arc<Self>) -> io::Result<()> {
        let tls = self.clone();
        std::thread::Builder::new()
            .name("switchboard-tls-reload".into())
            .spawn(move || tls.watch_files())
            .map(|_| ())
    }

    /// Reads the files again; on success new connections get the new
    /// certificate, else the current one stays (and the error is returned).
    pub fn reload(&self) -> Result<(), String> {
        let key = load_pair(&self.files)?;
        self.resolver.current.store(Arc::new(key));
        Ok(())
    }

    fn watch_files(&self) {
        let mut last = self.stamp();
        loop {
            std::thread::sleep(POLL_INTERVAL);
            // Stamped before reading: a write after this is seen next time.
            let now = self.stamp();
            if now == last {
                continue;
            }
            last = now;
            match self.reload() {
                Ok(()) => log::info!(
                    "TLS certificate reloaded from {} and {}: new connections use it",
                    self.files.cert,
                    self.files.key
                ),
                Err(e) => {
                    log::error!("TLS certificate reload failed, keeping the current one: {e}")
                }
            }
        }
    }

    fn stamp(&self) -> [Option<(SystemTime, u64)>; 2] {
        [stamp_of(&self.files.cert), stamp_of(&self.files.key)]
    }

    /// The TLS handshake on an accepted connection.
    pub(super) async fn handshake(
        &self,
        l4: L4Stream,
    ) -> pingora_core::Result<TlsStream<L4Stream>> {
        self.acceptor.tls_handshake(l4).await
    }
}

fn stamp_of(path: &str) -> Option<(SystemTime, u64)> {
    let md = std::fs::metadata(path).ok()?;
    Some((md.modified().ok()?, md.len()))
}

/// The certificate chain and key of `files`, checked to belong together.
fn load_pair(files: &CertFiles) -> Result<CertifiedKey, String> {
    let read = |path: &str| std::fs::read(path).map_err(|e| format!("{path}: {e}"));
    let cert_pem = read(&files.cert)?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate chain ({e})", files.cert))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in the file", files.cert));
    }
    let key_pem = read(&files.key)?;
    // The parse error is not quoted: it could echo the key's bytes.
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| {
        format!(
            "{}: not a PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC)",
            files.key
        )
    })?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|_| format!("{}: unsupported private key type", files.key))?;
    let pair = CertifiedKey::new(certs, signer);
    pair.keys_match().map_err(|_| {
        format!(
            "{} does not hold the key of the certificate in {}",
            files.key, files.cert
        )
    })?;
    Ok(pair)
}

/// The certificate every handshake gets: the last pair that loaded.
#[derive(Debug)]
struct Reloading {
    current: ArcSwap<CertifiedKey>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(dir: &std::path::Path, name: &str) -> CertFiles {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let files = CertFiles {
            cert: dir.join(format!("{name}.crt")).display().to_string(),
            key: dir.join(format!("{name}.key")).display().to_string(),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }

    fn tmp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("sb-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_matching_pair_loads_and_a_bad_one_names_the_file() {
        let d = tmp("load");
        let a = pair(&d, "a.test");
        let b = pair(&d, "b.test");
        assert!(Tls::load(a.clone()).is_ok());
        let mixed = CertFiles {
            cert: a.cert.clone(),
            key: b.key.clone(),
        };
        let e = Tls::load(mixed).err().unwrap();
        assert!(e.contains("does not hold the key"), "{e}");
        let missing = CertFiles {
            cert: d.join("nope.crt").display().to_string(),
            key: a.key.clone(),
        };
        assert!(Tls::load(missing).err().unwrap().contains("nope.crt"));
        std::fs::write(
            d.join("junk.key"),
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n",
        )
        .unwrap();
        let junk = CertFiles {
            cert: a.cert.clone(),
            key: d.join("junk.key").display().to_string(),
        };
        let e = Tls::load(junk).err().unwrap();
        assert!(e.contains("junk.key") && !e.contains("c2VjcmV0"), "{e}");
        let tls = Tls::load(a.clone()).unwrap();
        std::fs::write(&a.cert, "not pem").unwrap();
        assert!(tls.reload().is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
