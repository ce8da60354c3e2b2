//! `peers` and `routes`: the sessions and advertised routes of each node's speaker, from the
//! published `NodeBGPStatus` objects or (`--admin URL`) from one speaker's admin endpoint.
//!
//! Exit status: 0 shown, 1 `--node` has no status, 2 could not run.

use std::process::ExitCode;

use podcidr_api::PeerReport;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::load::{KubeArgs, LoadError, speaker_reports};
use super::render::{Cell, human_secs, table};
use super::{Output, admin_client, fail, unix_now, use_color};

#[derive(Debug, clap::Args)]
pub struct PeersArgs {
    #[command(flatten)]
    pub common: ViewArgs,
}

#[derive(Debug, clap::Args)]
pub struct RoutesArgs {
    #[command(flatten)]
    pub common: ViewArgs,
}

#[derive(Debug, clap::Args)]
pub struct ViewArgs {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Only this node.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Read one speaker's admin endpoint (e.g. http://127.0.0.1:9180) instead of the API.
    #[arg(long, value_name = "URL")]
    pub admin: Option<String>,
}

/// One node's peers (with routes when read for `routes`).
#[derive(Debug, Clone, PartialEq)]
struct NodePeers {
    node: String,
    /// The node's effective local AS and where it came from (config, label, override…).
    local_asn: Option<u32>,
    local_asn_source: String,
    peers: Vec<PeerReport>,
}

/// `/debug/peers`: `{node, peers: [PeerReport without routes]}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdminPeers {
    node: String,
    #[serde(default)]
    local_asn: Option<u32>,
    #[serde(default)]
    local_asn_source: String,
    #[serde(default)]
    peers: Vec<PeerReport>,
}

/// `/debug/routes`: `{node, peers: [{name, address, state, routes}]}`.
#[derive(Debug, Deserialize)]
struct AdminRoutes {
    node: String,
    #[serde(default)]
    peers: Vec<AdminRoutesPeer>,
}

#[derive(Debug, Deserialize)]
struct AdminRoutesPeer {
    name: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    routes: Vec<podcidr_api::RouteReport>,
}

async fn from_admin(url: &str, routes: bool, args: &ViewArgs) -> Result<Vec<NodePeers>, String> {
    let timeout = args.kube.timeout();
    let node = if routes {
        let doc = admin_client::get_json(url, "/debug/routes", timeout).await?;
        let r: AdminRoutes =
            serde_json::from_value(doc).map_err(|e| format!("{url}/debug/routes: {e}"))?;
        NodePeers {
            node: r.node,
            local_asn: None,
            local_asn_source: String::new(),
            peers: r
                .peers
                .into_iter()
                .map(|p| PeerReport {
                    name: p.name,
                    address: p.address,
                    state: p.state,
                    routes: p.routes,
                    ..PeerReport::default()
                })
                .collect(),
        }
    } else {
        let doc = admin_client::get_json(url, "/debug/peers", timeout).await?;
        let r: AdminPeers =
            serde_json::from_value(doc).map_err(|e| format!("{url}/debug/peers: {e}"))?;
        NodePeers {
            node: r.node,
            local_asn: r.local_asn,
            local_asn_source: r.local_asn_source,
            peers: r.peers,
        }
    };
    Ok(vec![node])
}

async fn from_api(args: &ViewArgs) -> Result<Vec<NodePeers>, LoadError> {
    let (client, url) = args.kube.client().await?;
    let limit = args.kube.timeout();
    let reports = tokio::time::timeout(limit, speaker_reports(&client))
        .await
        .map_err(|_| LoadError::Timeout(limit))?
        .map_err(|e| e.at(&url))?;
    Ok(reports
        .into_iter()
        .map(|(node, r)| NodePeers {
            node,
            local_asn: r.local_asn,
            local_asn_source: r.local_asn_source,
            peers: r.peers,
        })
        .collect())
}

/// Loads, filters by `--node`; `Err(exit code)` after printing the reason.
async fn gather(cmd: &str, args: &ViewArgs, routes: bool) -> Result<Vec<NodePeers>, ExitCode> {
    let mut nodes = match &args.admin {
        Some(url) => from_admin(url, routes, args)
            .await
            .map_err(|e| fail(cmd, e))?,
        None => from_api(args).await.map_err(|e| fail(cmd, e))?,
    };
    if let Some(want) = &args.node {
        nodes.retain(|n| &n.node == want);
        if nodes.is_empty() {
            eprintln!(
                "podcidr-bgp {cmd}: no speaker status for node {want:?} (speaker not running, \
                 or status.publish is false)"
            );
            return Err(ExitCode::from(1));
        }
    }
    Ok(nodes)
}

