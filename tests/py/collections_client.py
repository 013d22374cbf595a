"""redis-py, unchanged, drives hashes, lists, sets and sorted sets on a tamer server: run by
tests/collections.rs (redis_py_drives_the_collections).

Usage: python3 collections_client.py PORT. Exits non-zero with the failing check on stderr.
Collections grow past the packed bounds (300 fields, 500 members), so both representations
are read through a real client.
"""
import sys
import threading
import time

import redis

port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
r.flushall()

# Hashes
assert r.hset("user:1", mapping={"name": "ann", "age": "31"}) == 2
assert r.hget("user:1", "name") == "ann"
assert r.hgetall("user:1") == {"name": "ann", "age": "31"}
assert r.hincrby("user:1", "age", 2) == 33
assert abs(r.hincrbyfloat("user:1", "score", 1.5) - 1.5) < 1e-9
assert r.hexists("user:1", "name") and not r.hexists("user:1", "nope")
assert sorted(r.hkeys("user:1")) == ["age", "name", "score"]
assert r.hlen("user:1") == 3 and r.hstrlen("user:1", "name") == 3
assert r.hmget("user:1", ["name", "nope"]) == ["ann", None]
assert r.hdel("user:1", "score", "nope") == 1
big = {f"f{i}": "v" * (i % 50) for i in range(300)}
assert r.hset("big", mapping=big) == 300
assert r.hgetall("big") == big
assert r.hlen("big") == 300 and r.hget("big", "f299") == "v" * 49
seen = {}
for field, value in r.hscan_iter("big", count=17):
    seen[field] = value
assert seen == big
assert r.hrandfield("big") in big
assert len(r.hrandfield("big", 5)) == 5

# Sets
assert r.sadd("tags", "a", "b", "c") == 3 and r.sadd("tags", "a") == 0
assert r.smembers("tags") == {"a", "b", "c"}
assert r.sismember("tags", "a") and not r.sismember("tags", "z")
assert r.smismember("tags", ["a", "z"]) == [1, 0]
assert r.sadd("more", "b", "c", "d") == 3
assert r.sinter("tags", "more") == {"b", "c"} and r.sunion("tags", "more") == {"a", "b", "c", "d"}
assert r.sdiff("tags", "more") == {"a"} and r.sintercard(2, ["tags", "more"]) == 2
assert r.sinterstore("both", ["tags", "more"]) == 2 and r.smembers("both") == {"b", "c"}
members = {f"m{i}" for i in range(500)}
assert r.sadd("large", *members) == 500
assert r.smembers("large") == members and r.scard("large") == 500
assert set(r.sscan_iter("large", count=33)) == members
popped = r.spop("large", 10)
assert len(popped) == 10 and r.scard("large") == 490
assert r.smove("tags", "more", "a") is True and r.sismember("more", "a")

# Sorted sets
assert r.zadd("board", {"ann": 10, "bob": 20, "cid": 15}) == 3
assert r.zscore("board", "bob") == 20.0 and r.zrank("board", "cid") == 1
assert r.zrevrank("board", "bob") == 0
assert r.zrange("board", 0, -1, withscores=True) == [("ann", 10.0), ("cid", 15.0), ("bob", 20.0)]
assert r.zincrby("board", 7.5, "ann") == 17.5
assert r.zrangebyscore("board", 15, "+inf") == ["cid", "ann", "bob"]
assert r.zcount("board", "(15", 20) == 2
assert r.zadd("board", {"bob": 5}, xx=True, ch=True) == 1
assert r.zpopmin("board") == [("bob", 5.0)]
assert r.zmscore("board", ["ann", "zed"]) == [17.5, None]
scores = {f"p{i}": i * 0.5 for i in range(500)}
assert r.zadd("leader", scores) == 500
assert r.zcard("leader") == 500 and r.zrank("leader", "p250") == 250
top = r.zrevrange("leader", 0, 2, withscores=True)
assert top == [("p499", 249.5), ("p498", 249.0), ("p497", 248.5)]
assert r.zrangebyscore("leader", 10, 11) == ["p20", "p21", "p22"]
assert dict(r.zscan_iter("leader", count=40)) == {k: float(v) for k, v in scores.items()}
assert r.zunionstore("u", {"leader": 1, "board": 2}) == 502
assert r.zinter(["leader", "u"], withscores=False)[:2] == ["p0", "p1"]
assert r.zremrangebyrank("leader", 0, 99) == 100 and r.zcard("leader") == 400

# Lists
assert r.rpush("q", "a", "b", "c") == 3 and r.lpush("q", "z") == 4
assert r.lrange("q", 0, -1) == ["z", "a", "b", "c"]
assert r.lindex("q", -1) == "c" and r.llen("q") == 4
assert r.linsert("q", "before", "b", "ins") == 5 and r.lrange("q", 2, 3) == ["ins", "b"]
assert r.lset("q", 0, "first") is True and r.lpop("q") == "first"
assert r.lpos("q", "b") == 2 and r.lrem("q", 0, "ins") == 1
assert r.rpop("q", 2) == ["c", "b"]
assert r.lmove("q", "q2", "LEFT", "RIGHT") == "a" and r.lrange("q2", 0, -1) == ["a"]
items = [f"item{i}" for i in range(400)]
assert r.rpush("long", *items) == 400
assert r.lrange("long", 0, -1) == items and r.lindex("long", 200) == "item200"
assert r.ltrim("long", 100, 299) is True and r.llen("long") == 200
assert r.lrange("long", 0, 1) == ["item100", "item101"]

# Blocking pops served by another client
def push_later():
    time.sleep(0.2)
    redis.Redis(host="127.0.0.1", port=port, decode_responses=True).rpush("jobs", "j1")

t = threading.Thread(target=push_later)
t.start()
assert r.blpop(["jobs"], timeout=5) == ("jobs", "j1")
t.join()
assert r.blpop(["jobs"], timeout=0.2) is None
assert r.brpoplpush("long", "dst", timeout=1) == "item299"

def zadd_later():
    time.sleep(0.2)
    redis.Redis(host="127.0.0.1", port=port, decode_responses=True).zadd("waiting", {"w": 3})

t = threading.Thread(target=zadd_later)
t.start()
assert r.bzpopmin("waiting", timeout=5) == ("waiting", "w", 3.0)
t.join()

# Types and keys across them
assert r.type("big") == "hash" and r.type("large") == "set" and r.type("leader") == "zset"
assert r.type("long") == "list"
assert r.rename("leader", "leader2") is True and r.zcard("leader2") == 400
assert r.copy("big", "bigcopy") is True and r.hlen("bigcopy") == 300
assert r.hdel("bigcopy", "f0") == 1 and r.hlen("big") == 300
assert r.expire("large", 100) is True and 0 < r.ttl("large") <= 100
assert r.delete("big", "large", "leader2", "long") == 4
assert r.exists("big") == 0
try:
    r.lpush("user:1", "x")
    raise AssertionError("LPUSH on a hash must fail")
except redis.ResponseError as e:
    assert "WRONGTYPE" in str(e)
print("ok")
