"""The Celery application of celery_client.py: Redis as broker (database 0) and result
backend (database 1); each task counts its runs in database 2 (`runs:<i>`)."""

import os

from celery import Celery
from redis import Redis

PORT = int(os.environ["CELERY_TEST_PORT"])
app = Celery(
    "celery_tasks",
    broker=f"redis://127.0.0.1:{PORT}/0",
    backend=f"redis://127.0.0.1:{PORT}/1",
)
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=4,
    broker_connection_retry_on_startup=True,
    result_expires=3600,
)
runs = Redis(port=PORT, db=2)


def _count(i):
    return runs.incr(f"runs:{i}")


@app.task
def add(i):
    """Succeeds: 2 i."""
    _count(i)
    return 2 * i


@app.task(bind=True, max_retries=2)
def flaky(self, i):
    """Fails its first run and is retried; its second run succeeds: 3 i."""
    if _count(i) == 1:
        raise self.retry(exc=RuntimeError(f"task {i}: first run fails"), countdown=0)
    return 3 * i


@app.task
def fail(i):
    """Always fails."""
    _count(i)
    raise ValueError(f"task {i} always fails")
