//! The key files a node's config needs (TCP MD5 and BFD keys from Secrets), decided here and
//! not in the task that writes them: each running peer's keys to their files, and the files
//! no running peer uses any more removed. A last good peer whose Secret is gone keeps the
//! file it has (its session reads it at every connection attempt, its BFD session when it
//! starts).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use podcidr_api::{BGPPeerSpec, SecretKeyRef};
use podcidr_config::PeerConfig;

/// What a peer's Secret key is for: each use has its own limits and its own field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyUse {
    /// `spec.passwordSecretRef`: the TCP MD5 key (RFC 2385), 1..80 bytes.
    TcpMd5,
    /// `spec.bfd.authentication.secretRef`: the BFD SHA1 Auth Key (RFC 5880 §4.4), 1..20 bytes.
    BfdSha1,
}

impl KeyUse {
    /// The `BGPPeer` field that names the key.
    pub fn field(self) -> &'static str {
        match self {
            KeyUse::TcpMd5 => "spec.passwordSecretRef",
            KeyUse::BfdSha1 => "spec.bfd.authentication.secretRef",
        }
    }

    /// The key in a Secret's `bytes` (one trailing newline dropped), or why it is none for
    /// this use (never showing it).
    pub fn key_from_bytes(self, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
        match self {
            KeyUse::TcpMd5 => podcidr_config::md5_key_from_bytes(bytes).map_err(|e| e.to_string()),
            KeyUse::BfdSha1 => podcidr_config::bfd_key_from_bytes(bytes).map_err(|e| e.to_string()),
        }
    }

    /// The file the assembled peer reads this key from.
    fn file(self, p: &PeerConfig) -> Option<&PathBuf> {
        match self {
            KeyUse::TcpMd5 => p.password_file.as_ref(),
            KeyUse::BfdSha1 => p
                .bfd
                .as_ref()
                .and_then(|b| b.authentication.as_ref())
                .map(|a| &a.secret_file),
        }
    }
}

/// The Secret keys a peer names, each with what it is for.
pub fn peer_key_refs(spec: &BGPPeerSpec) -> impl Iterator<Item = (KeyUse, &SecretKeyRef)> + '_ {
    let md5 = spec
        .password_secret_ref
        .as_ref()
        .map(|r| (KeyUse::TcpMd5, r));
    let bfd = spec
        .bfd
        .as_ref()
        .and_then(|b| b.authentication.as_ref())
        .map(|a| (KeyUse::BfdSha1, &a.secret_ref));
    md5.into_iter().chain(bfd)
}

use super::NodeConfig;

/// What to do with the key files once a node's config is computed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyFilePlan {
    /// Each running peer's key, to its file (written only where the file does not hold it).
    pub write: Vec<(PathBuf, Vec<u8>)>,
    /// Files an earlier plan kept that no running peer uses: removed from the node.
    pub remove: Vec<PathBuf>,
    /// The files the running config uses: the next plan's `written`.
    pub in_use: BTreeSet<PathBuf>,
}

/// The plan for `config`. `key` reads the Secret key a peer's running version names for a
/// use (`None`: not readable now, the file stays as it is); `written`: the previous plan's
/// `in_use`.
pub fn key_file_plan(
    config: &NodeConfig,
    key: impl Fn(&SecretKeyRef, KeyUse) -> Option<Vec<u8>>,
    written: &BTreeSet<PathBuf>,
) -> KeyFilePlan {
    let mut plan = KeyFilePlan::default();
    for p in config.config.iter().flat_map(|c| &c.peers) {
        for key_use in [KeyUse::TcpMd5, KeyUse::BfdSha1] {
            let Some(path) = key_use.file(p) else {
                continue;
            };
            plan.in_use.insert(path.clone());
            // The key the running version names (a last good one may name another).
            let r = config.key_refs.get(&(p.name.clone(), key_use));
            if let Some(bytes) = r.and_then(|r| key(r, key_use)) {
                plan.write.push((path.clone(), bytes));
            }
        }
    }
    plan.remove = written.difference(&plan.in_use).cloned().collect();
    plan
}

/// The file a peer's Secret key is written to: `<key_dir>/<secret>/<key>`; `None` for a name
/// or key that is no path component (the schema refuses them; a file must never be read or
/// written outside `key_dir` if one gets through).
pub fn key_path(key_dir: &Path, r: &SecretKeyRef) -> Option<PathBuf> {
    let plain = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\0']);
    (plain(&r.name) && plain(&r.key)).then(|| key_dir.join(&r.name).join(&r.key))
}
