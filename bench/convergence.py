#!/usr/bin/python3
"""Convergence and footprint: podcidr-bgp, GoBGP and BIRD announcing N prefixes to a fresh
BIRD 2 receiver ("the ToR") on loopback. One JSON line per run goes to --out.

Run through bench/run.sh. Loopback only (127.77.K.0/24 per run); every wait is bounded; only
processes started here are stopped, by PID. A failed run is recorded (`error`, `announce_error`,
`withdraw_error`) and the suite goes on; with --strict the script then exits 1 and lists them.
"""

import argparse
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from birdctl import Bird, cpu_seconds, receiver_config, sender_config, status_kib, stop, wait_for  # noqa: E402

RECV_ASN = 65001
OUR_ASN = 4200000001
SENDER_ASN = {"podcidr": OUR_ASN, "gobgp": 65010, "bird": 65020}
TIMEOUT = 300.0  # default bound of any single convergence wait (GoBGP at 100k takes ~6 s)


def prefixes(n, v6):
    if v6:
        base = int(ipaddress.IPv6Address("fd00:1::"))
        return [f"{ipaddress.IPv6Address(base + (i << 64))}/64" for i in range(n)]
    base = int(ipaddress.IPv4Address("10.0.0.0"))
    return [f"{ipaddress.IPv4Address(base + (i << 6))}/26" for i in range(n)]


def log_tail(path, lines=5):
    """The last lines of a daemon's log, on one line (for error messages)."""
    try:
        with open(path, errors="replace") as f:
            tail = [line.strip() for line in f.readlines()[-lines:] if line.strip()]
    except OSError:
        return ""
    return " | ".join(tail)


