//! Server lifecycle, discovery and kubeconfig.

use crate::common;

use common::node;
use fake_kube::{FakeKube, Gvr};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, GroupVersionKind, ListParams, WatchParams};
use kube::discovery::{self, Discovery, Scope};
use serde_json::json;

#[tokio::test]
async fn kubeconfig_file_points_a_client_at_the_fake() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert_resource(&node("node-a", &[])).unwrap();
    let path = std::env::temp_dir().join(format!(
        "fake-kube-{}-{}.yaml",
        std::process::id(),
        fake.addr().port()
    ));
    fake.write_kubeconfig(&path).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(kubeconfig.current_context.as_deref(), Some("fake-kube"));
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        config.cluster_url.to_string().trim_end_matches('/'),
        fake.url()
    );
    let client = kube::Client::try_from(config).unwrap();
    let nodes = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(nodes.items.len(), 1);
    assert!(fake.addr().ip().is_loopback());
}

#[tokio::test]
async fn discovery_lists_builtin_registered_and_written_types() {
    let fake = FakeKube::builder()
        .register(
            Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs"),
            "NodePodCIDR",
            false,
        )
        .start()
        .await
        .unwrap();
    fake.insert(
        &Gvr::cilium_nodes(),
        json!({"kind": "CiliumNode", "metadata": {"name": "node-a"}}),
    )
    .unwrap();
    let client = fake.client();
    assert_eq!(client.apiserver_version().await.unwrap().major, "1");

    let gvk = GroupVersionKind::gvk("podcidr.io", "v1alpha1", "NodePodCIDR");
    let (ar, caps) = discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!(
        (ar.plural.as_str(), caps.scope),
        ("nodepodcidrs", Scope::Cluster)
    );

    let found = Discovery::new(client.clone()).run().await.unwrap();
    assert!(found.has_group("cilium.io"));
    assert!(!found.has_group("metallb.io"));
    let (lease, caps) = found
        .resolve_gvk(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"))
        .unwrap();
    assert_eq!(
        (lease.plural.as_str(), caps.scope),
        ("leases", Scope::Namespaced)
    );
    assert!(
        found
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Node"))
            .is_some()
    );
}

#[tokio::test]
async fn shutdown_closes_the_listener_and_open_watches() {
    let fake = FakeKube::start().await.unwrap();
    let nodes: Api<Node> = Api::all(fake.client_without_retry());
    nodes.list(&ListParams::default()).await.unwrap();
    let mut watch = nodes
        .watch(
            &WatchParams::default(),
            &fake.resource_version().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    fake.wait_for_open_watches(1, common::TIMEOUT)
        .await
        .unwrap();
    fake.shutdown().await;
    // The aborted response either ends or errors; it must not hang.
    let last = tokio::time::timeout(common::TIMEOUT, watch.next())
        .await
        .unwrap();
    assert!(
        !matches!(last, Some(Ok(_))),
        "no events after shutdown: {last:?}"
    );
    let after = tokio::time::timeout(common::TIMEOUT, nodes.list(&ListParams::default()))
        .await
        .unwrap();
    assert!(after.is_err(), "requests fail once the fake is shut down");
}
