#!/usr/bin/env python3
"""Idle keep-alive connections for benches/guard.sh (memory per connection).

Opens COUNT connections to 127.0.0.1:PORT, sends one HTTP/1.1 GET on each
(keep-alive) and reads its answer, so every connection has been through the
proxy's request path and is now idle, then prints "ready N" (N = the
connections whose request got a 2xx) and holds them until stdin closes or
--hold seconds pass, whichever is first. Bounded: at most COUNT sockets,
each operation under a 5 s timeout. Loopback only.
"""
import argparse
import resource
import select
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--hold", type=float, default=60.0)
    a = ap.parse_args()
    if not 1 <= a.count <= 20000:
        sys.exit("idle.py: --count must be 1..=20000")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.count + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    socks, ok = [], 0
    req = b"GET /idle HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    for _ in range(a.count):
        s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
        s.sendall(req)
        buf = b""
        # Read the head and the (small, length-delimited) body.
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        while len(body) < length:
            chunk = s.recv(4096)
            if not chunk:
                break
            body += chunk
        if head.startswith(b"HTTP/1.1 2"):
            ok += 1
        socks.append(s)
    print(f"ready {ok}", flush=True)
    deadline = time.monotonic() + a.hold
    while time.monotonic() < deadline:
        r, _, _ = select.select([sys.stdin], [], [], 0.5)
        if r and not sys.stdin.read(1):
            break
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
