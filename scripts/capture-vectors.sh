#!/usr/bin/env bash
# Captures golden BGP wire vectors from real daemons (BIRD 2 and GoBGP, Debian packages).
#
# Starts two BIRD instances and one gobgpd on loopback only, peers them, records every
# BGP TCP session with tcpdump, drives the sessions through the interesting cases
# (OPEN/capabilities, UPDATEs, withdrawals, End-of-RIB, ROUTE-REFRESH, NOTIFICATIONs),
# stops only what it started, then runs scripts/pcap2vectors.py to write
# bgp-proto/tests/vectors/<daemon>/NN-name.hex.
#
# Usage (as root):  scripts/capture-vectors.sh [OUT_DIR]
#   OUT_DIR              default: bgp-proto/tests/vectors
#   KEEP_WORK=1          keep the temp dir (configs, logs, pcap) for inspection
#   PCAP_OUT=path.pcap   also copy the raw capture there
#
# Topology (all on lo; port 11179 everywhere except bird-b's IPv6 listener):
#   bird-a  127.0.79.1 and [::1]:11179  AS 4200000001 (65001 on S4)
#   gobgp   127.0.79.2                  AS 4200000002 (gRPC API 127.0.0.1:50879)
#   bird-b  127.0.79.3 and [::1]:11180  AS 4200000001 on S2, 4200000002 on S3, 65010 on S4
# Sessions:
#   S1 ebgp  bird-a (127.0.79.1) <-> gobgp (127.0.79.2)   eBGP, IPv4 transport, ipv4+ipv6, no ADD-PATH
#   S2 ibgp6 bird-a ([::1]:11179) <-> bird-b ([::1]:11180) iBGP over IPv6 transport, ADD-PATH both
#            families, extended next hop for IPv4 NLRI (RFC 8950), extended messages (RFC 8654)
#   S3 ibgp  gobgp (127.0.79.2) <-> bird-b (127.0.79.3)   iBGP AS 4200000002, ADD-PATH ipv4,
#            hold time 3 (used for the hold-timer-expired case)
#   S4 old   bird-a (127.0.79.1, AS 65001) <-> bird-b (127.0.79.3, AS 65010, enable as4 off):
#            no 4-octet AS session, so bird-a sends AS_TRANS + AS4_PATH
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$REPO/bgp-proto/tests/vectors}

if [ "$(id -u)" -ne 0 ]; then
  echo "capture-vectors: must run as root (tcpdump on lo, daemons)" >&2
  exit 1
fi
bash "$REPO/scripts/install-test-deps.sh"

A4=127.0.79.1
G4=127.0.79.2
B4=127.0.79.3
PORT=11179
PORT_B6=11180
API_PORT=50879
ASA=4200000001
ASG=4200000002

WORK=$(mktemp -d /tmp/capture-vectors.XXXXXX)
TCPDUMP_PID=
GOBGPD_PID=
BIRD_A_PID=
BIRD_B_PID=

