"""The words every other folder uses: the result codes and one exception class per code
(``results``; ``pulsarfast.exceptions`` is the official module that shows them), the official
enums (``enums``), topic names and service URLs (``topics``), where the logs go (``logger``),
and what a client hands its user and keeps track of (``parts``). It imports nothing else of
pulsarfast.
"""
