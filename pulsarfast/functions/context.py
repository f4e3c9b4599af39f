"""``Context``: what the Pulsar Functions runtime tells a function while it
processes a message (the official ``pulsar.functions.context.Context``):
the message's id, key, properties and topic, the function's identity, its
configuration and secrets, metrics, state, and ``publish`` to other topics.

Every method is abstract and returns None here, as in the official base
class: a runtime (or a test's fake context) subclasses it.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Any, Callable

__all__ = ["Context"]


class Context:
    """The interface a function's ``process(input, context)`` receives."""

    # -- the message being processed
    @abstractmethod
    def get_message_id(self) -> Any:
        """The id of the message being processed."""

    @abstractmethod
    def get_message_key(self) -> Any:
        """Its key."""

    @abstractmethod
    def get_message_eventtime(self) -> Any:
        """Its event time."""

    @abstractmethod
    def get_message_properties(self) -> Any:
        """Its properties (a dict)."""

    @abstractmethod
    def get_current_message_topic_name(self) -> Any:
        """The topic it came from."""

    @abstractmethod
    def get_partition_key(self) -> Any:
        """Its partition key, if any."""

    @abstractmethod
    def get_ordering_key(self) -> Any:
        """Its ordering key, if any."""

    # -- the function
    @abstractmethod
    def get_function_tenant(self) -> Any:
        """The function's tenant."""

    @abstractmethod
    def get_function_namespace(self) -> Any:
        """The function's namespace."""

    @abstractmethod
    def get_function_name(self) -> Any:
        """The function's name."""

    @abstractmethod
    def get_function_id(self) -> Any:
        """The function's id."""

    @abstractmethod
    def get_instance_id(self) -> Any:
        """The id of the instance running it."""

    @abstractmethod
    def get_function_version(self) -> Any:
        """The function's version."""

    @abstractmethod
    def get_logger(self) -> Any:
        """A logger for the function."""

    @abstractmethod
    def get_user_config_value(self, key: str) -> Any:
        """One user-defined setting (None when absent)."""

    @abstractmethod
    def get_user_config_map(self) -> Any:
        """All user-defined settings (a dict, empty when none)."""

    @abstractmethod
    def get_secret(self, secret_name: str) -> Any:
        """A secret's value (None when absent)."""

    @abstractmethod
    def get_input_topics(self) -> Any:
        """The function's input topics."""

    @abstractmethod
    def get_output_topic(self) -> Any:
        """The function's output topic."""

    @abstractmethod
    def get_output_serde_class_name(self) -> Any:
        """The class name of the output's SerDe."""

    # -- actions
    @abstractmethod
    def record_metric(self, metric_name: str, metric_value: Any) -> Any:
        """Record a value (a number) of a metric."""

    @abstractmethod
    def publish(self, topic_name: str, message: Any, serde_class_name: str = "serde.IdentitySerDe",
                properties: Any = None, compression_type: Any = None, callback: Callable[..., Any] | None = None,
                message_conf: Any = None) -> Any:
        """Publish message, serialized with serde_class_name, to topic_name (message_conf: properties,
        partition_key, ordering_key, sequence_id, replication_clusters, disable_replication,
        event_timestamp)."""

    @abstractmethod
    def ack(self, msgid: Any, topic: str) -> Any:
        """Acknowledge a message."""

    # -- state
    @abstractmethod
    def incr_counter(self, key: str, amount: int) -> Any:
        """Add amount to a counter of the managed state."""

    @abstractmethod
    def get_counter(self, key: str) -> Any:
        """A counter of the managed state."""

    @abstractmethod
    def del_counter(self, key: str) -> Any:
        """Delete a counter of the managed state."""

    @abstractmethod
    def put_state(self, key: str, value: Any) -> Any:
        """Set a value of the managed state."""

    @abstractmethod
    def get_state(self, key: str) -> Any:
        """A value of the managed state."""
