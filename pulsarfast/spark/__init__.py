"""pulsarfast.spark: Apache Pulsar as a PySpark (4.2+) Python data source named "pulsar".

    import pulsarfast.spark
    pulsarfast.spark.register(spark)
    df = (spark.readStream.format("pulsar")
          .option("service_url", "pulsar://localhost:6650").option("admin_url", "http://localhost:8080")
          .option("topic", "events").load())
    df.write.format("pulsar").option("service_url", "pulsar://localhost:6650").option("topic", "out").save()

The source reads each topic partition's range of a micro-batch on the
executors, with offsets (each partition's last entry read) in Spark's
checkpoint; the sink produces from the executors and fails a task unless
every message was acknowledged (at least once), or, with
``deliveryGuarantee=exactly-once``, leaves each task's messages in a
transaction that the driver commits (``eocommit``, ``eolog``). Installed with
``pip install nsqfast[spark]``; see docs/spark.md.

The modules that need pyspark (``source``, ``sink``, ``datasource``) load
when one of their names is first used; ``options``, ``positions``,
``admin`` and ``planner`` import without it (``reading``, and so ``eolog`` and
``eocommit``, need pyarrow).
"""
from __future__ import annotations

import importlib
from typing import Any

from msgengine.sparkoptions import require_pyspark

__all__ = [
    "PulsarDataSource",
    "register",
    "SOURCE_SCHEMA",
    "PulsarOptionError",
    "PulsarSinkError",
    "ExactlyOnceError",
    "DataLossError",
    "PulsarStreamReader",
    "PulsarBatchReader",
    "PulsarWriter",
    "PulsarStreamWriter",
]

_WHERE = {
    "PulsarDataSource": "datasource",
    "SOURCE_SCHEMA": "source",
    "PulsarStreamReader": "source",
    "PulsarBatchReader": "source",
    "PulsarOptionError": "options",
    "SourceConfig": "options",
    "PulsarSinkError": "sink",
    "ExactlyOnceError": "eocommit",
    "PulsarWriter": "sink",
    "PulsarStreamWriter": "sink",
    "SinkConfig": "sink",
    "DataLossError": "options",
}
_WITHOUT_PYSPARK = {"options"}


def _require_pyspark() -> None:
    require_pyspark("pulsarfast.spark")


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError("module 'pulsarfast.spark' has no attribute %r" % (name,))
    if module not in _WITHOUT_PYSPARK:
        _require_pyspark()
    return getattr(importlib.import_module("." + module, __name__), name)


def register(spark: Any) -> None:
    """Make ``format("pulsar")`` available in this SparkSession."""
    _require_pyspark()
    from pulsarfast.spark.datasource import PulsarDataSource

    spark.dataSource.register(PulsarDataSource)
