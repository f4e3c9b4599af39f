"""Consume throughput per transport against a real nsqd (tests/support/servers.py).

100k messages of 100 bytes are preloaded with HTTP /mpub, then one Reader
(gevent backend, max_in_flight=2500) consumes them. Prints msgs/s measured
from the first message to the last (wall), and msgs per CPU-second of this
process (what the client's own work costs; stable on a loaded machine).

    cd /work/main && python bench_transports.py [plain snappy deflate tls tls+snappy tls+deflate]
    N=300000 python bench_transports.py       # more messages
    SSLSOCK=1 python bench_transports.py tls  # TLS through gevent.ssl.SSLSocket instead (comparison)
"""
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("NSQFAST_ROOT", "/work/main")
sys.path[:0] = [ROOT]

from tests.support.certs import make_pki  # noqa: E402
from tests.support.servers import Nsqd, free_port  # noqa: E402

import nsq  # noqa: E402
from msgengine.runtime import get_backend  # noqa: E402

N = int(os.environ.get("N", 100000))
MODES = sys.argv[1:] or ["plain", "snappy", "deflate", "tls", "tls+snappy", "tls+deflate"]
gevent_backend = get_backend("gevent")

if os.environ.get("SSLSOCK"):
    import msgengine.transport as transport

    class SSLSocketStream(transport.PlainStream):
        def __init__(self, sock, context, host, read_size):
            self._args, self._read_size = (sock, context, host), read_size

        def handshake(self):
            transport.PlainStream.__init__(self, gevent_backend.wrap_tls(*self._args), self._read_size)

        def version(self):
            return self.sock.version()

        def cipher(self):
            return self.sock.cipher()

    transport.TLSStream = SSLSocketStream


def run(server, pki, mode):
    kwargs = {}
    if "tls" in mode:
        kwargs.update(tls_v1=True, tls_options={"ca_certs": pki.ca_cert})
    if "snappy" in mode:
        kwargs["snappy"] = True
    if "deflate" in mode:
        kwargs["deflate"] = True
    topic = "bench_" + uuid.uuid4().hex[:8]
    server.http_mpub(topic, [os.urandom(50).hex().encode()] * N)  # 100-byte bodies
    count = [0]

    def handler(message):
        count[0] += 1
        return True

    reader = nsq.Reader(topic, "c", handler, nsqd_tcp_addresses=[server.tcp_address], max_in_flight=2500,
                        backend="gevent", **kwargs)
    reader.start()
    while count[0] == 0:
        gevent_backend.sleep(0.001)
    first, wall0, cpu0 = count[0], time.perf_counter(), time.process_time()
    while count[0] < N:
        gevent_backend.sleep(0.005)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    reader.close()
    done = N - first
    print("%-12s %8.0f msgs/s wall (%.2fs)   %8.0f msgs/cpu-s (%.2fs cpu)" % (mode, done / wall, wall, done / cpu, cpu),
          flush=True)


def main():
    pki = make_pki()
    server = Nsqd("--tls-cert=%s" % pki.server_cert, "--tls-key=%s" % pki.server_key,
                  "--https-address=127.0.0.1:%d" % free_port(), "--mem-queue-size=1000000")
    try:
        for mode in MODES:
            run(server, pki, mode)
    finally:
        server.close()


if __name__ == "__main__":
    main()
