"""A ``calibkit`` command that starts warm, for the guide's shell blocks (issue 67 §5).

Each ``calibkit ...`` line of a page starts a new Python that spends about 5 s importing
PyTorch, calibkit's commands and ``torch._dynamo`` (which ``torch.optim`` imports on the
first optimizer) before it does its work: about half of the tour page's time. Here one
server process imports them once, runs nothing, and forks a child per command, as a fork
server does (``multiprocessing``'s ``forkserver``, PyTorch's DataLoader workers). The
``calibkit`` on the shell's PATH is a small stdlib script that hands the server its
standard streams (file descriptors over a Unix socket), arguments, folder and
environment; the child runs :func:`calibkit.cli.main` on them as the console script does
and exits with its status, which the script exits with. Where the environment differs from
the server's in a variable read while importing (``PYTHON*``, ``TORCH*``, threads, CUDA),
the script runs the installed console script instead. The console script itself is run as
a new process by the CLI's own tests (tests/test_cli.py).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

#: environment variables read while importing: a command whose value differs runs cold
AT_IMPORT = ("PYTHON", "TORCH", "PYTORCH", "OMP_", "MKL_", "CUDA", "LD_")
SHIM = """#!{python} -S
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect({sock!r})
body = json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}})
socket.send_fds(s, [b"%d\\n" % len(body)], [0, 1, 2])
s.sendall(body.encode())
reply = s.makefile().readline().strip()
if reply == "cold":
    os.execv({cold!r}, [{cold!r}, *sys.argv[1:]])
sys.exit(int(reply))
"""


def start(folder: Path) -> tuple[subprocess.Popen, Path]:
    """Start a server with its socket in ``folder``; return it and a folder holding the
    ``calibkit`` script to put first on the PATH."""
    sock = folder / "calibkit.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.warm_cli", str(sock)],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        text=True,
    )
    if server.stdout.readline().strip() != "ready":
        raise RuntimeError("the warm calibkit server did not start")
    bin_ = folder / "bin"
    bin_.mkdir()
    script = bin_ / "calibkit"
    cold = str(Path(sys.executable).parent / "calibkit")
    script.write_text(SHIM.format(python=sys.executable, sock=str(sock), cold=cold))
    script.chmod(0o755)
    return server, bin_


def _cold(env: dict[str, str], imported: dict[str, str]) -> bool:
    """Whether ``env`` differs from ``imported`` (the server's environment before it
    imported) in a variable read while importing."""
    keys = {k for k in env.keys() | imported.keys() if k.startswith(AT_IMPORT)}
    return any(env.get(k) != imported.get(k) for k in keys)


def _run(fds: list[int], request: dict) -> None:
    """In the forked child: take the caller's streams, folder and environment, run the
    command, exit with its status."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # the streams as Python makes them: stdout line-buffered on a terminal, stderr always
    out_buffering = 1 if os.isatty(1) else -1
    sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False, buffering=out_buffering)  # noqa: SIM115
    sys.stderr = sys.__stderr__ = open(2, "w", 1, errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.argv = ["calibkit", *request["argv"]]
    from calibkit.cli import main

    code = 0
    try:
        main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (stop.code is not None)
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
    except BaseException:  # what an uncaught exception does to the console script
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def serve(sock: str) -> None:
    """Import, then serve each connection in a forked child of its own, so that commands
    run at once as from a shell (``&``)."""
    imported = dict(os.environ)  # importing torch._dynamo sets TORCHINDUCTOR_CACHE_DIR
    import torch._dynamo  # noqa: F401  (what the first optimizer imports)

    import calibkit.cli  # noqa: F401

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(sock)
    listener.listen()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the children reap themselves
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _serve_one(conn, imported)
        conn.close()


def _serve_one(conn: socket.socket, imported: dict[str, str]) -> None:
    """Read one request, run it in a child (cold: tell the script), reply its status."""
    head, fds, _, _ = socket.recv_fds(conn, 64, 3)
    size = int(head)
    body = b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    request = json.loads(body)
    if _cold(request["env"], imported):
        conn.sendall(b"cold\n")
        os._exit(0)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run(fds, request)
    for fd in fds:
        os.close(fd)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    conn.sendall(b"%d\n" % (128 - code if code < 0 else code))  # a signal, as a shell says
    os._exit(0)


if __name__ == "__main__":
    serve(sys.argv[1])
