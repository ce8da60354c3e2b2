//! The speaker under the identity the shipped DaemonSet gives it. The user, group,
//! supplementary groups, no_new_privs flag and capability sets are read from the rendered
//! manifest (`kubectl kustomize deploy/`); `setpriv` (util-linux) applies them to the binary
//! the way a container runtime does:
//!
//! - capabilities: `drop`/`add` against containerd's default set; the result is the bounding
//!   set; a uid-0 process gets it as permitted/effective at exec, a non-root one gets nothing
//!   (runtimes set no ambient capabilities), and inheritable is empty;
//! - `allowPrivilegeEscalation: false` is no_new_privs;
//! - MD5 keys: the shipped speaker reads them from the API (its `BGPPeer`s' Secrets) and
//!   writes them itself into the in-memory `keys` emptyDir (`--key-dir`), 0400 and owned by
//!   its own user (`write_key`, the function the daemon uses); the earlier model mounted a
//!   Secret volume, whose files belong to root and `fsGroup` with `defaultMode`.
//!
//! - `seccompProfile: RuntimeDefault`: that profile is the container runtime's own allowlist
//!   (built into containerd and CRI-O, not a file on the node), and no runtime runs here, so
//!   the exact profile cannot be applied, and writing out a copy would test the copy. What
//!   the model applies instead is a seccomp filter (installed before `setpriv` execs, kept by
//!   the speaker) that refuses, with EPERM, every syscall the runtimes' default profile
//!   refuses outright to a process without CAP_SYS_ADMIN and the other capabilities the
//!   speaker lacks ([`RUNTIME_DEFAULT_DENIED`]: mount, namespaces, keyrings, BPF, ptrace,
//!   modules, clocks, ...). A speaker that needed any of them would fail here; one that
//!   needs a syscall outside the runtime's allowlist but not in that list would not (x86_64
//!   only: the filter checks the syscall ABI).
//!
//! Then: the MD5 key is read from such a file and an MD5 session with BIRD comes up, and
//! BIRD reaches a passive peer on port 179. A second test shows the harness catches the
//! non-root model that shipped before (uid 65532 + `add: [NET_BIND_SERVICE]`).

use crate::common;
use integration_tests::skip::Need;

use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{PermissionsExt, chown};
use std::process::Command;
use std::time::Duration;

use common::kustomize::{deploy, of_kind, render};
use common::speaker::{Peer, config, write_cidrs};
use common::{Proc, TempDir, free_port, poll};
use integration_tests::{Bird, BirdConfig, BirdNeighbor, net};
use podcidr_bgp::daemon::kube::config_objects::write_key;
use serde_json::Value;

const T: Duration = Duration::from_secs(30);
const OUR_ASN: u32 = 4_200_000_001;

/// containerd's default capabilities for a container (before `drop`/`add`).
const RUNTIME_DEFAULT_CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
];

/// Syscalls the container runtimes' default seccomp profile refuses to a container without
/// CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_MODULE, CAP_SYS_TIME, CAP_SYS_BOOT, CAP_SYS_PACCT,
/// CAP_SYS_RAWIO, CAP_SYS_NICE or CAP_DAC_READ_SEARCH (the speaker has none of them), as the
/// Docker documentation lists them ("Significant syscalls blocked by the default profile"),
/// but for those the kernel no longer has (create_module, get_kernel_syms, query_module).
#[cfg(target_arch = "x86_64")]
const RUNTIME_DEFAULT_DENIED: &[libc::c_long] = &[
    libc::SYS_acct,
    libc::SYS_add_key,
    libc::SYS_bpf,
    libc::SYS_clock_adjtime,
    libc::SYS_clock_settime,
    libc::SYS_delete_module,
    libc::SYS_finit_module,
    libc::SYS_get_mempolicy,
    libc::SYS_init_module,
    libc::SYS_ioperm,
    libc::SYS_iopl,
    libc::SYS_kcmp,
    libc::SYS_kexec_file_load,
    libc::SYS_kexec_load,
    libc::SYS_keyctl,
    libc::SYS_lookup_dcookie,
    libc::SYS_mbind,
    libc::SYS_mount,
    libc::SYS_move_pages,
    libc::SYS_name_to_handle_at,
    libc::SYS_nfsservctl,
    libc::SYS_open_by_handle_at,
    libc::SYS_perf_event_open,
    libc::SYS_pivot_root,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_ptrace,
    libc::SYS_quotactl,
    libc::SYS_reboot,
    libc::SYS_request_key,
    libc::SYS_set_mempolicy,
    libc::SYS_setns,
    libc::SYS_settimeofday,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_sysfs,
    libc::SYS__sysctl,
    libc::SYS_umount2,
    libc::SYS_unshare,
    libc::SYS_uselib,
    libc::SYS_userfaultfd,
    libc::SYS_ustat,
];

