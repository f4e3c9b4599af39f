"""The ``nsq`` data source class that a SparkSession registers: it builds
the streaming reader (``source``) and the batch and streaming writers
(``sink``) from Spark's options."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from nsq.spark._options import SourceConfig
from nsq.spark.sink import NsqStreamWriter, NsqWriter, SinkConfig
from nsq.spark.source import SOURCE_SCHEMA, NsqStreamReader, check_schema


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
