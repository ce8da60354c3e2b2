//! Starts the pod-CIDR source the config names, for this node.

use std::sync::Arc;
use std::time::Duration;

use ipam_watch::source::{
    CiliumNodeSource, DesiredSet, FileSource, IpamCrdSource, NodeEvents, NodeSpecSource,
    PodCidrSource,
};
use kube::Client;
use podcidr_api::OBJECT_FILE_SOURCE_DIR;
use podcidr_config::SourceConfig;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use podcidr_config::SourceNeedsApi;

/// The source for `node` and the task that drives it. `node_events`: the speaker's own watch
/// of the Node, given to a source that reads the Node (one watch for every reader); `None`:
/// the source watches it itself. `from_objects`: the config came from a `BGPSpeakerConfig`,
/// so a file source reads only what resolves under [`OBJECT_FILE_SOURCE_DIR`].
pub fn start_source(
    source: &SourceConfig,
    client: Option<&Client>,
    node: &str,
    file_poll: Duration,
    node_events: Option<NodeEvents>,
    from_objects: bool,
) -> Result<(watch::Receiver<Arc<DesiredSet>>, JoinHandle<()>), SourceNeedsApi> {
    let src: Box<dyn PodCidrSource> = match (source, client) {
        (SourceConfig::File { path }, _) => {
            let file = FileSource::new(path.clone()).with_interval(file_poll);
            Box::new(if from_objects {
                file.within(OBJECT_FILE_SOURCE_DIR)
            } else {
                file
            })
        }
        (SourceConfig::NodeSpec, Some(c)) => Box::new(NodeSpecSource::new(c.clone())),
        (SourceConfig::IpamCrd, Some(c)) => Box::new(IpamCrdSource::new(c.clone())),
        (SourceConfig::CiliumNode, Some(c)) => Box::new(CiliumNodeSource::new(c.clone())),
        // Not configured: a set that is never ready, so nothing is announced or withdrawn.
        (SourceConfig::Unconfigured, _) => {
            let (tx, rx) = watch::channel(Arc::new(DesiredSet::default()));
            return Ok((rx, tokio::spawn(async move { tx.closed().await })));
        }
        (other, None) => return Err(SourceNeedsApi(other.kind())),
    };
    let (rx, driver) = match node_events {
        Some(events) => src.watch_node_with(node, events),
        None => src.watch_node(node),
    };
    Ok((rx, tokio::spawn(driver)))
}
