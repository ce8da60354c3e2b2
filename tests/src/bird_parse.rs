//! Parsers for BIRD 2 CLI text (`show protocols all`, `show route all`), as birdc prints it.
//!
//! BIRD 2.0 marks no per-route flag for plain graceful-restart staleness in `show route`;
//! only LLGR-stale routes show `(100s)` and carry the LLGR_STALE community (65535,6). The GR
//! state is visible in `show protocols all` ("Neighbor graceful restart active", per channel
//! "Neighbor GR: Regular|Long-lived"); [`crate::Bird::routes`] combines both.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

/// One protocol from `show protocols all`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProtocolInfo {
    pub name: String,
    /// Protocol type column: "BGP", "Static", "Device", "Kernel".
    pub proto: String,
    pub table: String,
    /// "up", "start", "down", "flush".
    pub state: String,
    pub since: String,
    /// BGP state ("Established", "Active", "Connect", "Passive", "Idle", "OpenSent",
    /// "OpenConfirm", "Down"), else the first word of the Info column ("" if none).
    pub info: String,
    /// The whole Info column, e.g. "Passive       Socket: Connection closed".
    pub info_raw: String,
    pub last_error: Option<String>,
    /// "Message:" line (the message given to `disable`).
    pub message: Option<String>,
    pub neighbor_address: Option<IpAddr>,
    pub neighbor_as: Option<u32>,
    pub local_as: Option<u32>,
    pub neighbor_id: Option<Ipv4Addr>,
    pub source_address: Option<IpAddr>,
    /// "Session:" line, e.g. "external multihop AS4".
    pub session: Option<String>,
    /// Negotiated hold time (second half of "Hold timer: 7.034/9").
    pub hold_time: Option<u32>,
    pub keepalive_time: Option<u32>,
    /// "Neighbor graceful restart active": the peer is restarting, its routes are stale.
    pub gr_active: bool,
    /// Capability lines under "Local capabilities", trimmed ("Route refresh", "Restart time: 30").
    pub local_caps: Vec<String>,
    pub neighbor_caps: Vec<String>,
    pub channels: Vec<ChannelInfo>,
    /// Sum of "Routes: N imported" over channels (None if no channel reported routes).
    pub routes_imported: Option<u64>,
    pub routes_exported: Option<u64>,
    /// The protocol's lines as printed, for ad-hoc assertions.
    pub raw: String,
}

impl ProtocolInfo {
    pub fn is_established(&self) -> bool {
        self.state == "up" && self.info == "Established"
    }

    pub fn channel(&self, name: &str) -> Option<&ChannelInfo> {
        self.channels.iter().find(|c| c.name == name)
    }

    pub fn neighbor_has_cap(&self, cap: &str) -> bool {
        self.neighbor_caps.iter().any(|c| c == cap)
    }
}

/// A channel ("Channel ipv4") of a protocol.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelInfo {
    pub name: String,
    /// "UP", "START", "DOWN", ...
    pub state: String,
    pub table: String,
    pub input_filter: String,
    pub output_filter: String,
    pub routes_imported: Option<u64>,
    pub routes_exported: Option<u64>,
    pub routes_preferred: Option<u64>,
    /// "Import updates" row: received, rejected, filtered, ignored, accepted (`---` = None).
    pub import_updates: Vec<Option<u64>>,
    pub import_withdraws: Vec<Option<u64>>,
    pub export_updates: Vec<Option<u64>>,
    pub export_withdraws: Vec<Option<u64>>,
    /// "Neighbor GR: Regular|Long-lived": set while the peer's routes are kept as stale.
    pub neighbor_gr: Option<String>,
    pub bgp_next_hop: Option<String>,
}

/// One route from `show route all`.
#[derive(Debug, Clone, PartialEq)]
pub struct BirdRoute {
    pub table: String,
    pub prefix: IpNet,
    /// Destination as printed: "unreachable", "blackhole", "via 10.0.0.1 on eth0", ...
    pub dest: String,
    /// Forwarding gateway from "via X" (BIRD shows loopback BGP routes as unreachable).
    pub gateway: Option<IpAddr>,
    /// BGP.next_hop's first address, else the gateway.
    pub next_hop: Option<IpAddr>,
    /// All addresses of BGP.next_hop (IPv6 may carry global + link-local).
    pub bgp_next_hops: Vec<IpAddr>,
    pub from_protocol: String,
    /// "from X" in the brackets (the BGP neighbour).
    pub from_addr: Option<IpAddr>,
    /// Last-modified time as printed.
    pub since: String,
    /// `*`: the route selected for the network.
    pub primary: bool,
    pub preference: Option<u32>,
    /// Stale: LLGR-stale (`(100s)`), or kept over a graceful restart (see module docs).
    pub stale: bool,
    pub llgr_stale: bool,
    /// "Type:" line, e.g. "BGP univ".
    pub route_type: Option<String>,
    pub origin: Option<String>,
    pub as_path: Vec<u32>,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    pub communities: Vec<(u16, u16)>,
    pub large_communities: Vec<(u32, u32, u32)>,
    /// Extended communities as printed, e.g. "(rt, 65000, 7)".
    pub ext_communities: Vec<String>,
    /// Every "Name: value" attribute line, e.g. "BGP.originator_id".
    pub attrs: BTreeMap<String, String>,
}

