# gpuscope's front door for developers and CI.
#
#   make test    install what is missing, build, run every test: the plain
#                build (unit, NVTX, install-consumer, example, benchmark smoke),
#                AddressSanitizer+UBSan over the whole suite, ThreadSanitizer
#                over the concurrency tests
#   make demo    install what is missing, build, run the instrumented example
#   make bench   Release build, run the Google Benchmarks (docs/benchmarks.md)

JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST = ctest --output-on-failure -j $(JOBS) --timeout 600

.PHONY: all deps build test test-plain test-asan test-tsan demo bench clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSCOPE_WERROR=ON $(CMAKE_FLAGS)
	cmake --build build -j $(JOBS)

test-plain: build
	$(CTEST) --test-dir build

test-asan: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUSCOPE_SANITIZE=address \
	  -DGPUSCOPE_BUILD_BENCHMARKS=OFF -DGPUSCOPE_ENABLE_INSTALL=OFF -DGPUSCOPE_WERROR=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	$(CTEST) --test-dir build-asan

test-tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSCOPE_SANITIZE=thread \
	  -DGPUSCOPE_BUILD_BENCHMARKS=OFF -DGPUSCOPE_BUILD_EXAMPLES=OFF -DGPUSCOPE_ENABLE_INSTALL=OFF \
	  -DGPUSCOPE_WERROR=ON $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS)
	$(CTEST) --test-dir build-tsan -L concurrency

test: test-plain test-asan test-tsan
	@echo "make test: all suites passed"

demo: build
	./build/examples/cpp_training_loop

bench: deps
	cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUSCOPE_BUILD_TESTS=OFF $(CMAKE_FLAGS)
	cmake --build build-release -j $(JOBS)
	./build-release/benchmarks/scope_overhead_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	./build-release/benchmarks/aggregator_benchmark --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

clean:
	rm -rf build build-asan build-tsan build-release
