package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goccl/goccl/internal/trace"
)

func init() {
	register(command{name: "trace", summary: "merge per-rank traces (GOCCL_TRACE=dir) into one Chrome/Perfetto file", run: runTrace})
}

func runTrace(_ context.Context, args []string) int {
	fs := flag.NewFlagSet("goccl trace", flag.ContinueOnError)
	out := fs.String("o", "", "output file (default DIR/goccl-trace-merged.json)")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: goccl trace merge [-o out.json] DIR\n\nMerges the goccl-trace.*.json files that GOCCL_TRACE=DIR wrote, one track per rank;\nopen the result in https://ui.perfetto.dev or chrome://tracing.")
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "merge" {
		fs.Usage()
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	dir := fs.Arg(0)
	merged, paths, err := trace.Merge(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goccl trace:", err)
		return 1
	}
	dst := *out
	if dst == "" {
		dst = filepath.Join(dir, "goccl-trace-merged.json")
	}
	b, err := json.Marshal(merged)
	if err == nil {
		err = os.WriteFile(dst, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goccl trace:", err)
		return 1
	}
	fmt.Printf("merged %d files (%d events) into %s\n", len(paths), len(merged.TraceEvents), dst)
	return 0
}