/// Parses `show protocols [all]` output (with or without the "BIRD … ready." banner).
pub fn parse_protocols(text: &str) -> Vec<ProtocolInfo> {
    let mut out: Vec<ProtocolInfo> = Vec::new();
    let mut caps: Option<bool> = None; // Some(true) = local caps, Some(false) = neighbour caps
    for line in text.lines() {
        if line.starts_with("BIRD ") && line.ends_with("ready.") || line.starts_with("Name ") {
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            out.push(parse_protocol_line(line));
            caps = None;
            continue;
        }
        let Some(p) = out.last_mut() else { continue };
        p.raw.push('\n');
        p.raw.push_str(line);
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if indent >= 6
            && let Some(local) = caps
        {
            if local {
                &mut p.local_caps
            } else {
                &mut p.neighbor_caps
            }
            .push(t.to_owned());
            continue;
        }
        caps = None;
        if let Some(ch) = t.strip_prefix("Channel ") {
            p.channels.push(ChannelInfo {
                name: ch.to_owned(),
                ..Default::default()
            });
            continue;
        }
        match t {
            "Local capabilities" => caps = Some(true),
            "Neighbor capabilities" => caps = Some(false),
            "Neighbor graceful restart active" => p.gr_active = true,
            _ => {}
        }
        let Some((key, val)) = t.split_once(':') else {
            continue;
        };
        let val = val.trim();
        // Channel fields are indented by 4 or more under "Channel X"; BGP fields too, so
        // disambiguate by key.
        if let Some(c) = p.channels.last_mut() {
            apply_channel_field(c, key, val);
            continue;
        }
        match key {
            "BGP state" => p.info = val.to_owned(),
            "Neighbor address" => p.neighbor_address = val.parse().ok(),
            "Neighbor AS" => p.neighbor_as = val.parse().ok(),
            "Local AS" => p.local_as = val.parse().ok(),
            "Neighbor ID" => p.neighbor_id = val.parse().ok(),
            "Source address" => p.source_address = val.parse().ok(),
            "Session" => p.session = Some(val.to_owned()),
            "Last error" => p.last_error = Some(val.to_owned()),
            "Message" => p.message = Some(val.to_owned()),
            "Hold timer" => p.hold_time = timer_limit(val),
            "Keepalive timer" => p.keepalive_time = timer_limit(val),
            _ => {}
        }
    }
    for p in &mut out {
        p.routes_imported = sum(p.channels.iter().map(|c| c.routes_imported));
        p.routes_exported = sum(p.channels.iter().map(|c| c.routes_exported));
    }
    out
}

fn sum(it: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    it.fold(None, |acc, v| match (acc, v) {
        (None, v) => v,
        (a, None) => a,
        (Some(a), Some(b)) => Some(a + b),
    })
}

/// "7.034/9" -> 9.
fn timer_limit(val: &str) -> Option<u32> {
    val.rsplit('/').next()?.trim().parse().ok()
}

fn parse_protocol_line(line: &str) -> ProtocolInfo {
    let mut p = ProtocolInfo {
        raw: line.to_owned(),
        ..Default::default()
    };
    let toks: Vec<&str> = line.split_whitespace().collect();
    let get = |i: usize| toks.get(i).copied().unwrap_or_default().to_owned();
    p.name = get(0);
    p.proto = get(1);
    p.table = get(2);
    p.state = get(3);
    // "Since" is one token ("06:50:14.563") or two with an ISO date.
    let mut info_at = 5;
    p.since = get(4);
    if is_iso_date(&p.since) && toks.len() > 5 {
        p.since = format!("{} {}", get(4), get(5));
        info_at = 6;
    }
    // Info is the rest of the line, spacing kept after its first word.
    if toks.len() > info_at {
        let start = nth_token_offset(line, info_at);
        p.info_raw = line[start..].trim_end().to_owned();
        p.info = get(info_at);
    }
    p
}

fn is_iso_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10 && b[4] == b'-' && b[7] == b'-' && s[..4].bytes().all(|c| c.is_ascii_digit())
}

