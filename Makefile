# bolt-agent: `make demo` runs the main job on the embedded models, `make test` runs the tests.
.PHONY: demo test setup setup-test clean

demo: .venv/.ready-run
	.venv/bin/bolt-agent demo

test: .venv/.ready-test
	.venv/bin/python -m pytest

setup: .venv/.ready-run
setup-test: .venv/.ready-test

.venv/.ready-run: pyproject.toml launch/setup.sh
	bash launch/setup.sh run
	touch $@

.venv/.ready-test: pyproject.toml launch/setup.sh
	bash launch/setup.sh test
	touch $@ .venv/.ready-run

clean:
	rm -rf .venv out .pytest_cache
