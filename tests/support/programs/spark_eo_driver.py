"""A Spark driver program writing to Pulsar with the exactly-once sink, run as a
subprocess by tests/spark/test_pulsar_spark_eo.py so that it can be SIGKILLed whole
and started again. One JSON argument:

- ``mode``: ``stream`` (an ``availableNow`` query from ``input`` to ``output``, with
  ``checkpoint``, ``maxMessagesPerTrigger`` and the crash point options of
  tests/support/spark_crash_points.py) or ``batch`` (``rows`` rows ``v-<id>`` in
  ``partitions`` tasks, written to ``output`` as one job);
- ``master`` (default ``local[2]``) or ``remote`` (a Spark Connect URL);
- ``service_url``, ``admin_url``, ``options`` (more sink options).

Prints ``DONE <json>`` (rows written, or the query's micro-batches) and exits 0.
"""
import json
import os
import sys


def session(spec):
    from pyspark.sql import SparkSession

    if spec.get("remote"):
        return SparkSession.builder.remote(spec["remote"]).getOrCreate()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (SparkSession.builder.master(spec.get("master", "local[2]")).appName("pulsar-eo-driver")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               # (a test's driver JVM starts in about half the time with C1 only and the serial GC)
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData")
               .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
               .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable))
    if not builder_is_local(spec):
        builder = (builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.executor.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"))
    for key, value in spec.get("conf", {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def builder_is_local(spec):
    return spec.get("master", "local[2]").startswith("local")


def main():
    spec = json.loads(sys.argv[1])
    spark = session(spec)
    if spec["mode"] == "stream":
        from tests.support.spark_crash_points import CrashingPulsarDataSource

        spark.dataSource.register(CrashingPulsarDataSource)
    else:
        from pulsarfast.spark.datasource import PulsarDataSource

        spark.dataSource.register(PulsarDataSource)
    sink = {"service_url": spec["service_url"], "admin_url": spec["admin_url"], "topic": spec["output"],
            "deliveryGuarantee": "exactly-once", **spec.get("options", {})}
    if spec["mode"] == "stream":
        sink.update(crashPid=str(os.getpid()))
        query = (spark.readStream.format("pulsar").option("service_url", spec["service_url"])
                 .option("admin_url", spec["admin_url"]).option("topic", spec["input"])
                 .option("startingOffsets", "earliest")
                 .option("maxMessagesPerTrigger", str(spec["maxMessagesPerTrigger"])).load()
                 .selectExpr("value", "cast(value as string) as key")
                 .writeStream.format("pulsar").options(**sink)
                 .option("checkpointLocation", spec["checkpoint"]).trigger(availableNow=True).start())
        query.awaitTermination()
        if query.exception() is not None:
            raise SystemExit("the query failed: %s" % query.exception())
        done = {"batches": [p["batchId"] for p in query.recentProgress]}
    else:
        (spark.range(0, spec["rows"], 1, spec.get("partitions", 2))
         .selectExpr("cast(concat('v-', cast(id as string)) as binary) as value", "cast(id as string) as key")
         .write.format("pulsar").mode("append").options(**sink).save())
        done = {"rows": spec["rows"]}
        if not spec.get("remote"):  # (the executors that ran the job: the driver is one of the blocks' holders)
            done["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print("DONE " + json.dumps(done), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