/// Byte offset of the n-th whitespace-separated token.
fn nth_token_offset(line: &str, n: usize) -> usize {
    let mut count = 0;
    let mut in_tok = false;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            in_tok = false;
        } else if !in_tok {
            if count == n {
                return i;
            }
            count += 1;
            in_tok = true;
        }
    }
    line.len()
}

fn apply_channel_field(c: &mut ChannelInfo, key: &str, val: &str) {
    let row = || val.split_whitespace().map(|v| v.parse().ok()).collect();
    match key {
        "State" => c.state = val.to_owned(),
        "Table" => c.table = val.to_owned(),
        "Input filter" => c.input_filter = val.to_owned(),
        "Output filter" => c.output_filter = val.to_owned(),
        "Neighbor GR" => c.neighbor_gr = Some(val.to_owned()),
        "BGP Next hop" => c.bgp_next_hop = Some(val.to_owned()),
        "Import updates" => c.import_updates = row(),
        "Import withdraws" => c.import_withdraws = row(),
        "Export updates" => c.export_updates = row(),
        "Export withdraws" => c.export_withdraws = row(),
        "Routes" => {
            // "2 imported, 0 exported, 2 preferred" (also "N filtered" with import keep filtered)
            for part in val.split(',') {
                let mut it = part.split_whitespace();
                let (Some(n), Some(what)) = (it.next(), it.next()) else {
                    continue;
                };
                let n = n.parse().ok();
                match what {
                    "imported" => c.routes_imported = n,
                    "exported" => c.routes_exported = n,
                    "preferred" => c.routes_preferred = n,
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Parses `show route [all]` output. Unparsable lines are ignored.
pub fn parse_routes(text: &str) -> Vec<BirdRoute> {
    let mut out: Vec<BirdRoute> = Vec::new();
    let mut table = String::new();
    let mut last_prefix: Option<IpNet> = None;
    let mut last_attr: Option<String> = None;
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("Table ") {
            table = t.trim_end_matches(':').to_owned();
            continue;
        }
        if line.trim().is_empty() || line.starts_with("BIRD ") && line.ends_with("ready.") {
            continue;
        }
        if let Some(cont) = line.strip_prefix("\t\t") {
            // Long attribute values continue on lines indented by two tabs.
            if let (Some(k), Some(r)) = (&last_attr, out.last_mut())
                && let Some(v) = r.attrs.get_mut(k)
            {
                v.push(' ');
                v.push_str(cont.trim());
            }
            continue;
        }
        if let Some(attr) = line.strip_prefix('\t') {
            let Some(r) = out.last_mut() else { continue };
            // Keys hold no ':'; values may (IPv6), and may be empty ("BGP.as_path: ").
            if let Some((k, v)) = attr.split_once(':') {
                r.attrs.insert(k.to_owned(), v.trim().to_owned());
                last_attr = Some(k.to_owned());
            }
            continue;
        }
        // A route header; lines starting with spaces are more routes for the same prefix.
        let (prefix, rest) = if line.starts_with(' ') {
            (last_prefix, line.trim_start())
        } else {
            let (p, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            (p.parse().ok(), rest.trim_start())
        };
        let Some(prefix) = prefix else { continue };
        last_prefix = Some(prefix);
        last_attr = None;
        if let Some(r) = parse_route_header(&table, prefix, rest) {
            out.push(r);
        }
    }
    for r in &mut out {
        fill_attrs(r);
    }
    out
}

fn parse_route_header(table: &str, prefix: IpNet, rest: &str) -> Option<BirdRoute> {
    let open = rest.find('[')?;
    let close = open + rest[open..].find(']')?;
    let dest = rest[..open].trim().to_owned();
    let inside: Vec<&str> = rest[open + 1..close].split_whitespace().collect();
    let after = &rest[close + 1..];
    let from_idx = inside.iter().position(|t| *t == "from");
    let from_addr = from_idx
        .and_then(|i| inside.get(i + 1))
        .and_then(|a| a.parse().ok());
    let since = inside[1.min(inside.len())..from_idx.unwrap_or(inside.len())].join(" ");
    let gateway = dest
        .strip_prefix("via ")
        .and_then(|v| v.split_whitespace().next()?.parse().ok());
    let (preference, llgr_stale) = match (after.find('('), after.find(')')) {
        (Some(a), Some(b)) if a < b => {
            let p = &after[a + 1..b];
            let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
            (digits.parse().ok(), p[digits.len()..].contains('s'))
        }
        _ => (None, false),
    };
    let head = after.split('(').next().unwrap_or_default();
    Some(BirdRoute {
        table: table.to_owned(),
        prefix,
        dest,
        gateway,
        next_hop: gateway,
        bgp_next_hops: Vec::new(),
        from_protocol: inside.first().copied().unwrap_or_default().to_owned(),
        from_addr,
        since,
        primary: head.contains('*') || head.contains('!'),
        preference,
        stale: llgr_stale,
        llgr_stale,
        route_type: None,
        origin: None,
        as_path: Vec::new(),
        med: None,
        local_pref: None,
        communities: Vec::new(),
        large_communities: Vec::new(),
        ext_communities: Vec::new(),
        attrs: BTreeMap::new(),
    })
}

fn fill_attrs(r: &mut BirdRoute) {
    let a = &r.attrs;
    r.route_type = a.get("Type").cloned();
    r.origin = a.get("BGP.origin").cloned();
    r.med = a.get("BGP.med").and_then(|v| v.parse().ok());
    r.local_pref = a.get("BGP.local_pref").and_then(|v| v.parse().ok());
    if let Some(p) = a.get("BGP.as_path") {
        r.as_path = p
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|t| t.parse().ok())
            .collect();
    }
    if let Some(nh) = a.get("BGP.next_hop") {
        r.bgp_next_hops = nh
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
    }
    if let Some(c) = a.get("BGP.community") {
        r.communities = groups(c)
            .filter_map(|g| match g[..] {
                [x, y] => Some((x.parse().ok()?, y.parse().ok()?)),
                _ => None,
            })
            .collect();
    }
    if let Some(c) = a.get("BGP.large_community") {
        r.large_communities = groups(c)
            .filter_map(|g| match g[..] {
                [x, y, z] => Some((x.parse().ok()?, y.parse().ok()?, z.parse().ok()?)),
                _ => None,
            })
            .collect();
    }
    if let Some(c) = a.get("BGP.ext_community") {
        r.ext_communities = groups(c).map(|g| format!("({})", g.join(", "))).collect();
    }
    if let Some(nh) = r.bgp_next_hops.first() {
        r.next_hop = Some(*nh);
    }
}

/// "(1,2) (3, 4, 5)" -> [["1","2"], ["3","4","5"]].
fn groups(s: &str) -> impl Iterator<Item = Vec<&str>> {
    s.split('(')
        .filter_map(|g| g.split(')').next())
        .filter(|g| !g.trim().is_empty())
        .map(|g| g.split(',').map(str::trim).collect())
}

/// Converts raw control-socket replies ("1007-text", " text", "0000 ") into birdc's text.
/// Returns Err with the message for 8xxx/9xxx reply codes.
pub fn socket_reply_to_text(reply: &str) -> Result<String, String> {
    let mut out = String::new();
    for line in reply.lines() {
        let b = line.as_bytes();
        let coded =
            b.len() >= 5 && b[..4].iter().all(u8::is_ascii_digit) && matches!(b[4], b'-' | b' ');
        let text = if coded {
            if matches!(b[0], b'8' | b'9') {
                return Err(line[5..].to_owned());
            }
            &line[5..]
        } else {
            line.strip_prefix(' ').unwrap_or(line)
        };
        // Final "0000 " carries no text.
        if coded && b[4] == b' ' && text.is_empty() {
            continue;
        }
        out.push_str(text);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
#[path = "bird_parse_tests.rs"]
mod tests;

/// How far apart two readings of one BIRD "Since" time may be. BIRD stores a monotonic time
/// and converts it to the wall clock each time it prints it, so the same instant reads a
/// millisecond apart between two `show` calls (seen in CI: 12:17:58.313, then .314, with no
/// state change). A reset moves it by the time since the session came up: far more.
pub const SINCE_JITTER_MS: u64 = 50;

/// Whether two readings of BIRD's "Since" column (`HH:MM:SS.mmm`, or a date before it) name
/// the same instant, within [`SINCE_JITTER_MS`]; text BIRD did not print as a time must be
/// equal.
pub fn same_since(a: &str, b: &str) -> bool {
    fn millis(t: &str) -> Option<u64> {
        let time = t.split_whitespace().last()?;
        let (hms, ms) = time.split_once('.').unwrap_or((time, "0"));
        let mut parts = hms.split(':').map(|x| x.parse::<u64>().ok());
        let (h, m, s) = (parts.next()??, parts.next()??, parts.next()??);
        let ms: u64 = format!("{ms:0<3}").get(..3)?.parse().ok()?;
        Some(((h * 60 + m) * 60 + s) * 1000 + ms)
    }
    match (millis(a), millis(b)) {
        (Some(x), Some(y)) => x.abs_diff(y) <= SINCE_JITTER_MS,
        _ => a == b,
    }
}
