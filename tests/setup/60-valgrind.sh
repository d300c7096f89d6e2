# valgrind, for benchmarks/callgrind.py's instruction counts (tests/integration/test_bench_callgrind.py).
if ! command -v valgrind >/dev/null; then
    apt-get update -qq && apt-get install -y -qq valgrind
fi