log() { printf '%s capture-vectors: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
# case NAME -- log and record the start of a case; pcap2vectors.py labels each message with
# the case that was running when it was captured.
case_mark() {
  log "case: $*"
  printf '%s\t%s\n' "$(date +%s.%N)" "$*" >>"$WORK/cases.tsv"
}

stop_pid() { # stop_pid PID NAME -- TERM, bounded wait, then KILL; only our own PIDs
  local pid=$1 name=$2 i
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name ($pid) did not exit on TERM, killing"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$GOBGPD_PID" gobgpd
  stop_pid "$BIRD_A_PID" bird-a
  stop_pid "$BIRD_B_PID" bird-b
  stop_pid "$TCPDUMP_PID" tcpdump
  if [ "${KEEP_WORK:-0}" = 1 ] || [ $rc -ne 0 ]; then
    log "work dir kept: $WORK"
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for SECONDS DESCRIPTION CMD... -- poll CMD every 0.1 s, bounded.
wait_for() {
  local secs=$1 what=$2 i n
  shift 2
  n=$((secs * 10))
  for ((i = 0; i < n; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  log "timeout after ${secs}s waiting for: $what"
  return 1
}

birdc_a() { birdc -s "$WORK/bird-a.ctl" "$@"; }
birdc_b() { birdc -s "$WORK/bird-b.ctl" "$@"; }
gobgp_() { gobgp -p "$API_PORT" "$@"; }

bird_established() { # bird_established CTL PROTO
  birdc -s "$1" show protocols "$2" | grep -q Established
}
bird_not_established() {
  ! birdc -s "$1" show protocols "$2" | grep -q Established
}
gobgp_established() { # gobgp_established NEIGHBOR
  gobgp_ neighbor "$1" | grep -q 'BGP state = ESTABLISHED\|BGP state = BGP_FSM_ESTABLISHED'
}
gobgp_not_established() {
  ! gobgp_established "$1"
}

# ---------------------------------------------------------------- configs
# BIRD timers: start/connect delays are shortened so re-enabling a session is quick.
BIRD_TIMERS='
  connect delay time 1;
  connect retry time 2;
  error wait time 1, 2;
  error forget time 10;'

cat >"$WORK/bird-a.conf" <<EOF
log "$WORK/bird-a.log" all;
router id $A4;

protocol device { scan time 60; }

# Routes originated by bird-a. Attributes are set in the export filters.
protocol static st4 {
  ipv4;
  route 198.51.100.0/24 blackhole;
  route 198.18.10.0/24 blackhole;
  route 198.18.11.0/24 blackhole;
  route 203.0.113.0/24 blackhole;
}
protocol static st6 {
  ipv6;
  route 2001:db8:a::/48 blackhole;
  route 2001:db8:b::/48 blackhole;
  route 2001:db8:c:1::/64 blackhole;
  route 2001:db8:d::/48 blackhole;
}
# Disabled later to produce withdrawals of several prefixes at once.
protocol static st4w {
  ipv4;
  route 198.18.20.0/24 blackhole;
  route 198.18.21.0/24 blackhole;
  route 198.18.22.128/25 blackhole;
}
protocol static st6w {
  ipv6;
  route 2001:db8:dead::/48 blackhole;
  route 2001:db8:beef::/48 blackhole;
}

function special() {
  if net.type = NET_IP4 then return net ~ [ 203.0.113.0/24 ];
  return net ~ [ 2001:db8:d::/48 ];
}

function attrs_common() {
  bgp_origin = ORIGIN_IGP;
  bgp_community.add((65000, 100));
  bgp_large_community.add(($ASA, 1, 1));
  bgp_ext_community.add((rt, 65000, 7));
  if special() then {
    bgp_med = 77;
    bgp_community.add((65000, 999));
    bgp_community.add((65535, 65281));   # NO_EXPORT
    bgp_large_community.add(($ASA, 2, 3));
    bgp_ext_community.add((rt, $ASA, 42));  # 4-octet-AS-specific RT
    bgp_ext_community.add((ro, 198.51.100.1, 5)); # IPv4-address-specific
  }
}

filter to_gobgp {
  if source != RTS_STATIC then reject;   # own routes only, no transit
  attrs_common();
  bgp_med = 50;
  if special() then bgp_med = 77;
  bgp_path.prepend($ASA);
  # GoBGP drops IPv4 routes whose next hop is in 127/8.
  if net.type = NET_IP4 then bgp_next_hop = 198.18.0.1;
  accept;
}

filter to_ibgp {
  if source != RTS_STATIC then reject;   # own routes only, no transit
  attrs_common();
  bgp_local_pref = 250;
  if special() then bgp_local_pref = 90;
  accept;
}

# S1: eBGP to GoBGP, IPv4 transport.
protocol bgp gobgp1 {
  description "S1 eBGP bird-a -> gobgp";
  local $A4 port $PORT as $ASA;
  neighbor $G4 port $PORT as $ASG;
  strict bind on;
  multihop 2;
  hold time 90;
  keepalive time 30;
  graceful restart on;
  graceful restart time 120;
  long lived graceful restart on;
  long lived stale time 3600;
  enable extended messages on;
  $BIRD_TIMERS
  ipv4 {
    import all;
    export filter to_gobgp;
  };
  ipv6 {
    import all;
    export filter to_gobgp;
    next hop address 2001:db8:ffff::1;
  };
}

filter to_old {
  if source != RTS_STATIC then reject;
  attrs_common();
  bgp_path.prepend($ASA);
  accept;
}

# S4: eBGP to bird-b acting as an old speaker (no 4-octet AS support) in AS 65010. bird-a
# uses local AS 65001 here; the export filter prepends $ASA, which does not fit in two
# octets, so bird-a must send AS_PATH with AS_TRANS (23456) plus AS4_PATH (RFC 6793).
protocol bgp birdb_old {
  description "S4 eBGP bird-a <-> bird-b (2-octet-AS speaker)";
  local $A4 port $PORT as 65001;
  neighbor $B4 port $PORT as 65010;
  strict bind on;
  multihop 2;
  $BIRD_TIMERS
  ipv4 {
    import all;
    export filter to_old;
  };
}

# S2: iBGP to bird-b over ::1 (IPv6 transport), ADD-PATH, extended next hop for IPv4.
protocol bgp birdb6 {
  description "S2 iBGP bird-a <-> bird-b over ::1";
  local ::1 port $PORT as $ASA;
  neighbor ::1 port $PORT_B6 as $ASA;
  strict bind on;
  hold time 60;
  graceful restart on;
  graceful restart time 90;
  enable extended messages on;
  $BIRD_TIMERS
  ipv4 {
    import all;
    export filter to_ibgp;
    extended next hop on;
    add paths on;
    # Both ends are ::1, so the default next hop (self = ::1) would equal the neighbour address.
    next hop address 2001:db8:ffff::a;
  };
  ipv6 {
    import all;
    export filter to_ibgp;
    add paths on;
    next hop address 2001:db8:ffff::a;
  };
}
EOF

cat >"$WORK/bird-b.conf" <<EOF
log "$WORK/bird-b.log" all;
router id $B4;

protocol device { scan time 60; }

protocol static st4b {
  ipv4;
  route 198.18.30.0/24 blackhole;
  route 198.18.31.0/24 blackhole;
}
protocol static st6b {
  ipv6;
  route 2001:db8:30::/48 blackhole;
  route 2001:db8:31::/48 blackhole;
}

filter to_gobgp_ibgp {
  if source != RTS_STATIC then reject;   # own routes only, no transit
  bgp_local_pref = 150;
  bgp_community.add((65000, 300));
  bgp_large_community.add(($ASG, 3, 3));
  if net.type = NET_IP4 then bgp_next_hop = 198.18.0.3;
  accept;
}

# S2, passive side (bird-a connects).
protocol bgp birda6 {
  description "S2 iBGP bird-b <-> bird-a over ::1";
  local ::1 port $PORT_B6 as $ASA;
  neighbor ::1 port $PORT as $ASA;
  strict bind on;
  passive on;
  hold time 60;
  graceful restart on;
  enable extended messages on;
  $BIRD_TIMERS
  ipv4 {
    import all;
    export none;
    extended next hop on;
    add paths on;
  };
  ipv6 {
    import all;
    export none;
    add paths on;
  };
}

filter to_new {
  if source != RTS_STATIC then reject;
  bgp_community.add((65010, 1));
  accept;
}

# S4, passive side: an "old" speaker in AS 65010 that does not advertise the 4-octet AS
# capability, so the session is not a 4-octet AS session. (BIRD refuses a 4-octet neighbor
# AS with "enable as4 off", so bird-a uses local AS 65001 on this session.)
protocol bgp birda_old {
  description "S4 eBGP bird-b (as4 off) <-> bird-a";
  local $B4 port $PORT as 65010;
  neighbor $A4 port $PORT as 65001;
  strict bind on;
  multihop 2;
  passive on;
  enable as4 off;
  $BIRD_TIMERS
  ipv4 {
    import all;
    export filter to_new;
  };
}

# S3: iBGP to GoBGP in AS $ASG, hold time 3.
protocol bgp gobgp3 {
  description "S3 iBGP bird-b <-> gobgp";
  local $B4 port $PORT as $ASG;
  neighbor $G4 port $PORT as $ASG;
  strict bind on;
  hold time 3;
  keepalive time 1;
  graceful restart on;
  $BIRD_TIMERS
  ipv4 {
    import all;
    export filter to_gobgp_ibgp;
    add paths rx;
  };
  ipv6 {
    import all;
    export filter to_gobgp_ibgp;
    next hop address 2001:db8:ffff::3;
  };
}
EOF

cat >"$WORK/gobgpd.toml" <<EOF
[global.config]
  as = $ASG
  router-id = "$G4"
  port = $PORT
  local-address-list = ["$G4"]
# Per-neighbour policies are for route-server clients only in GoBGP; this one is global.
[global.apply-policy.config]
  export-policy-list = ["no-transit"]
  default-export-policy = "accept-route"

# Routes learned from one BIRD are not passed on to the other (keeps the vector set small),
# except 2001:db8:30::/48 from bird-b, which shows what GoBGP sends for an IPv6 route whose
# next hop it rewrites to its own IPv4 session address (IPv4-mapped IPv6 next hop).
[[defined-sets.prefix-sets]]
  prefix-set-name = "foreign4"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "198.51.100.0/24"
    masklength-range = "24..32"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "203.0.113.0/24"
    masklength-range = "24..24"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "198.18.10.0/23"
    masklength-range = "23..32"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "198.18.20.0/22"
    masklength-range = "22..32"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "198.18.30.0/23"
    masklength-range = "23..32"
[[defined-sets.prefix-sets]]
  prefix-set-name = "foreign6"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "2001:db8:a::/47"
    masklength-range = "47..128"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "2001:db8:c::/47"
    masklength-range = "47..128"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "2001:db8:dead::/48"
    masklength-range = "48..128"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "2001:db8:beef::/48"
    masklength-range = "48..128"
  [[defined-sets.prefix-sets.prefix-list]]
    ip-prefix = "2001:db8:31::/48"
    masklength-range = "48..128"

[[policy-definitions]]
  name = "no-transit"
  [[policy-definitions.statements]]
    name = "foreign4"
    [policy-definitions.statements.conditions.match-prefix-set]
      prefix-set = "foreign4"
    [policy-definitions.statements.actions]
      route-disposition = "reject-route"
  [[policy-definitions.statements]]
    name = "foreign6"
    [policy-definitions.statements.conditions.match-prefix-set]
      prefix-set = "foreign6"
    [policy-definitions.statements.actions]
      route-disposition = "reject-route"

# S1: eBGP with bird-a. Passive: GoBGP waits 5-9 s before connecting out.
[[neighbors]]
  [neighbors.config]
    neighbor-address = "$A4"
    peer-as = $ASA
    description = "S1 eBGP gobgp <-> bird-a"
  [neighbors.transport.config]
    local-address = "$G4"
    remote-port = $PORT
    passive-mode = true
  [neighbors.ebgp-multihop.config]
    enabled = true
    multihop-ttl = 2
  [neighbors.timers.config]
    hold-time = 90
    keepalive-interval = 30
    connect-retry = 1
    idle-hold-time-after-reset = 1
  [neighbors.graceful-restart.config]
    enabled = true
    restart-time = 120
    notification-enabled = true
    long-lived-enabled = true
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = true
    [neighbors.afi-safis.long-lived-graceful-restart.config]
      enabled = true
      restart-time = 3600
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = true
    [neighbors.afi-safis.long-lived-graceful-restart.config]
      enabled = true
      restart-time = 3600

# S3: iBGP with bird-b (which uses local AS $ASG for this session).
[[neighbors]]
  [neighbors.config]
    neighbor-address = "$B4"
    peer-as = $ASG
    description = "S3 iBGP gobgp <-> bird-b"
  [neighbors.transport.config]
    local-address = "$G4"
    remote-port = $PORT
    passive-mode = true
  [neighbors.timers.config]
    hold-time = 3
    keepalive-interval = 1
    connect-retry = 1
    idle-hold-time-after-reset = 1
  [neighbors.graceful-restart.config]
    enabled = true
    restart-time = 60
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = true
    [neighbors.afi-safis.add-paths.config]
      receive = true
      send-max = 4
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = true
EOF

cat >"$WORK/sessions.json" <<EOF
{
  "port_listeners": [
    {"addr": "$A4", "port": $PORT, "daemon": "bird-a"},
    {"addr": "$G4", "port": $PORT, "daemon": "gobgp"},
    {"addr": "$B4", "port": $PORT, "daemon": "bird-b"},
    {"addr": "::1", "port": $PORT, "daemon": "bird-a"},
    {"addr": "::1", "port": $PORT_B6, "daemon": "bird-b"}
  ],
  "sessions": [
    {"name": "S1", "peers": ["bird-a", "gobgp"], "transport": "ipv4", "kind": "eBGP AS$ASA <-> AS$ASG, IPv4 transport (127.0.79.1 <-> 127.0.79.2)"},
    {"name": "S2", "peers": ["bird-a", "bird-b"], "transport": "ipv6", "kind": "iBGP AS$ASA, IPv6 transport (::1 port $PORT <-> ::1 port $PORT_B6)"},
    {"name": "S3", "peers": ["bird-b", "gobgp"], "transport": "ipv4", "kind": "iBGP AS$ASG, IPv4 transport (127.0.79.3 <-> 127.0.79.2)"},
    {"name": "S4", "peers": ["bird-a", "bird-b"], "transport": "ipv4", "kind": "eBGP AS65001 (bird-a, local as 65001) <-> AS65010 (bird-b: enable as4 off, a 2-octet-AS-only speaker), IPv4 transport (127.0.79.1 <-> 127.0.79.3)"}
  ],
  "daemons": {
    "bird-a": {"software": "BIRD", "asn": $ASA},
    "bird-b": {"software": "BIRD", "asn": $ASA},
    "gobgp": {"software": "GoBGP", "asn": $ASG}
  }
}
EOF

# ---------------------------------------------------------------- capture
log "work dir $WORK"
tcpdump -i lo -U -s 0 -n -w "$WORK/bgp.pcap" \
  "tcp and (port $PORT or port $PORT_B6) and (host $A4 or host $G4 or host $B4 or host ::1)" \
  >"$WORK/tcpdump.log" 2>&1 &
TCPDUMP_PID=$!
wait_for 10 "tcpdump listening" grep -q 'listening on' "$WORK/tcpdump.log"

# ---------------------------------------------------------------- daemons
gobgpd -f "$WORK/gobgpd.toml" --api-hosts "127.0.0.1:$API_PORT" --pprof-disable \
  >"$WORK/gobgpd.log" 2>&1 &
GOBGPD_PID=$!
wait_for 15 "gobgpd API" gobgp_ global

# GoBGP's own routes, loaded before any session comes up so each attribute set goes out as
# one UPDATE with several prefixes.
gobgp_ global rib add -a ipv4 203.0.113.0/25 nexthop 198.18.2.1 origin igp med 20 local-pref 300 \
  community 65000:200,no-export large-community $ASG:2:1,$ASG:2:2 rt 65000:42
gobgp_ global rib add -a ipv4 203.0.113.128/25 nexthop 198.18.2.1 origin igp med 20 local-pref 300 \
  community 65000:200,no-export large-community $ASG:2:1,$ASG:2:2 rt 65000:42
gobgp_ global rib add -a ipv4 198.18.100.0/24 nexthop 198.18.2.1 origin igp med 20 local-pref 300 \
  community 65000:200,no-export large-community $ASG:2:1,$ASG:2:2 rt 65000:42
gobgp_ global rib add -a ipv4 198.18.101.0/24 nexthop 198.18.2.1 origin incomplete \
  aspath 64512,64513 aggregator $ASG:198.18.2.1 community 65000:201
gobgp_ global rib add -a ipv4 198.18.102.0/24 nexthop 198.18.2.1 origin egp
gobgp_ global rib add -a ipv6 2001:db8:2::/48 nexthop 2001:db8:ffff::2 origin igp med 30 \
  community 65000:600 large-community $ASG:6:1 rt 65000:6
gobgp_ global rib add -a ipv6 2001:db8:3::/48 nexthop 2001:db8:ffff::2 origin igp med 30 \
  community 65000:600 large-community $ASG:6:1 rt 65000:6
gobgp_ global rib add -a ipv6 2001:db8:4:1::/64 nexthop 2001:db8:ffff::2 origin igp med 30 \
  community 65000:600 large-community $ASG:6:1 rt 65000:6
gobgp_ global rib add -a ipv6 2001:db8:5::/48 nexthop 2001:db8:ffff::2 origin egp

bird -c "$WORK/bird-a.conf" -s "$WORK/bird-a.ctl" -P "$WORK/bird-a.pid" -f >"$WORK/bird-a.out" 2>&1 &
BIRD_A_PID=$!
bird -c "$WORK/bird-b.conf" -s "$WORK/bird-b.ctl" -P "$WORK/bird-b.pid" -f >"$WORK/bird-b.out" 2>&1 &
BIRD_B_PID=$!
wait_for 10 "bird-a control socket" birdc_a show status
wait_for 10 "bird-b control socket" birdc_b show status

case_mark "session establishment (OPEN, KEEPALIVE, initial UPDATEs, End-of-RIB)"
wait_for 30 "S1 established" bird_established "$WORK/bird-a.ctl" gobgp1
wait_for 30 "S2 established" bird_established "$WORK/bird-a.ctl" birdb6
wait_for 30 "S3 established" bird_established "$WORK/bird-b.ctl" gobgp3
wait_for 30 "S4 established" bird_established "$WORK/bird-a.ctl" birdb_old
wait_for 10 "gobgp sees S1" gobgp_established "$A4"
wait_for 10 "gobgp sees S3" gobgp_established "$B4"
# Let the initial UPDATEs and End-of-RIBs flow.
sleep 2

# ---------------------------------------------------------------- cases
case_mark "route refresh (BIRD asks; enhanced route refresh between BIRDs -> BoRR/EoRR)"
birdc_a reload in gobgp1 >/dev/null
birdc_b reload in birda6 >/dev/null
birdc_b reload in gobgp3 >/dev/null
sleep 1
# (GoBGP 3.10 sends no ROUTE-REFRESH: `gobgp neighbor X softresetin` only re-runs its own
# Adj-RIB-In through policy, so there is no GoBGP route-refresh case.)

case_mark "withdrawals (BIRD: IPv4 withdrawn routes, MP_UNREACH_NLRI)"
birdc_a disable st4w >/dev/null
birdc_a disable st6w >/dev/null
sleep 1
case_mark "withdrawals (GoBGP)"
gobgp_ global rib del -a ipv4 203.0.113.0/25
gobgp_ global rib del -a ipv4 203.0.113.128/25
gobgp_ global rib del -a ipv6 2001:db8:2::/48
gobgp_ global rib del -a ipv6 2001:db8:3::/48
sleep 1
case_mark "announce again after withdrawal (incremental UPDATEs)"
birdc_a enable st4w >/dev/null
gobgp_ global rib add -a ipv4 203.0.113.0/25 nexthop 198.18.2.1 origin igp med 21 community 65000:202
sleep 1

case_mark "Cease/Administrative Shutdown with RFC 9003 message from BIRD"
# birdc joins its arguments with spaces, so the message keeps its own quotes.
birdc_a disable gobgp1 '"bird-a: planned maintenance, back in 5 min"' >/dev/null
wait_for 10 "S1 down" gobgp_not_established "$A4"
birdc_a enable gobgp1 >/dev/null
wait_for 30 "S1 re-established" gobgp_established "$A4"
sleep 1

case_mark "Cease/Administrative Shutdown with message from GoBGP"
# `disable` ignores --reason in gobgp 3.10; `shutdown` (deprecated alias) sends it.
gobgp_ neighbor "$A4" shutdown --reason "gobgp: draining for upgrade" >/dev/null
wait_for 10 "S1 down (gobgp disable)" bird_not_established "$WORK/bird-a.ctl" gobgp1
gobgp_ neighbor "$A4" enable
wait_for 30 "S1 re-established after gobgp enable" bird_established "$WORK/bird-a.ctl" gobgp1
sleep 1

case_mark "Cease/Administrative Reset from BIRD (birdc restart)"
birdc_a restart birdb6 >/dev/null
wait_for 30 "S2 re-established" bird_established "$WORK/bird-a.ctl" birdb6
sleep 1

case_mark "hold timer expired (gobgpd stopped with SIGSTOP; S3 hold time 3 s)"
kill -STOP "$GOBGPD_PID"
wait_for 10 "S3 hold timer expiry at bird-b" bird_not_established "$WORK/bird-b.ctl" gobgp3
kill -CONT "$GOBGPD_PID"
wait_for 30 "S3 re-established after hold timer" bird_established "$WORK/bird-b.ctl" gobgp3
sleep 1

# After an admin reset GoBGP refuses the peer for ~30 s, so nothing waits for S3 after this.
case_mark "Cease/Administrative Reset with RFC 9003 message from GoBGP"
gobgp_ neighbor "$B4" reset --reason "gobgp: reset with message"
wait_for 10 "S3 down after reset" bird_not_established "$WORK/bird-b.ctl" gobgp3
sleep 0.5

case_mark "GoBGP graceful restart: gobgpd killed (SIGKILL, no NOTIFICATION), restarted with -r (R and F bits)"
kill -KILL "$GOBGPD_PID"
{ wait "$GOBGPD_PID"; } 2>/dev/null || true
gobgpd -f "$WORK/gobgpd.toml" --api-hosts "127.0.0.1:$API_PORT" --pprof-disable -r \
  >>"$WORK/gobgpd.log" 2>&1 &
GOBGPD_PID=$!
wait_for 15 "gobgpd API after restart" gobgp_ global
gobgp_ global rib add -a ipv4 203.0.113.0/25 nexthop 198.18.2.1 origin igp med 20 \
  community 65000:200 large-community $ASG:2:1
gobgp_ global rib add -a ipv6 2001:db8:2::/48 nexthop 2001:db8:ffff::2 origin igp med 30
wait_for 30 "S1 re-established after gobgpd restart" bird_established "$WORK/bird-a.ctl" gobgp1
sleep 2

case_mark "Cease/Peer De-configured from GoBGP (gobgp neighbor del)"
gobgp_ neighbor del "$A4"
wait_for 10 "S1 down after neighbor del" bird_not_established "$WORK/bird-a.ctl" gobgp1
sleep 0.5

case_mark "Cease/Administrative Shutdown without message (birdc disable, S4)"
birdc_a disable birdb_old >/dev/null
wait_for 10 "S4 down" bird_not_established "$WORK/bird-a.ctl" birdb_old
sleep 0.5

case_mark "Cease/Administrative Shutdown with message between BIRDs"
birdc_b disable birda6 '"bird-b: shutdown test"' >/dev/null
wait_for 10 "S2 down" bird_not_established "$WORK/bird-a.ctl" birdb6
sleep 0.5

# ---------------------------------------------------------------- stop and convert
case_mark "daemon shutdown (SIGTERM to each daemon)"
stop_pid "$GOBGPD_PID" gobgpd
GOBGPD_PID=
stop_pid "$BIRD_A_PID" bird-a
BIRD_A_PID=
stop_pid "$BIRD_B_PID" bird-b
BIRD_B_PID=
sleep 0.5
stop_pid "$TCPDUMP_PID" tcpdump
TCPDUMP_PID=
cat "$WORK/tcpdump.log" >&2

if [ -n "${PCAP_OUT:-}" ]; then cp "$WORK/bgp.pcap" "$PCAP_OUT"; fi

BIRD_VERSION=$(dpkg-query -W -f='${Version}' bird2 2>/dev/null || bird --version 2>&1 | awk '{print $NF}')
GOBGP_VERSION=$(dpkg-query -W -f='${Version}' gobgpd 2>/dev/null || gobgpd --version 2>&1 | awk '{print $NF}')
python3 "$REPO/scripts/pcap2vectors.py" \
  --pcap "$WORK/bgp.pcap" \
  --sessions "$WORK/sessions.json" \
  --cases "$WORK/cases.tsv" \
  --out "$OUT" \
  --provenance "$OUT/PROVENANCE.md" \
  --version "BIRD=bird2 $BIRD_VERSION (Debian)" \
  --version "GoBGP=gobgpd $GOBGP_VERSION (Debian)"
log "done: vectors in $OUT"
