#!/usr/bin/env python3
"""Turn a tcpdump capture of BGP sessions into golden wire vectors (python3 stdlib only).

Reads a pcap or pcapng file (Ethernet as tcpdump writes on Linux `lo`, Linux cooked
SLL/SLL2, BSD loopback/NULL or raw IP), reassembles each TCP direction in sequence order
(retransmissions and overlapping segments are handled), splits each byte stream into BGP
messages by the 19-byte header, works out what each session negotiated from the two OPENs,
and writes one file per distinct message:

    <out>/<sender software>/<NN>-<short-name>.hex

File format: `#` comment lines (`# key: value` metadata, then a `# decode:` block), then the
message as lowercase hex, 16 bytes per line, bytes separated by spaces. A reader strips
comment lines and whitespace and hex-decodes the rest.

Usage:
  pcap2vectors.py --pcap bgp.pcap --sessions sessions.json [--cases cases.tsv] --out DIR \
      [--version BIRD="bird2 2.0.12-7"] [--version GoBGP="gobgpd 3.10.0-1"]

sessions.json (written by scripts/capture-vectors.sh):
  {"port_listeners": [{"addr": "127.0.79.1", "port": 11179, "daemon": "bird-a"}, ...],
   "sessions": [{"name": "S1", "peers": ["bird-a", "gobgp"], "kind": "eBGP ..."}, ...],
   "daemons": {"bird-a": {"software": "BIRD", "asn": 4200000001}, ...}}
cases.tsv: lines "<unix time>\t<case description>", the case that starts at that time.
"""

import argparse
import datetime
import ipaddress
import json
import os
import re
import struct
import sys
from collections import defaultdict

# ------------------------------------------------------------------------------ pcap

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276


