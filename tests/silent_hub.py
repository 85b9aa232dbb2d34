"""A Hugging Face Hub that accepts connections and never answers a byte, for the tests of outside waits."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def silent_endpoint() -> Iterator[str]:
    """An ``HF_ENDPOINT`` URL on loopback whose server accepts every connection (the kernel's backlog, then
    a thread) and never sends a byte; closed with everything it held on exit."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        for s in held:
            s.close()
