"""Fixtures of the Spark tests: one local[2] SparkSession for the whole run's
Spark modules (they all run on one xdist worker: group ``spark``), with the
``nsq`` and ``pulsar`` formats registered. Each module calls
``tests.support.spark_processes.require_spark()`` first."""
from __future__ import annotations

import os
import sys

import pytest

from tests.support.processes import refuse_in_unit_run
from tests.support.servers import REPO_ROOT


@pytest.fixture
def spark(spark_session):
    """The run's SparkSession, made the JVM's active session for this test's thread: Spark looks a
    streaming sink's format up in the active session's registered data sources, and the JVM keeps
    the active session per thread (py4j gives a Python thread a JVM thread of its own, which need
    not be the one that made the session)."""
    spark_session._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark_session._jsparkSession)
    return spark_session


@pytest.fixture(scope="session")
def spark_session():
    """The run's local[2] SparkSession, with the `nsq` and `pulsar` formats registered.

    Spark starts its Python workers with the JVM's environment: point them at
    this interpreter and this checkout so that they import the packages under test.
    """
    from pyspark.sql import SparkSession

    import nsq.spark
    import pulsarfast.spark

    refuse_in_unit_run("a SparkSession")
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, saved["PYTHONPATH"]) if p)
    try:
        session = (
            SparkSession.builder.master("local[2]")
            .appName("nsqfast-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.streaming.stopTimeout", "30s")
            .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
            .getOrCreate()
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    session.sparkContext.setLogLevel("ERROR")
    nsq.spark.register(session)
    pulsarfast.spark.register(session)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()
