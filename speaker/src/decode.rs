//! `podcidr-bgp decode`: hex in, one JSON object per BGP message out.
//!
//! Exit status: 0 when every message decoded cleanly, 1 when any message had an error
//! (including RFC 7606 treat-as-withdraw and attribute-discard), 2 when the input is not hex.

use std::io::Read;
use std::process::ExitCode;

use bgp_proto::message::attribute::{
    AttrValue, format_community, format_extended_community, format_large_community,
};
use bgp_proto::message::capability::Capability;
use bgp_proto::message::{Decoded, Message, WireOptions, decode_stream};
use bgp_proto::{Action, AsPath, AsSegmentType, DecodeError, MpNextHop, Open, Update, iana};
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// One or more concatenated BGP messages in hex (whitespace, ':' and a 0x prefix
    /// tolerated). Repeatable; without it, hex is read from stdin ('#' lines are comments).
    #[arg(long)]
    hex: Vec<String>,
    /// The session did not negotiate 4-octet AS: AS_PATH and AGGREGATOR carry 2-octet ASNs.
    #[arg(long)]
    two_octet_as: bool,
    /// The session negotiated RFC 8654 extended messages: up to 65,535 octets. Without it a
    /// message over 4,096 octets is 1/2 Bad Message Length, as on our sessions (which never
    /// negotiate extended messages).
    #[arg(long)]
    extended_message: bool,
}

pub fn run(args: &DecodeArgs) -> ExitCode {
    let inputs = if args.hex.is_empty() {
        let mut s = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut s) {
            eprintln!("podcidr-bgp decode: cannot read stdin: {e}");
            return ExitCode::from(2);
        }
        vec![s]
    } else {
        args.hex.clone()
    };
    let opts = WireOptions {
        four_octet_as: !args.two_octet_as,
        extended_message: args.extended_message,
    };
    let mut failed = false;
    for input in &inputs {
        let bytes = match parse_hex(input) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("podcidr-bgp decode: {e}");
                return ExitCode::from(2);
            }
        };
        for result in decode_stream(&bytes, &opts) {
            let (line, ok) = render(&result, &opts);
            failed |= !ok;
            println!("{line}");
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Hex text to bytes. Tolerates whitespace, ':' separators, `0x` prefixes and `#` comments.
pub fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let mut digits = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        for token in line.split_whitespace() {
            let token = token
                .strip_prefix("0x")
                .or_else(|| token.strip_prefix("0X"))
                .unwrap_or(token);
            digits.extend(token.chars().filter(|c| *c != ':'));
        }
    }
    if let Some((i, c)) = digits.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
        return Err(format!("not hex: {c:?} at hex digit {i}"));
    }
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| {
            digits
                .get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("not hex at digit {i}"))
        })
        .collect()
}

/// One output line and whether the message was clean.
pub fn render(result: &Result<Decoded, DecodeError>, opts: &WireOptions) -> (Value, bool) {
    match result {
        Err(e) => {
            let h = e.handling();
            (
                json!({
                    "error": e.to_string(),
                    "action": h.action.as_str(),
                    "notification": {"code": u8::from(h.notification.code), "subcode": h.notification.subcode},
                }),
                false,
            )
        }
        Ok(decoded) => {
            let mut v = message_json(&decoded.message, decoded.length, opts);
            let worst = decoded
                .errors
                .iter()
                .map(DecodeError::action)
                .min_by_key(|a| match a {
                    Action::TreatAsWithdraw => 0,
                    _ => 1,
                });
            if let (Some(action), Some(obj)) = (worst, v.as_object_mut()) {
                if action == Action::TreatAsWithdraw {
                    treat_as_withdraw(obj, &decoded.message);
                }
                obj.insert("action".into(), action.as_str().into());
            }
            (v, decoded.errors.is_empty())
        }
    }
}

fn treat_as_withdraw(obj: &mut serde_json::Map<String, Value>, msg: &Message) {
    if let Message::Update(u) = msg {
        let mut all: Vec<String> = u
            .withdrawn_prefixes()
            .iter()
            .map(ToString::to_string)
            .collect();
        all.extend(u.announced().iter().map(ToString::to_string));
        obj.insert("announced".into(), json!([]));
        obj.insert("withdrawn".into(), json!(all));
    }
}

