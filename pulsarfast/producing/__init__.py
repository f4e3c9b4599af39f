"""Producers: ``Producer`` and one ``PartitionProducer`` per partition (``producer``: sends,
batches, receipts, resends), and the checks a message's arguments pass before it is queued
(``sendargs``). It imports ``network`` and the folders below it, never ``consuming``.
"""
