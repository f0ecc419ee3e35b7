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
	# Every FuzzXxx target, a few seconds each, from its checked-in seed corpus.
	for pkg in $(go list ./...); do
		dir=$(go list -f '{{.Dir}}' "$pkg")
		for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
			go test -run '^$' -fuzz "^${f}\$" -fuzztime "${FUZZTIME:-5s}" "$pkg" >/dev/null
			echo "fuzz $pkg $f ok"
		done
	done
fi
echo "== all tests passed"
