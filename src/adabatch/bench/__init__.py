"""adabatch.bench: the papers' experiments on real Spark (``adabatch bench``).

The harness: :mod:`.model` (configs, outcomes, the analysis an experiment returns),
:mod:`.registry` (the experiments by name), :mod:`.runner` (running them),
:mod:`.ratios` (to the oracle and to Spark's default), :mod:`.resume` (what a continued
run reuses), :mod:`.machine` (the machine facts results carry), :mod:`.report` (tables,
CSV, Markdown) and :mod:`.figures`. One module per experiment in :mod:`.experiments`
defines ``EXPERIMENT``; the deadline paper's bench is the package
:mod:`.experiments.deadline`.
"""