def read_packets(path):
    """Yield (timestamp float, linktype, frame bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise SystemExit(f"{path}: too short for a capture file")
    magic = data[:4]
    if magic == b"\x0a\x0d\x0d\x0a":
        yield from read_pcapng(data)
        return
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise SystemExit(f"{path}: not a pcap/pcapng file (magic {magic.hex()})")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        frame = data[off:off + incl]
        off += incl
        ts = sec + frac / (1e9 if nano else 1e6)
        yield ts, linktype, frame


def read_pcapng(data):
    off = 0
    endian = "<"
    interfaces = []  # (linktype, ts divisor)
    while off + 12 <= len(data):
        btype = struct.unpack(endian + "I", data[off:off + 4])[0]
        if btype == 0x0A0D0D0A:  # section header: byte order magic decides endianness
            bom = data[off + 8:off + 12]
            endian = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
            interfaces = []
        blen = struct.unpack(endian + "I", data[off + 4:off + 8])[0]
        if blen < 12 or off + blen > len(data):
            break
        body = data[off + 8:off + blen - 4]
        if btype == 1:  # interface description
            linktype = struct.unpack(endian + "H", body[0:2])[0]
            divisor = 1e6
            opts = body[8:]
            o = 0
            while o + 4 <= len(opts):
                code, olen = struct.unpack(endian + "HH", opts[o:o + 4])
                if code == 0:
                    break
                if code == 9 and olen >= 1:  # if_tsresol
                    v = opts[o + 4]
                    divisor = float(2 ** (v & 0x7F)) if v & 0x80 else float(10 ** v)
                o += 4 + ((olen + 3) & ~3)
            interfaces.append((linktype, divisor))
        elif btype == 6:  # enhanced packet
            ifid, tsh, tsl, caplen, _ = struct.unpack(endian + "IIIII", body[0:20])
            linktype, divisor = interfaces[ifid]
            ts = ((tsh << 32) | tsl) / divisor
            yield ts, linktype, body[20:20 + caplen]
        elif btype == 3:  # simple packet
            if interfaces:
                yield 0.0, interfaces[0][0], body[4:]
        off += blen


def ip_payload(linktype, frame):
    """Return the IP packet inside a link-layer frame, or None."""
    if linktype == LINKTYPE_ETHERNET:
        if len(frame) < 14:
            return None
        etype = struct.unpack("!H", frame[12:14])[0]
        off = 14
        while etype in (0x8100, 0x88A8) and len(frame) >= off + 4:
            etype = struct.unpack("!H", frame[off + 2:off + 4])[0]
            off += 4
        return frame[off:] if etype in (0x0800, 0x86DD) else None
    if linktype == LINKTYPE_LINUX_SLL:
        if len(frame) < 16:
            return None
        proto = struct.unpack("!H", frame[14:16])[0]
        return frame[16:] if proto in (0x0800, 0x86DD) else None
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(frame) < 20:
            return None
        proto = struct.unpack("!H", frame[0:2])[0]
        return frame[20:] if proto in (0x0800, 0x86DD) else None
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        return frame[4:]  # address family in host (NULL) or network (LOOP) order; IP version tells
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6, 12, 14):
        return frame
    return None


def parse_tcp(pkt):
    """Return (src, sport, dst, dport, seq, flags, payload) or None."""
    if not pkt:
        return None
    ver = pkt[0] >> 4
    if ver == 4:
        if len(pkt) < 20:
            return None
        ihl = (pkt[0] & 0x0F) * 4
        total = struct.unpack("!H", pkt[2:4])[0]
        frag = struct.unpack("!H", pkt[6:8])[0]
        if pkt[9] != 6 or (frag & 0x1FFF) or (frag & 0x2000):
            return None  # not TCP, or a fragment (never happens on lo)
        src = str(ipaddress.IPv4Address(pkt[12:16]))
        dst = str(ipaddress.IPv4Address(pkt[16:20]))
        seg = pkt[ihl:total] if total else pkt[ihl:]
    elif ver == 6:
        if len(pkt) < 40:
            return None
        plen = struct.unpack("!H", pkt[4:6])[0]
        nxt = pkt[6]
        src = str(ipaddress.IPv6Address(pkt[8:24]))
        dst = str(ipaddress.IPv6Address(pkt[24:40]))
        rest = pkt[40:40 + plen] if plen else pkt[40:]
        while nxt in (0, 43, 60):  # hop-by-hop, routing, destination options
            if len(rest) < 8:
                return None
            nxt, hlen = rest[0], (rest[1] + 1) * 8
            rest = rest[hlen:]
        if nxt != 6:
            return None
        seg = rest
    else:
        return None
    if len(seg) < 20:
        return None
    sport, dport, seq = struct.unpack("!HHI", seg[0:8])
    doff = (seg[12] >> 4) * 4
    flags = seg[13]
    return src, sport, dst, dport, seq, flags, bytes(seg[doff:])


TCP_FIN, TCP_SYN, TCP_RST, TCP_ACK = 0x01, 0x02, 0x04, 0x10


class Direction:
    def __init__(self):
        self.isn = None  # sequence number of the first data byte
        self.segments = []  # (seq, ts, payload)
        self.first_ts = None

    def add(self, ts, seq, flags, payload):
        if self.first_ts is None:
            self.first_ts = ts
        if flags & TCP_SYN:
            self.isn = (seq + 1) & 0xFFFFFFFF
        if payload:
            self.segments.append((seq, ts, payload))

    def reassemble(self):
        """Return (bytes, [(offset, ts)...], gaps) with duplicates/retransmits folded."""
        if not self.segments:
            return b"", [], 0
        base = self.isn
        if base is None:  # capture started mid-connection: lowest sequence number wins
            base = min(s for s, _, _ in self.segments)
        segs = sorted(((s - base) & 0xFFFFFFFF, ts, p) for s, ts, p in self.segments)
        out = bytearray()
        marks = []
        gaps = 0
        for rel, ts, p in segs:
            if rel > 0x7FFFFFFF:  # before the ISN (should not happen)
                continue
            end = rel + len(p)
            if end <= len(out):
                continue  # full duplicate / retransmission
            if rel > len(out):
                gaps += 1
                break  # missing data: everything after is unreliable
            marks.append((len(out), ts))
            out += p[len(out) - rel:]
        return bytes(out), marks, gaps


def ts_at(marks, offset):
    ts = marks[0][1] if marks else 0.0
    for off, t in marks:
        if off > offset:
            break
        ts = t
    return ts


# ------------------------------------------------------------------------------ BGP

MSG_TYPES = {1: "OPEN", 2: "UPDATE", 3: "NOTIFICATION", 4: "KEEPALIVE", 5: "ROUTE-REFRESH"}
AFI = {1: "ipv4", 2: "ipv6", 25: "l2vpn", 16388: "bgp-ls"}
SAFI = {1: "unicast", 2: "multicast", 4: "labeled-unicast", 70: "evpn", 128: "mpls-vpn",
        133: "flowspec"}
CAP_NAMES = {
    1: "multiprotocol", 2: "route-refresh", 3: "outbound-route-filtering",
    5: "extended-next-hop", 6: "extended-message", 7: "bgpsec", 8: "multiple-labels",
    9: "bgp-role", 64: "graceful-restart", 65: "four-octet-as", 67: "dynamic-capability",
    69: "add-path", 70: "enhanced-route-refresh", 71: "long-lived-graceful-restart",
    73: "fqdn", 74: "bfd", 75: "software-version", 128: "route-refresh-cisco(old)",
}
ATTR_NAMES = {
    1: "ORIGIN", 2: "AS_PATH", 3: "NEXT_HOP", 4: "MULTI_EXIT_DISC", 5: "LOCAL_PREF",
    6: "ATOMIC_AGGREGATE", 7: "AGGREGATOR", 8: "COMMUNITIES", 9: "ORIGINATOR_ID",
    10: "CLUSTER_LIST", 14: "MP_REACH_NLRI", 15: "MP_UNREACH_NLRI", 16: "EXTENDED_COMMUNITIES",
    17: "AS4_PATH", 18: "AS4_AGGREGATOR", 22: "PMSI_TUNNEL", 26: "AIGP", 32: "LARGE_COMMUNITY",
    35: "ONLY_TO_CUSTOMER", 128: "ATTR_SET",
}
NOTIF_CODES = {1: "message-header-error", 2: "open-message-error", 3: "update-message-error",
               4: "hold-timer-expired", 5: "fsm-error", 6: "cease", 7: "route-refresh-error"}
CEASE_SUB = {1: "max-prefixes", 2: "admin-shutdown", 3: "peer-deconfigured", 4: "admin-reset",
             5: "connection-rejected", 6: "other-config-change", 7: "connection-collision",
             8: "out-of-resources", 9: "hard-reset", 10: "bfd-down"}
RR_SUBTYPES = {0: "request", 1: "BoRR", 2: "EoRR"}
WELL_KNOWN_COMM = {0xFFFFFF01: "NO_EXPORT", 0xFFFFFF02: "NO_ADVERTISE",
                   0xFFFFFF03: "NO_EXPORT_SUBCONFED", 0xFFFFFF04: "NOPEER",
                   0xFFFF0006: "LLGR_STALE", 0xFFFF0007: "NO_LLGR", 0xFFFF029A: "BLACKHOLE"}


def fam(afi, safi):
    return f"{AFI.get(afi, 'afi' + str(afi))}-{SAFI.get(safi, 'safi' + str(safi))}"


def split_messages(stream):
    """Split a byte stream into BGP messages; returns (list of (offset, bytes), leftover)."""
    msgs = []
    off = 0
    while off + 19 <= len(stream):
        if stream[off:off + 16] != b"\xff" * 16:
            raise ValueError(f"bad BGP marker at stream offset {off}")
        length = struct.unpack("!H", stream[off + 16:off + 18])[0]
        if length < 19:
            raise ValueError(f"bad BGP length {length} at stream offset {off}")
        if off + length > len(stream):
            break
        msgs.append((off, stream[off:off + length]))
        off += length
    return msgs, len(stream) - off


def parse_open(msg):
    """Return dict: version, my_as, hold, bgp_id, caps (list of (code, bytes)), ext_opt."""
    body = msg[19:]
    version, my_as, hold = struct.unpack("!BHH", body[0:5])
    bgp_id = str(ipaddress.IPv4Address(body[5:9]))
    optlen = body[9]
    off = 10
    ext = False
    if optlen == 255 and len(body) > 10 and body[10] == 255:  # RFC 9072 extended opt params
        ext = True
        optlen = struct.unpack("!H", body[11:13])[0]
        off = 13
    opts = body[off:off + optlen]
    caps = []
    o = 0
    while o < len(opts):
        ptype = opts[o]
        if ext:
            plen = struct.unpack("!H", opts[o + 1:o + 3])[0]
            pval = opts[o + 3:o + 3 + plen]
            o += 3 + plen
        else:
            plen = opts[o + 1]
            pval = opts[o + 2:o + 2 + plen]
            o += 2 + plen
        if ptype != 2:
            caps.append((-ptype, pval))
            continue
        c = 0
        while c + 2 <= len(pval):
            code, clen = pval[c], pval[c + 1]
            caps.append((code, pval[c + 2:c + 2 + clen]))
            c += 2 + clen
    return {"version": version, "my_as": my_as, "hold": hold, "bgp_id": bgp_id, "caps": caps,
            "ext_opt": ext}


def describe_cap(code, val):
    name = CAP_NAMES.get(code, f"capability-{code}")
    if code < 0:
        return f"optional parameter type {-code} len {len(val)}: {val.hex()}"
    try:
        if code == 1:
            afi, _, safi = struct.unpack("!HBB", val[:4])
            return f"{name} {fam(afi, safi)}"
        if code == 65:
            return f"{name} AS{struct.unpack('!I', val)[0]}"
        if code == 64:
            flags_time = struct.unpack("!H", val[:2])[0]
            flags = flags_time >> 12
            parts = [f"restart-time {flags_time & 0x0FFF}s",
                     f"R={1 if flags & 8 else 0}", f"N={1 if flags & 4 else 0}"]
            afs = []
            for i in range(2, len(val), 4):
                afi, safi, fl = struct.unpack("!HBB", val[i:i + 4])
                afs.append(f"{fam(afi, safi)} F={1 if fl & 0x80 else 0}")
            return f"{name} " + " ".join(parts) + (" [" + ", ".join(afs) + "]" if afs else " (no AFs)")
        if code == 69:
            mode = {1: "receive", 2: "send", 3: "send+receive"}
            afs = []
            for i in range(0, len(val), 4):
                afi, safi, sr = struct.unpack("!HBB", val[i:i + 4])
                afs.append(f"{fam(afi, safi)} {mode.get(sr, sr)}")
            return f"{name} [" + ", ".join(afs) + "]"
        if code == 5:
            t = []
            for i in range(0, len(val), 6):
                afi, safi, nh = struct.unpack("!HHH", val[i:i + 6])
                t.append(f"{fam(afi, safi)} nh-afi {AFI.get(nh, nh)}")
            return f"{name} [" + ", ".join(t) + "]"
        if code == 71:
            t = []
            for i in range(0, len(val), 7):
                afi, safi, fl = struct.unpack("!HBB", val[i:i + 4])
                st = int.from_bytes(val[i + 4:i + 7], "big")
                t.append(f"{fam(afi, safi)} F={1 if fl & 0x80 else 0} stale-time {st}s")
            return f"{name} [" + ", ".join(t) + "]"
        if code == 73:
            hl = val[0]
            host = val[1:1 + hl].decode("utf-8", "replace")
            dl = val[1 + hl]
            dom = val[2 + hl:2 + hl + dl].decode("utf-8", "replace")
            return f"{name} hostname {host!r} domain {dom!r}"
        if code == 9:
            roles = {0: "provider", 1: "rs", 2: "rs-client", 3: "customer", 4: "peer"}
            return f"{name} {roles.get(val[0], val[0])}"
        if code == 75:
            return f"{name} {val[1:1 + val[0]].decode('utf-8', 'replace')!r}"
    except (struct.error, IndexError):
        return f"{name} (malformed) {val.hex()}"
    return f"{name}" + (f" {val.hex()}" if val else "")


class Negotiated:
    """What a decoder must know for messages sent in one direction of one connection."""

    def __init__(self, sender_open, receiver_open):
        s = sender_open["caps"] if sender_open else []
        r = receiver_open["caps"] if receiver_open else []
        self.known = bool(sender_open and receiver_open)

        def has(caps, code):
            return any(c == code for c, _ in caps)

        def mp(caps):
            out = set()
            for c, v in caps:
                if c == 1 and len(v) >= 4:
                    afi, _, safi = struct.unpack("!HBB", v[:4])
                    out.add((afi, safi))
            return out

        def addpath(caps):
            out = {}
            for c, v in caps:
                if c == 69:
                    for i in range(0, len(v) - 3, 4):
                        afi, safi, sr = struct.unpack("!HBB", v[i:i + 4])
                        out[(afi, safi)] = sr
            return out

        def enh(caps):
            out = set()
            for c, v in caps:
                if c == 5:
                    for i in range(0, len(v) - 5, 6):
                        out.add(struct.unpack("!HHH", v[i:i + 6]))
            return out

        def asn(o):
            if not o:
                return None
            for c, v in o["caps"]:
                if c == 65 and len(v) == 4:
                    return struct.unpack("!I", v)[0]
            return o["my_as"]

        self.sender_as, self.receiver_as = asn(sender_open), asn(receiver_open)
        self.as4 = has(s, 65) and has(r, 65)
        self.ext_msg = has(s, 6) and has(r, 6)
        fams = mp(s) & mp(r)
        if not mp(s) and not mp(r):
            fams = {(1, 1)}
        self.families = sorted(fams)
        sa, ra = addpath(s), addpath(r)
        # Path identifiers are present in this direction when the sender can send and the
        # receiver can receive (RFC 7911 section 4).
        self.addpath = sorted(k for k in sa if sa[k] & 2 and ra.get(k, 0) & 1)
        # RFC 8950: the sender may use a next hop of the other family when the receiver
        # advertised the tuple; list tuples advertised by both ends.
        self.ext_nh = sorted(enh(s) & enh(r))
        self.ext_nh_receiver_only = sorted(enh(r) - enh(s))

    def addpath_for(self, afi, safi):
        return (afi, safi) in self.addpath

    def lines(self):
        def fl(items):
            return ", ".join(fam(a, s) for a, s in items) or "none"
        yield f"four-octet-as: {'yes' if self.as4 else 'no'}"
        yield f"add-path: {fl(self.addpath)}"
        ext = ", ".join(f"{fam(a, s)} nh {AFI.get(n, n)}" for a, s, n in self.ext_nh) or "none"
        yield f"extended-next-hop: {ext}"
        yield f"extended-message: {'yes' if self.ext_msg else 'no'}"
        yield f"families: {fl(self.families)}"


def decode_prefixes(data, afi, addpath):
    out = []
    o = 0
    alen = 4 if afi == 1 else 16
    while o < len(data):
        pid = None
        if addpath:
            pid = struct.unpack("!I", data[o:o + 4])[0]
            o += 4
        plen = data[o]
        o += 1
        nb = (plen + 7) // 8
        raw = data[o:o + nb] + b"\x00" * (alen - nb)
        o += nb
        if nb > alen or o > len(data):
            raise ValueError("prefix overruns")
        addr = ipaddress.IPv4Address(raw) if afi == 1 else ipaddress.IPv6Address(raw)
        s = f"{addr}/{plen}"
        out.append(s if pid is None else f"{s} path-id {pid}")
    return out


def decode_aspath(val, four):
    segs = []
    o = 0
    w = 4 if four else 2
    names = {1: "AS_SET", 2: "AS_SEQUENCE", 3: "AS_CONFED_SEQUENCE", 4: "AS_CONFED_SET"}
    while o < len(val):
        t, n = val[o], val[o + 1]
        o += 2
        asns = [int.from_bytes(val[o + i * w:o + (i + 1) * w], "big") for i in range(n)]
        o += n * w
        segs.append(f"{names.get(t, t)} {asns}")
    return "; ".join(segs) if segs else "empty"


def decode_ext_comm(v):
    t, st = v[0], v[1]
    if t in (0x00, 0x40):
        return f"type 0x{t:02x}/0x{st:02x} 2-octet-AS {struct.unpack('!H', v[2:4])[0]}:{struct.unpack('!I', v[4:8])[0]}"
    if t in (0x01, 0x41):
        return f"type 0x{t:02x}/0x{st:02x} IPv4 {ipaddress.IPv4Address(v[2:6])}:{struct.unpack('!H', v[6:8])[0]}"
    if t in (0x02, 0x42):
        return f"type 0x{t:02x}/0x{st:02x} 4-octet-AS {struct.unpack('!I', v[2:6])[0]}:{struct.unpack('!H', v[6:8])[0]}"
    return f"type 0x{t:02x}/0x{st:02x} value {v[2:].hex()}"


def decode_update(msg, neg):
    """Return (summary dict, decode lines)."""
    body = msg[19:]
    lines = []
    info = {"withdrawn4": 0, "nlri4": 0, "attrs": [], "mp_reach": None, "mp_unreach": None,
            "addpath": False, "extnh": False, "nh_len": None, "nh_mapped": False}
    wlen = struct.unpack("!H", body[0:2])[0]
    wd = body[2:2 + wlen]
    alen = struct.unpack("!H", body[2 + wlen:4 + wlen])[0]
    attrs = body[4 + wlen:4 + wlen + alen]
    nlri = body[4 + wlen + alen:]
    ap4 = neg.addpath_for(1, 1)
    w = decode_prefixes(wd, 1, ap4)
    info["withdrawn4"] = len(w)
    lines.append(f"withdrawn-routes-length {wlen}" + (f": {', '.join(w)}" if w else ""))
    lines.append(f"total-path-attribute-length {alen}")
    o = 0
    while o < len(attrs):
        flags, typ = attrs[o], attrs[o + 1]
        if flags & 0x10:
            ln = struct.unpack("!H", attrs[o + 2:o + 4])[0]
            hdr = 4
        else:
            ln = attrs[o + 2]
            hdr = 3
        val = attrs[o + hdr:o + hdr + ln]
        o += hdr + ln
        name = ATTR_NAMES.get(typ, f"attr-{typ}")
        info["attrs"].append(typ)
        desc = ""
        if typ == 1:
            desc = {0: "IGP", 1: "EGP", 2: "INCOMPLETE"}.get(val[0], str(val[0]))
        elif typ == 2:
            desc = decode_aspath(val, neg.as4)
        elif typ == 17:
            desc = decode_aspath(val, True)
        elif typ == 3:
            desc = str(ipaddress.IPv4Address(val))
        elif typ in (4, 5):
            desc = str(struct.unpack("!I", val)[0])
        elif typ == 7:
            if len(val) == 8:
                desc = f"AS{struct.unpack('!I', val[:4])[0]} {ipaddress.IPv4Address(val[4:])}"
            else:
                desc = f"AS{struct.unpack('!H', val[:2])[0]} {ipaddress.IPv4Address(val[2:])}"
        elif typ == 18:
            desc = f"AS{struct.unpack('!I', val[:4])[0]} {ipaddress.IPv4Address(val[4:])}"
        elif typ == 8:
            cs = []
            for i in range(0, len(val), 4):
                c = struct.unpack("!I", val[i:i + 4])[0]
                cs.append(WELL_KNOWN_COMM.get(c, f"{c >> 16}:{c & 0xFFFF}"))
            desc = ", ".join(cs)
        elif typ == 16:
            desc = "; ".join(decode_ext_comm(val[i:i + 8]) for i in range(0, len(val), 8))
        elif typ == 32:
            desc = ", ".join("%d:%d:%d" % struct.unpack("!III", val[i:i + 12])
                             for i in range(0, len(val), 12))
        elif typ == 9:
            desc = str(ipaddress.IPv4Address(val))
        elif typ == 10:
            desc = ", ".join(str(ipaddress.IPv4Address(val[i:i + 4])) for i in range(0, len(val), 4))
        elif typ == 14:
            afi, safi, nhl = struct.unpack("!HBB", val[:4])
            nh = val[4:4 + nhl]
            nlris = val[5 + nhl:]
            nhs = []
            if nhl in (16, 32):
                nhs = [str(ipaddress.IPv6Address(nh[i:i + 16])) for i in range(0, nhl, 16)]
            elif nhl == 4:
                nhs = [str(ipaddress.IPv4Address(nh))]
            else:
                nhs = [nh.hex()]
            ap = neg.addpath_for(afi, safi)
            pfx = decode_prefixes(nlris, afi, ap)
            info["mp_reach"] = (afi, safi, len(pfx))
            info["nh_len"] = nhl
            if ap and pfx:
                info["addpath"] = True
            if afi == 1 and nhl in (16, 32):
                info["extnh"] = True
            if afi == 2 and nhl in (16, 32) and nh[:12] == b"\x00" * 10 + b"\xff\xff":
                info["nh_mapped"] = True
            desc = (f"{fam(afi, safi)} next-hop-length {nhl} next-hop {' + '.join(nhs)} "
                    f"reserved {val[4 + nhl]} nlri ({len(pfx)}): {', '.join(pfx)}")
        elif typ == 15:
            afi, safi = struct.unpack("!HB", val[:3])
            ap = neg.addpath_for(afi, safi)
            pfx = decode_prefixes(val[3:], afi, ap)
            info["mp_unreach"] = (afi, safi, len(pfx))
            if ap and pfx:
                info["addpath"] = True
            desc = f"{fam(afi, safi)} withdrawn ({len(pfx)}): {', '.join(pfx) if pfx else '(none: End-of-RIB)'}"
        elif typ == 26:
            desc = val.hex()
        else:
            desc = val.hex()
        lines.append(f"attribute {name} (type {typ}, flags 0x{flags:02x}, length {ln}): {desc}")
    n = decode_prefixes(nlri, 1, ap4)
    info["nlri4"] = len(n)
    if (w or n) and ap4:
        info["addpath"] = True
    lines.append(f"nlri ({len(n)})" + (f": {', '.join(n)}" if n else ""))
    return info, lines


def classify(msg, neg):
    """Return (short name, decode lines)."""
    mtype = msg[18]
    tname = MSG_TYPES.get(mtype, f"type{mtype}")
    lines = [f"{tname}, length {len(msg)}"]
    if mtype == 1:
        o = parse_open(msg)
        lines.append(f"version {o['version']}, my-as {o['my_as']}, hold-time {o['hold']}, "
                     f"bgp-identifier {o['bgp_id']}, extended-optional-parameters "
                     f"{'yes' if o['ext_opt'] else 'no'}")
        for c, v in o["caps"]:
            lines.append("capability " + describe_cap(c, v))
        codes = {c for c, _ in o["caps"]}
        extra = []
        if 69 in codes:
            extra.append("addpath")
        if 5 in codes:
            extra.append("extnh")
        return "open" + ("-" + "-".join(extra) if extra else ""), lines
    if mtype == 4:
        return "keepalive", lines
    if mtype == 3:
        code, sub = msg[19], msg[20]
        data = msg[21:]
        cname = NOTIF_CODES.get(code, f"code{code}")
        sname = CEASE_SUB.get(sub, f"subcode{sub}") if code == 6 else f"subcode{sub}"
        lines.append(f"error-code {code} ({cname}), subcode {sub} ({sname}), data length {len(data)}")
        name = f"notification-{cname}" + (f"-{sname}" if code == 6 or sub else "")
        if code == 6 and sub in (2, 4) and data:
            ml = data[0]
            text = data[1:1 + ml].decode("utf-8", "replace")
            lines.append(f"shutdown-communication length {ml}: {text!r} (RFC 9003)")
            name += "-message"
        elif data:
            lines.append(f"data: {data.hex()}")
        return name, lines
    if mtype == 5:
        afi, sub, safi = struct.unpack("!HBB", msg[19:23])
        lines.append(f"{fam(afi, safi)}, subtype {sub} ({RR_SUBTYPES.get(sub, sub)})")
        sname = {0: "", 1: "-borr", 2: "-eorr"}.get(sub, f"-subtype{sub}")
        return f"route-refresh-{AFI.get(afi, afi)}{sname}", lines
    if mtype == 2:
        info, ul = decode_update(msg, neg)
        lines += ul
        attrs = set(info["attrs"])
        if len(msg) == 23:
            return "update-eor-ipv4", lines
        if info["mp_unreach"] and info["mp_unreach"][2] == 0 and attrs == {15} \
                and not info["withdrawn4"] and not info["nlri4"]:
            afi, safi, _ = info["mp_unreach"]
            return f"update-eor-{fam(afi, safi).replace('-unicast', '')}", lines
        parts = []
        if info["nlri4"]:
            parts.append("ipv4-reach")
        if info["withdrawn4"]:
            parts.append("ipv4-withdraw")
        if info["mp_reach"]:
            parts.append(f"{AFI.get(info['mp_reach'][0], 'mp')}-mp-reach")
        if info["mp_unreach"]:
            parts.append(f"{AFI.get(info['mp_unreach'][0], 'mp')}-mp-unreach")
        if info["extnh"]:
            parts.append("extnh")
        if info["nh_len"] == 32:
            parts.append("nh-ll")
        if info["nh_mapped"]:
            parts.append("nh-v4mapped")
        if info["addpath"]:
            parts.append("addpath")
        if 5 in attrs:
            parts.append("ibgp")
        if 17 in attrs:
            parts.append("as4path")
        return "update-" + "-".join(parts or ["other"]), lines
    return f"type{mtype}", lines


def message_shape(msg, neg):
    """A coarse structural key: messages with the same key exercise the same decoder paths."""
    mtype = msg[18]
    if mtype != 2:
        return (mtype, msg[19:23] if mtype in (3, 5) else b"", len(msg) if mtype == 3 else 0)
    info, _ = decode_update(msg, neg)

    def many(n):
        return 0 if n == 0 else (1 if n == 1 else 2)
    return (mtype, tuple(info["attrs"]), many(info["withdrawn4"]), many(info["nlri4"]),
            info["mp_reach"][:2] + (many(info["mp_reach"][2]),) if info["mp_reach"] else None,
            info["mp_unreach"][:2] + (many(info["mp_unreach"][2]),) if info["mp_unreach"] else None,
            info["nh_len"])


def exercises(msg, neg, decode):
    """One-line description of what a vector exercises, for the provenance table."""
    mtype = msg[18]
    if mtype == 1:
        o = parse_open(msg)
        names = []
        for c, v in o["caps"]:
            n = CAP_NAMES.get(c, f"cap {c}")
            if c == 1:
                n = "MP " + fam(*struct.unpack("!HxB", v[:4])).replace("-unicast", "")
            elif c == 65:
                n = f"4-octet AS {struct.unpack('!I', v)[0]}"
            elif c == 64:
                ft = struct.unpack("!H", v[:2])[0]
                fbits = "".join("F" if v[i + 3] & 0x80 else "-" for i in range(2, len(v), 4))
                n = f"GR {ft & 0xFFF}s R={ft >> 15} N={(ft >> 14) & 1} AF-F[{fbits}]"
            elif c == 69:
                n = "ADD-PATH " + ",".join(
                    f"{AFI.get(struct.unpack('!H', v[i:i + 2])[0])}:{ {1: 'rx', 2: 'tx', 3: 'tx+rx'}.get(v[i + 3])}"
                    for i in range(0, len(v), 4))
            elif c == 5:
                n = "ext-NH " + ",".join(f"{AFI.get(struct.unpack('!H', v[i:i + 2])[0])}/nh-{AFI.get(struct.unpack('!H', v[i + 4:i + 6])[0])}" for i in range(0, len(v), 6))
            elif c == 71:
                n = f"LLGR ({len(v) // 7} AFs)"
            elif c == 73:
                n = "FQDN"
            names.append(n)
        return f"my-as {o['my_as']}, hold {o['hold']}; " + "; ".join(names)
    if mtype == 2:
        attrs = [line for line in decode if line.startswith("attribute ")]
        short = []
        for a in attrs:
            name = a.split()[1]
            if name == "MP_REACH_NLRI":
                m = re.search(r"\): (\S+) next-hop-length (\d+).* nlri \((\d+)\)", a)
                short.append(f"MP_REACH {m.group(1)} nh{m.group(2)} x{m.group(3)}" if m else name)
            elif name == "MP_UNREACH_NLRI":
                m = re.search(r"\): (\S+) withdrawn \((\d+)\)", a)
                short.append(f"MP_UNREACH {m.group(1)} x{m.group(2)}" if m else name)
            else:
                short.append(name)
        wd = next((line for line in decode if line.startswith("withdrawn-routes-length")), "")
        nl = next((line for line in decode if line.startswith("nlri (")), "")
        nw = len(wd.split(": ", 1)[1].split(", ")) if ": " in wd else 0
        nn = int(re.search(r"\((\d+)\)", nl).group(1)) if nl else 0
        parts = []
        if nw:
            parts.append(f"withdrawn x{nw}")
        if short:
            parts.append(", ".join(short))
        if nn:
            parts.append(f"NLRI x{nn}")
        info, _ = decode_update(msg, neg)
        if info["addpath"]:
            parts.append("ADD-PATH path identifiers")
        if info["extnh"]:
            parts.append("IPv4 NLRI with IPv6 next hop (RFC 8950)")
        if info["nh_mapped"]:
            parts.append("IPv4-mapped IPv6 next hop")
        if not neg.as4:
            parts.append("2-octet AS session")
        if len(msg) == 23:
            return "End-of-RIB IPv4 (empty UPDATE)"
        if info["mp_unreach"] and info["mp_unreach"][2] == 0 and set(info["attrs"]) == {15}:
            return f"End-of-RIB {fam(*info['mp_unreach'][:2])} (empty MP_UNREACH_NLRI)"
        return "; ".join(parts)
    return "; ".join(decode[1:]) if len(decode) > 1 else decode[0]


def write_provenance(path, summary, versions, all_msgs, conns):
    begin, end = "<!-- BEGIN GENERATED TABLE -->", "<!-- END GENERATED TABLE -->"
    lines = [begin, "",
             f"Generated by `scripts/pcap2vectors.py` on "
             f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from a capture of "
             f"{len(all_msgs)} BGP messages in {len(conns)} TCP connections. Versions: "
             + "; ".join(f"{k}: {v}" for k, v in sorted(versions.items())) + ".", "",
             "| file | sender | message | session | case | exercises |",
             "|---|---|---|---|---|---|"]
    for sw, fname, first, m, ex, case in summary:
        sess = m["session"]["name"] if m["session"] else "?"
        mt = MSG_TYPES.get(m["bytes"][18], "?")
        lines.append(f"| `{sw}/{fname}` | {m['sender']} ({sw}) | {mt} ({len(m['bytes'])} B) | {sess} | "
                     f"{case.replace('|', '/')} | {ex.replace('|', '/')} |")
    lines += ["", end]
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    if begin in text and end in text:
        text = text[:text.index(begin)] + "\n".join(lines) + text[text.index(end) + len(end):]
    else:
        text = text + ("\n" if text else "") + "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)


# ------------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pcap", required=True)
    ap.add_argument("--sessions", required=True)
    ap.add_argument("--cases")
    ap.add_argument("--out", required=True)
    ap.add_argument("--version", action="append", default=[],
                    help="SOFTWARE=version string, e.g. BIRD='bird2 2.0.12-7'")
    ap.add_argument("--provenance",
                    help="Markdown file whose generated section (between the BEGIN/END GENERATED "
                         "markers) is replaced with a table of the vectors written")
    ap.add_argument("--max-per-shape", type=int, default=2,
                    help="vectors kept per sender software, session and message shape (type, "
                         "attribute codes, single/several prefixes); 0 = keep every distinct message")
    args = ap.parse_args()

    with open(args.sessions) as f:
        cfg = json.load(f)
    versions = dict(v.split("=", 1) for v in args.version)
    listeners = {(ipaddress.ip_address(x["addr"]).compressed, x["port"]): x["daemon"]
                 for x in cfg["port_listeners"]}
    addr_daemons = defaultdict(set)
    for (a, _), d in listeners.items():
        addr_daemons[a].add(d)
    daemons = cfg["daemons"]
    sessions = cfg["sessions"]
    cases = []
    if args.cases and os.path.exists(args.cases):
        with open(args.cases) as f:
            for line in f:
                if "\t" in line:
                    t, name = line.rstrip("\n").split("\t", 1)
                    cases.append((float(t), name))
        cases.sort()

    def case_at(ts):
        name = "before the first case mark"
        for t, n in cases:
            if t <= ts:
                name = n
        return name

    # --- collect TCP connections
    conns = {}  # (a, ap, b, bp) canonical, instance -> {"dirs": {(src,sport): Direction}}
    current = {}
    skipped = 0
    for ts, lt, frame in read_packets(args.pcap):
        pkt = ip_payload(lt, frame)
        t = parse_tcp(pkt) if pkt is not None else None
        if t is None:
            skipped += 1
            continue
        src, sport, dst, dport, seq, flags, payload = t
        src = ipaddress.ip_address(src).compressed
        dst = ipaddress.ip_address(dst).compressed
        key = tuple(sorted([(src, sport), (dst, dport)]))
        if flags & TCP_SYN and not flags & TCP_ACK:
            # a new connection on this 4-tuple, unless it is a retransmitted SYN
            # (or a SYN captured after the first segments of its connection: reordering)
            inst, syn = current.get(key, (-1, None))
            if inst < 0 or (syn is not None and syn != (src, sport, seq)):
                inst += 1
            current[key] = (inst, (src, sport, seq))
        inst = current.setdefault(key, (0, None))[0]
        c = conns.setdefault((key, inst), {"dirs": {}, "first": ts})
        d = c["dirs"].setdefault((src, sport, dst, dport), Direction())
        d.add(ts, seq, flags, payload)

    # --- split into messages, attribute to daemons
    all_msgs = []  # dicts
    problems = []
    for (key, inst), c in sorted(conns.items(), key=lambda kv: kv[1]["first"]):
        per_dir = {}
        for (src, sport, dst, dport), d in c["dirs"].items():
            stream, marks, gaps = d.reassemble()
            if gaps:
                problems.append(f"{src}:{sport}->{dst}:{dport}: gap in TCP stream, truncated")
            try:
                msgs, left = split_messages(stream)
            except ValueError as e:
                problems.append(f"{src}:{sport}->{dst}:{dport}: {e}")
                continue
            if left:
                problems.append(f"{src}:{sport}->{dst}:{dport}: {left} trailing bytes (connection cut)")
            sender = listeners.get((src, sport))
            receiver = listeners.get((dst, dport))
            if sender is None and receiver is not None:
                cands = addr_daemons.get(src, set()) - {receiver}
                sender = next(iter(cands)) if len(cands) == 1 else None
            if receiver is None and sender is not None:
                cands = addr_daemons.get(dst, set()) - {sender}
                receiver = next(iter(cands)) if len(cands) == 1 else None
            if sender is None or receiver is None:
                problems.append(f"{src}:{sport}->{dst}:{dport}: cannot tell which daemons talk")
                continue
            per_dir[(src, sport, dst, dport)] = (sender, receiver, msgs, marks)
        opens = {}
        for k, (sender, receiver, msgs, marks) in per_dir.items():
            for off, m in msgs:
                if m[18] == 1:
                    opens[sender] = parse_open(m)
                    break
        for (src, sport, dst, dport), (sender, receiver, msgs, marks) in per_dir.items():
            neg = Negotiated(opens.get(sender), opens.get(receiver))
            tfam = "ipv6" if ":" in src else "ipv4"
            sess = next((s for s in sessions if set(s["peers"]) == {sender, receiver}
                         and s.get("transport", tfam) == tfam), None)
            for off, m in msgs:
                ts = ts_at(marks, off)
                all_msgs.append({"ts": ts, "sender": sender, "receiver": receiver,
                                 "src": f"{src}:{sport}" if ":" not in src else f"[{src}]:{sport}",
                                 "dst": f"{dst}:{dport}" if ":" not in dst else f"[{dst}]:{dport}",
                                 "session": sess, "neg": neg, "bytes": m})

    all_msgs.sort(key=lambda m: m["ts"])
    type_order = {1: 0, 4: 1, 2: 2, 5: 3, 3: 4}

    # --- dedup per sender software: identical bytes once; then at most N per "shape"
    chosen = defaultdict(list)  # software -> list of msg dicts (first occurrence)
    seen = {}
    shapes = defaultdict(int)
    dropped = 0
    for m in all_msgs:
        sw = daemons[m["sender"]]["software"]
        k = (sw, m["bytes"])
        if k in seen:
            seen[k]["also"] += 1
            continue
        shape = (sw, m["session"]["name"] if m["session"] else None) + message_shape(m["bytes"], m["neg"])
        seen[k] = m
        m["also"] = 0
        if args.max_per_shape and shapes[shape] >= args.max_per_shape:
            dropped += 1
            continue
        shapes[shape] += 1
        chosen[sw].append(m)

    os.makedirs(args.out, exist_ok=True)
    summary = []
    for sw, msgs in sorted(chosen.items()):
        d = os.path.join(args.out, sw.lower())
        os.makedirs(d, exist_ok=True)
        for old in os.listdir(d):
            if re.match(r"^\d\d-.*\.hex$", old):
                os.remove(os.path.join(d, old))
        msgs.sort(key=lambda m: (type_order.get(m["bytes"][18], 9), m["ts"]))
        used = set()
        for i, m in enumerate(msgs, 1):
            name, decode = classify(m["bytes"], m["neg"])
            sess = m["session"]
            base = f"{name}-{sess['name'].lower()}" if sess else name
            fname = f"{i:02d}-{base}.hex"
            used.add(fname)
            ts = datetime.datetime.fromtimestamp(m["ts"], datetime.timezone.utc)
            snd, rcv = daemons[m["sender"]], daemons[m["receiver"]]
            sas = m["neg"].sender_as or snd["asn"]
            ras = m["neg"].receiver_as or rcv["asn"]
            hdr = [
                f"sender: {snd['software']} ({versions.get(snd['software'], 'version unknown')}), instance {m['sender']}, AS{sas}",
                f"receiver: {rcv['software']} ({versions.get(rcv['software'], 'version unknown')}), instance {m['receiver']}, AS{ras}",
                f"direction: {m['sender']} -> {m['receiver']} ({m['src']} -> {m['dst']})",
                f"session: {sess['name'] + ' ' + sess['kind'] if sess else 'unknown'}",
                f"case: {case_at(m['ts'])}",
                f"captured: {ts.strftime('%Y-%m-%dT%H:%M:%S.%fZ')[:-4] + 'Z'} by scripts/capture-vectors.sh",
                f"message: {MSG_TYPES.get(m['bytes'][18], m['bytes'][18])}, {len(m['bytes'])} bytes"
                + (f" (identical bytes seen {m['also']} more times)" if m["also"] else ""),
            ]
            if m["neg"].known:
                hdr += list(m["neg"].lines())
            else:
                hdr.append("negotiated: unknown (OPENs not captured)")
            out = [f"# {h}" for h in hdr]
            out.append("# decode:")
            out += [f"#   {line}" for line in decode]
            b = m["bytes"]
            for j in range(0, len(b), 16):
                out.append(" ".join(f"{x:02x}" for x in b[j:j + 16]))
            with open(os.path.join(d, fname), "w") as f:
                f.write("\n".join(out) + "\n")
            summary.append((sw.lower(), fname, decode[0], m, exercises(m["bytes"], m["neg"], decode),
                            case_at(m["ts"])))
    for s in summary:
        print(f"{s[0]}/{s[1]}: {s[2]}")
    if args.provenance:
        write_provenance(args.provenance, summary, versions, all_msgs, conns)
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    print(f"{len(all_msgs)} BGP messages in {len(conns)} TCP connections, {len(seen)} distinct, "
          f"{dropped} skipped as same shape, {len(summary)} vectors written to {args.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
