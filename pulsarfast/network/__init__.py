"""Talking to brokers: one connection per broker (``connection``, shared through ``pool``), the
life of a producer or consumer on one connection (``link``), lookups over the binary protocol
and the broker's HTTP API (``lookup``, ``httplookup``), the service a client uses now
(``discovery``), a topic's schema by version (``schemafetch``), what producers and consumers
use of their client (``owner``), and how a client dropped without ``close()`` ends
(``lifetime``). It imports ``options`` and the folders below it.
"""
