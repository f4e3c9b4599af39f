"""The official arguments, checked once: the settings each ``Client`` method builds from its
keyword arguments (``settings``), and the option objects those take and check:
``ConsumerKeySharedPolicy`` (``keyshared``), ``ConsumerBatchReceivePolicy`` (``batchreceive``),
``ConsumerDeadLetterPolicy`` (``deadletterpolicy``) and where a subscription starts
(``startposition``). It imports ``base``, ``wire``, ``endpoints`` and ``pulsarfast.schema``.
"""
