"""The ``pulsar`` data source class that a SparkSession registers: it builds
the batch and streaming readers (``source``) and writers (``sink``) from
Spark's options."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from pulsarfast.spark.admin import Admin
from pulsarfast.spark.options import PulsarOptionError, SourceConfig
from pulsarfast.spark.sink import PulsarStreamWriter, PulsarWriter, SinkConfig, prepare_output
from pulsarfast.spark.source import PulsarBatchReader, PulsarStreamReader, check_schema, source_schema
from pulsarfast.spark.values import ValueSchema


def source_config(options: Mapping[str, Any], streaming: bool) -> SourceConfig:
    """The source's settings, with the topic's schema fetched when valueSchema=topic."""
    config = SourceConfig.from_options(options, streaming=streaming)
    if config.decode_values:
        topic = config.topics[0]
        answer = Admin(config.client.admin_settings(), config.client.authentication()).schema(topic)
        if answer is None:
            raise PulsarOptionError("option 'valueSchema=topic': %s has no schema registered" % topic)
        config = dataclasses.replace(config, value_schema=ValueSchema.from_registry(answer, topic))
    return config


class PulsarDataSource(DataSource):
    """The ``pulsar`` format: a source (batch and streaming) and a sink (batch and streaming)."""

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def schema(self) -> StructType:
        return source_schema(source_config(self.options, streaming=False))

    def reader(self, schema: StructType) -> PulsarBatchReader:
        config = source_config(self.options, streaming=False)
        return PulsarBatchReader(config, check_schema(schema, config))

    def streamReader(self, schema: StructType) -> PulsarStreamReader:
        config = source_config(self.options, streaming=True)
        return PulsarStreamReader(config, check_schema(schema, config))

    def writer(self, schema: StructType, overwrite: bool) -> PulsarWriter:
        config = SinkConfig.from_options(self.options, schema)
        prepare_output(config)
        return PulsarWriter(config)

    def streamWriter(self, schema: StructType, overwrite: bool) -> PulsarStreamWriter:
        config = SinkConfig.from_options(self.options, schema, streaming=True)
        prepare_output(config)  # (Spark makes a stream writer again for each commit: then nothing left to do)
        return PulsarStreamWriter(config)
