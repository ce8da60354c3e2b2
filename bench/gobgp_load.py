"""Loads routes into GoBGP through its gRPC API (AddPathStream; DeletePath for a family)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gobgp_api"))

import grpc  # noqa: E402
from google.protobuf.any_pb2 import Any  # noqa: E402

import attribute_pb2 as attr  # noqa: E402
import gobgp_pb2 as api  # noqa: E402
import gobgp_pb2_grpc as rpc  # noqa: E402

# Paths per AddPathStreamRequest: large batches are GoBGP's fastest path.
BATCH = 1000


def _any(msg):
    a = Any()
    a.Pack(msg)
    return a


def family(v6):
    return api.Family(
        afi=api.Family.AFI_IP6 if v6 else api.Family.AFI_IP,
        safi=api.Family.SAFI_UNICAST,
    )


def config(addr, asn, peer_addr, peer_asn):
    """gobgpd TOML: passive towards the receiver (GoBGP delays its own connects by 5-9 s)."""
    return f"""[global.config]
  as = {asn}
  router-id = "192.0.2.30"
  port = 179
  local-address-list = ["{addr}"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "{peer_addr}"
    peer-as = {peer_asn}
  [neighbors.transport.config]
    local-address = "{addr}"
    passive-mode = true
  [neighbors.ebgp-multihop.config]
    enabled = true
    multihop-ttl = 2
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
"""


def build_requests(prefixes, v6, next_hop):
    """Pre-built AddPathStream requests (built before the clock starts)."""
    fam = family(v6)
    origin = _any(attr.OriginAttribute(origin=0))
    reqs = []
    paths = []
    for p in prefixes:
        net, plen = p.split("/")
        nlri = _any(attr.IPAddressPrefix(prefix_len=int(plen), prefix=net))
        if v6:
            nh = _any(attr.MpReachNLRIAttribute(family=fam, next_hops=[next_hop], nlris=[nlri]))
        else:
            nh = _any(attr.NextHopAttribute(next_hop=next_hop))
        paths.append(api.Path(nlri=nlri, pattrs=[origin, nh], family=fam))
        if len(paths) == BATCH:
            reqs.append(api.AddPathStreamRequest(table_type=api.GLOBAL, paths=paths))
            paths = []
    if paths:
        reqs.append(api.AddPathStreamRequest(table_type=api.GLOBAL, paths=paths))
    return reqs


class GoBgpApi:
    def __init__(self, target):
        self.channel = grpc.insecure_channel(target)
        self.stub = rpc.GobgpApiStub(self.channel)

    def ready(self, timeout=10.0):
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def add_stream(self, reqs):
        self.stub.AddPathStream(iter(reqs), timeout=600)

    def delete_family(self, v6):
        """All paths of the family in the global table, in one call."""
        self.stub.DeletePath(
            api.DeletePathRequest(table_type=api.GLOBAL, family=family(v6)), timeout=600
        )

    def close(self):
        self.channel.close()
