"""What the service keeps between requests: the jobs of ``?async=true`` requests (``JobStore``) and the
most recently used values by key (``Kept``: candidate tables and proven answers); ``Busy`` when full."""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any


class Busy(Exception):
    """More requests wait for a solver than the service queues: answered 503, try again later."""


@dataclass
class Job:
    """A request answered later (``?async=true``): its status, its progress lines and its answer."""

    id: str
    kind: str
    created: float = field(default_factory=time.time)
    status: str = "queued"  # queued, running, done, failed
    started: float | None = None
    finished: float | None = None
    progress: deque = field(default_factory=lambda: deque(maxlen=20))
    result: Any = None
    error: dict | None = None

    def view(self, with_result: bool = True) -> dict:
        end = self.finished or time.time()
        data: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "url": f"/v1/jobs/{self.id}",
            "queued_s": round((self.started or end) - self.created, 3),
            "elapsed_s": round(end - self.started, 3) if self.started else 0.0,
            "progress": list(self.progress),
        }
        if with_result and self.status == "done":
            data["result"] = self.result
        if self.status == "failed":
            data["error"] = self.error
        return data


class JobStore:
    """The jobs of this process, newest last; past ``keep`` the oldest finished ones go."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, kind: str) -> Job:
        with self._lock:
            for old in [j for j in self._jobs.values() if j.status in ("done", "failed")]:
                if len(self._jobs) < self.keep:
                    break
                del self._jobs[old.id]
            if len(self._jobs) >= self.keep:
                raise Busy(f"{len(self._jobs)} jobs are queued or running, the most this service keeps")
            job = Job(id=secrets.token_hex(8), kind=kind)
            self._jobs[job.id] = job
            return job

    def drop(self, job: Job) -> None:
        with self._lock:
            self._jobs.pop(job.id, None)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def all(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())


class Kept:
    """The ``size`` most recently used values by key, safe across threads, counting hits and misses."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.hits = self.misses = 0
        self._values: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key in self._values:
                self.hits += 1
                self._values.move_to_end(key)
                return self._values[key]
            self.misses += 1
            return None

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)

    def counts(self) -> dict:
        return {"kept": len(self._values), "hits": self.hits, "misses": self.misses}
