use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use podcidr_config::{CniConfig, CniPlugin};
use serde_json::{Value, json};

use super::*;
use crate::daemon::core::guard::Guarded;
use crate::daemon::host::cni_write::{CniWriteError, write_conflist};

fn nets(v: &[&str]) -> Vec<IpNet> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

fn enabled() -> CniConfig {
    CniConfig {
        enabled: true,
        conf_dir: PathBuf::from("/etc/cni/net.d"),
        ..CniConfig::default()
    }
}

fn guarded(v: &[&str]) -> Guarded {
    Guarded {
        announce: nets(v),
        refused: Vec::new(),
    }
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).expect("valid JSON")
}

#[test]
fn dual_stack_gets_one_host_local_range_set_per_family() {
    let text = conflist(&enabled(), &nets(&["198.19.1.0/24", "fd00:19:1::/64"])).unwrap();
    let doc = parsed(&text);
    assert_eq!(doc["cniVersion"], "1.0.0");
    assert_eq!(doc["name"], "podcidr");
    let plugin = &doc["plugins"][0];
    assert_eq!(plugin["type"], "bridge");
    assert_eq!(plugin["bridge"], "podcidr0");
    assert_eq!(plugin["isGateway"], true);
    assert_eq!(plugin["ipMasq"], false);
    assert_eq!(
        plugin["ipam"],
        json!({
            "type": "host-local",
            "ranges": [[{"subnet": "198.19.1.0/24"}], [{"subnet": "fd00:19:1::/64"}]],
            "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}],
        })
    );
    assert!(text.ends_with("}\n"));
}

#[test]
fn several_cidrs_of_one_family_share_its_range_set() {
    let doc = parsed(&conflist(&enabled(), &nets(&["198.19.1.0/26", "198.19.9.0/26"])).unwrap());
    assert_eq!(
        doc["plugins"][0]["ipam"]["ranges"],
        json!([[{"subnet": "198.19.1.0/26"}, {"subnet": "198.19.9.0/26"}]])
    );
    assert_eq!(
        doc["plugins"][0]["ipam"]["routes"],
        json!([{"dst": "0.0.0.0/0"}])
    );
}

#[test]
fn ptp_mtu_and_data_dir_are_passed_to_the_plugins() {
    let cfg = CniConfig {
        plugin: CniPlugin::Ptp,
        mtu: Some(9000),
        data_dir: Some(PathBuf::from("/var/lib/podcidr/cni")),
        ..enabled()
    };
    let doc = parsed(&conflist(&cfg, &nets(&["fd00:19:1::/64"])).unwrap());
    let plugin = &doc["plugins"][0];
    assert_eq!(plugin["type"], "ptp");
    assert_eq!(plugin["mtu"], 9000);
    assert!(plugin.get("bridge").is_none());
    assert_eq!(plugin["ipam"]["dataDir"], "/var/lib/podcidr/cni");
    assert_eq!(plugin["ipam"]["routes"], json!([{"dst": "::/0"}]));
}

#[test]
fn no_cidr_no_conflist() {
    assert_eq!(conflist(&enabled(), &[]), None);
}

#[test]
fn nothing_is_written_before_the_source_is_ready_or_without_cidrs() {
    let mut s = CniState::default();
    assert_eq!(s.plan(&enabled(), None), None);
    assert_eq!(s.plan(&enabled(), Some(&guarded(&[]))), None);
    assert_eq!(
        s.condition(&enabled(), None).map(|c| c.reason),
        Some("SourceNotReady")
    );
    assert_eq!(
        s.condition(&enabled(), Some(&guarded(&[])))
            .map(|c| c.reason),
        Some("NoPodCIDRs")
    );
}

#[test]
fn disabled_writes_nothing_and_reports_no_condition() {
    let mut s = CniState::default();
    let g = guarded(&["198.19.1.0/24"]);
    assert_eq!(s.plan(&CniConfig::default(), Some(&g)), None);
    assert_eq!(s.condition(&CniConfig::default(), Some(&g)), None);
}

