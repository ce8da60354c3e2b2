"""BIRD 2 and process helpers for the convergence benchmark (loopback only, bounded waits)."""

import os
import re
import socket
import subprocess
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
IMPORTED = re.compile(rb"Routes:\s+(\d+) imported")


class BirdCtl:
    """A persistent connection to BIRD's control socket (cheaper than spawning birdc)."""

    def __init__(self, path, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(5.0)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.buf = b""
        self._read_reply()  # "0001 BIRD x ready."

    def _read_reply(self):
        # A reply ends with a line whose 4-digit code is followed by a space; codes starting
        # with 0 are success/final, 8/9 are errors.
        lines = []
        while True:
            while b"\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise OSError("BIRD closed the control socket")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            lines.append(line)
            if len(line) >= 5 and line[:4].isdigit() and line[4:5] == b" ":
                if line[:1] in (b"0", b"8", b"9"):
                    return b"\n".join(lines)

    def cmd(self, text):
        self.sock.sendall(text.encode() + b"\n")
        return self._read_reply()

    def imported(self, proto):
        """`Routes: N imported` summed over the protocol's channels (None before Established)."""
        out = self.cmd(f"show protocols all {proto}")
        counts = [int(m) for m in IMPORTED.findall(out)]
        return sum(counts) if counts else None

    def established(self, proto):
        out = self.cmd(f"show protocols {proto}")
        return b"Established" in out

    def close(self):
        self.sock.close()


def wait_for(pred, timeout, interval=0.002):
    """Polls `pred` until truthy or `timeout` seconds pass; returns (value, seconds)."""
    t0 = time.monotonic()
    while True:
        v = pred()
        now = time.monotonic()
        if v:
            return v, now - t0
        if now - t0 > timeout:
            return None, now - t0
        time.sleep(interval)


def cpu_seconds(pid):
    """utime + stime of a process in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except OSError:
        return 0.0


def status_kib(pid, key):
    """A `VmHWM`/`VmRSS` line of /proc/PID/status, in KiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def stop(proc, timeout=5.0):
    """Stops a child we started (by PID): SIGTERM, then SIGKILL after `timeout`."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class Bird:
    """A BIRD daemon with its own config, socket and log in `workdir`."""

    def __init__(self, workdir, name, config):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.conf = os.path.join(self.dir, "bird.conf")
        self.sock_path = os.path.join(self.dir, "bird.ctl")
        with open(self.conf, "w") as f:
            f.write(config)
        log = open(os.path.join(self.dir, "bird.out"), "w")
        # -f: foreground, so the PID is ours and we stop it ourselves.
        self.proc = subprocess.Popen(
            ["bird", "-f", "-c", self.conf, "-s", self.sock_path],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.ctl = BirdCtl(self.sock_path)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        try:
            self.ctl.close()
        finally:
            stop(self.proc)


def receiver_config(addr, asn, neighbors, log):
    """The ToR: BGP to each (name, address, asn, passive[, local address]) neighbour."""
    c = [
        f'log "{log}" all;',
        "router id 192.0.2.1;",
        "protocol device { scan time 60; }",
    ]
    for name, naddr, nasn, passive, *local in neighbors:
        c.append(
            f"""protocol bgp {name} {{
  local {local[0] if local else addr} as {asn};
  neighbor {naddr} as {nasn};
  strict bind on;
  multihop;
  passive {"on" if passive else "off"};
  start delay time 0;
  connect delay time 1;
  error wait time 1, 2;
  ipv4 {{ import all; export none; }};
  ipv6 {{ import all; export none; }};
}}"""
        )
    return "\n".join(c) + "\n"


def sender_config(addr, asn, peer_addr, peer_asn, prefixes, v6, log):
    """BIRD as sender: N static routes (disabled until the benchmark enables them)."""
    fam = "ipv6" if v6 else "ipv4"
    routes = "\n".join(f"  route {p} blackhole;" for p in prefixes)
    nh6 = "    next hop address 2001:db8::20;\n" if v6 else ""
    return f"""log "{log}" all;
router id 192.0.2.20;
protocol device {{ scan time 60; }}
protocol static statics {{
  disabled;
  {fam};
{routes}
}}
protocol bgp tor {{
  local {addr} as {asn};
  neighbor {peer_addr} as {peer_asn};
  strict bind on;
  multihop;
  start delay time 0;
  connect delay time 1;
  ipv4 {{ import none; export all; }};
  ipv6 {{ import none; export all;
{nh6}  }};
}}
"""
