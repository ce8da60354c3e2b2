//! The MD5 key files a node's config needs, decided here and not in the task that writes
//! them: each running peer's key to its file, and the files no running peer uses any more
//! removed. A last good peer whose Secret is gone keeps the file it has (its session reads
//! it at every connection attempt).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use podcidr_api::SecretKeyRef;

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

/// The plan for `config`. `key` reads the Secret key a peer's running version names (`None`:
/// not readable now, the file stays as it is); `written`: the previous plan's `in_use`.
pub fn key_file_plan(
    config: &NodeConfig,
    key: impl Fn(&SecretKeyRef) -> Option<Vec<u8>>,
    written: &BTreeSet<PathBuf>,
) -> KeyFilePlan {
    let mut plan = KeyFilePlan::default();
    for p in config.config.iter().flat_map(|c| &c.peers) {
        let Some(path) = &p.password_file else {
            continue;
        };
        plan.in_use.insert(path.clone());
        // The key the running version names (a last good one may name another).
        if let Some(bytes) = config.key_refs.get(&p.name).and_then(&key) {
            plan.write.push((path.clone(), bytes));
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
