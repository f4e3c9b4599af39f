"""Pulsar transactions: the coordinator's client (``coordinator.py``) and the ``Transaction``
that producers and consumers send and acknowledge in (``transaction.py``). Between the network
(connections, lookups) and the producing and consuming rooms, which use it."""