#[test]
fn one_write_at_a_time_and_none_for_the_same_content() {
    let mut s = CniState::default();
    let g = guarded(&["198.19.1.0/24"]);
    let file = s.plan(&enabled(), Some(&g)).expect("first write");
    assert_eq!(
        file.path,
        PathBuf::from("/etc/cni/net.d/10-podcidr-bgp.conflist")
    );
    assert_eq!(s.plan(&enabled(), Some(&g)), None, "one in flight");
    s.finished(file, Ok(()));
    assert_eq!(s.plan(&enabled(), Some(&g)), None, "already written");
    s.set_now(RECHECK_AFTER);
    let again = s.plan(&enabled(), Some(&g));
    assert!(again.is_some(), "the disk is compared again after a while");
    s.finished(again.unwrap(), Ok(()));
    let c = s.condition(&enabled(), Some(&g)).unwrap();
    assert!(c.ok, "{c:?}");
    assert_eq!(c.reason, "Written");
    assert!(c.message.contains("198.19.1.0/24"), "{c:?}");
    let next = s.plan(&enabled(), Some(&guarded(&["198.19.2.0/24"])));
    assert!(
        next.is_some_and(|f| f.content.contains("198.19.2.0/24")),
        "a CIDR change writes the new range"
    );
}

#[test]
fn a_failed_write_is_a_condition_and_is_retried_after_a_pause() {
    let mut s = CniState::default();
    let g = guarded(&["198.19.1.0/24"]);
    let file = s.plan(&enabled(), Some(&g)).unwrap();
    s.finished(
        file,
        Err("cni.confDir /etc/cni/net.d does not exist".into()),
    );
    let c = s.condition(&enabled(), Some(&g)).unwrap();
    assert_eq!((c.ok, c.reason), (false, "WriteFailed"));
    assert!(c.message.contains("does not exist"));
    s.set_now(RETRY_AFTER - Duration::from_secs(1));
    assert_eq!(s.plan(&enabled(), Some(&g)), None, "not hammering the disk");
    assert!(
        s.plan(&enabled(), Some(&guarded(&["198.19.2.0/24"])))
            .is_some(),
        "new content is tried at once"
    );
    let mut s2 = CniState::default();
    let file = s2.plan(&enabled(), Some(&g)).unwrap();
    s2.finished(file, Err("boom".into()));
    s2.set_now(RETRY_AFTER);
    assert!(s2.plan(&enabled(), Some(&g)).is_some(), "retried");
}

fn temp_dir(tag: &str) -> integration_tests::TempDir {
    integration_tests::TempDir::new(tag)
}

#[test]
fn write_is_atomic_and_only_when_the_content_changes() {
    let dir = temp_dir("cni-write");
    let path = dir.path("10-podcidr-bgp.conflist");
    assert!(write_conflist(&path, "{\"a\":1}\n").unwrap());
    let inode =
        |p: &std::path::Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let first = inode(&path);
    assert!(!write_conflist(&path, "{\"a\":1}\n").unwrap(), "unchanged");
    assert_eq!(inode(&path), first, "an unchanged file is not touched");
    assert!(write_conflist(&path, "{\"a\":2}\n").unwrap());
    assert_ne!(
        inode(&path),
        first,
        "replaced by rename, never rewritten in place"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":2}\n");
    let names: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["10-podcidr-bgp.conflist"], "no temp file left");
}

#[test]
fn a_missing_or_bad_conf_dir_is_a_clear_error() {
    let dir = temp_dir("cni-bad");
    let missing = dir.path("net.d").join("x.conflist");
    let e = write_conflist(&missing, "{}").unwrap_err();
    assert!(matches!(e, CniWriteError::NoDir { .. }));
    assert!(
        e.to_string()
            .contains("is the host's CNI config dir mounted"),
        "{e}"
    );

    std::fs::write(dir.path("file"), "").unwrap();
    let e = write_conflist(&dir.path("file").join("x.conflist"), "{}").unwrap_err();
    assert!(matches!(e, CniWriteError::NotADir { .. }), "{e}");

    // Not writable even for root.
    let e = write_conflist(std::path::Path::new("/proc/self/x.conflist"), "{}").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot write /proc/self/x.conflist: "),
        "{e}"
    );
}
