"""A token-bucket rate limiter in Lua (the script applications write: tokens refilled by
elapsed time, one taken per request, state in a hash with a TTL), against a server on
argv[1]'s port. The arrival times are arguments, so its decisions depend only on the
arrival sequence: a seeded sequence of 2,000 requests from 4 clients over 20 buckets is
sent in order from 4 connections and every decision printed (one per line), to compare
between servers. Then 8 threads take from one bucket of 50 tokens at one instant: exactly
50 must be allowed (the script is atomic)."""

import random
import sys
import threading

import redis

PORT = int(sys.argv[1])

TOKEN_BUCKET = """
local key, capacity, rate_per_s, now_ms = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('HMGET', key, 'tokens', 'at_ms')
local tokens = tonumber(state[1]) or capacity
local at_ms = tonumber(state[2]) or now_ms
if now_ms > at_ms then
  tokens = math.min(capacity, tokens + (now_ms - at_ms) * rate_per_s / 1000)
  at_ms = now_ms
end
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', key, 'tokens', tostring(tokens), 'at_ms', at_ms)
redis.call('PEXPIRE', key, math.ceil(capacity / rate_per_s * 1000) + 1000)
return {allowed, tostring(tokens)}
"""

clients = [redis.Redis(port=PORT) for _ in range(4)]
clients[0].flushall()
limit = clients[0].register_script(TOKEN_BUCKET)

rng = random.Random(24_026)
now_ms = 1_700_000_000_000
for i in range(2000):
    now_ms += rng.choice([0, 0, 1, 5, 20, 100])
    bucket = f"bucket:{rng.randrange(20)}"
    client = clients[rng.randrange(4)]
    allowed, tokens = limit(keys=[bucket], args=[5, 10, now_ms], client=client)
    print(i, bucket, allowed, tokens.decode())

allowed_total = [0]
lock = threading.Lock()


def taker():
    r = redis.Redis(port=PORT)
    mine = 0
    for _ in range(20):
        allowed, _ = limit(keys=["burst"], args=[50, 1, 1_800_000_000_000], client=r)
        mine += allowed
    with lock:
        allowed_total[0] += mine


threads = [threading.Thread(target=taker) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert allowed_total[0] == 50, f"{allowed_total[0]} allowed from a bucket of 50"
print("burst: 50 of 160 allowed")
