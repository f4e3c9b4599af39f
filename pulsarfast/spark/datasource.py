"""The ``pulsar`` data source class that a SparkSession registers: it builds
the batch and streaming readers (``source``) and writers (``sink``) from
Spark's options."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .options import SourceConfig
from .sink import PulsarStreamWriter, PulsarWriter, SinkConfig
from .source import SOURCE_SCHEMA, PulsarBatchReader, PulsarStreamReader, check_schema


class PulsarDataSource(DataSource):
    """The ``pulsar`` format: a source (batch and streaming) and a sink (batch and streaming)."""

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> PulsarBatchReader:
        return PulsarBatchReader(SourceConfig.from_options(self.options, streaming=False), check_schema(schema))

    def streamReader(self, schema: StructType) -> PulsarStreamReader:
        return PulsarStreamReader(SourceConfig.from_options(self.options), check_schema(schema))

    def writer(self, schema: StructType, overwrite: bool) -> PulsarWriter:
        return PulsarWriter(SinkConfig.from_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> PulsarStreamWriter:
        return PulsarStreamWriter(SinkConfig.from_options(self.options, schema))
