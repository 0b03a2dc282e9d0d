"""The one executor factory of serve, cleaner run and clean, and the Spark master it is given."""

from __future__ import annotations

from compactlog.cleaner.executor import InProcessExecutor
from compactlog.spark.executor import AutoExecutor, SparkExecutor, make_executor, spark_master_for
from compactlog.storage.config import BrokerConfig


def test_the_default_local_master_means_spark_only_when_the_cost_model_says_so():
    assert spark_master_for(None, BrokerConfig({})) is None
    assert spark_master_for("local[*]", BrokerConfig({})) == "local[*]"      # asked for explicitly
    assert spark_master_for(None, BrokerConfig({"compactlog.spark.master": "spark://h:7077"})) == "spark://h:7077"
    assert spark_master_for("spark://x:1", BrokerConfig({"compactlog.spark.master": "spark://h:7077"})) == "spark://x:1"


def test_make_executor_by_engine_and_master():
    assert isinstance(make_executor("auto"), AutoExecutor)
    assert isinstance(make_executor("local", "spark://h:7077"), InProcessExecutor)
    assert isinstance(make_executor("in-process"), InProcessExecutor)
    assert isinstance(make_executor("auto", "spark://h:7077"), SparkExecutor)
