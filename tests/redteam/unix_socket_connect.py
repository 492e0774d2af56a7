# expect: forbidden
# Opens Unix sockets and connects them to paths (a display server, syslog, nscd, an abstract name):
# the audit hook kills it at the import. Without the hook (tests/test_redteam_hardening.py) the
# seccomp filter makes socket(AF_UNIX) fail with EACCES; only socketpair() (within the task) works.
import json
import socket

TARGETS = [
    (socket.SOCK_STREAM, "/tmp/.X11-unix/X0"),
    (socket.SOCK_DGRAM, "/dev/log"),
    (socket.SOCK_STREAM, "/var/run/nscd/socket"),
    (socket.SOCK_STREAM, "\0spade-redteam"),
]


def attempt(kind, path):
    try:
        s = socket.socket(socket.AF_UNIX, kind)
    except OSError as e:
        return ["socket", e.errno]
    try:
        s.connect(path)
        return ["connected", 0]
    except OSError as e:
        return ["connect", e.errno]
    finally:
        s.close()


class UnixSocketEnv:
    def reset(self, seed=None):
        out = {path: attempt(kind, path) for kind, path in TARGETS}
        a, b = socket.socketpair()
        a.sendall(b"x")
        out["socketpair"] = b.recv(1).decode()
        try:
            import pwd

            pwd.getpwuid(os_uid())  # the C library tries nscd's socket first: an error, not a kill
            out["getpwuid"] = "found"
        except KeyError:
            out["getpwuid"] = "KeyError"
        return json.dumps(out), {}

    def step(self, action):
        return "x", 0.0, True, False, {}


def os_uid():
    import os

    return os.getuid()
