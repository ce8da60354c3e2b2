//! Server-side apply field ownership, as kube-apiserver does it (1.22+: per subresource): a
//! manager's next apply removes the fields it applied before and leaves out now, unless
//! another applier owns them too or another writer changed them since. The speaker relies on
//! it (an empty `refused` is left out of its status report, never written as `[]`);
//! speaker/tests/apiserver/real_api_speaker.rs shows it on a real API server.

use fake_kube::{FakeKube, Gvr};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

fn nbs() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("podcidr.io", "v1alpha1", "NodeBGPStatus"),
        "nodebgpstatuses",
    )
}

fn body(value: Value) -> Value {
    let mut value = value;
    value["apiVersion"] = json!("podcidr.io/v1alpha1");
    value["kind"] = json!("NodeBGPStatus");
    value
}

async fn apply(api: &Api<DynamicObject>, manager: &str, value: Value) -> Value {
    let params = PatchParams::apply(manager).force();
    let obj = api
        .patch("node-a", &params, &Patch::Apply(&body(value)))
        .await
        .unwrap();
    serde_json::to_value(obj).unwrap()
}

async fn apply_status(api: &Api<DynamicObject>, manager: &str, status: Value) -> Value {
    let params = PatchParams::apply(manager).force();
    let obj = api
        .patch_status(
            "node-a",
            &params,
            &Patch::Apply(&body(json!({"status": status}))),
        )
        .await
        .unwrap();
    serde_json::to_value(obj).unwrap()
}

#[tokio::test]
async fn an_apply_removes_the_fields_its_manager_applied_before_and_leaves_out_now() {
    let fake = FakeKube::start().await.unwrap();
    let api: Api<DynamicObject> = Api::all_with(fake.client(), &nbs());
    let obj = apply(
        &api,
        "speaker",
        json!({"metadata": {"name": "node-a", "labels": {"a": "1", "b": "2"}},
               "spec": {"nodeName": "node-a", "extra": "x"}}),
    )
    .await;
    assert_eq!(obj["metadata"]["generation"], 1);
    let status = json!({"source": "ipam-crd", "announced": ["10.0.0.0/24"],
                        "refused": [{"cidr": "192.0.2.0/24", "reason": "default-route"}]});
    let obj = apply_status(&api, "speaker", status).await;
    assert_eq!(obj["status"]["refused"][0]["cidr"], "192.0.2.0/24");

    // The refusal ended: the next report leaves `refused` out.
    let obj = apply_status(
        &api,
        "speaker",
        json!({"source": "ipam-crd", "announced": ["10.0.0.0/24"]}),
    )
    .await;
    assert_eq!(obj["status"].get("refused"), None, "{obj}");
    assert_eq!(obj["status"]["announced"], json!(["10.0.0.0/24"]));
    assert_eq!(
        obj["spec"]["extra"], "x",
        "a status apply owns only the status"
    );

    // The main resource: a label and a spec field left out are removed (a new generation).
    let obj = apply(
        &api,
        "speaker",
        json!({"metadata": {"name": "node-a", "labels": {"a": "1"}},
               "spec": {"nodeName": "node-a"}}),
    )
    .await;
    assert_eq!(obj["metadata"]["labels"], json!({"a": "1"}));
    assert_eq!(obj["spec"], json!({"nodeName": "node-a"}));
    assert_eq!(obj["metadata"]["generation"], 2);
    assert_eq!(
        obj["status"]["source"], "ipam-crd",
        "a main apply keeps the status"
    );

    let managers: Vec<(String, String, String)> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (s("manager"), s("operation"), s("subresource"))
        })
        .collect();
    assert_eq!(
        managers,
        [
            ("speaker".into(), "Apply".into(), String::new()),
            ("speaker".into(), "Apply".into(), "status".into()),
        ]
    );
}

#[tokio::test]
async fn fields_another_writer_owns_or_changed_stay_when_an_applier_leaves_them_out() {
    let fake = FakeKube::start().await.unwrap();
    let api: Api<DynamicObject> = Api::all_with(fake.client(), &nbs());
    apply(
        &api,
        "speaker",
        json!({"metadata": {"name": "node-a"}, "spec": {"nodeName": "node-a"}}),
    )
    .await;
    apply_status(
        &api,
        "speaker",
        json!({"source": "ipam-crd", "speakerVersion": "1", "updatedAt": "t1"}),
    )
    .await;
    // Another applier applies the same field; an update changes another one.
    apply_status(&api, "other", json!({"source": "ipam-crd"})).await;
    api.patch_status(
        "node-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"speakerVersion": "2"}})),
    )
    .await
    .unwrap();

    let obj = apply_status(&api, "speaker", json!({"updatedAt": "t2"})).await;
    assert_eq!(
        obj["status"]["source"], "ipam-crd",
        "still owned by the other applier"
    );
    assert_eq!(
        obj["status"]["speakerVersion"], "2",
        "changed by an update since"
    );
    assert_eq!(obj["status"]["updatedAt"], "t2");

    // Once no one owns it, the field goes with its last applier's next apply.
    let obj = apply_status(&api, "other", json!({"updatedAt": "t2"})).await;
    assert_eq!(obj["status"].get("source"), None, "{obj}");
    assert_eq!(
        fake.list(&Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses"), None)
            .len(),
        1
    );
}
