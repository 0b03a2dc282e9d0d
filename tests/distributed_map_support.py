"""The distributed key map's stages (``cleaner.distributed_map``) run in this process, the shuffle a
dict: the scan, reduce and rewrite tasks Spark runs, on the same jobs and reducers, so that every
corpus case checks the distributed map's rules without a Spark job per case; Spark's shuffle of
the same stages is checked on a few cases (test_corpus, test_compaction_strategies)."""

from __future__ import annotations

from compactlog.cleaner.distributed_map import (distributed_stages, ordered_results, reduce_task, rewrite_task,
                                                scan_task, seed)
from compactlog.cleaner.executor import run_guarded

PARALLELISM = 2          # the tests' local[2] session's


def run_distributed_in_process(plans: list) -> list:
    jobs, reducers, bases = distributed_stages(plans, PARALLELISM)
    records_read, bytes_read = [0] * len(plans), [0] * len(plans)

    def count(p: int, n: int, nbytes: int) -> None:
        records_read[p] += n
        bytes_read[p] += nbytes

    by_reducer: dict[int, list] = {}
    for job in jobs:
        for r, block in scan_task(plans, job, reducers, count):
            by_reducer.setdefault(r, []).append((r, block))
    by_plan: dict[int, list] = {p: [seed(p)] for p in range(len(plans))}
    for blocks in by_reducer.values():
        for p, arrays in reduce_task(blocks, bases):
            by_plan[p].append((p, arrays))
    results = {}
    for items in by_plan.values():
        results.update(rewrite_task(plans, items))
    return ordered_results(plans, results, records_read, bytes_read)


class InProcessDistributedExecutor:
    """An executor that cleans the plans asking for the distributed map with its stages in this
    process (``InProcessExecutor`` turns them into task-map plans), the others as tasks here."""

    name = "in-process"
    choice = None
    progress = None

    @property
    def last_choice(self) -> str:
        return self.name

    def run(self, plans: list) -> list:
        results: list = [None] * len(plans)
        distributed = [i for i, p in enumerate(plans) if p.map_kind == "distributed"]
        for i, p in enumerate(plans):
            if p.map_kind != "distributed":
                results[i] = run_guarded(p)
        for i, r in zip(distributed, run_distributed_in_process([plans[i] for i in distributed])):
            results[i] = r
        return results
