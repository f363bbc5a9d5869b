"""adabatch.bench: the papers' experiments on real Spark (``adabatch bench``).

The framework is :mod:`adabatch.bench.core` (configs, runner, ratios, registry),
:mod:`adabatch.bench.report` (tables, CSV, Markdown) and :mod:`adabatch.bench.figures`;
one module per experiment defines ``EXPERIMENT``.
"""