/// Installs a seccomp filter on the calling process: [`RUNTIME_DEFAULT_DENIED`] answer
/// EPERM, a foreign syscall ABI is killed, everything else is allowed. Runs between fork
/// and exec (async-signal-safe: no allocation).
#[cfg(target_arch = "x86_64")]
fn deny_runtime_default_denials() -> std::io::Result<()> {
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const N: usize = RUNTIME_DEFAULT_DENIED.len();
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: u16::try_from(code).unwrap_or(0),
        jt: 0,
        jf: 0,
        k,
    };
    let mut prog = [stmt(0, 0); N + 6];
    // The seccomp_data offsets: nr at 0, arch at 4.
    prog[0] = stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 4);
    prog[1] = libc::sock_filter {
        jt: 1,
        ..stmt(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            AUDIT_ARCH_X86_64,
        )
    };
    prog[2] = stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_KILL_PROCESS);
    prog[3] = stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0);
    for (i, nr) in RUNTIME_DEFAULT_DENIED.iter().enumerate() {
        prog[4 + i] = libc::sock_filter {
            // To the EPERM return after the allow.
            jt: u8::try_from(N - i).unwrap_or(0),
            ..stmt(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, *nr as u32)
        };
    }
    prog[N + 4] = stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW);
    prog[N + 5] = stmt(
        libc::BPF_RET | libc::BPF_K,
        libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
    );
    let fprog = libc::sock_fprog {
        len: (N + 6) as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: seccomp(2) reads `fprog` (alive for the call); it only restricts this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &raw const fprog,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What the kubelet and the runtime make of a pod's security settings.
#[derive(Debug, Clone)]
struct RunModel {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    no_new_privs: bool,
    /// The bounding set.
    caps: Vec<String>,
    key: KeyFile,
    /// `seccompProfile: RuntimeDefault` (see the module doc for what is applied).
    seccomp: bool,
}

/// Owner and mode of the MD5 key file the speaker reads.
#[derive(Debug, Clone, Copy)]
struct KeyFile {
    uid: u32,
    gid: u32,
    mode: u32,
}

impl RunModel {
    /// From the rendered speaker DaemonSet.
    fn shipped() -> RunModel {
        let docs = render(&deploy());
        let ds = of_kind(&docs, "DaemonSet");
        assert_eq!(ds.len(), 1);
        let pod = &ds[0]["spec"]["template"]["spec"];
        let c = pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "speaker")
            .unwrap();
        let sc = &c["securityContext"];
        let psc = &pod["securityContext"];
        // The image's USER is 0:0 (Dockerfile); the manifest may override it.
        let num = |v: &Value| v.as_u64().map(|n| u32::try_from(n).unwrap());
        let uid = num(&sc["runAsUser"])
            .or(num(&psc["runAsUser"]))
            .unwrap_or(0);
        let gid = num(&sc["runAsGroup"])
            .or(num(&psc["runAsGroup"]))
            .unwrap_or(0);
        let fs_group = num(&psc["fsGroup"]);
        let mut groups: Vec<u32> = psc["supplementalGroups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(num)
            .collect();
        groups.extend(fs_group);
        let names = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_uppercase))
                .collect()
        };
        let drop = names(&sc["capabilities"]["drop"]);
        let mut caps: Vec<String> = if drop.iter().any(|d| d == "ALL") {
            Vec::new()
        } else {
            RUNTIME_DEFAULT_CAPS
                .iter()
                .map(|c| (*c).to_owned())
                .filter(|c| !drop.contains(c))
                .collect()
        };
        for a in names(&sc["capabilities"]["add"]) {
            if !caps.contains(&a) {
                caps.push(a);
            }
        }
        // The keys live where --key-dir says, on an in-memory emptyDir: written by the
        // speaker, so owned by its uid/gid and 0400 (write_key).
        let key_dir = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find_map(|a| a.strip_prefix("--key-dir="))
            .expect("--key-dir in the speaker's args");
        let mount = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == key_dir)
            .expect("a volume mounted at --key-dir");
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .expect("the keys volume");
        assert_eq!(
            volume["emptyDir"]["medium"], "Memory",
            "keys never touch disk"
        );
        assert!(
            pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|v| !v["secret"].is_object()),
            "no Secret volume: keys come from the API"
        );
        let profile = if sc["seccompProfile"].is_null() {
            &psc["seccompProfile"]
        } else {
            &sc["seccompProfile"]
        };
        RunModel {
            uid,
            gid,
            groups,
            no_new_privs: sc["allowPrivilegeEscalation"] == false,
            caps,
            key: KeyFile {
                uid,
                gid,
                mode: 0o400,
            },
            seccomp: profile["type"] == "RuntimeDefault",
        }
    }

    fn setpriv(&self) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid));
        if self.groups.is_empty() {
            cmd.arg("--clear-groups");
        } else {
            let g: Vec<String> = self.groups.iter().map(ToString::to_string).collect();
            cmd.arg(format!("--groups={}", g.join(",")));
        }
        if self.no_new_privs {
            cmd.arg("--no-new-privs");
        }
        let mut bounding = vec!["-all".to_owned()];
        bounding.extend(self.caps.iter().map(|c| format!("+{}", c.to_lowercase())));
        cmd.arg(format!("--bounding-set={}", bounding.join(",")))
            .arg("--inh-caps=-all")
            .arg("--ambient-caps=-all");
        #[cfg(target_arch = "x86_64")]
        if self.seccomp {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure makes one syscall and allocates nothing.
            unsafe {
                cmd.pre_exec(deny_runtime_default_denials);
            }
        }
        cmd
    }

    /// The key file as the model lays it out, written by the daemon's own `write_key`.
    fn key_file(&self, dir: &TempDir, key: &str) -> std::path::PathBuf {
        let keys = dir.path("keys");
        let file = keys.join("podcidr-bgp-md5").join("tor1");
        write_key(&file, key.as_bytes()).unwrap();
        for d in [&keys, &keys.join("podcidr-bgp-md5")] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        chown(&file, Some(self.key.uid), Some(self.key.gid)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(self.key.mode)).unwrap();
        file
    }
}

