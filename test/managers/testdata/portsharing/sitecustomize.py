"""Port sharing for the Python managers of test/managers (ports_test.go).

Python imports sitecustomize at start-up; the test puts this directory first on the PYTHONPATH
of a manager it starts. The test holds the loopback ports named in PODPATCH_SHARED_PORTS bound
with SO_REUSEPORT (test/cluster/ports.go) for as long as the manager runs, so that nothing else
can take them; Linux lets the manager listen on one only if its socket sets SO_REUSEPORT too,
which this does for a TCP socket binding one of those ports, and reports it on standard error
(the test waits for that line). Every other bind is left as it was.
"""

import os
import socket
import sys

_PORTS = frozenset(int(p) for p in os.environ.get("PODPATCH_SHARED_PORTS", "").split(",") if p)

if _PORTS:
    _bind = socket.socket.bind

    def _bind_shared(self, address):
        if (
            self.family in (socket.AF_INET, socket.AF_INET6)
            and self.type == socket.SOCK_STREAM
            and isinstance(address, tuple)
            and len(address) >= 2
            and address[1] in _PORTS
        ):
            self.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            print(
                "podpatch-portsharing: bind %s:%d with SO_REUSEPORT" % (address[0], address[1]),
                file=sys.stderr,
                flush=True,
            )
        return _bind(self, address)

    socket.socket.bind = _bind_shared
