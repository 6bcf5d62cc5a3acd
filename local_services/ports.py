"""Free TCP ports on loopback, for the throwaway servers of this package."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago (the caller binds it soon
    after; a server that loses the race fails to start and is retried by its caller)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])
