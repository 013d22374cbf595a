"""redis-py's own scripting paths against a server on argv[1]'s port, unchanged:
register_script (EVALSHA, NOSCRIPT, SCRIPT LOAD, EVALSHA again), scripts in a pipeline,
Lock (acquired with SET NX, extended and released by its Lua scripts) contended by threads,
and script errors as ResponseError."""

import sys
import threading

import redis

r = redis.Redis(port=int(sys.argv[1]))
r.flushall()
r.script_flush()

incr_by = r.register_script(
    "local v = redis.call('incrby', KEYS[1], ARGV[1]) redis.call('expire', KEYS[1], 100) return v"
)
assert incr_by(keys=["counter"], args=[5]) == 5  # NOSCRIPT, then SCRIPT LOAD, then EVALSHA
assert incr_by(keys=["counter"], args=[2]) == 7
assert r.script_exists(incr_by.sha) == [True]
assert 0 < r.ttl("counter") <= 100

pipe = r.pipeline()
for i in range(10):
    incr_by(keys=["counter"], args=[1], client=pipe)
assert pipe.execute() == list(range(8, 18))

try:
    r.eval("return redis.call('lpush', KEYS[1], 'x')", 1, "counter")
    raise AssertionError("no error")
except redis.ResponseError as e:
    assert "WRONGTYPE" in str(e), e

assert r.eval("return {1, 'two', {ok='three'}}", 0) == [1, b"two", b"three"]

# Lock: 4 threads take it 50 times each; inside it they read-modify-write a plain key.
r.set("shared", 0)


def worker():
    c = redis.Redis(port=int(sys.argv[1]))
    for _ in range(50):
        with c.lock("the-lock", timeout=10, blocking_timeout=30) as lock:
            value = int(c.get("shared"))
            c.set("shared", value + 1)
            lock.extend(5)


threads = [threading.Thread(target=worker) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert int(r.get("shared")) == 200, r.get("shared")
assert r.get("the-lock") is None
print("scripting client: ok")