fn message_json(msg: &Message, length: usize, opts: &WireOptions) -> Value {
    let mut v = json!({"type": msg.type_name(), "length": length});
    let extra = match msg {
        Message::Open(o) => open_json(o),
        Message::Update(u) => update_json(u, opts),
        Message::Notification(n) => {
            let mut m = json!({
                "code": u8::from(n.code),
                "subcode": n.subcode,
                "name": n.name(),
            });
            if let Some(text) = n.shutdown_message() {
                m["shutdown_message"] = text.into();
            }
            m
        }
        Message::Keepalive => json!({}),
        Message::RouteRefresh(r) => json!({
            "afi": r.family.afi.0,
            "safi": r.family.safi.0,
            "subtype": r.subtype.name(),
        }),
    };
    if let (Some(obj), Value::Object(extra)) = (v.as_object_mut(), extra) {
        obj.extend(extra);
    }
    v
}

fn open_json(o: &Open) -> Value {
    json!({
        "version": o.version,
        "asn": o.asn().0,
        "hold_time": o.hold_time.seconds(),
        "router_id": o.router_id.to_string(),
        "capabilities": o.capabilities().map(capability_json).collect::<Vec<_>>(),
    })
}

fn capability_json(c: &Capability) -> Value {
    let mut v = json!({"code": c.code(), "name": c.name()});
    let fields = match c {
        Capability::Multiprotocol { family, .. } => json!({
            "afi": family.afi.0, "safi": family.safi.0, "family": family.name(),
        }),
        Capability::GracefulRestart(gr) => json!({
            "restart_time": gr.restart_time,
            "restart_state": gr.restarting(),
            "notification": gr.restart_flags & bgp_proto::GracefulRestart::NOTIFICATION != 0,
            "families": gr.families.iter().map(|f| json!({
                "family": f.family.name(), "forwarding_state": f.forwarding_preserved(),
            })).collect::<Vec<_>>(),
        }),
        Capability::LongLivedGracefulRestart(families) => json!({
            "families": families.iter().map(|f| json!({
                "family": f.family.name(),
                "forwarding_state": f.flags & bgp_proto::LlgrFamily::FORWARDING_STATE != 0,
                "long_lived_stale_time": f.stale_time,
            })).collect::<Vec<_>>(),
        }),
        Capability::FourOctetAs(asn) => json!({"asn": asn.0}),
        Capability::ExtendedNextHop(entries) => json!({
            "entries": entries.iter().map(|e| json!({
                "nlri_afi": e.nlri_afi, "nlri_safi": e.nlri_safi, "next_hop_afi": e.next_hop_afi,
            })).collect::<Vec<_>>(),
        }),
        Capability::AddPath(entries) => json!({
            "families": entries.iter().map(|e| json!({
                "family": e.family.name(),
                "send_receive": match e.send_receive { 1 => "receive", 2 => "send", 3 => "both", _ => "invalid" },
            })).collect::<Vec<_>>(),
        }),
        Capability::Fqdn { hostname, domain } => json!({
            "hostname": String::from_utf8_lossy(hostname),
            "domain": String::from_utf8_lossy(domain),
        }),
        Capability::Unknown { value, .. } => json!({"value": hex(value)}),
        Capability::RouteRefresh
        | Capability::EnhancedRouteRefresh
        | Capability::ExtendedMessage => {
            json!({})
        }
    };
    if let (Some(obj), Value::Object(f)) = (v.as_object_mut(), fields) {
        obj.extend(f);
    }
    v
}

