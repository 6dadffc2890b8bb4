"""The client's channels to a sandboxed kernel, which drop every message the kernel sent
malformed. The kernel writes each message whole (it holds the connection's key, so it signs what
it likes): a header, parent header, metadata or content that is not a mapping, a message type that
is not a string, or frames that do not deserialize at all. nbclient indexes those parts without a
check, so one such message would end the grading of the whole notebook; dropped here, the cell it
belonged to simply lacks it (SafeExecute then drops an output nbformat would refuse)."""

from __future__ import annotations

import time
from queue import Empty

from jupyter_client.channels import AsyncZMQSocketChannel

PARTS = ("header", "parent_header", "metadata", "content")


def well_formed_message(msg) -> bool:
    """Does `msg` have every part nbclient reads, each of the type it expects?"""
    return isinstance(msg, dict) and all(isinstance(msg.get(k), dict) for k in PARTS) \
        and isinstance(msg.get("msg_type"), str) and isinstance(msg["header"].get("msg_type"), str)


class WellFormedChannel(AsyncZMQSocketChannel):
    """An asyncio channel whose get_msg returns well-formed messages only, within the same timeout."""

    async def get_msg(self, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:   # the frames are taken off the socket before they are deserialized
                msg = await super().get_msg(left)
            except Empty:
                raise
            except Exception:  # noqa: BLE001 - frames a kernel made up: dropped like any malformed one
                msg = None
            if well_formed_message(msg):
                return msg
