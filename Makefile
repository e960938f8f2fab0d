# gpuscope's front door for developers and CI.
#
#   make test    install what is missing, build, run every test: the plain
#                C++ build (unit, NVTX, install-consumer, example, benchmark
#                smoke), the wheel installed and pytest, the wheel in a clean
#                root and an isolated `pip install .`, AddressSanitizer+UBSan
#                over the whole C++ suite, ThreadSanitizer over the concurrency
#                tests
#   make wheel   the self-contained wheel pip users install, in dist/
#   make demo    install what is missing, build and install the package, run a
#                PyTorch training loop with a slow input pipeline and its report
#   make bench   Release build, run the Google Benchmarks and the Python
#                overhead benchmark (docs/benchmarks.md)
#   make format  clang-format the C++ tree in place (make check verifies it)
#   make lint    clang-tidy over lib/ and bindings/ (.clang-tidy)

JOBS ?= $(shell nproc)
PYTHON ?= python3
CMAKE_FLAGS ?=
# Repetitions interleaved at random, medians reported: a shared VM's noise
# then hits every benchmark alike.
BENCH_FLAGS ?= --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true
CTEST = ctest --output-on-failure -j $(JOBS) --timeout 600

.PHONY: all deps deps-test build wheel python test _pytest _build-lane test-wheel check check-layers check-format format lint test-plain test-python test-asan test-tsan demo demo-cpp bench clean

all: build

deps:
	@bash scripts/install-deps.sh

# What the tests need beyond that: Chromium (the HTML report is opened in it)
# and Pillow (to look at its screenshot).
deps-test: deps
	@bash scripts/install-deps.sh --test

build: deps
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSCOPE_WERROR=ON $(CMAKE_FLAGS)
	cmake --build build -j $(JOBS)

test-plain: build
	$(CTEST) --test-dir build

# The wheel pip users install (scripts/build_wheel.py): Abseil and libstdc++
# linked in, auditwheel-repaired to the manylinux tag its symbols need, in
# dist/. Built without build isolation, so that it builds offline with what
# `make deps` installed and fetched (Abseil's source); build-python/ keeps
# the CMake build.
wheel: deps
	$(PYTHON) scripts/build_wheel.py

# The package as a user gets it: that wheel, installed.
python: wheel
	$(PYTHON) -m pip install -q --force-reinstall --no-deps dist/gpuscope-*.whl

# The wheel where the build machine's libraries are not: a clean Debian root
# (debootstrap) without Abseil, nlohmann-json or libstdc++; and a plain
# `pip install .` (build isolation on) into a fresh venv, with the CUDA
# toolkit's and the system's nlohmann-json headers hidden (tests/wheel/).
test-wheel: wheel
	$(TEST_WHEEL)

test-python: python deps-test
	$(PYTEST)

test-asan: deps
	$(BUILD_ASAN)
	$(RUN_ASAN)

test-tsan: deps
	$(BUILD_TSAN)
	$(RUN_TSAN)

TEST_WHEEL = bash tests/wheel/run.sh
PYTEST = cd tests/python && GPUSCOPE_REQUIRE_CHROMIUM=1 GPUSCOPE_REQUIRE_FLEET=1 GPUSCOPE_REQUIRE_TRACKERS=1 \
	$(PYTHON) -m pytest -q -p no:cacheprovider .
define BUILD_ASAN
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUSCOPE_SANITIZE=address \
  -DGPUSCOPE_BUILD_BENCHMARKS=OFF -DGPUSCOPE_ENABLE_INSTALL=OFF -DGPUSCOPE_WERROR=ON \
  -DGPUSCOPE_UNITY_BUILD=ON $(CMAKE_FLAGS)
