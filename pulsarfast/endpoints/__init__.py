"""Where a client connects and how it proves itself: a service URL made ready to use with its
TLS context and authentication (``endpoint``), ``ServiceInfo`` and ``ServiceInfoProvider``
(``serviceinfo``), ``AutoClusterFailover`` and its probing (``failover``), the TLS context
(``tls``), and authentication (``auth``; the OAuth 2.0 flow in ``oauth2``). It imports ``base``
only.
"""
