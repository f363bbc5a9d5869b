"""Deadline-aware intermittent query processing (seed ``deadline-batch-scheduling``).

Pure core (no Spark): specs (:mod:`.spec`), arrivals (:mod:`.arrival`), cost models
(:mod:`.cost`), schedules (:mod:`.schedule`), the single-query planner (:mod:`.single`,
Function 1) and its MILP check (:mod:`.milp`), the multi-query loop (:mod:`.multi`,
Algorithm 2 and its EDF/SJF/RR variants) with its executor interface (:mod:`.executor`),
the schedulability test (:mod:`.feasibility`) and the simulated mode (:mod:`.simulate`).
The Spark runner, TPC-H data and queries live beside them in their own modules.
"""
