#!/usr/bin/env bash
# The web console's cost: its page load times and the broker CPU it costs while the
# groups page polls, at 10,000 groups with committed offsets, against the same broker
# with no console open (docs/benchmarks.md, "The web console"). Builds the release
# broker and its plugins and runs tests/conformance/benches/console_cpu.py with the test
# venv (selenium, confluent-kafka) and Debian's chromium.
#   scripts/bench-console.sh [--groups N] [--rounds R] [--seconds S] [--loads L]
set -euo pipefail
exec "$(dirname "$0")/bench-release.sh" tests/conformance/benches/console_cpu.py "$@"