cmake --build build-asan -j $(JOBS)
endef
RUN_ASAN = bash scripts/ctest-asan.sh build-asan -j $(JOBS) --timeout 600
define BUILD_TSAN
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSCOPE_SANITIZE=thread \
  -DGPUSCOPE_BUILD_BENCHMARKS=OFF -DGPUSCOPE_BUILD_EXAMPLES=OFF -DGPUSCOPE_ENABLE_INSTALL=OFF \
  -DGPUSCOPE_WERROR=ON -DGPUSCOPE_UNITY_BUILD=ON $(CMAKE_FLAGS)
cmake --build build-tsan -j $(JOBS) --target concurrency_tests
endef
RUN_TSAN = $(CTEST) --test-dir build-tsan -L concurrency

# Every C++ file git tracks or would track (new files not yet added count:
# a check that skipped them passed here and failed on a fresh clone);
# third-party code has none in the tree.
CXX_SOURCES = $(shell git ls-files --cached --others --exclude-standard '*.cc' '*.h' 2>/dev/null)

# The include graph and the definitions follow the library's layers
# (scripts/check_layers.py), and no function in lib/ runs over 80 lines
# without saying why (scripts/check_functions.py).
check-layers:
	$(PYTHON) scripts/check_layers.py
	$(PYTHON) scripts/check_functions.py

# The tree is formatted as .clang-format says.
check-format: deps
	@clang-format --dry-run --Werror $(CXX_SOURCES) && echo "check-format: every C++ file is formatted"

check: check-layers check-format

format: deps
	clang-format -i $(CXX_SOURCES)

# The library from the plain build's compile database, the extension from
# the pip build's. -Werror stays the compiler's job: clang reads GCC's
# libstdc++ 12, whose headers trip clang's deprecation warnings.
TIDY = clang-tidy --quiet --extra-arg=-Wno-error --extra-arg=-Wno-deprecated-declarations
lint: build python
	$(TIDY) -p build $(filter lib/%.cc,$(CXX_SOURCES))
	$(TIDY) -p build-python $(filter bindings/%.cc,$(CXX_SOURCES))

# pytest keeps about one core busy (its tests wait on servers, sleeps and
# subprocesses), so the builds that nothing times (the wheel's clean-root
# and isolated-build checks, the ASan and TSan builds) run beside it; the
# sanitizers' tests, which time their threads, run after it, alone. Each
# lane's output is printed when the lane ends.
test: check test-plain python deps-test
	$(MAKE) --no-print-directory -j2 --output-sync=target _pytest _build-lane
	$(RUN_ASAN)
	$(RUN_TSAN)
	@echo "make test: all suites passed"

_pytest:
	$(PYTEST)

_build-lane:
	$(TEST_WHEEL)
	$(BUILD_ASAN)
	$(BUILD_TSAN)

demo: python
	$(PYTHON) examples/torch_training_loop.py

demo-cpp: build
	./build/examples/cpp_training_loop

bench: deps
	cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUSCOPE_BUILD_TESTS=OFF $(CMAKE_FLAGS)
	cmake --build build-release -j $(JOBS)
	./build-release/benchmarks/scope_overhead_benchmark $(BENCH_FLAGS)
	GPUSCOPE_CLOCK=monotonic ./build-release/benchmarks/scope_overhead_benchmark $(BENCH_FLAGS) --benchmark_filter='ClockRead|Phase|Step'
	./build-release/benchmarks/aggregator_benchmark $(BENCH_FLAGS)
	$(MAKE) python
	$(PYTHON) -m pip install -q nvtx
	$(PYTHON) benchmarks/python_overhead.py
	$(PYTHON) benchmarks/real_loop.py
	$(PYTHON) benchmarks/worker_cost.py
	$(PYTHON) benchmarks/series_html.py
	$(PYTHON) benchmarks/compare_phases.py
	$(PYTHON) benchmarks/compare_noise.py --steps 100,1000,10000
	$(PYTHON) benchmarks/analyze_trace.py
	$(PYTHON) benchmarks/memory_sampler.py
	$(PYTHON) benchmarks/wheel_import.py dist/gpuscope-*.whl

clean:
	rm -rf build build-asan build-tsan build-release build-python dist
