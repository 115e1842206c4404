# bolt-agent: `make demo` runs the main job on the embedded models, `make test` runs the tests.
.PHONY: demo test lint setup setup-test clean

demo: .venv/.ready-run
	.venv/bin/bolt-agent demo

# A test skipped for missing data fails here (tests/conftest.py); -rs (pyproject) lists every skip.
test: .venv/.ready-test lint
	BOLT_STRICT_DATA=1 .venv/bin/python -m pytest

lint: .venv/.ready-test
	.venv/bin/ruff format --check .
	.venv/bin/ruff check .

setup: .venv/.ready-run
setup-test: .venv/.ready-test

.venv/.ready-run: pyproject.toml launch/setup.sh launch/unpack.py
	bash launch/setup.sh run
	touch $@

.venv/.ready-test: pyproject.toml launch/setup.sh launch/build_llama_server.sh launch/unpack.py
	bash launch/setup.sh test
	touch $@ .venv/.ready-run

clean:
	rm -rf .venv out .pytest_cache
