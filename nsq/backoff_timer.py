"""pynsq's ``nsq.backoff_timer`` module: ``BackoffTimer`` (it lives in ``msgengine.backoff``)."""
from msgengine.backoff import BackoffTimer

__all__ = ["BackoffTimer"]