fn since_secs(since: &str, now: i64) -> Option<u64> {
    let t: k8s_openapi::jiff::Timestamp = since.parse().ok()?;
    Some(u64::try_from(now.saturating_sub(t.as_second())).unwrap_or(0))
}

fn short_family(f: &str) -> &str {
    f.strip_suffix("-unicast").unwrap_or(f)
}

fn dash(s: String) -> String {
    if s.is_empty() { "-".to_owned() } else { s }
}

/// Non-zero counts per family (`ipv4:1,ipv6:1`), `0` when nothing was sent.
fn sent_cell(p: &PeerReport) -> String {
    let parts: Vec<String> = p
        .prefixes_sent
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(f, n)| format!("{}:{n}", short_family(f)))
        .collect();
    if parts.is_empty() {
        "0".to_owned()
    } else {
        parts.join(",")
    }
}

fn state_cell(state: &str) -> Cell {
    Cell {
        text: state.to_owned(),
        color: Some(if state == "Established" {
            "\x1b[32m"
        } else {
            "\x1b[1;31m"
        }),
    }
}

/// Peer JSON: the report's fields (without routes) plus `node` and `uptimeSeconds`.
fn peer_json(n: &NodePeers, p: &PeerReport, now: i64) -> Value {
    let mut out = Map::new();
    out.insert("node".into(), json!(n.node));
    out.insert("localAsn".into(), json!(n.local_asn));
    out.insert("localAsnSource".into(), json!(n.local_asn_source));
    if let Ok(Value::Object(fields)) = serde_json::to_value(p) {
        for (k, v) in fields {
            if k == "routes" {
                continue;
            }
            let since = k == "since";
            out.insert(k, v);
            if since {
                out.insert("uptimeSeconds".into(), json!(since_secs(&p.since, now)));
            }
        }
    }
    Value::Object(out)
}

