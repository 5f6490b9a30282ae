"""Running asyncio code from the tests (tests/app/test_front.py, test_workers.py)."""

from __future__ import annotations

import asyncio
import concurrent.futures


def run(coro):
    """``asyncio.run`` in a thread of its own: a test process may already run an event loop on its main
    thread (Playwright's sync API does, after the browser tests of the same worker)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def until(predicate, timeout: float = 20.0, every: float = 0.02) -> bool:
    """Await until ``predicate()`` holds or ``timeout`` seconds pass; whether it held.  A deadline, not a
    fixed wait: a loaded CI machine only makes it slower, never wrong."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(every)
    return True
