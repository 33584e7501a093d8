"""Failures reaching or using a remote host, each one line for the user."""

from __future__ import annotations

from hbtui.engine.errors import EngineError


class RemoteError(EngineError):
    """Something about a remote host went wrong.

    An EngineError, because to the core it is an engine call that failed:
    rollbacks that tolerate a failing engine tolerate an unreachable host.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, code="REMOTE", hint=hint)


class HostUnreachable(RemoteError):
    """No SSH connection could be made or kept (refused, timed out, dropped)."""


class HostAuthFailed(RemoteError):
    """The server refused our key."""


class HostKeyError(RemoteError):
    """The server's host key is not one the user trusts."""

    exit_code = 3

    def __init__(self, message: str, *, fingerprint: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.fingerprint = fingerprint


class HostKeyUnknown(HostKeyError):
    """known_hosts has no key for this host."""


class HostKeyChanged(HostKeyError):
    """known_hosts has a different key for this host: maybe an attack."""
