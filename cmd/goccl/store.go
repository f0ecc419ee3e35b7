package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/goccl/goccl/transport/rendezvous"
)

const storeUsage = `usage: goccl store --listen host:port [--token-file F]

Serves a standalone rendezvous store (the TCPStore ranks reach through GOCCL_STORE or
MASTER_ADDR:MASTER_PORT) until interrupted. With --token-file (or GOCCL_AUTH_TOKEN) every
client must prove it holds the same token.`

func init() {
	register(command{name: "store", summary: "serve a standalone rendezvous store", run: runStore})
}

func runStore(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("goccl store", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "", "address to serve on, host:port (\":29500\" = every interface)")
	tokenFile := fs.String("token-file", "", "file holding the auth token (surrounding whitespace is ignored)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Println(storeUsage)
			return 0
		}
		fmt.Fprintf(os.Stderr, "goccl store: %v\n%s\n", err, storeUsage)
		return 2
	}
	if *listen == "" || fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "goccl store: --listen host:port is required and nothing else\n%s\n", storeUsage)
		return 2
	}
	token := os.Getenv("GOCCL_AUTH_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "goccl store: token file: %v\n", err)
			return 2
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			fmt.Fprintf(os.Stderr, "goccl store: token file %s is empty\n", *tokenFile)
			return 2
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv, err := rendezvous.NewTCPStoreServer(*listen, rendezvous.ServerOptions{AuthToken: []byte(token), Logger: log})
	if err != nil {
		fmt.Fprintf(os.Stderr, "goccl store: %v\n", err)
		return 1
	}
	auth := "without auth"
	if token != "" {
		auth = "with auth"
	}
	fmt.Fprintf(os.Stderr, "goccl store: serving on %s %s\n", srv.Addr(), auth)
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "goccl store: %v\n", err)
		return 1
	}
	return 0
}