/// A speaker under `model` with an MD5 peer (BIRD passive) and a passive peer on port 179
/// (BIRD connects); returns the speaker and the two routers' views.
struct Run {
    proc: Proc,
    md5_router: Bird,
    passive_router: Bird,
    admin: SocketAddr,
    _dir: TempDir,
}

fn start(model: &RunModel, tag: &str) -> Run {
    let ours = net::alloc_v4();
    let md5_router = Bird::start(
        BirdConfig::new(net::alloc_v4(), 65001).neighbor(
            BirdNeighbor::new("tor1", ours, OUR_ASN)
                .passive(true)
                .password("change-me"),
        ),
    );
    let passive_addr = net::alloc_v4();
    let passive_router = Bird::start(
        BirdConfig::new(passive_addr, 65002).neighbor(
            BirdNeighbor::new("spk", ours, OUR_ASN)
                .port(179)
                .passive(false),
        ),
    );
    let dir = TempDir::new(tag);
    let key = model.key_file(&dir, "change-me");
    let md5 = md5_router.peer_addr("tor1");
    let peers = [
        Peer {
            name: "md5",
            address: md5.addr,
            port: md5.port,
            asn: md5.asn,
            local: IpAddr::V4(ours),
            extra: format!("    passwordFile: {}\n", key.display()),
        },
        Peer {
            name: "passive",
            address: IpAddr::V4(passive_addr),
            port: 179,
            asn: 65002,
            local: IpAddr::V4(ours),
            extra: "    passive: true\n".into(),
        },
    ];
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    write_cidrs(&dir, &["198.19.9.0/24"]);
    let cfg = dir.path("config.yaml");
    std::fs::write(&cfg, config(&dir, admin, "", &peers)).unwrap();
    // The test's temp dir is the process's only other input: readable by any uid.
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = model.setpriv();
    cmd.arg(common::BIN).args(["speaker", "--config"]).arg(&cfg);
    Run {
        proc: Proc::spawn_command(cmd, &dir.path("speaker.log")),
        md5_router,
        passive_router,
        admin,
        _dir: dir,
    }
}

