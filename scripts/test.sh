#!/usr/bin/env bash
# goccl's test command (the README's): format and vet checks, every test, the race
# detector on the core packages, and a short run of every fuzz target.
#   bash scripts/test.sh          # everything
#   QUICK=1 bash scripts/test.sh  # skip race and fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test ./..."
go test -count=1 -timeout 15m ./...

if [ -z "${QUICK:-}" ]; then
	echo "== go test -race (core packages)"
	go test -race -count=1 -timeout 15m . ./transport/... ./algos/... ./tcp/... ./shm/... ./dp/...

	echo "== fuzz (short)"
	# Every FuzzXxx target, from its checked-in seed corpus, for a fixed number of inputs
	# (a few seconds each). A count, not a duration: a duration races the fuzzing engine's
	# own deadline on a loaded machine and fails with "context deadline exceeded" having
	# found nothing (golang/go#51484). A failure prints the engine's whole log, which names
	# the failing input it wrote under testdata/fuzz/.
	log=$(mktemp)
	trap 'rm -f "$log"' EXIT
	for pkg in $(go list ./...); do
		dir=$(go list -f '{{.Dir}}' "$pkg")
		for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
			if ! go test -run '^$' -fuzz "^${f}\$" -fuzztime "${FUZZTIME:-20000x}" "$pkg" >"$log" 2>&1; then
				echo "fuzz $pkg $f FAILED:"; cat "$log"; exit 1
			fi
			echo "fuzz $pkg $f ok"
		done
	done
fi
echo "== all tests passed"
