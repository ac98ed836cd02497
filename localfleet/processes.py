"""How the local fleet runs its processes: one launcher for every child process (the control
plane's components, OPA, Prometheus, the stack's services), and one supervisor for a server.

A `Supervisor` runs one process in one of two modes:

- attached (tests, the replay, benchmarks): a child of this process, stopped by `stop()`, and
  killed by the kernel when the thread that started it dies (PR_SET_PDEATHSIG), so a test run
  that is killed leaves no server behind;
- detached (`fleetplane up`): it outlives the command; its pid and port are kept in files of
  its work directory, where `fleetplane status` and `fleetplane down` find it.

A server never "starts" on a port something else holds: a fixed port that is taken fails at
once, naming the port and its holder (`port_holder`), and a free port is taken otherwise.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal a process gets when the thread that forked it dies."""


class ServerError(RuntimeError):
    """A server could not be started, or answered with an error; the message says which."""


def spawn(
    cmd: list[str],
    log_path: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    die_with_parent: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `cmd` in a session of its own (so it can outlive this process and be stopped as a
    group), stdin closed, stdout and stderr appended to `log_path`; `env` adds to ours. With
    `die_with_parent` the kernel sends it SIGTERM when the thread starting it dies."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
            env=None if env is None else {**os.environ, **env},
            preexec_fn=_die_with_parent if die_with_parent else None,
        )


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports of `host`. Each socket stays bound until all are chosen:
    a port released at once may be handed out again by the next bind to port 0, and two
    components of one cluster were once given the same port."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def port_holder(port: int) -> str | None:
    """Who listens on TCP `port` (any address): `pid N (command line)` when /proc tells
    (/proc/net/tcp gives the socket's inode, /proc/*/fd the process holding it), the
    listening address when only that is readable, None when nothing listens there."""
    inodes: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes[f"socket:[{inode}]"] = _address(local)
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        argv = (proc / "cmdline").read_bytes().split(b"\0")
                        command = " ".join(a.decode(errors="replace") for a in argv if a)
                        return f"pid {proc.name} ({command[:200]})"
    return "a process this user cannot see, listening on " + ", ".join(sorted(inodes.values()))


def _address(hex_address: str) -> str:
    """`0100007F:1F90` (/proc/net/tcp, little-endian IPv4) as `127.0.0.1:8080`."""
    host, port = hex_address.rsplit(":", 1)
    shown = socket.inet_ntoa(bytes.fromhex(host)[::-1]) if len(host) == 8 else f"[{host}]"
    return f"{shown}:{int(port, 16)}"


def require_port(name: str, host: str, port: int) -> None:
    """ServerError, naming the port and its holder, when `host:port` cannot be listened on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as the servers do (Go sets it): a port held only by closing connections is free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise ServerError(f"{name}: cannot listen on {host}:{port}: {error}") from error
            holder = port_holder(port) or "another process"
            raise ServerError(
                f"{name}: port {port} ({host}:{port}) is already held by {holder}; stop it, or "
                "give this stack other ports"
            ) from None


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    """Whether `url` answers 200 within 2 s."""
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def proc_stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (the state first); OSError when
    there is no such process."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not; one that is ours is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0): reap it if it is ours; one of a cluster started by an
    # earlier command (reparented to init) has exited all the same.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        state = proc_stat(pid)[0]
    except FileNotFoundError:
        return False  # gone since kill(0)
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def gone_by(pid: int, until: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    """Wait until the process has exited or the monotonic clock reaches `until`; whether it
    has. `proc`: the process, when it is this one's child."""
    while time.monotonic() < until and alive(pid):
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
        else:
            time.sleep(0.1)
    return not alive(pid)


def stop_group(pid: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM to the process group of `pid`, SIGKILL after 10 s; returns once it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    if not gone_by(pid, time.monotonic() + 10, proc):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        gone_by(pid, time.monotonic() + 10, proc)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


@dataclass
class Supervisor:
    """One server process, attached or detached (see the module's docstring); its log is
    `<work_dir>/<name>.log`, and, detached, its pid and port are `pid` and `port` there."""

    name: str
    work_dir: Path
    detached: bool = False
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def log_path(self) -> Path:
        return self.work_dir / f"{self.name}.log"

    @property
    def pid_file(self) -> Path:
        return self.work_dir / "pid"

    @property
    def port_file(self) -> Path:
        return self.work_dir / "port"

    def pid(self) -> int | None:
        """The running process: ours, or the one the pid file names."""
        if self.proc is not None:
            # `poll` alone would call a process running while its main thread is a zombie and
            # a last thread still exits (seen under load); `alive` calls it gone, as `stop` does.
            running = self.proc.poll() is None and alive(self.proc.pid)
            return self.proc.pid if running else None
        if not self.pid_file.exists():
            return None
        pid = int(self.pid_file.read_text().strip())
        return pid if alive(pid) else None

    def port(self) -> int | None:
        """The port the running process serves on, as recorded when it started."""
        if self.pid() is None or not self.port_file.exists():
            return None
        return int(self.port_file.read_text().strip())

    def serve(
        self,
        command: Callable[[int], list[str]],
        ready: Callable[[int], bool],
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        timeout: float = 30.0,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> int:
        """Start a server on `host:port` and wait until `ready(port)`; returns the port.

        port 0: a free one. A free port is only free until someone binds it: when the server
        could not bind the port it was given (another process took it in between), it is
        started again on another one. A fixed port already held fails at once, naming its
        holder. Readiness is only believed while our own process is alive, so an answer from
        whatever else listens on that port is never taken for ours."""
        attempts = 1 if port else 3
        for attempt in range(attempts):
            if port:
                require_port(self.name, host, port)
            chosen = port or free_port(host)
            try:
                self.run(
                    command(chosen),
                    functools.partial(ready, chosen),
                    timeout=timeout,
                    cwd=cwd,
                    env=env,
                )
            except ServerError:
                bind_failed = "address already in use" in self.log_tail().lower()
                self.stop()
                if not bind_failed or attempt == attempts - 1:
                    raise
                continue
            self.work_dir.mkdir(parents=True, exist_ok=True)
            self.port_file.write_text(f"{chosen}\n")
            return chosen
        raise AssertionError("unreachable")

    def run(
        self,
        cmd: list[str],
        ready: Callable[[], bool],
        *,
        timeout: float = 30.0,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Start `cmd` (stopping an earlier one of this work directory) and wait for `ready`."""
        self.stop()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        # Only a process started from the main thread can die with its parent: the signal
        # follows the thread that forked it, and a worker thread may end before the server.
        attached = not self.detached and threading.current_thread() is threading.main_thread()
        self.proc = spawn(cmd, self.log_path, cwd=cwd, env=env, die_with_parent=attached)
        if self.detached:
            self.pid_file.write_text(f"{self.proc.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            if ready():
                if self.proc.poll() is None:
                    return
                break
            time.sleep(0.1)
        if self.proc.poll() is not None:
            raise ServerError(f"{self.name} exited right after answering:\n{self.log_tail()}")
        raise ServerError(f"{self.name} not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Stop the process (ours, or the one the pid file names) and its group."""
        pid = self.pid()
        if pid is not None:
            stop_group(pid, self.proc)
        elif self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self.proc = None
        if self.detached:
            self.pid_file.unlink(missing_ok=True)
            self.port_file.unlink(missing_ok=True)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return f"--- {self.name}: no log"
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {self.name} ({self.log_path}):\n" + "\n".join(text)