async fn peer_state(admin: SocketAddr, name: &str) -> Option<String> {
    let (_, body) = common::http_get(admin, "/debug/peers").await?;
    let v: Value = serde_json::from_str(&body).ok()?;
    v["peers"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["state"].as_str().map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_run_model_reads_its_md5_key_and_listens_on_179() {
    integration_tests::require!(Need::Kubectl, Need::Root, Need::Bin("setpriv"));
    let model = RunModel::shipped();
    assert!(model.seccomp, "the DaemonSet asks for RuntimeDefault");
    let r = start(&model, "run-model");
    let up = poll(T, || async {
        let md5 = peer_state(r.admin, "md5").await?;
        let passive = peer_state(r.admin, "passive").await?;
        (md5 == "Established" && passive == "Established").then_some(())
    })
    .await;
    assert!(
        up.is_some(),
        "under {model:?} both sessions must come up\n{}\n{}\n{}",
        r.proc.log(),
        r.md5_router.diagnostics(),
        r.passive_router.diagnostics()
    );
    assert!(
        r.md5_router
            .wait_until(T, |b| !b.routes_from("tor1").is_empty())
    );
    assert!(
        r.passive_router
            .wait_until(T, |b| !b.routes_from("spk").is_empty())
    );
    #[cfg(target_arch = "x86_64")]
    {
        // The speaker ran under the filter (mode 2: filter) ...
        let status = std::fs::read_to_string(format!("/proc/{}/status", r.proc.pid())).unwrap();
        assert!(
            status.lines().any(|l| l == "Seccomp:\t2"),
            "{}",
            status
                .lines()
                .filter(|l| l.starts_with("Seccomp"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        // ... and the filter refuses what it lists: a new user namespace (unshare(2)).
        let mut probe = model.setpriv();
        probe.args(["unshare", "--user", "true"]);
        let out = probe.output().unwrap();
        assert!(
            !out.status.success()
                && String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
            "{out:?}"
        );
    }
}

/// The harness tells a broken model apart: the model that shipped before this test (uid
/// 65532, `add: [NET_BIND_SERVICE]`, no_new_privs, a 0400 root-owned key) could neither
/// read the key nor listen on 179.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_earlier_non_root_model_could_neither_read_the_key_nor_listen_on_179() {
    integration_tests::require!(Need::Kubectl, Need::Root, Need::Bin("setpriv"));
    let old = RunModel {
        uid: 65532,
        gid: 65532,
        groups: Vec::new(),
        no_new_privs: true,
        caps: vec!["NET_BIND_SERVICE".into()],
        key: KeyFile {
            uid: 0,
            gid: 0,
            mode: 0o400,
        },
        seccomp: false,
    };
    let mut r = start(&old, "run-model-old");
    let status = r.proc.wait_exit(T);
    let log = r.proc.log();
    assert!(
        status.is_some_and(|s| !s.success()),
        "the speaker refuses to start with an unreadable key:\n{log}"
    );
    assert!(
        log.contains("passwordFile") && log.contains("Permission denied"),
        "{log}"
    );
    drop(r);

    // With the key made world-readable it starts, but cannot listen on 179: the added
    // capability never reaches a non-root process.
    let readable = RunModel {
        key: KeyFile {
            mode: 0o444,
            ..old.key
        },
        ..old
    };
    let r = start(&readable, "run-model-old-179");
    let refused = poll(T, || async {
        let log = r.proc.log();
        (log.contains(":179") && log.contains("Permission denied")).then_some(())
    })
    .await;
    assert!(refused.is_some(), "{}", r.proc.log());
    // The rest works: only the port is out of reach.
    let md5_up = poll(T, || async {
        (peer_state(r.admin, "md5").await? == "Established").then_some(())
    })
    .await;
    assert!(md5_up.is_some(), "{}", r.proc.log());
}
