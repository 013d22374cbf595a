#!/usr/bin/env python3
"""Pub/sub fan-out, tamer beside redis-server, in one run: interleaved rounds.

Each round starts each server fresh on CPU 1 (`tamer serve --cores 1 --durability none`,
redis-server without persistence); SUBSCRIBERS raw-socket subscribers and one publisher,
in this process on CPU 0, subscribe to one channel; the publisher pipelines MESSAGES
PUBLISHes (batches of 100) and the clock stops when every subscriber holds every message.
Reports, per server, delivered messages per second and the server's CPU µs per delivered
message (user + system from /proc), and tamer ÷ redis for each, as the median of the rounds.

    python3 scripts/pubsub-fanout.py --tamer target/release/tamer --rounds 5

Needs redis-server (scripts/install-peers.sh) and taskset. The load generator is Python on
one CPU: when it is the bottleneck both servers wait for it, so the throughput ratio
understates the faster one; the CPU per message is the figure to read then.
"""

import argparse
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def connect(port, timeout=30):
    deadline = time.time() + timeout
    while True:  # bounded by the deadline
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=timeout)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_exactly(sock, n):
    got = b""
    while len(got) < n:  # bounded by the socket's timeout
        chunk = sock.recv(n - len(got))
        if not chunk:
            raise RuntimeError("closed")
        got += chunk
    return got


def fanout(port, subscribers, messages, payload):
    """Delivered messages per second, and the publisher's wall time."""
    channel = b"fan"
    # The frame a subscriber gets: *3 $7 message $3 fan $N payload.
    frame = len(b"*3\r\n$7\r\nmessage\r\n$3\r\nfan\r\n" + b"$%d\r\n" % len(payload) + payload + b"\r\n")
    subs = []
    for _ in range(subscribers):
        s = connect(port)
        s.sendall(command(b"SUBSCRIBE", channel))
        read_exactly(s, len(b"*3\r\n$9\r\nsubscribe\r\n$3\r\nfan\r\n:1\r\n"))
        s.setblocking(False)
        subs.append(s)
    pub = connect(port)
    batch = command(b"PUBLISH", channel, payload) * 100
    reply = b":%d\r\n" % subscribers
    want = frame * messages
    sel = selectors.DefaultSelector()
    for s in subs:
        sel.register(s, selectors.EVENT_READ)
    got = {s: 0 for s in subs}
    started = time.time()
    sent = 0
    pending_replies = 0
    while sent < messages or any(g < want for g in got.values()):  # bounded: a deadline below
        if sent < messages and pending_replies < 1000:
            pub.sendall(batch)
            sent += 100
            pending_replies += 100
        if pending_replies:
            pub.setblocking(False)
            try:
                data = pub.recv(1 << 20)
                pending_replies -= len(data) // len(reply)
            except BlockingIOError:
                pass
            pub.setblocking(True)
        for key, _ in sel.select(timeout=0):
            try:
                got[key.fileobj] += len(key.fileobj.recv(1 << 20))
            except BlockingIOError:
                pass
        if time.time() - started > 120:
            raise RuntimeError(f"not delivered in 120 s: {min(got.values())} of {want} bytes")
    took = time.time() - started
    for s in subs + [pub]:
        s.close()
    return subscribers * messages / took


def start(kind, binary, port, data_dir):
    if kind == "tamer":
        shutil.rmtree(data_dir, ignore_errors=True)
        os.makedirs(data_dir)
        args = [binary, "serve", "--port", str(port), "--dir", data_dir, "--cores", "1",
                "--durability", "none"]
    else:
        args = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"]
    return subprocess.Popen(["taskset", "-c", "1", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tamer", default="target/release/tamer")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--subscribers", type=int, default=8)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--payload-bytes", type=int, default=64)
    args = ap.parse_args()
    os.sched_setaffinity(0, {0})
    payload = b"p" * args.payload_bytes
    rows = {"tamer": [], "redis": []}
    tmp = tempfile.mkdtemp(prefix="fanout-")
    for r in range(args.rounds):
        order = ["tamer", "redis"] if r % 2 == 0 else ["redis", "tamer"]
        for kind in order:
            port = free_port()
            server = start(kind, os.path.abspath(args.tamer), port, os.path.join(tmp, kind))
            try:
                connect(port).close()
                before = cpu_seconds(server.pid)
                rate = fanout(port, args.subscribers, args.messages, payload)
                used = cpu_seconds(server.pid) - before
                cpu_us = used * 1e6 / (args.subscribers * args.messages)
                rows[kind].append((rate, cpu_us))
                print(f"round {r + 1} {kind}: {rate:,.0f} msg/s, {cpu_us:.2f} CPU us/msg", flush=True)
            finally:
                server.terminate()
                server.wait()
    t_rate = [x[0] for x in rows["tamer"]]
    r_rate = [x[0] for x in rows["redis"]]
    t_cpu = [x[1] for x in rows["tamer"]]
    r_cpu = [x[1] for x in rows["redis"]]
    print(f"delivered msg/s: tamer {statistics.median(t_rate):,.0f}, redis "
          f"{statistics.median(r_rate):,.0f}; publish_fanout_vs_redis "
          f"{statistics.median(a / b for a, b in zip(t_rate, r_rate)):.3f} (median of rounds)")
    print(f"CPU us per delivered msg: tamer {statistics.median(t_cpu):.2f}, redis "
          f"{statistics.median(r_cpu):.2f}; redis / tamer "
          f"{statistics.median(b / a for a, b in zip(t_cpu, r_cpu)):.3f}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
