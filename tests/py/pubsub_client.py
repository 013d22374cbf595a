"""redis-py's pub/sub against a server on argv[1]'s port, unchanged: PubSub objects
subscribing by channel and pattern, get_message with a timeout, a subscriber thread
(run_in_thread with handlers), a fan-out to eight subscribers of 2,000 messages each with
none lost or reordered, ping inside the subscribed context, and PUBSUB's introspection."""

import sys
import threading
import time

import redis

PORT = int(sys.argv[1])
r = redis.Redis(port=PORT)


def wait_message(p, timeout=10.0):
    """The next message (not a confirmation) within `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = p.get_message(timeout=0.5)
        if m is not None and m["type"] in ("message", "pmessage"):
            return m
    raise AssertionError("no message")


def confirmed(p, n):
    """Waits for `n` subscribe confirmations on `p` (its commands are sent, not awaited)."""
    deadline = time.time() + 10
    seen = 0
    while seen < n:  # bounded by the deadline
        m = p.get_message(timeout=0.5)
        if m is not None and m["type"] in ("subscribe", "psubscribe"):
            seen += 1
        assert time.time() < deadline, "no confirmation"


p = r.pubsub()
p.subscribe("orders")
p.psubscribe("audit.*")
confirmed(p, 2)
assert r.pubsub_numsub("orders") == [(b"orders", 1)]
assert r.pubsub_numpat() == 1
assert b"orders" in r.pubsub_channels()
assert r.publish("orders", "o1") == 1
m = wait_message(p)
assert (m["type"], m["channel"], m["data"]) == ("message", b"orders", b"o1"), m
assert r.publish("audit.login", "u7") == 1
m = wait_message(p)
assert (m["type"], m["pattern"], m["channel"], m["data"]) == (
    "pmessage", b"audit.*", b"audit.login", b"u7"), m
p.ping()
deadline = time.time() + 10
while True:  # bounded by the deadline
    m = p.get_message(timeout=0.5)
    if m is not None and m["type"] == "pong":
        break
    assert time.time() < deadline, "no pong"
p.unsubscribe()
p.punsubscribe()
p.close()

# A handler thread, as applications (Celery's broadcasts, cache invalidation) run one.
got = []
done = threading.Event()


def handler(message):
    got.append(message["data"])
    if len(got) == 100:
        done.set()


p = r.pubsub()
p.subscribe(**{"events": handler})
worker = p.run_in_thread(sleep_time=0.01)
deadline = time.time() + 10
while r.pubsub_numsub("events")[0][1] < 1:  # bounded by the deadline
    assert time.time() < deadline, "the thread did not subscribe"
    time.sleep(0.01)
for i in range(100):
    r.publish("events", f"e{i}")
assert done.wait(20), f"only {len(got)} of 100 events arrived"
assert got == [f"e{i}".encode() for i in range(100)]
worker.stop()

# Fan-out: eight subscribers, 2,000 messages, every one in order at every subscriber.
N, SUBS = 2000, 8
subscribers = []
for _ in range(SUBS):
    s = redis.Redis(port=PORT).pubsub()
    s.subscribe("fan")
    confirmed(s, 1)
    subscribers.append(s)
assert r.pubsub_numsub("fan") == [(b"fan", SUBS)]
for i in range(N):
    assert r.publish("fan", str(i)) == SUBS
for s in subscribers:
    seen = []
    deadline = time.time() + 30
    while len(seen) < N:  # bounded by the deadline
        m = s.get_message(timeout=1.0)
        if m is not None:
            seen.append(int(m["data"]))
        assert time.time() < deadline, f"{len(seen)} of {N} arrived"
    assert seen == list(range(N))
    s.close()
print("ok")
