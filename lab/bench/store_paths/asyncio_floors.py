"""The driver's floor through asyncio: the send floor's statements as one coroutine per send on an
asyncio loop in the calling thread, each driver answer handed to the loop (``call_soon_threadsafe``),
``in_flight`` coroutines at a time. Beside :mod:`callback_floors` it prices the loop hand-off an
asyncio core would pay per request.

More: docs/bench-internals.md.
"""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from lab.bench.store_paths.floors import SendFloorPlan
from lab.cluster.connection import Connection, Stmt
from lab.measure import Timing
from lab.measure.timing import now_ns

__all__ = ["awaited", "run_coroutines", "send_coroutine"]

Send = Callable[[], Coroutine[Any, Any, None]]


async def awaited(response: Any) -> Any:
    """A driver ResponseFuture's rows, awaited on the running loop. An answer that arrives on this very
    loop's thread (the driver's asyncio reactor) settles the future at once; one from another thread
    (libev's I/O thread) is handed to the loop (``call_soon_threadsafe``)."""
    loop, thread = asyncio.get_running_loop(), threading.get_ident()
    future = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            future.set_result(value) if ok else future.set_exception(value)

    def on(ok: bool) -> Callable[[Any], None]:
        def call(value: Any) -> None:
            if threading.get_ident() == thread:
                settle(ok, value)
            else:
                loop.call_soon_threadsafe(settle, ok, value)
        return call
    response.add_callbacks(on(True), on(False))
    return await future


async def _answer(conn: Connection, stmt: Stmt, params: Sequence[Any]) -> Any:
    """One statement's rows, awaited."""
    return await awaited(conn.execute_async(stmt, params))


def send_coroutine(conn: Connection, plan: SendFloorPlan) -> Send:
    """The send floor's plan in the order :func:`callback_floors.send_chain` issues it: the fencing
    read (a conversation's first call), the reservation (applied, or it fails), record + index
    together, COMMITTED, the head read, the head write. A plan with an outbox append is refused."""
    if plan.log_append is not None or plan.log_record is not None:
        raise ValueError("an asyncio floor issues driver statements only: build its plans with outbox=False")

    async def send() -> None:
        if plan.fencing_read is not None:
            await _answer(conn, *plan.fencing_read)
        rows = await _answer(conn, *plan.reserve)
        if not rows or not rows[0][0]:
            raise RuntimeError("asyncio floor: the reservation was not applied")
        await asyncio.gather(*(_answer(conn, *item) for item in plan.record_and_index))
        await _answer(conn, *plan.commit)
        if plan.head_read is not None:
            await _answer(conn, *plan.head_read)
        await _answer(conn, *plan.head_write)
    return send


def run_coroutines(sends: Sequence[Send], *, in_flight: int) -> list[Timing]:
    """Run ``sends`` on a new event loop in this thread, ``in_flight`` at a time; each one's Timing in
    input order (a failed one: its error's type)."""
    timings: list[Timing | None] = [None] * len(sends)

    async def worker(queue: list[int]) -> None:
        while queue:
            i = queue.pop()
            started = now_ns()
            try:
                await sends[i]()
                error = None
            except Exception as exc:  # a failed call is recorded, not raised: the block goes on
                error = type(exc).__name__
            timings[i] = Timing(started, now_ns(), error)

    async def main() -> None:
        queue = list(range(len(sends)))[::-1]
        await asyncio.gather(*(worker(queue) for _ in range(min(in_flight, len(sends)))))

    if sends:
        asyncio.run(main())
    return [t for t in timings if t is not None]
