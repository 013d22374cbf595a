"""redis-py's Lock, as an application uses it, against a server on argv[1]'s port: 8
processes contend for 1,000 acquisitions in all; inside the lock each marks itself the
holder (SET NX must succeed: nobody else is inside), reads and rewrites a counter, and
leaves. Mutual exclusion holds when no SET NX fails and the counter ends at 1,000."""

import multiprocessing
import sys

import redis

PORT = int(sys.argv[1])
PROCESSES = 8
ACQUISITIONS = 1000


def worker(n):
    r = redis.Redis(port=PORT)
    overlaps = 0
    for _ in range(ACQUISITIONS // PROCESSES):
        # blocking_timeout bounds each wait; a stalled machine may be slow, not stuck.
        with r.lock("app-lock", timeout=30, blocking_timeout=120, sleep=0.001):
            if not r.set("app-holder", n, nx=True):
                overlaps += 1
            value = int(r.get("app-counter"))
            r.set("app-counter", value + 1)
            r.delete("app-holder")
    return overlaps


if __name__ == "__main__":
    r = redis.Redis(port=PORT)
    r.delete("app-lock", "app-holder")
    r.set("app-counter", 0)
    with multiprocessing.Pool(PROCESSES) as pool:
        overlaps = sum(pool.map(worker, range(PROCESSES)))
    counter = int(r.get("app-counter"))
    assert overlaps == 0, f"{overlaps} acquisitions found another holder inside"
    assert counter == ACQUISITIONS, f"counter {counter}, want {ACQUISITIONS}"
    assert r.get("app-lock") is None, "the lock was left held"
    print(f"lock: {ACQUISITIONS} acquisitions by {PROCESSES} processes, no overlap")
