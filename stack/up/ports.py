"""Every port of the stack checked before anything starts: a taken one is named with its setting."""

from __future__ import annotations

import socket

from stack.up.settings import PORT_FIELDS, UpSettings
from tokenpulse.settings_cli import env_name

HOST = "127.0.0.1"  # every service of the local stack binds loopback


class PortError(RuntimeError):
    """A port of the stack is taken or given twice; the message names the setting."""


def _setting(name: str) -> str:
    return f"--{name.replace('_', '-')} / {env_name(UpSettings, name)}"


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as the servers do: a port held only by closing connections counts as free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def check_ports(settings: UpSettings) -> None:
    """Raise PortError for the first port given twice or already in use on 127.0.0.1."""
    seen: dict[int, str] = {}
    for name in PORT_FIELDS:
        port = int(getattr(settings, name))
        if port in seen:
            raise PortError(
                f"port {port} is set for both {seen[port]} ({_setting(seen[port])}) and "
                f"{name} ({_setting(name)}); give each component its own port"
            )
        seen[port] = name
        if not _free(port):
            raise PortError(
                f"port {port} on {HOST} is already in use; it is the {name} setting "
                f"({_setting(name)}): stop what holds it or choose another port"
            )
