//! A Secret as the speakers and the status writer read it: its metadata and its `data`, each
//! value kept as whatever JSON the API sent. Decoding it cannot fail on any object the API
//! returns, which matters twice: kube's client logs the whole response body at WARN when a
//! list or watch event does not decode (for a Secret, the keys in it), and one undecodable
//! Secret would stall the watch. The one key a peer names is decoded when it is used, and a
//! bad one is reported without its value.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Md5Secret {
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Key → the base64 string the API sends; anything else is kept and refused on use.
    #[serde(default, deserialize_with = "lenient")]
    pub data: BTreeMap<String, Value>,
}

/// `data` as a map whatever it is: a value that is no object is an empty map.
fn lenient<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Value>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Object(m) => m.into_iter().collect(),
        _ => BTreeMap::new(),
    })
}

impl Md5Secret {
    /// The bytes of `key`: `None` when there is no such key, `Err` (naming the key, never
    /// the value) when it is not base64 text.
    pub fn bytes(&self, key: &str) -> Option<Result<Vec<u8>, String>> {
        let v = self.data.get(key)?;
        Some(
            serde_json::from_value::<k8s_openapi::ByteString>(v.clone())
                .map(|b| b.0)
                .map_err(|_| format!("key {key:?} is not base64 text")),
        )
    }
}

impl kube::Resource for Md5Secret {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Secret".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "secrets".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captures every log line of the current thread (a current-thread runtime runs every
    /// task of the test there, the client's included).
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut v) = self.0.lock() {
                v.extend_from_slice(b);
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn text(&self) -> String {
            self.0
                .lock()
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default()
        }
    }

    /// Issue 31 item 5: a Secret the client cannot decode into k8s-openapi's `Secret` (here
    /// one `data` value is a number) makes kube's client log the whole response at WARN,
    /// keys and all. Read as `Md5Secret`, the same Secret decodes, the peer's key is there,
    /// and no log line carries it.
    #[tokio::test(flavor = "current_thread")]
    async fn no_log_line_carries_a_secrets_key_even_when_it_does_not_decode() {
        use kube::api::{Api, ListParams};
        let fake = fake_kube::FakeKube::start().await.unwrap();
        let material = "s3cret-key-material";
        let b64 =
            serde_json::to_value(k8s_openapi::ByteString(material.as_bytes().to_vec())).unwrap();
        let b64_text = b64.as_str().unwrap().to_owned();
        fake.insert(
            &fake_kube::Gvr::new("v1", "secrets"),
            serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "podcidr-bgp-md5", "namespace": "podcidr-system"},
                   "data": {"tor1": b64, "tor2": 42}}),
        )
        .unwrap();
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let params = ListParams::default().fields("metadata.name=podcidr-bgp-md5");

        // The leak this guards against, shown: k8s-openapi's Secret does not decode, and the
        // client logs the body.
        let typed: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(fake.client(), "podcidr-system");
        assert!(typed.list(&params).await.is_err());
        assert!(
            logs.text().contains(&b64_text),
            "kube logs an undecodable body: {}",
            logs.text()
        );
        logs.0.lock().unwrap().clear();

        let ours: Api<Md5Secret> = Api::namespaced(fake.client(), "podcidr-system");
        let list = ours.list(&params).await.unwrap();
        assert_eq!(
            list.items[0].bytes("tor1"),
            Some(Ok(material.as_bytes().to_vec()))
        );
        assert!(list.items[0].bytes("tor2").unwrap().is_err());
        let text = logs.text();
        assert!(
            !text.contains(&b64_text) && !text.contains(material),
            "{text}"
        );
    }

    /// Whatever the API sends in `data`, the Secret decodes; a key that is no base64 text is
    /// refused on use, naming the key and not the value.
    #[test]
    fn any_secret_decodes_and_a_bad_key_is_refused_without_its_value() {
        let s: Md5Secret = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "podcidr-bgp-md5", "namespace": "podcidr-system"},
            "data": {"tor1": "czNjcmV0", "tor2": 42, "tor3": "not base64 s3cret!"}
        }))
        .unwrap();
        assert_eq!(s.bytes("tor1"), Some(Ok(b"s3cret".to_vec())));
        let e = s.bytes("tor2").unwrap().unwrap_err();
        assert!(e.contains("tor2") && !e.contains("42"), "{e}");
        let e = s.bytes("tor3").unwrap().unwrap_err();
        assert!(!e.contains("s3cret"), "{e}");
        assert_eq!(s.bytes("tor4"), None);
        let odd: Md5Secret =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "x"}, "data": [1]}))
                .unwrap();
        assert!(odd.data.is_empty());
    }
}
