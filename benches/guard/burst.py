#!/usr/bin/env python3
"""Bursts of keep-alive connections for benches/guard.sh (memory after bursts).

Each round opens COUNT connections to 127.0.0.1:PORT, sends one HTTP/1.1
GET / on each (keep-alive) and reads its whole answer, so that all COUNT are
open at once at the end of the round, then closes them all. After a round
it prints one line

    round K OK FAILED SECONDS

(K from 1; OK the connections whose request got a 2xx, FAILED those that
could not connect, timed out or got no answer; SECONDS the round's wall
time), then waits for a line on stdin before the next round, so guard.sh
can let the proxy settle and read its RSS in between; stdin closing ends it.
No line is waited for after the last round.

Bounded: at most COUNT sockets, at most --parallel of them connecting or
waiting for an answer at once, every connect and every answer under a
--timeout (5 s), every round under a --round-timeout (120 s), every wait
for guard.sh's line under --wait (120 s). Loopback only; stdlib only.
"""
import argparse
import asyncio
import resource
import select
import sys
import time

REQ = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def read_answer(reader):
    """Reads one answer (head and body: length-delimited or chunked); its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    length, chunked = None, False
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        k = k.strip().lower()
        if k == b"content-length":
            length = int(v.strip())
        elif k == b"transfer-encoding" and b"chunked" in v.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                # Trailers, if any, up to the empty line.
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            await reader.readexactly(size + 2)
    elif length:
        await reader.readexactly(length)
    return status


async def burst(port, count, parallel, timeout, round_timeout):
    """One round; returns (ok, failed)."""
    sem = asyncio.Semaphore(parallel)
    writers = []

    async def one():
        async with sem:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), timeout)
            except (OSError, asyncio.TimeoutError):
                return False
            writers.append(writer)
            try:
                writer.write(REQ)
                await asyncio.wait_for(writer.drain(), timeout)
                status = await asyncio.wait_for(read_answer(reader), timeout)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                    asyncio.LimitOverrunError, ValueError):
                return False
            # Kept open (keep-alive) until every connection of the round is answered.
            return 200 <= status < 300

    tasks = [asyncio.ensure_future(one()) for _ in range(count)]
    done, pending = await asyncio.wait(tasks, timeout=round_timeout)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=timeout)
    ok = sum(1 for t in done if not t.cancelled() and t.exception() is None and t.result())
    # Close them all, then wait (bounded) until the sockets are closed.
    for w in writers:
        w.close()
    closing = [asyncio.ensure_future(w.wait_closed()) for w in writers]
    if closing:
        await asyncio.wait(closing, timeout=timeout)
        for c in closing:
            if not c.done():
                c.cancel()
            elif not c.cancelled():
                c.exception()  # consumed: a reset on close is not a failure here
    return ok, count - ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--parallel", type=int, default=500,
                    help="connections connecting or waiting for their answer at once")
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--round-timeout", type=float, default=120.0)
    ap.add_argument("--wait", type=float, default=120.0)
    a = ap.parse_args()
    if not 1 <= a.count <= 20000:
        sys.exit("burst.py: --count must be 1..=20000")
    if not 1 <= a.rounds <= 100:
        sys.exit("burst.py: --rounds must be 1..=100")
    if not 1 <= a.parallel <= a.count:
        a.parallel = max(1, min(a.parallel, a.count))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.count + 64
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            sys.exit(f"burst.py: {a.count} connections need {want} file descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    for k in range(1, a.rounds + 1):
        t0 = time.monotonic()
        ok, failed = asyncio.run(burst(a.port, a.count, a.parallel, a.timeout, a.round_timeout))
        print(f"round {k} {ok} {failed} {time.monotonic() - t0:.2f}", flush=True)
        if k == a.rounds:
            break
        r, _, _ = select.select([sys.stdin], [], [], a.wait)
        if not r or not sys.stdin.readline():
            break


if __name__ == "__main__":
    main()
