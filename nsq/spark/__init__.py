# nsq.spark: a PySpark (4.2+) Python data source named "nsq".
#
#   import nsq.spark
#   nsq.spark.register(spark)
#   df.write.format("nsq").option("topic", "events").option("nsqd_tcp_addresses", "127.0.0.1:4150").save()
#   spark.readStream.format("nsq").option("topic", "events").option("channel", "spark") \
#       .option("nsqd_tcp_addresses", "127.0.0.1:4150").load()
#
# Installed with `pip install nsqfast[spark]`. See docs/spark.md.
from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    from pyspark.sql.datasource import DataSource
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "nsq.spark needs pyspark>=4.2 and pyarrow: pip install 'nsqfast[spark]' (%s)" % (exc,)
    ) from exc

from typing import Any

from pyspark.sql.types import StructType

from ._options import NsqOptionError
from .sink import NsqCommitMessage, NsqPublishError, NsqStreamWriter, NsqWriter, SinkConfig
from .source import SOURCE_SCHEMA, NsqStreamReader, SourceConfig, check_schema

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


class NsqDataSource(DataSource):
    """The ``nsq`` format: a streaming source and a batch/streaming sink."""

    @classmethod
    def name(cls) -> str:
        return "nsq"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> NsqStreamReader:
        return NsqStreamReader(SourceConfig.from_options(self.options), check_schema(schema))

    def writer(self, schema: StructType, overwrite: bool) -> NsqWriter:
        return NsqWriter(SinkConfig.from_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> NsqStreamWriter:
        return NsqStreamWriter(SinkConfig.from_options(self.options, schema))


def register(spark: Any) -> None:
    """Make ``format("nsq")`` available in this SparkSession."""
    spark.dataSource.register(NsqDataSource)
