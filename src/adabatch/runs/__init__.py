"""Run a job: simulated (:mod:`.simulated`) or on Spark (:mod:`.spark_job`), compare
controllers side by side (:mod:`.compare`), and meter the CPU it used (:mod:`.cpu`);
:mod:`.checks` holds the input checks both kinds of run share."""