def exited(proc, log, who="sender"):
    """Why a sender process is gone (None while it runs)."""
    rc = proc.poll()
    if rc is None:
        return None
    tail = log_tail(log)
    return f"{who} exited with code {rc}" + (f"; log: {tail}" if tail else "")


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Run:
    """One sender against one fresh receiver; results in `self.r`."""

    counter = 0

    def __init__(self, args, sender, n, v6, workdir):
        Run.counter += 1
        k = 10 + (os.getpid() + Run.counter) % 240
        self.net = f"127.77.{k}"
        self.recv_addr, self.send_addr = f"{self.net}.1", f"{self.net}.2"
        self.args, self.sender, self.n, self.v6 = args, sender, n, v6
        self.dir = tempfile.mkdtemp(prefix=f"{sender}-{n}-", dir=workdir)
        self.pfx = prefixes(n, v6)
        self.r = {"sender": sender, "n": n, "family": "ipv6" if v6 else "ipv4"}

    def receiver(self, passive):
        cfg = receiver_config(
            self.recv_addr,
            RECV_ASN,
            [("snd", self.send_addr, SENDER_ASN[self.sender], passive)],
            os.path.join(self.dir, "receiver.log"),
        )
        return Bird(self.dir, "receiver", cfg)

    def imported(self, recv):
        return recv.ctl.imported("snd")

    def converge(self, recv, want, sender):
        """Waits for `want` routes at the receiver (or for the sender process to die);
        returns (seconds, ok)."""
        _, secs = wait_for(
            lambda: self.imported(recv) == want or sender.poll() is not None,
            self.args.timeout,
            self.args.poll,
        )
        ok = self.imported(recv) == want
        return secs, ok

    def fail(self, name, recv, want, sender, log):
        msg = f"receiver has {self.imported(recv)} of {want}"
        why = exited(sender, log)
        if why is None:
            msg += f" after {self.args.timeout:g} s"
        self.r[f"{name}_error"] = msg + (f"; {why}" if why else "")

    def phase(self, name, recv, sender, start, want, log):
        """Runs `start` (which tells the sender process `sender`), then waits for `want`
        routes."""
        c_snd, c_rcv = cpu_seconds(sender.pid), cpu_seconds(recv.pid)
        t0 = time.monotonic()
        start()
        _, ok = self.converge(recv, want, sender)
        secs = time.monotonic() - t0
        self.r[name] = secs if ok else None
        self.r[f"{name}_sender_cpu"] = cpu_seconds(sender.pid) - c_snd
        self.r[f"{name}_receiver_cpu"] = cpu_seconds(recv.pid) - c_rcv
        if not ok:
            self.fail(name, recv, want, sender, log)

    def footprint(self, pid):
        self.r["sender_peak_rss_kib"] = status_kib(pid, "VmHWM")
        self.r["sender_cpu_total"] = cpu_seconds(pid)

    def run(self):
        fn = {"podcidr": self.run_podcidr, "gobgp": self.run_gobgp, "bird": self.run_bird}
        try:
            fn[self.sender]()
        except Exception as e:  # a failed run is recorded, the suite goes on
            self.r["error"] = f"{type(e).__name__}: {e}"
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        return self.r

    # --- podcidr-bgp ---------------------------------------------------------------------
    def write_cidrs(self, cidrs):
        tmp = os.path.join(self.dir, "cidrs.yaml.tmp")
        with open(tmp, "w") as f:
            f.write("nodes:\n  node-a: [" + ", ".join(cidrs) + "]\n")
        os.rename(tmp, os.path.join(self.dir, "cidrs.yaml"))  # atomic, as a ConfigMap swap

    def speaker_config(self, peers):
        s = (
            f"nodeName: node-a\nasn: {OUR_ASN}\nrouterId: 192.0.2.10\n"
            f"source: {{kind: file, path: {self.dir}/cidrs.yaml}}\n"
            'nextHop: {ipv4: self, ipv6: "2001:db8::10"}\n'
            f'admin: {{listen: "127.0.0.1:{free_port()}"}}\nstatus: {{publish: false}}\n'
            "log: {level: warn}\npeers:\n"
        )
        for name, addr, local in peers:
            s += (
                f"  - name: {name}\n    address: {addr}\n    asn: {RECV_ASN}\n"
                f"    localAddress: {local}\n    connectRetry: {{base: 1, max: 2}}\n"
            )
        path = os.path.join(self.dir, "config.yaml")
        with open(path, "w") as f:
            f.write(s)
        return path

    def spawn_speaker(self, conf):
        log = open(os.path.join(self.dir, "speaker.log"), "w")
        return subprocess.Popen(
            [self.args.speaker, "speaker", "--config", conf,
             "--file-poll-ms", str(self.args.file_poll_ms)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def run_podcidr(self):
        recv = self.receiver(passive=True)
        spk = None
        try:
            self.write_cidrs(self.pfx)
            conf = self.speaker_config([("tor", self.recv_addr, self.send_addr)])
            holder = {}

            def start():
                holder["p"] = self.spawn_speaker(conf)

            # announce: from process start (with the file in place) to N imported.
            c_rcv = cpu_seconds(recv.pid)
            t0 = time.monotonic()
            start()
            spk = holder["p"]
            log = os.path.join(self.dir, "speaker.log")
            _, ok = self.converge(recv, self.n, spk)
            self.r["announce"] = time.monotonic() - t0 if ok else None
            self.r["announce_sender_cpu"] = cpu_seconds(spk.pid)
            self.r["announce_receiver_cpu"] = cpu_seconds(recv.pid) - c_rcv
            if not ok:
                self.fail("announce", recv, self.n, spk, log)
                return
            self.phase("withdraw", recv, spk, lambda: self.write_cidrs([]), 0, log)
            self.footprint(spk.pid)
        finally:
            if spk is not None:
                stop(spk, self.args.stop_timeout)
            recv.stop()

    # --- GoBGP ---------------------------------------------------------------------------
    def run_gobgp(self):
        from gobgp_load import GoBgpApi, build_requests, config

        recv = self.receiver(passive=False)
        conf = os.path.join(self.dir, "gobgpd.toml")
        with open(conf, "w") as f:
            f.write(config(self.send_addr, SENDER_ASN["gobgp"], self.recv_addr, RECV_ASN))
        port = free_port()
        log_path = os.path.join(self.dir, "gobgpd.log")
        log = open(log_path, "w")
        gob = subprocess.Popen(
            ["gobgpd", "-f", conf, "-t", "toml", "--pprof-disable",
             "--api-hosts", f"127.0.0.1:{port}", "-l", "warn"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        cli = None
        try:
            cli = GoBgpApi(f"127.0.0.1:{port}")
            cli.ready(10)
            up, _ = wait_for(lambda: recv.ctl.established("snd"), 30, 0.05)
            if not up:
                raise RuntimeError("receiver never established with gobgpd")
            nh = "2001:db8::30" if self.v6 else self.send_addr
            reqs = build_requests(self.pfx, self.v6, nh)
            self.phase(
                "announce", recv, gob, lambda: cli.add_stream(reqs), self.n, log_path
            )
            if self.r["announce"] is None:
                return
            self.phase("withdraw", recv, gob, lambda: cli.delete_family(self.v6), 0, log_path)
            self.footprint(gob.pid)
        finally:
            if cli is not None:
                cli.close()
            stop(gob)
            recv.stop()

    # --- BIRD as sender ------------------------------------------------------------------
    def run_bird(self):
        recv = self.receiver(passive=True)
        cfg = sender_config(
            self.send_addr, SENDER_ASN["bird"], self.recv_addr, RECV_ASN, self.pfx, self.v6,
            os.path.join(self.dir, "sender.log"),
        )
        snd = None
        try:
            snd = Bird(self.dir, "sender", cfg)
            up, _ = wait_for(lambda: recv.ctl.established("snd"), 30, 0.05)
            if not up:
                raise RuntimeError("receiver never established with the BIRD sender")
            log = os.path.join(snd.dir, "bird.out")
            self.phase(
                "announce", recv, snd.proc, lambda: snd.ctl.cmd("enable statics"), self.n, log
            )
            if self.r["announce"] is None:
                return
            self.phase(
                "withdraw", recv, snd.proc, lambda: snd.ctl.cmd("disable statics"), 0, log
            )
            self.footprint(snd.pid)
        finally:
            if snd is not None:
                snd.stop()
            recv.stop()


def idle_rss(args, workdir):
    """A per-node speaker with 2 peers (two ToR addresses of one BIRD) and 2 prefixes."""
    run = Run(args, "podcidr", 2, False, workdir)
    a2, a4 = f"{run.net}.2", f"{run.net}.4"
    cfg = receiver_config(
        run.recv_addr, RECV_ASN,
        [("tor1", a2, OUR_ASN, True), ("tor2", a4, OUR_ASN, True, f"{run.net}.3")],
        os.path.join(run.dir, "receiver.log"),
    )
    recv = Bird(run.dir, "receiver", cfg)
    spk = None
    r = {"sender": "podcidr", "mode": "idle", "peers": 2, "prefixes": 2}
    try:
        run.write_cidrs(["10.0.0.0/26", "fd00:1::/64"])
        conf = run.speaker_config([("tor1", run.recv_addr, a2), ("tor2", f"{run.net}.3", a4)])
        spk = run.spawn_speaker(conf)

        def both():
            return recv.ctl.imported("tor1") == 2 and recv.ctl.imported("tor2") == 2

        wait_for(lambda: both() or spk.poll() is not None, 30, 0.05)
        if not both():
            why = exited(spk, os.path.join(run.dir, "speaker.log"), "speaker")
            r["error"] = "routes not received from both sessions" + (f"; {why}" if why else "")
            if why:
                return r
        time.sleep(args.idle_settle)
        r["idle_rss_kib"] = status_kib(spk.pid, "VmRSS")
        r["idle_hwm_kib"] = status_kib(spk.pid, "VmHWM")
        r["idle_rss_anon_kib"] = status_kib(spk.pid, "RssAnon")
        r["idle_rss_file_kib"] = status_kib(spk.pid, "RssFile")
        r["threads"] = status_kib(spk.pid, "Threads")
    finally:
        if spk is not None:
            stop(spk, args.stop_timeout)
        recv.stop()
        if not args.keep:
            shutil.rmtree(run.dir, ignore_errors=True)
    return r


def failures(rows):
    """(row, [problems]) for every run that did not complete: what --strict fails on."""
    out = []
    for r in rows:
        probs = []
        if r.get("mode") == "idle":
            if r.get("error"):
                probs.append(f"error: {r['error']}")
            elif not r.get("idle_rss_kib"):
                probs.append("no idle RSS reading (speaker gone?)")
        else:
            for k in ("error", "announce_error", "withdraw_error"):
                if r.get(k):
                    probs.append(f"{k}: {r[k]}")
            for k in ("announce", "withdraw"):
                if r.get(k) is None:
                    probs.append(f"{k}: {'missing' if k not in r else 'None'}")
        if probs:
            out.append((r, probs))
    return out


def describe(r):
    if r.get("mode") == "idle":
        return f"{r['sender']} idle (2 peers, 2 prefixes) run {r.get('run', '?')}"
    n = f"{r['n']:,} {'/64' if r['family'] == 'ipv6' else '/26'}"
    return f"{r['sender']} N={n} run {r.get('run', '?')}"


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--speaker", required=True, help="release podcidr-bgp binary")
    p.add_argument("--out", required=True, help="JSON lines file (appended)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--senders", default="podcidr,bird,gobgp")
    p.add_argument("--sizes", default="1000,10000,100000", help="IPv4 /26 counts")
    p.add_argument("--v6-sizes", default="10000", help="IPv6 /64 counts ('' for none)")
    p.add_argument("--poll", type=float, default=0.002, help="receiver poll interval (s)")
    p.add_argument("--file-poll-ms", type=int, default=5)
    p.add_argument("--idle-settle", type=float, default=5.0)
    p.add_argument("--timeout", type=float, default=TIMEOUT,
                   help="bound of each convergence wait in seconds (default %(default)s)")
    p.add_argument("--stop-timeout", type=float, default=5.0,
                   help="seconds the speaker gets to exit after SIGTERM before SIGKILL")
    p.add_argument("--skip-idle", action="store_true", help="no idle-RSS measurement")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 if any run failed (error, no announce or withdraw time)")
    p.add_argument("--keep", action="store_true", help="keep work directories")
    args = p.parse_args()
    workdir = tempfile.mkdtemp(prefix="podcidr-bench-")
    cases = [(n, False) for n in map(int, filter(None, args.sizes.split(",")))]
    cases += [(n, True) for n in map(int, filter(None, args.v6_sizes.split(",")))]
    rows = []

    def record(r, i):
        r["run"] = i
        rows.append(r)
        print(json.dumps(r), flush=True)
        out.write(json.dumps(r) + "\n")
        out.flush()

    with open(args.out, "a") as out:
        for n, v6 in cases:
            # Interleave senders within each run so drift on the shared machine hits all.
            for i in range(args.runs):
                for sender in args.senders.split(","):
                    record(Run(args, sender, n, v6, workdir).run(), i)
        if "podcidr" in args.senders and not args.skip_idle:
            for i in range(args.runs):
                try:
                    r = idle_rss(args, workdir)
                except Exception as e:  # recorded like a failed run
                    r = {"sender": "podcidr", "mode": "idle", "error": f"{type(e).__name__}: {e}"}
                record(r, i)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    failed = failures(rows)
    if failed:
        print(f"\nconvergence: {len(failed)} of {len(rows)} runs FAILED"
              + ("" if args.strict else " (not --strict: exit status 0)") + ":", file=sys.stderr)
        for r, probs in failed:
            print(f"  FAILED {describe(r)}:", file=sys.stderr)
            for msg in probs:
                print(f"    {msg}", file=sys.stderr)
        if args.strict:
            sys.exit(1)
    elif args.strict:
        print(f"convergence: all {len(rows)} runs complete", file=sys.stderr)


if __name__ == "__main__":
    main()
