#!/usr/bin/env python3
"""Writes crates/server/src/config/redis_only.rs: Redis 7.0's settings that tamer accepts
without effect, probed from a fresh redis-server 7.0 (the behaviour tamer follows).

    python3 scripts/gen-redis-settings.py > crates/server/src/config/redis_only.rs

For every setting `CONFIG GET *` lists that tamer's own registry (`SETTINGS` and `ALIASES`
in crates/server/src/config.rs) does not have, the probe reads its default and learns from
redis-server's own replies whether `CONFIG SET` may change it (an immutable one says so),
and what it takes: `CONFIG SET name tamer-probe-x` is refused with Redis's reason (yes/no,
an integer, a memory value, one of a list) or accepted (any text); an integer's or memory
value's range is read from the refusals of the least and greatest 64-bit values. Every
probe's value is set back. FIXED names the settings whose silent acceptance would mislead
(replication, TLS, ACL files, unix sockets, daemonizing): tamer shows their defaults and
refuses to change them. Needs redis-server and redis-cli (scripts/install-peers.sh).
"""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG_RS = os.path.join(HERE, "..", "crates", "server", "src", "config.rs")

# Redis 7.0's other names of settings (its `deprecated_configs` and renamed ones): shown by
# CONFIG GET * beside the setting they name.
ALIASES = {
    "slaveof": "replicaof",
    "slave-serve-stale-data": "replica-serve-stale-data",
    "slave-read-only": "replica-read-only",
    "slave-ignore-maxmemory": "replica-ignore-maxmemory",
    "slave-lazy-flush": "replica-lazy-flush",
    "slave-priority": "replica-priority",
    "slave-announce-ip": "replica-announce-ip",
    "slave-announce-port": "replica-announce-port",
    "min-slaves-to-write": "min-replicas-to-write",
    "min-slaves-max-lag": "min-replicas-max-lag",
    "repl-ping-slave-period": "repl-ping-replica-period",
    "cluster-slave-validity-factor": "cluster-replica-validity-factor",
    "cluster-slave-no-failover": "cluster-replica-no-failover",
}

FIXED_PREFIXES = ("tls-", "repl", "replica", "masterauth", "masteruser", "min-replicas-",
                  "cluster-")
FIXED = {"aclfile", "unixsocket", "unixsocketperm", "daemonize", "supervised", "pidfile",
         "enable-debug-command", "enable-module-command",
         "enable-protected-configs", "maxmemory-clients", "activedefrag",
         # Its own syntax, which tamer does not parse: shown, not changed.
         "oom-score-adj-values"}

# Settings with a syntax of their own that tamer parses (crates/server/src/config/).
OWN_KINDS = {"client-output-buffer-limit": "Kind::BufferLimits"}

I64 = 9223372036854775807


def fixed(name):
    return name in FIXED or name.startswith(FIXED_PREFIXES)


def tamer_names():
    text = open(CONFIG_RS).read()
    names = set(re.findall(r'setting\(\s*"([^"]+)"', text))
    names |= set(re.findall(r'^\s*\("([^"]+)", "[^"]+"\),', text, re.M))
    return names


def cli(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True)
    # One line per value: only the last line's end is dropped (a last value may be empty).
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reason(reply):
    """The part of a CONFIG SET error after the argument's name."""
    m = re.match(r"ERR CONFIG SET failed \(possibly related to argument '[^']+'\) - (.*)", reply)
    return m.group(1) if m else None


def startup_kind(default):
    """An immutable setting's kind, from its default (CONFIG SET cannot probe it)."""
    if default in ("yes", "no"):
        return "Kind::Bool"
    if re.fullmatch(r"-?\d+", default):
        return f"Kind::Int {{ min: {-I64}, max: {I64} }}"
    return "Kind::Text"