fn render_peers(nodes: &[NodePeers], output: Output, now: i64) -> String {
    if output.is_document() {
        let peers: Vec<Value> = nodes
            .iter()
            .flat_map(|n| n.peers.iter().map(move |p| peer_json(n, p, now)))
            .collect();
        return output.document(format!("{:#}\n", json!({ "peers": peers })));
    }
    let wide = output == Output::Wide;
    let mut header = vec![
        "NODE",
        "LOCAL-ASN",
        "PEER",
        "ADDRESS",
        "ASN",
        "STATE",
        "UPTIME",
        "HOLD",
        "FAMILIES",
        "SENT",
    ];
    if wide {
        header.extend([
            "KEEPALIVE",
            "CAPABILITIES",
            "MSGS-OUT/IN",
            "FLAPS",
            "LAST-NOTIFICATION",
        ]);
    }
    header.push("LAST-ERROR");
    let mut rows = Vec::new();
    for n in nodes {
        for p in &n.peers {
            let local_asn = match (n.local_asn, wide) {
                (None, _) => "-".to_owned(),
                (Some(a), true) if !n.local_asn_source.is_empty() => {
                    format!("{a} ({})", n.local_asn_source)
                }
                (Some(a), _) => a.to_string(),
            };
            let mut row: Vec<Cell> = vec![
                n.node.as_str().into(),
                local_asn.into(),
                p.name.as_str().into(),
                p.address.as_str().into(),
                p.asn.to_string().into(),
                state_cell(&p.state),
                since_secs(&p.since, now)
                    .map_or_else(|| "-".to_owned(), human_secs)
                    .into(),
                p.hold_time
                    .map_or_else(|| "-".to_owned(), |h| format!("{h}s"))
                    .into(),
                dash(
                    p.families
                        .iter()
                        .map(|f| short_family(f))
                        .collect::<Vec<_>>()
                        .join(","),
                )
                .into(),
                sent_cell(p).into(),
            ];
            if wide {
                let last_notification = p
                    .last_notification_received
                    .as_ref()
                    .map(|n| format!("received {} at {}", n.name, n.at))
                    .or_else(|| {
                        p.last_notification_sent
                            .as_ref()
                            .map(|n| format!("sent {} at {}", n.name, n.at))
                    });
                row.extend([
                    p.keepalive_time
                        .map_or_else(|| "-".to_owned(), |k| format!("{k}s"))
                        .into(),
                    dash(p.capabilities.join(",")).into(),
                    format!("{}/{}", p.messages_sent, p.messages_received).into(),
                    p.flaps.to_string().into(),
                    last_notification.unwrap_or_else(|| "-".to_owned()).into(),
                ]);
            }
            row.push(
                p.last_error
                    .clone()
                    .unwrap_or_else(|| "-".to_owned())
                    .into(),
            );
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return "no BGP peers reported\n".to_owned();
    }
    table(&header, &rows, use_color())
}

/// Route JSON: node and peer, then the route's fields.
fn route_json(node: &str, p: &PeerReport, r: &podcidr_api::RouteReport) -> Value {
    let mut out = Map::new();
    out.insert("node".into(), json!(node));
    out.insert("peer".into(), json!(p.name));
    out.insert("peerAddress".into(), json!(p.address));
    out.insert("peerState".into(), json!(p.state));
    if let Ok(Value::Object(fields)) = serde_json::to_value(r) {
        out.extend(fields);
    }
    Value::Object(out)
}

fn render_routes(nodes: &[NodePeers], output: Output) -> String {
    if output.is_document() {
        let routes: Vec<Value> = nodes
            .iter()
            .flat_map(|n| {
                n.peers
                    .iter()
                    .flat_map(move |p| p.routes.iter().map(move |r| route_json(&n.node, p, r)))
            })
            .collect();
        return output.document(format!("{:#}\n", json!({ "routes": routes })));
    }
    let header = [
        "NODE",
        "PEER",
        "PREFIX",
        "NEXT-HOP",
        "AS-PATH",
        "MED",
        "LOCAL-PREF",
        "COMMUNITIES",
    ];
    let mut rows = Vec::new();
    let mut empty = Vec::new();
    for n in nodes {
        for p in &n.peers {
            if p.routes.is_empty() {
                empty.push(format!("{}/{} ({})", n.node, p.name, p.state));
            }
            for r in &p.routes {
                let communities: Vec<String> = r
                    .communities
                    .iter()
                    .chain(&r.large_communities)
                    .cloned()
                    .collect();
                rows.push(vec![
                    n.node.as_str().into(),
                    p.name.as_str().into(),
                    r.prefix.as_str().into(),
                    r.next_hop.as_str().into(),
                    dash(
                        r.as_path
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(" "),
                    )
                    .into(),
                    r.med
                        .map_or_else(|| "-".to_owned(), |m| m.to_string())
                        .into(),
                    r.local_pref
                        .map_or_else(|| "-".to_owned(), |l| l.to_string())
                        .into(),
                    dash(communities.join(" ")).into(),
                ]);
            }
        }
    }
    let mut out = if rows.is_empty() {
        "no routes advertised\n".to_owned()
    } else {
        table(&header, &rows, use_color())
    };
    if !empty.is_empty() {
        out.push_str(&format!("no routes advertised to: {}\n", empty.join(", ")));
    }
    out
}

pub async fn run_peers(args: PeersArgs) -> ExitCode {
    let args = args.common;
    match gather("peers", &args, false).await {
        Ok(nodes) => {
            print!("{}", render_peers(&nodes, args.output, unix_now()));
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

pub async fn run_routes(args: RoutesArgs) -> ExitCode {
    let args = args.common;
    match gather("routes", &args, true).await {
        Ok(nodes) => {
            print!("{}", render_routes(&nodes, args.output));
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podcidr_api::RouteReport;

    fn sample() -> Vec<NodePeers> {
        vec![NodePeers {
            node: "node-a".into(),
            local_asn: Some(65020),
            local_asn_source: "label example.com/asn".into(),
            peers: vec![
                PeerReport {
                    name: "tor1".into(),
                    address: "192.0.2.1".into(),
                    asn: 65000,
                    state: "Established".into(),
                    since: "2026-01-01T00:00:00Z".into(),
                    hold_time: Some(90),
                    families: vec!["ipv4-unicast".into()],
                    prefixes_sent: [("ipv4-unicast".to_owned(), 1)].into(),
                    routes: vec![RouteReport {
                        prefix: "10.5.113.0/24".into(),
                        next_hop: "192.0.2.10".into(),
                        as_path: vec![64512],
                        ..RouteReport::default()
                    }],
                    ..PeerReport::default()
                },
                PeerReport {
                    name: "tor2".into(),
                    address: "192.0.2.2".into(),
                    asn: 65000,
                    state: "Active".into(),
                    last_error: Some("connection refused".into()),
                    ..PeerReport::default()
                },
            ],
        }]
    }

    #[test]
    fn peers_json_is_flat_with_uptime() {
        let now = 1_767_225_600 + 125; // 2026-01-01T00:02:05Z
        let doc: Value = serde_json::from_str(&render_peers(&sample(), Output::Json, now)).unwrap();
        let peers = doc["peers"].as_array().unwrap();
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[0]["node"], "node-a");
        assert_eq!(peers[0]["uptimeSeconds"], 125);
        assert_eq!(peers[0]["holdTime"], 90);
        assert!(peers[0].get("routes").is_none());
        assert_eq!(peers[1]["uptimeSeconds"], Value::Null);
        assert_eq!(peers[1]["lastError"], "connection refused");
    }

    #[test]
    fn peers_show_the_node_local_asn_and_where_it_came_from() {
        let now = 1_767_225_600;
        let doc: Value = serde_json::from_str(&render_peers(&sample(), Output::Json, now)).unwrap();
        assert_eq!(doc["peers"][0]["localAsn"], 65020);
        assert_eq!(doc["peers"][0]["localAsnSource"], "label example.com/asn");
        let table = render_peers(&sample(), Output::Table, now);
        let header = table.lines().next().unwrap();
        assert!(header.contains("LOCAL-ASN"), "{table}");
        assert!(table.lines().nth(1).unwrap().contains("65020"), "{table}");
        let wide = render_peers(&sample(), Output::Wide, now);
        assert!(wide.contains("65020 (label example.com/asn)"), "{wide}");
        let mut unknown = sample();
        unknown[0].local_asn = None;
        let table = render_peers(&unknown, Output::Table, now);
        assert!(!table.contains("65020"), "{table}");
    }

    /// Peer-supplied text (an RFC 9003 message in the last NOTIFICATION) and strings from a
    /// speaker's own report reach the table escaped: no terminal escape, no forged line. JSON
    /// keeps them exact.
    #[test]
    fn table_output_escapes_control_characters_from_peers_and_reports() {
        let hostile = "bye\x1b[2J\x1b[31mforged\nnode-z   10.0.0.0/8   ok";
        let mut nodes = sample();
        nodes[0].peers[1].last_error = Some(hostile.into());
        nodes[0].peers[0].last_notification_received = Some(podcidr_api::NotificationReport {
            name: hostile.into(),
            at: "2026-01-01T00:00:00Z".into(),
            ..Default::default()
        });
        for output in [Output::Table, Output::Wide] {
            let text = render_peers(&nodes, output, 1_767_225_600);
            assert!(!text.contains('\x1b'), "{text:?}");
            assert_eq!(text.lines().count(), 3, "a header and two peers: {text}");
            assert!(text.contains("\\u{1b}[31mforged\\n"), "{text}");
        }
        let doc: Value =
            serde_json::from_str(&render_peers(&nodes, Output::Json, 1_767_225_600)).unwrap();
        assert_eq!(doc["peers"][1]["lastError"], hostile, "{doc}");
    }

    #[test]
    fn routes_table_names_peers_without_routes() {
        let text = render_routes(&sample(), Output::Table);
        assert!(text.contains("10.5.113.0/24"), "{text}");
        assert!(text.contains("192.0.2.10"));
        assert!(text.contains("no routes advertised to: node-a/tor2 (Active)"));
        let doc: Value = serde_json::from_str(&render_routes(&sample(), Output::Json)).unwrap();
        assert_eq!(doc["routes"][0]["peer"], "tor1");
        assert_eq!(doc["routes"][0]["asPath"], json!([64512]));
    }

    #[test]
    fn yaml_output_is_the_json_document_as_yaml() {
        let now = 1_767_225_600;
        for (json_text, yaml_text) in [
            (
                render_peers(&sample(), Output::Json, now),
                render_peers(&sample(), Output::Yaml, now),
            ),
            (
                render_routes(&sample(), Output::Json),
                render_routes(&sample(), Output::Yaml),
            ),
        ] {
            let from_json: Value = serde_json::from_str(&json_text).unwrap();
            let from_yaml: Value = serde_saphyr::from_str(&yaml_text).unwrap();
            assert_eq!(from_yaml, from_json);
            assert!(!yaml_text.trim_start().starts_with('{'), "{yaml_text}");
        }
    }
}
