"""msgengine: the protocol-neutral machinery under nsqfast's clients.

Nothing here knows a wire protocol. A client (``nsq``, ``pulsarfast``) brings a sans-I/O protocol object and its codec; the engine
gives it the rest:

- ``primitives``: what every backend offers and builds on (``Backend``,
  ``Timer``, OS-thread locks); ``fork``: what a forked child is told.
- ``scheduler``: one timer thread per process for the threads backend.
- ``threads`` and ``greenlets``: the two backends (spawn, sleep, Event, Lock,
  Queue and timers over OS threads or gevent; the one door into a gevent hub
  from other OS threads).
- ``runtime``: chooses a backend (``get_backend``, ``BackendSetting``) and
  marks what may be called from any OS thread; the layers above import the
  concurrency layer from here.
- ``transport``: byte streams (TCP, TLS, snappy, deflate).
- ``correlator``: pending answers, paired with their requests in the order they
  were sent (NSQ) or by request id (Pulsar).
- ``driver``: ``Driver[P]`` moves bytes between a protocol object ``P`` and a stream, on a reader
  task or, for request/response clients, on the callers that wait for answers
  (leader/follower).
- ``supervisor``: keeps a connection to each target alive (reconnect with
  jittered backoff, discovery polling, close).
- ``flow``: spreads a budget of in-flight messages over connections, with
  rotation and a backoff state machine (its defaults are written there).
- ``backoff``: the backoff interval timer and reconnect delays.
- ``errors``: the engine's exception root.
- ``twins``: the choice between a compiled codec and its pure-Python twin
  (``_buffer.pxd``: the reassembly buffer both Cython codecs compile in).
- ``cli``: what both command-line tools share.
- ``lazy``: the names a package shows but loads when first used (both clients' ``__init__``).
- ``metrics``: the Prometheus machinery both clients' collectors share
  (optional: it needs prometheus_client, and nothing imports it unasked).

Importing ``msgengine`` imports none of its modules and never gevent.
"""
