"""msgengine: the protocol-neutral machinery under nsqfast's clients.

Nothing here knows a wire protocol. A client (``nsq``, and later
``pulsarfast``) brings a sans-I/O protocol object and its codec; the engine
gives it the rest:

- ``runtime``: spawn, sleep, Event, Lock, Queue and timers over gevent or
  threads; the one door into a gevent hub from other OS threads; fork hooks.
- ``scheduler``: one timer thread per process for the threads backend.
- ``transport``: byte streams (TCP, TLS, snappy, deflate).
- ``correlator``: pending answers, paired with their requests in the order they
  were sent (NSQ) or by request id (Pulsar).
- ``driver``: moves bytes between a protocol object and a stream, on a reader
  task or, for request/response clients, on the callers that wait for answers
  (leader/follower).
- ``supervisor``: keeps a connection to each target alive (reconnect with
  jittered backoff, discovery polling, close).
- ``flow``: spreads a budget of in-flight messages over connections, with
  rotation and a backoff state machine.
- ``backoff``: the backoff interval timer and reconnect delays.
- ``errors``: the engine's exception root.
- ``metrics``: the Prometheus machinery both clients' collectors share
  (optional: it needs prometheus_client, and nothing imports it unasked).

Importing ``msgengine`` imports none of its modules and never gevent.
"""