fn update_json(u: &Update, opts: &WireOptions) -> Value {
    let next_hop = u.next_hop().map(|a| a.to_string()).or_else(|| {
        u.mp_reach()
            .and_then(|m| m.next_hop.primary())
            .map(|a| a.to_string())
    });
    let mut communities = Vec::new();
    let mut large = Vec::new();
    let mut extended = Vec::new();
    for a in &u.attributes {
        match &a.value {
            AttrValue::Communities(c) => communities.extend(c.iter().map(|c| format_community(*c))),
            AttrValue::LargeCommunities(c) => large.extend(c.iter().map(format_large_community)),
            AttrValue::ExtendedCommunities(c) => {
                extended.extend(c.iter().map(format_extended_community))
            }
            _ => {}
        }
    }
    json!({
        "announced": u.announced().iter().map(ToString::to_string).collect::<Vec<_>>(),
        "withdrawn": u.withdrawn_prefixes().iter().map(ToString::to_string).collect::<Vec<_>>(),
        "end_of_rib": u.end_of_rib_family().map(|f| f.name()),
        "next_hop": next_hop,
        "origin": u.origin().map(|o| o.name()),
        "as_path": u.effective_as_path(opts).map(|p| p.sequence_asns()),
        "communities": communities,
        "large_communities": large,
        "extended_communities": extended,
        "med": u.med(),
        "local_pref": u.local_pref(),
        "attributes": u.attributes.iter().map(|a| {
            let mut v = json!({
                "code": a.type_code(),
                "flags": a.flags,
                "name": iana::attr_type::name(a.type_code()).unwrap_or("UNKNOWN"),
            });
            if let Some(value) = attr_value_json(&a.value) {
                v["value"] = value;
            }
            v
        }).collect::<Vec<_>>(),
    })
}

fn as_path_json(p: &AsPath) -> Value {
    json!(
        p.segments
            .iter()
            .map(|s| json!({
                "type": match s.kind {
                    AsSegmentType::Set => "AS_SET",
                    AsSegmentType::Sequence => "AS_SEQUENCE",
                    AsSegmentType::ConfedSequence => "AS_CONFED_SEQUENCE",
                    AsSegmentType::ConfedSet => "AS_CONFED_SET",
                },
                "asns": s.asns,
            }))
            .collect::<Vec<_>>()
    )
}

fn next_hop_json(nh: &MpNextHop) -> Value {
    match nh {
        MpNextHop::Ipv4(a) => json!({"global": a.to_string()}),
        MpNextHop::Ipv6 { global, link_local } => json!({
            "global": global.to_string(),
            "link_local": link_local.map(|l| l.to_string()),
        }),
        MpNextHop::Other(raw) => json!({"raw": hex(raw)}),
    }
}

fn attr_value_json(v: &AttrValue) -> Option<Value> {
    Some(match v {
        AttrValue::Origin(o) => json!(o.name()),
        AttrValue::AsPath(p) | AttrValue::As4Path(p) => as_path_json(p),
        AttrValue::NextHop(a) | AttrValue::OriginatorId(a) => json!(a.to_string()),
        AttrValue::Med(x) | AttrValue::LocalPref(x) => json!(x),
        AttrValue::AtomicAggregate => json!(true),
        AttrValue::Aggregator { asn, address } | AttrValue::As4Aggregator { asn, address } => {
            json!({"asn": asn, "address": address.to_string()})
        }
        AttrValue::Communities(c) => {
            json!(c.iter().map(|c| format_community(*c)).collect::<Vec<_>>())
        }
        AttrValue::ClusterList(c) => json!(c.iter().map(ToString::to_string).collect::<Vec<_>>()),
        AttrValue::ExtendedCommunities(c) => {
            json!(c.iter().map(format_extended_community).collect::<Vec<_>>())
        }
        AttrValue::LargeCommunities(c) => {
            json!(c.iter().map(format_large_community).collect::<Vec<_>>())
        }
        AttrValue::MpReach(m) => json!({
            "family": m.family.name(),
            "next_hop": next_hop_json(&m.next_hop),
            "nlri": m.nlri.prefixes().iter().map(ToString::to_string).collect::<Vec<_>>(),
        }),
        AttrValue::MpUnreach(m) => json!({
            "family": m.family.name(),
            "withdrawn": m.withdrawn.prefixes().iter().map(ToString::to_string).collect::<Vec<_>>(),
        }),
        AttrValue::Unknown { .. } => return None,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_input_tolerates_whitespace_colons_prefix_and_comments() {
        let b = parse_hex("# comment\n0xff:FF 00\n  0a").unwrap();
        assert_eq!(b, vec![0xff, 0xff, 0x00, 0x0a]);
    }

    #[test]
    fn hex_input_errors_name_the_bad_character() {
        let e = parse_hex("ffzz").unwrap_err();
        assert!(e.contains("'z'"), "{e}");
        assert!(parse_hex("fff").unwrap_err().contains("odd"));
    }
}
