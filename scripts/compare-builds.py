#!/usr/bin/env python3
"""Two builds of tamer side by side, in one run: interleaved rounds (A B, then B A, ...) of

  * `tamer bench rpc --quick` and `tamer bench types --quick`, each build's own binary (so
    each starts its own `tamer serve`), and
  * CPU per request: each build's `tamer serve --cores 1 --durability none` pinned to CPU 1,
    redis-benchmark pinned to CPU 0 sending a fixed number of requests, the server's user +
    system CPU time (from /proc) divided by the requests: a figure a shared, noisy machine
    disturbs far less than throughput.

With --served types (or rpc), B's bench (one load generator) drives both builds' servers
through TAMER_BIN; types also reports the server's CPU time per operation of each workload.
For a paired view, each figure's per-round B vs A and its median are printed beside.

Reports each figure's median over the rounds for both builds and B / A (for CPU per request,
A / B, so that above 1 is better for B everywhere).

    python3 scripts/compare-builds.py --a /path/to/tamer-before --b target/release/tamer \\
        --rounds 3 --out target/compare

Needs redis-server, redis-benchmark and memcached (scripts/install-peers.sh) and `taskset`.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import time

CPU_TESTS = [
    ("get", ["-t", "get"]),
    ("get_p16", ["-t", "get", "-P", "16"]),
    ("set", ["-t", "set"]),
    ("set_p16", ["-t", "set", "-P", "16"]),
    ("hset_p16", ["-t", "hset", "-P", "16"]),
    ("lpush_p16", ["-t", "lpush", "-P", "16"]),
    ("zadd_p16", ["-t", "zadd", "-P", "16"]),
    ("mset", ["-t", "mset"]),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def wait_port(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def cpu_per_request(binary, data_dir, requests):
    """CPU µs per request of each CPU_TESTS workload on a fresh server of `binary`."""
    shutil.rmtree(data_dir, ignore_errors=True)
    os.makedirs(data_dir)
    port = free_port()
    server = subprocess.Popen(
        ["taskset", "-c", "1", binary, "serve", "--port", str(port), "--dir", data_dir,
         "--cores", "1", "--durability", "none", "--cache-size", "256mb"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        out = {}
        for name, args in CPU_TESTS:
            before = cpu_seconds(server.pid)
            started = time.time()
            subprocess.run(
                ["taskset", "-c", "0", "redis-benchmark", "-p", str(port), "-c", "50",
                 "-r", "100000", "-d", "64", "-n", str(requests), "-q"] + args,
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            took = time.time() - started
            used = cpu_seconds(server.pid) - before
            out[f"cpu_us_per_req_{name}"] = used * 1e6 / requests
            out[f"req_per_s_{name}"] = requests / took
        return out
    finally:
        server.terminate()
        server.wait()


def bench(binary, name, data_dir):
    """The figures of `tamer bench NAME --quick` and its raw per-server throughputs."""
    shutil.rmtree(data_dir, ignore_errors=True)
    os.makedirs(data_dir)
    subprocess.run([binary, "bench", name, "--quick", "--data-dir", data_dir], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(data_dir, "bench", f"{name}.json")) as f:
        result = json.load(f)
    out = {}
    for k, v in result["figures"].items():
        if isinstance(v, (int, float)):
            out[f"{name}.{k}"] = v
    for row in result["rows"]:
        if name == "rpc" and row.get("figure") == "vs_redis":
            key = f"rpc.capacity_{row['server']}_{row['op']}_b{row['batch']}"
            out[key] = row["search"]["capacity_per_s"]
        if name == "types" and row.get("figure") == "vs_redis":
            out[f"types.ops_{row['server']}_{row['workload']}"] = row["measured"]["ops_per_s"]
        if name == "types" and row.get("figure") == "ycsb_e":
            out["types.ops_tamer_ycsb_e_embedded"] = row["tamer_embedded_ops_per_s"]
    return out


def served(driver, binary, name, data_dir):
    """`bench NAME --quick` (types: only vs_redis) run by `driver`, serving with `binary`
    (TAMER_BIN): one load generator for both builds, so only the server differs. Its
    throughputs (and, for types, the server CPU time per operation) of tamer and redis-server."""
    shutil.rmtree(data_dir, ignore_errors=True)
    os.makedirs(data_dir)
    env = dict(os.environ, TAMER_BIN=binary)
    only = ["--only", "vs_redis"] if name == "types" else []
    subprocess.run([driver, "bench", name, "--quick", *only, "--data-dir", data_dir],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(data_dir, "bench", f"{name}.json")) as f:
        result = json.load(f)
    out = {}
    for row in result["rows"]:
        if row.get("figure") != "vs_redis":
            continue
        if name == "rpc":
            key = f"{row['server']}_{row['op']}_b{row['batch']}"
            out[f"rpc.capacity_{key}"] = row["search"]["capacity_per_s"]
            continue
        m, key = row["measured"], f"{row['server']}_{row['workload']}"
        out[f"types.ops_{key}"] = m["ops_per_s"]
        if m.get("server_cpu_us_per_op") is not None:
            out[f"types.cpu_us_per_op_{key}"] = m["server_cpu_us_per_op"]
    return out


def lower_is_better(key):
    return "cpu_us" in key or key.endswith("_us") or "p99" in key or "p50" in key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the baseline build's tamer binary")
    ap.add_argument("--b", required=True, help="the build compared with it")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=400000, help="per CPU-per-request test")
    ap.add_argument("--out", default="target/compare")
    ap.add_argument("--skip-benches", action="store_true", help="CPU per request only")
    ap.add_argument("--served", choices=["types", "rpc"], action="append",
                    help="only this bench's vs_redis figures, both builds served by B's own"
                         " load generator (repeatable)")
    ap.add_argument("--report", help="only report the rounds of this rounds.json")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            return report(json.load(f))
    os.makedirs(args.out, exist_ok=True)
    runs = {"a": [], "b": []}
    for r in range(args.rounds):
        order = ["a", "b"] if r % 2 == 0 else ["b", "a"]
        for which in order:
            binary = os.path.abspath(getattr(args, which))
            if args.served:
                driver, figures = os.path.abspath(args.b), {}
                for name in args.served:
                    out = os.path.join(args.out, f"served-{name}-{which}")
                    figures.update(served(driver, binary, name, out))
                runs[which].append(figures)
                print(f"round {r + 1} {which} done", flush=True)
                continue
            figures = cpu_per_request(binary, os.path.join(args.out, f"cpu-{which}"), args.requests)
            if not args.skip_benches:
                for name in ["rpc", "types"]:
                    figures.update(bench(binary, name, os.path.join(args.out, f"{name}-{which}")))
            runs[which].append(figures)
            print(f"round {r + 1} {which} done", flush=True)
    with open(os.path.join(args.out, "rounds.json"), "w") as f:
        json.dump(runs, f, indent=1)
    report(runs)


def report(runs):
    """Each figure present in every round: both medians and B vs A."""
    numeric = lambda r: {k for k, v in r.items() if isinstance(v, (int, float))}
    keys = sorted(set.intersection(*(numeric(r) for r in runs["a"] + runs["b"])))
    print(f"{'figure':48} {'A median':>12} {'B median':>12} {'B vs A':>8} {'paired':>8}"
          f" {'range':>13}")
    for k in keys:
        a = statistics.median(r[k] for r in runs["a"])
        b = statistics.median(r[k] for r in runs["b"])
        # Each round's B vs A (the two ran back to back), then their median and range.
        pairs = [vs(ra[k], rb[k], k) for ra, rb in zip(runs["a"], runs["b"])]
        paired = statistics.median(pairs)
        spread = f"{min(pairs):.2f}-{max(pairs):.2f}"
        print(f"{k:48} {a:12.3f} {b:12.3f} {vs(a, b, k):8.3f} {paired:8.3f} {spread:>13}")


def vs(a, b, key):
    """B vs A, above 1 when B is better."""
    if a == 0 or b == 0:
        return float("nan")
    return a / b if lower_is_better(key) else b / a


if __name__ == "__main__":
    main()