def probe(port, name, value):
    """(mutability, kind) of one setting, as Rust source."""
    if name in OWN_KINDS:
        return "Live", OWN_KINDS[name]
    first = cli(port, "config", "set", name, value)
    if first != "OK":
        if "can't set protected config" in first:
            return "Protected", "Kind::Text"
        assert "can't set immutable config" in first, (name, first)
        return "Immutable", startup_kind(value)
    why = reason(cli(port, "config", "set", name, "tamer-probe-x"))
    cli(port, "config", "set", name, value)
    if why is None:
        return "Live", "Kind::Text"
    if why == "argument must be 'yes' or 'no'":
        return "Live", "Kind::Bool"
    if why.startswith("argument(s) must be one of the following: "):
        names = why.split(": ", 1)[1].split(", ")
        return "Live", "Kind::Enum(&[%s])" % ", ".join(f'"{n}"' for n in names)
    if why in ("argument couldn't be parsed into an integer", "argument must be a memory value"):
        lo, hi = -I64, I64
        for probe_value in (str(-I64), str(I64)):
            r = reason(cli(port, "config", "set", name, probe_value))
            cli(port, "config", "set", name, value)
            m = r and re.match(r"argument must be between (-?\d+) and (-?\d+) inclusive", r)
            if m:
                lo, hi = int(m.group(1)), int(m.group(2))
                break
        if why.startswith("argument couldn't"):
            return "Live", f"Kind::Int {{ min: {lo}, max: {hi} }}"
        return "Live", "Kind::Memory"
    # A setting with its own syntax (client-output-buffer-limit, oom-score-adj-values, ...).
    return "Live", "Kind::Text"


def main():
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(["redis-server", "--port", str(port), "--dir", tmp,
                                   "--save", ""], stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if cli(port, "ping") == "PONG":
                    break
                time.sleep(0.05)
            version = cli(port, "info", "server")
            version = re.search(r"redis_version:(\S+)", version).group(1)
            pairs = cli(port, "config", "get", "*").split("\n")
            values = dict(zip(pairs[0::2], pairs[1::2]))
            ours = tamer_names()
            rows, aliases = [], []
            for name in sorted(values):
                if name in ours or name in ("dir",):
                    continue
                if ALIASES.get(name):
                    aliases.append((name, ALIASES[name]))
                    continue
                mutability, kind = probe(port, name, values[name])
                if fixed(name):
                    mutability = "Fixed"
                rows.append((name, values[name], kind, mutability))
        finally:
            server.terminate()
            server.wait()
    emit(version, rows, aliases)


def emit(version, rows, aliases):
    print("//! Redis 7.0's settings that tamer accepts and shows without effect (`CONFIG GET`,")
    print("//! `CONFIG SET`, the config file), with Redis's defaults, kinds and mutability as")
    print(f"//! redis-server {version} showed them. Generated by `scripts/gen-redis-settings.py`;")
    print("//! do not edit. A `fixed` one (replication, TLS, ACL files, unix sockets,")
    print("//! daemonizing: accepting them silently would mislead) keeps its default.")
    print()
    print("use super::{Kind, Mutability, Setting};")
    print()
    print("/// Accepted without effect, sorted by name (see the module docs).")
    print("#[rustfmt::skip]")
    print("pub const REDIS_ONLY: &[Setting] = &[")
    for name, default, kind, mutability in rows:
        d = default.replace("\\", "\\\\").replace('"', '\\"')
        kind = kind.replace(f"-{I64}", "-i64::MAX").replace(str(I64), "i64::MAX")
        print(f'    Setting::redis_only("{name}", "{d}", {kind}, Mutability::{mutability}),')
    print("];")
    print()
    print("/// Redis's other names of those settings.")
    print("#[rustfmt::skip]")
    print("pub const REDIS_ONLY_ALIASES: &[(&str, &str)] = &[")
    for alias, name in aliases:
        print(f'    ("{alias}", "{name}"),')
    print("];")


if __name__ == "__main__":
    main()
