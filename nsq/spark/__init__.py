"""nsq.spark: a PySpark (4.2+) Python data source named "nsq".

    import nsq.spark
    nsq.spark.register(spark)
    df.write.format("nsq").option("topic", "events").option("nsqd_tcp_addresses", "127.0.0.1:4150").save()
    spark.readStream.format("nsq").option("topic", "events").option("channel", "spark") \\
        .option("nsqd_tcp_addresses", "127.0.0.1:4150").load()

Installed with ``pip install nsqfast[spark]``. See docs/spark.md.

The modules that need pyspark (``source``, ``sink``, ``datasource``) load
when one of their names is first used; ``nsq.spark.consumer`` and
``nsq.spark._options`` import without pyspark.
"""
from __future__ import annotations

import importlib
from typing import Any

from msgengine.sparkoptions import require_pyspark

__all__ = [
    "NsqDataSource",
    "register",
    "SOURCE_SCHEMA",
    "NsqOptionError",
    "NsqPublishError",
    "NsqCommitMessage",
    "NsqStreamReader",
    "NsqWriter",
    "NsqStreamWriter",
]

_WHERE = {
    "NsqDataSource": "datasource",
    "SOURCE_SCHEMA": "source",
    "NsqStreamReader": "source",
    "SourceConfig": "_options",
    "check_schema": "source",
    "NsqOptionError": "_options",
    "NsqPublishError": "sink",
    "NsqCommitMessage": "sink",
    "NsqWriter": "sink",
    "NsqStreamWriter": "sink",
    "SinkConfig": "sink",
}


def _require_pyspark() -> None:
    require_pyspark("nsq.spark")


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError("module 'nsq.spark' has no attribute %r" % (name,))
    if module != "_options":
        _require_pyspark()
    return getattr(importlib.import_module("." + module, __name__), name)


def register(spark: Any) -> None:
    """Make ``format("nsq")`` available in this SparkSession."""
    _require_pyspark()
    from nsq.spark.datasource import NsqDataSource

    spark.dataSource.register(NsqDataSource)
