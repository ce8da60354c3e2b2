#!/usr/bin/python3
"""Summarises the peak snapshot of a valgrind massif out file: heap bytes attributed to the
innermost stack frame that belongs to this workspace's crates (bgp_proto, ipam_watch,
podcidr_bgp, podcidr_config), largest first, in MiB.

    bench/massif_summary.py [--top 30] massif.out.PID...

Every allocation path of the peak heap tree is walked from the allocation function outwards;
the first frame of a workspace crate gets the bytes of the whole subtree. Paths without such a
frame, and massif's "below threshold" aggregates, are listed as such. Used by bench/profile.sh;
standard library only.
"""

import argparse
import re
import sys
from collections import defaultdict

CRATES = ("bgp_proto", "ipam_watch", "podcidr_bgp", "podcidr_config")
# `n3: 12345 0x4E5A1B: func (file.rs:12)`, indentation = depth.
NODE = re.compile(r"^( *)n(\d+): (\d+) (.*)$")
ADDR = re.compile(r"^0x[0-9A-Fa-f]+: ")
# A trailing `(file.rs:12)` or `(in /usr/lib/x.so)`.
WHERE = re.compile(r" \((?:in [^()]*|[^()]*:\d+)\)$")
HASH = re.compile(r"::h[0-9a-f]{16}$")
# A workspace frame: the crate path may sit behind `<`, `&`, `[`, `mut `, `dyn ` or a
# `{closure...}` / `{impl...}` prefix, as the demangler prints trait impls and closures.
OURS = re.compile(
    r"^(?:[<&\[\s]|mut |dyn |\{(?:closure|impl)[^}]*\}(?:::)?)*(?:%s)::" % "|".join(CRATES)
)
MIB = 1024 * 1024


class Node:
    __slots__ = ("bytes", "text", "children")

    def __init__(self, nbytes, text):
        self.bytes, self.text, self.children = nbytes, text, []

    @property
    def location(self):
        m = WHERE.search(self.text)
        return m.group(0)[2:-1] if m else ""

    @property
    def func(self):
        f = WHERE.sub("", ADDR.sub("", self.text)).strip()
        return HASH.sub("", f)

    @property
    def below_threshold(self):
        return "below massif's threshold" in self.text


def parse(path):
    """[(snapshot header dict, root Node or None)] in file order."""
    snaps = []
    cur = None
    stack = []  # (depth, Node)
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("snapshot="):
                cur = {"snapshot": int(line.split("=", 1)[1])}
                snaps.append([cur, None])
                stack = []
                continue
            if cur is None:
                continue
            m = NODE.match(line)
            if m:
                depth = len(m.group(1))
                node = Node(int(m.group(3)), m.group(4))
                while stack and stack[-1][0] >= depth:
                    stack.pop()
                if stack:
                    stack[-1][1].children.append(node)
                else:
                    snaps[-1][1] = node
                stack.append((depth, node))
            elif "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                cur[k] = v
    return snaps


def attribute(root):
    """({label: bytes}, {label: {source location: bytes}}) for the innermost workspace frame
    of every path below `root`."""
    out = defaultdict(int)
    where = defaultdict(lambda: defaultdict(int))

    def walk(node):
        if node.below_threshold:
            out["(below massif's threshold, not attributed)"] += node.bytes
            return
        if OURS.match(node.func):
            out[node.func] += node.bytes
            where[node.func][node.location] += node.bytes
            return
        if not node.children:
            out["(no workspace frame on the path)"] += node.bytes
            return
        for c in node.children:
            walk(c)
        rest = node.bytes - sum(c.bytes for c in node.children)
        if rest > 0:
            out["(no workspace frame on the path)"] += rest

    for c in root.children:  # the root is "(heap allocation functions) malloc/new/..."
        walk(c)
    return out, where


def summarise(path, top):
    snaps = parse(path)
    if not snaps:
        print(f"{path}: no snapshots (did the process exit normally?)", file=sys.stderr)
        return False
    peak = [s for s in snaps if s[0].get("heap_tree") == "peak"]
    note = ""
    if not peak:
        detailed = [s for s in snaps if s[1] is not None]
        if not detailed:
            print(f"{path}: no detailed snapshot", file=sys.stderr)
            return False
        peak = [max(detailed, key=lambda s: int(s[0].get("mem_heap_B", 0)))]
        note = " (no heap_tree=peak: largest detailed snapshot)"
    head, root = peak[0]
    heap = int(head.get("mem_heap_B", 0))
    extra = int(head.get("mem_heap_extra_B", 0))
    stacks = int(head.get("mem_stacks_B", 0))
    print(f"{path}: peak snapshot {head['snapshot']}{note} at time {head.get('time')}: "
          f"useful heap {heap / MIB:.2f} MiB, allocator overhead {extra / MIB:.2f} MiB, "
          f"stacks {stacks / MIB:.2f} MiB")
    if root is None or heap == 0:
        print("  (empty heap tree)")
        return True
    totals, where = attribute(root)
    rows = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = rows[:top]
    print(f"\n  {'MiB':>8} {'% heap':>7}  innermost workspace frame [call sites, largest first]")
    for label, b in shown:
        sites = sorted(where.get(label, {}).items(), key=lambda kv: -kv[1])
        at = ", ".join(loc for loc, _ in sites[:3] if loc)
        if len(sites) > 3:
            at += f", +{len(sites) - 3} more"
        print(f"  {b / MIB:8.2f} {100 * b / heap:6.1f}%  {label}" + (f"  [{at}]" if at else ""))
    if len(rows) > top:
        rest = sum(b for _, b in rows[top:])
        print(f"  {rest / MIB:8.2f} {100 * rest / heap:6.1f}%  ({len(rows) - top} more)")
    total = sum(b for _, b in rows)
    print(f"  {total / MIB:8.2f} {100 * total / heap:6.1f}%  total")
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--top", type=int, default=30, help="rows to show (default 30)")
    p.add_argument("files", nargs="+", help="massif out files")
    args = p.parse_args()
    ok = True
    for i, path in enumerate(args.files):
        if i:
            print()
        ok = summarise(path, args.top) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
