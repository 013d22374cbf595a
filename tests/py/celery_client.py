"""Celery end to end: a real worker (`celery worker`, prefork pool of 2) runs 1,000 tasks
sent through the Redis broker on the server at argv[1], their results read back through
the Redis result backend (which waits on pub/sub).

Of task i: i % 10 == 3 always fails; i % 10 == 5 fails its first run, is retried and
succeeds; i % 10 == 7 is sent with a 1 s countdown; the others succeed at once. Checks that
every result arrives, is right, and that each task ran exactly as often as it should (no task
lost, none run twice). Prints "celery ok" on success."""

import os
import signal
import subprocess
import sys
import tempfile
import time

JOBS = 1000
DEADLINE_S = 240
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    port = int(sys.argv[1])
    os.environ["CELERY_TEST_PORT"] = str(port)
    sys.path.insert(0, HERE)
    import celery_tasks as t

    t.runs.flushall()
    celery = os.path.join(os.path.dirname(sys.executable), "celery")
    log = tempfile.TemporaryFile()
    worker = subprocess.Popen(
        [celery, "-A", "celery_tasks", "worker", "--concurrency", "2", "--loglevel", "WARNING"],
        cwd=HERE,
        env=os.environ,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        sent = []
        for i in range(JOBS):
            kind = i % 10
            if kind == 3:
                sent.append(t.fail.delay(i))
            elif kind == 5:
                sent.append(t.flaky.delay(i))
            elif kind == 7:
                sent.append(t.add.apply_async((i,), countdown=1))
            else:
                sent.append(t.add.delay(i))
        check(t, sent)
    except BaseException:
        log.seek(0)
        sys.stderr.write(log.read()[-20000:].decode(errors="replace"))
        raise
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
    print("celery ok")


def check(t, sent):
    started = time.time()
    for i, result in enumerate(sent):
        left = max(1.0, DEADLINE_S - (time.time() - started))
        value = result.get(timeout=left, propagate=False)
        runs = int(t.runs.get(f"runs:{i}") or 0)
        kind = i % 10
        if kind == 3:
            assert result.failed() and isinstance(value, ValueError), (i, value)
            assert runs == 1, (i, runs)
        else:
            want = 3 * i if kind == 5 else 2 * i
            assert result.successful() and value == want, (i, result.state, value)
            assert runs == (2 if kind == 5 else 1), (i, runs)
    # Nothing left in the broker's queue, nothing unacknowledged.
    broker = t.runs.connection_pool.connection_kwargs
    from redis import Redis

    b = Redis(port=broker["port"], db=0)
    assert b.llen("celery") == 0, b.llen("celery")
    assert b.zcard("unacked_index") == 0, b.zcard("unacked_index")


if __name__ == "__main__":
    main()
