"""The deadline scheduler's pure core: specs, arrivals, cost models, planners, the
multi-query loop, the schedulability test and the simulated mode. No Spark."""
