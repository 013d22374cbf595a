#!/usr/bin/env python3
"""GET with client-side caching's tracking on, tamer beside redis-server, in one run:
interleaved rounds (the figure `tracking_get_vs_redis` of issue 24).

Each round starts each server fresh on CPU 1 (`tamer serve --cores 1 --durability none`,
redis-server without persistence), loads KEYS keys of 8 bytes, then CONNECTIONS RESP3
connections in this process on CPU 0 pipeline GETs of random keys (DEPTH per connection in
flight) until each has had its share of GETS replies; first without tracking, then with
`CLIENT TRACKING ON` on every connection (each GET remembers its key: the table ends with
KEYS keys and up to CONNECTIONS x KEYS entries). Reports per server and mode GETs per second
and the server's CPU µs per GET (user + system from /proc); tamer ÷ redis with tracking
(`tracking_get_vs_redis`, throughput) and redis ÷ tamer in CPU per GET, as medians of the
rounds, and each server's cost of tracking (tracked ÷ untracked).

    python3 scripts/tracking-get.py --tamer target/release/tamer --rounds 5

Needs redis-server (scripts/install-peers.sh) and taskset. The load generator is Python on
one CPU: when it is the bottleneck both servers wait for it, so the throughput ratio
understates the faster one; the CPU per GET is the figure to read then.
"""

import argparse
import os
import random
import selectors
import shutil
import statistics
import tempfile
import time

import importlib.util

_spec = importlib.util.spec_from_file_location(
    "fanout", os.path.join(os.path.dirname(os.path.abspath(__file__)), "pubsub-fanout.py"))
fanout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fanout)

VALUE = b"v" * 8
REPLY = b"$8\r\n" + VALUE + b"\r\n"


def load(port, keys):
    s = fanout.connect(port)
    batch = b"".join(fanout.command(b"SET", b"tk:%d" % i, VALUE) for i in range(keys))
    s.sendall(batch)
    fanout.read_exactly(s, len(b"+OK\r\n") * keys)
    s.close()


def hello(s, tracking):
    s.sendall(fanout.command(b"HELLO", b"3"))
    buf = b""
    while b"modules" not in buf:  # bounded by the socket's timeout
        buf += s.recv(4096)
    if tracking:
        s.sendall(fanout.command(b"CLIENT", b"TRACKING", b"ON"))
        fanout.read_exactly(s, len(b"+OK\r\n"))


def gets(port, connections, depth, total, keys, tracking, rng):
    """GETs per second over `connections`, `depth` in flight each."""
    conns = []
    for _ in range(connections):
        s = fanout.connect(port)
        hello(s, tracking)
        s.setblocking(False)
        conns.append(s)
    per = total // connections
    sel = selectors.DefaultSelector()
    state = {}
    for s in conns:
        sel.register(s, selectors.EVENT_READ)
        state[s] = {"sent": 0, "got": 0, "bytes": 0}
    requests = [fanout.command(b"GET", b"tk:%d" % rng.randrange(keys)) for _ in range(4096)]
    started = time.time()

    def refill(s, st):
        n = min(depth - (st["sent"] - st["got"]), per - st["sent"])
        if n > 0:
            at = rng.randrange(len(requests) - n)
            s.setblocking(True)
            s.sendall(b"".join(requests[at:at + n]))
            s.setblocking(False)
            st["sent"] += n

    for s in conns:
        refill(s, state[s])
    done = 0
    while done < connections:  # bounded: a deadline below
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            st = state[s]
            try:
                data = s.recv(1 << 20)
            except BlockingIOError:
                continue
            st["bytes"] += len(data)
            got = st["bytes"] // len(REPLY)
            if got > st["got"]:
                st["got"] = got
                if got >= per:
                    done += 1
                    sel.unregister(s)
                else:
                    refill(s, st)
        if time.time() - started > 300:
            raise RuntimeError("GETs not answered in 300 s")
    took = time.time() - started
    for s in conns:
        s.close()
    return connections * per / took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tamer", default="target/release/tamer")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--gets", type=int, default=400_000)
    ap.add_argument("--keys", type=int, default=10_000)
    args = ap.parse_args()
    os.sched_setaffinity(0, {0})
    rows = {(k, t): [] for k in ("tamer", "redis") for t in (False, True)}
    tmp = tempfile.mkdtemp(prefix="tracking-get-")
    for r in range(args.rounds):
        order = ["tamer", "redis"] if r % 2 == 0 else ["redis", "tamer"]
        for kind in order:
            port = fanout.free_port()
            server = fanout.start(kind, os.path.abspath(args.tamer), port,
                                  os.path.join(tmp, kind))
            try:
                fanout.connect(port).close()
                load(port, args.keys)
                for tracking in (False, True):
                    rng = random.Random(r)
                    before = fanout.cpu_seconds(server.pid)
                    rate = gets(port, args.connections, args.depth, args.gets, args.keys,
                                tracking, rng)
                    used = fanout.cpu_seconds(server.pid) - before
                    cpu_us = used * 1e6 / args.gets
                    rows[(kind, tracking)].append((rate, cpu_us))
                    mode = "tracking" if tracking else "plain"
                    print(f"round {r + 1} {kind} {mode}: {rate:,.0f} GET/s, "
                          f"{cpu_us:.2f} CPU us/GET", flush=True)
            finally:
                server.terminate()
                server.wait()
    med = statistics.median
    for tracking in (False, True):
        t = rows[("tamer", tracking)]
        rd = rows[("redis", tracking)]
        mode = "tracking on " if tracking else "tracking off"
        print(f"{mode}: GET/s tamer {med(x[0] for x in t):,.0f}, redis "
              f"{med(x[0] for x in rd):,.0f}, tamer / redis "
              f"{med(a[0] / b[0] for a, b in zip(t, rd)):.3f}; CPU us/GET tamer "
              f"{med(x[1] for x in t):.2f}, redis {med(x[1] for x in rd):.2f}, redis / tamer "
              f"{med(b[1] / a[1] for a, b in zip(t, rd)):.3f}")
    for kind in ("tamer", "redis"):
        on, off = rows[(kind, True)], rows[(kind, False)]
        print(f"{kind}: tracked / untracked GET/s {med(a[0] / b[0] for a, b in zip(on, off)):.3f},"
              f" CPU per GET {med(a[1] / b[1] for a, b in zip(on, off)):.3f}")
    print("tracking_get_vs_redis = the tamer / redis GET/s with tracking on, above")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
