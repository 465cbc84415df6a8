#!/usr/bin/env python3
"""Prints a TCP port on 127.0.0.1 that nothing is bound to, for a rendezvous another process binds a moment later.

The same rule as src/common/free_port.h (braidrun's): a random port below the kernel's ephemeral range, because a port
bound to 0 and released comes from the range every outgoing connect() draws from and can be taken before the rank
binds it.

  free_port.py           a free port
  free_port.py --pair    a port whose successor is free too
  free_port.py --hold    with --pair: keep listening on the port (printing it once bound) and accept forever, a
                         stand-in for torchrun's store on MASTER_PORT
"""
import random
import socket
import sys


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(v) for v in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def bind(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return s
    except OSError:
        s.close()
        return None


def main():
    pair = "--pair" in sys.argv[1:]
    hold = "--hold" in sys.argv[1:]
    lo, hi = ephemeral_range()
    first, last = 10000, lo - 2
    if last - first < 1000:
        first, last = hi + 1, 65534
    for _ in range(200):
        port = random.randint(first, last)
        if 29400 <= port <= 29501:
            continue
        held = bind(port)
        if held is None:
            continue
        nxt = bind(port + 1) if pair else None
        if pair and nxt is None:
            held.close()
            continue
        if nxt is not None:
            nxt.close()
        if not hold:
            held.close()
            print(port, flush=True)
            return 0
        held.listen(16)
        print(port, flush=True)
        conns = []
        while True:
            conns.append(held.accept()[0])
    print("free_port.py: no free port found", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
