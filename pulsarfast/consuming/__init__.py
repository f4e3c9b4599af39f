"""What reads a topic: ``Consumer`` and one ``TopicConsumer`` per topic or partition
(``consumer``), ``Reader`` (``reader``), the unacknowledged-message timeout and redeliveries
(``redelivery``), dead-letter topics (``deadletter``), pattern subscriptions (``pattern``),
partitions added to a topic later, for consumers and producers (``partitionwatch``), the table
view's reader (``rawtable``), and ``pulsarfast.asyncio``'s receives (``aiotake``). It imports
``network`` and the folders below it, never ``producing``.
"""
