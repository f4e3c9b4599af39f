"""The official C extension's own objects, which ``pulsarfast._pulsar`` exposes: the
configuration objects and the ``_pulsar.Client`` made from one (``configobjects``), the policy
objects (``policies``; three of them are top-level ``pulsar`` names too), ``MessageBuilder``
(``messagebuilder``) and ``TopicRegex`` (``topicregex``). Built on ``pulsarfast.client`` and
everything below it.
"""
