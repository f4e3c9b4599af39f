"""What the ``nsqfast`` and ``pulsarfast`` command lines share, apart from
either protocol: the tool's parser, ``main`` and console script (``tool``),
starting and ending a command (``app``), reading input lines in batches
(``lines``), writing received messages (``output``) and the publish progress
and rate (``progress``). Neither client's CLI imports the other's; both import
this."""
