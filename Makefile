# Two commands do everything on a fresh machine:
#   make demo   set up, then run the main job (Spark, generator source, SQLite)
#   make test   set up, then lint and run the test suite (what CI runs)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= runs/demo

.PHONY: setup demo test test-unit test-all lint clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[spark,dev]"
	touch $@

demo: setup
	rm -rf $(OUT)
	$(BIN)/adabatch run --workload reduce --controller fixed-point \
		--profile constant:2000 --duration 60s --out $(OUT)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# the tests without Spark on two workers, then the Spark ones (each run is two cores) alone
test: lint
	$(BIN)/python -m pytest -m "not slow and not spark" -n 2 -q --durations=10
	$(BIN)/python -m pytest -m "not slow and spark" -q --durations=25

# no Spark, no services, no fuzz suite: the fast loop while editing
test-unit: setup
	$(BIN)/python -m pytest -m "not spark and not services and not slow and not fuzz" -q

test-all: lint
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache
