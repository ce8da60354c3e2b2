#!/usr/bin/python3
"""Summarises bench/convergence.py JSON lines as Markdown tables: median (min–max) per
sender and size, ratios to GoBGP and to the BIRD→BIRD ceiling."""

import json
import statistics
import sys
from collections import defaultdict

SENDERS = [("podcidr", "podcidr-bgp"), ("bird", "BIRD 2 (ceiling)"), ("gobgp", "GoBGP 3.10")]


def med(xs):
    return statistics.median(xs) if xs else None


def span(xs, fmt):
    if not xs:
        return "—"
    if len(xs) == 1:
        return fmt(xs[0])
    return f"{fmt(med(xs))} ({fmt(min(xs))}–{fmt(max(xs))})"


def secs(x):
    return f"{x:.3f}" if x < 10 else f"{x:.2f}"


def mib(k):
    return f"{k / 1024:.1f}"


def cpu(x):
    return f"{x:.2f}"


def ratio(a, b):
    if a is None or b is None or a == 0:
        return "—"
    return f"{b / a:.1f}×"


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    runs = defaultdict(list)
    idle = []
    for r in rows:
        if r.get("mode") == "idle":
            idle.append(r)
        else:
            runs[(r["family"], r["n"], r["sender"])].append(r)
    cases = sorted({(f, n) for f, n, _ in runs}, key=lambda c: (c[0], c[1]))

    def vals(key, case, sender):
        return [r[key] for r in runs.get((*case, sender), []) if r.get(key) is not None]

    for phase in ("announce", "withdraw"):
        print(f"\n#### {phase.capitalize()}: seconds until the receiver reports "
              f"{'all N imported' if phase == 'announce' else '0 imported'}\n")
        print("| prefixes | " + " | ".join(name for _, name in SENDERS)
              + " | GoBGP ÷ podcidr-bgp | podcidr-bgp ÷ BIRD |")
        print("|---|" + "---:|" * (len(SENDERS) + 2))
        for case in cases:
            cells = [span(vals(phase, case, s), secs) for s, _ in SENDERS]
            p, b, g = (med(vals(phase, case, s)) for s in ("podcidr", "bird", "gobgp"))
            pb = f"{p / b:.2f}×" if p and b else "—"
            print(f"| {case[1]:,} {'/64' if case[0] == 'ipv6' else '/26'} | "
                  + " | ".join(cells) + f" | {ratio(p, g)} | {pb} |")

    print("\n#### Footprint: sender peak RSS (VmHWM, MiB) and CPU seconds "
          "(sender announce + withdraw; receiver announce + withdraw)\n")
    print("| prefixes | sender | peak RSS MiB | sender CPU s | receiver CPU s | runs ok |")
    print("|---|---|---:|---:|---:|---:|")
    for case in cases:
        for s, name in SENDERS:
            rs = runs.get((*case, s), [])
            if not rs:
                continue
            ok = [r for r in rs if r.get("announce") is not None and r.get("withdraw") is not None]
            scpu = [r["announce_sender_cpu"] + r["withdraw_sender_cpu"] for r in ok]
            rcpu = [r["announce_receiver_cpu"] + r["withdraw_receiver_cpu"] for r in ok]
            rss = [r["sender_peak_rss_kib"] for r in ok if r.get("sender_peak_rss_kib")]
            print(f"| {case[1]:,} {'/64' if case[0] == 'ipv6' else '/26'} | {name} | "
                  f"{span(rss, mib)} | {span(scpu, cpu)} | {span(rcpu, cpu)} | "
                  f"{len(ok)}/{len(rs)} |")
    if idle:
        rss = [r["idle_rss_kib"] for r in idle if r.get("idle_rss_kib")]
        hwm = [r["idle_hwm_kib"] for r in idle if r.get("idle_hwm_kib")]
        anon = [r["idle_rss_anon_kib"] for r in idle if r.get("idle_rss_anon_kib")]
        file_ = [r["idle_rss_file_kib"] for r in idle if r.get("idle_rss_file_kib")]
        print("\n#### Idle per-node speaker (2 peers, 2 prefixes)\n")
        print("| VmRSS MiB | of which anonymous | of which file-backed | VmHWM MiB | runs |")
        print("|---:|---:|---:|---:|---:|")
        print(f"| {span(rss, mib)} | {span(anon, mib)} | {span(file_, mib)} | "
              f"{span(hwm, mib)} | {len(idle)} |")
    errors = [r for r in rows if any(k.endswith("error") for k in r)]
    if errors:
        print("\nFailed runs:\n")
        for r in errors:
            msg = "; ".join(f"{k}: {v}" for k, v in r.items() if k.endswith("error"))
            what = "idle" if r.get("mode") == "idle" else f"{r.get('n', '')} {r.get('family', '')}"
            print(f"- {r['sender']} {what}: {msg}")


if __name__ == "__main__":
    main(sys.argv[1])
