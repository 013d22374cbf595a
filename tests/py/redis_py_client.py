"""redis-py, unchanged, against a tamer server: run by tests/serve.rs (redis_py_works_unchanged).

Usage: python3 redis_py_client.py PORT. Exits non-zero with the failing check on stderr.
"""
import sys
import threading
import time

import redis

port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)

assert r.ping() is True
assert r.set("greeting", "hello") is True
assert r.get("greeting") == "hello"
assert r.get("absent") is None
assert r.set("greeting", "x", nx=True) is None
assert r.set("n", 10) and r.incr("n") == 11 and r.incrby("n", -5) == 6 and r.decr("n") == 5
assert r.mset({"a": "1", "b": "2"}) is True
assert r.mget(["a", "b", "c"]) == ["1", "2", None]
assert r.append("a", "23") == 3 and r.strlen("a") == 3 and r.getrange("a", 1, -1) == "23"
assert r.expire("a", 100) is True and 0 < r.ttl("a") <= 100 and r.persist("a") is True
assert r.ttl("a") == -1 and r.exists("a", "b", "zz") == 2 and r.type("a") == "string"
assert r.delete("a", "zz") == 1 and r.exists("a") == 0
# The TTL counts from the SETEX, before its durable reply: allow for the time both took.
t0 = time.monotonic()
assert r.setex("s", 50, "v") is True
pttl = r.pttl("s")
elapsed_ms = (time.monotonic() - t0) * 1000
assert 50_000 - elapsed_ms - 5 <= pttl <= 50_000, (pttl, elapsed_ms)
assert r.getdel("s") == "v" and r.get("s") is None

try:
    r.incr("greeting")
    raise AssertionError("INCR of a non-integer must fail")
except redis.ResponseError as e:
    assert "not an integer" in str(e), e

# Pipelines, with and without MULTI.
p = r.pipeline(transaction=False)
for i in range(100):
    p.set(f"k{i}", i)
for i in range(100):
    p.get(f"k{i}")
out = p.execute()
assert out[:100] == [True] * 100 and out[100:] == [str(i) for i in range(100)], out[:5]
p = r.pipeline(transaction=True)
p.incr("counter").incr("counter").get("counter")
assert p.execute() == [1, 2, "2"]

# WATCH-based optimistic transactions from several threads: no increment is lost.
r.set("shared", 0)
THREADS, EACH = 4, 25


def worker():
    c = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)

    def bump(pipe):
        v = int(pipe.get("shared"))
        pipe.multi()
        pipe.set("shared", v + 1)

    for _ in range(EACH):
        c.transaction(bump, "shared")


ts = [threading.Thread(target=worker) for _ in range(THREADS)]
for t in ts:
    t.start()
for t in ts:
    t.join()
assert r.get("shared") == str(THREADS * EACH), r.get("shared")

# Binary values round-trip.
rb = redis.Redis(host="127.0.0.1", port=port)
blob = bytes(range(256)) * 64
assert rb.set(b"bin\x00key", blob) and rb.get(b"bin\x00key") == blob

# A second database.
r1 = redis.Redis(host="127.0.0.1", port=port, db=1, decode_responses=True)
assert r1.get("greeting") is None and r1.set("greeting", "db1") and r.get("greeting") == "hello"
print("redis-py ok")
