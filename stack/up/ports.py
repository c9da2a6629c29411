"""Every port of the stack checked before anything starts: a taken one is named with its setting."""

from __future__ import annotations

import socket

from stack.config import REPLICA_PORT_STEP, replica_ports
from stack.up.settings import HA_PORT_FIELDS, PORT_FIELDS, UpSettings
from tokenpulse.settings_cli import env_name

HOST = "127.0.0.1"  # every service of the local stack binds loopback
MAX_PORT = 65535


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


def _ports(settings: UpSettings) -> list[tuple[int, str, str]]:
    """(port, what, which settings choose it) of every listener, replicas' ports included."""
    names = PORT_FIELDS + (HA_PORT_FIELDS if settings.ha else ())
    out = [(int(getattr(settings, n)), n, _setting(n)) for n in names]
    if settings.fault_proxy_port:
        out.append((settings.fault_proxy_port, "fault_proxy_port", _setting("fault_proxy_port")))
    if settings.es_fault_proxy_port:
        name = "es_fault_proxy_port"
        out.append((settings.es_fault_proxy_port, name, _setting(name)))
    extra = replica_ports(settings.rest_port, settings.grpc_port, settings.model_server_replicas)
    replicas = _setting("model_server_replicas")
    for i, ports in enumerate(extra, start=1):
        for port, name in zip(ports, ("rest_port", "grpc_port"), strict=True):
            how = f"{_setting(name)} + {REPLICA_PORT_STEP * i}, with {replicas}"
            out.append((port, f"{name} of model-server replica {i}", how))
    return out


def check_ports(settings: UpSettings) -> None:
    """Raise PortError for the first port past 65535 or given twice, else the first already in
    use on 127.0.0.1. Those two are wrong on any machine, so they are named first, whatever else
    happens to hold a port now."""
    listeners = _ports(settings)
    seen: dict[int, tuple[str, str]] = {}
    for port, name, how in listeners:
        if port > MAX_PORT:  # a replica's port (rest_port + 2 x i) can pass the last one
            raise PortError(
                f"port {port} is past {MAX_PORT}; it is the {name} setting ({how}): "
                "choose a lower port"
            )
        if port in seen:
            other, other_how = seen[port]
            raise PortError(
                f"port {port} is set for both {other} ({other_how}) and "
                f"{name} ({how}); give each component its own port"
            )
        seen[port] = (name, how)
    for port, name, how in listeners:
        if not _free(port):
            raise PortError(
                f"port {port} on {HOST} is already in use; it is the {name} setting "
                f"({how}): stop what holds it or choose another port"
            )
