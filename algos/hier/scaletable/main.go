// Command scaletable prints the cost model's predictions for ring, tree and hier
// AllReduce (float32 sum) over world sizes up to 1024, as markdown tables for
// BENCHMARKS.md ("Scale on paper"): the time for small messages and nccl-tests' busbw (algbw x
// 2(W-1)/W) for large ones, with the algorithm auto would pick.
//
//	go run ./algos/hier/scaletable -intra 2us,150e9,400e9 -inter 5us,12.5e9 -perhost 8
//
// A link model is alpha (a Go duration), beta (bytes/s over one link direction; for
// -inter, what one host's network link moves) and optionally gamma (bytes/s the reduce
// kernel combines; -inter takes -intra's).
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goccl/goccl/algos"
	_ "github.com/goccl/goccl/algos/hier"
	_ "github.com/goccl/goccl/algos/naive"
	"github.com/goccl/goccl/transport"
)

func main() {
	intraS := flag.String("intra", "2us,150e9,400e9", "links inside a host: alpha,beta[,gamma]")
	interS := flag.String("inter", "5us,12.5e9", "links between hosts: alpha,beta[,gamma] (beta per host)")
	perHost := flag.Int("perhost", 8, "ranks per host")
	worldsS := flag.String("worlds", "2,4,8,16,32,64,128,256,512,1024", "world sizes")
	sizesS := flag.String("sizes", "8,64K,1M,64M,1G", "buffer sizes (8 B rows show time, the others busbw)")
	chunk := flag.Int("chunk", 0, "pipelining chunk in bytes (0 = algos.DefaultChunkBytes)")
	unitS := flag.String("unit", "auto", "auto (time below 4 KiB, busbw above), time (us) or busbw (GB/s)")
	flag.Parse()
	if *unitS != "auto" && *unitS != "time" && *unitS != "busbw" {
		fmt.Fprintf(os.Stderr, "scaletable: -unit %q: want auto, time or busbw\n", *unitS)
		os.Exit(2)
	}
	intra, err1 := parseModel(*intraS)
	inter, err2 := parseModel(*interS)
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "scaletable:", err1, err2)
		os.Exit(2)
	}
	intra.ChunkBytes = *chunk
	var worlds, sizes []int
	for _, f := range strings.Split(*worldsS, ",") {
		w, err := strconv.Atoi(f)
		if err != nil || w < 1 {
			fmt.Fprintf(os.Stderr, "scaletable: bad world size %q\n", f)
			os.Exit(2)
		}
		worlds = append(worlds, w)
	}
	for _, f := range strings.Split(*sizesS, ",") {
		n, err := algos.ParseSize(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scaletable:", err)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	fmt.Printf("Model: intra alpha %v beta %.3g B/s gamma %.3g B/s; inter alpha %v beta %.3g B/s per host; %d ranks per host.\n\n",
		intra.Alpha, intra.Beta, intra.Gamma, inter.Alpha, inter.Beta, *perHost)
	for _, n := range sizes {
		small := *unitS == "time" || (*unitS == "auto" && n < 4096)
		unit := "busbw GB/s"
		if small {
			unit = "time us"
		}
		fmt.Printf("AllReduce %s, %s:\n\n| W | hosts | ring | tree | hier | auto |\n|---:|---:|---:|---:|---:|:---|\n", algos.FormatSize(n), unit)
		for _, w := range worlds {
			hosts := (w + *perHost - 1) / *perHost
			m := algos.HostModel(intra, inter, algos.Layout{Hosts: hosts, PerHost: min(w, *perHost)})
			m.ChunkBytes = *chunk
			row := fmt.Sprintf("| %d | %d |", w, hosts)
			for _, alg := range []string{"ring", "tree", "hier"} {
				d, err := m.Predict(alg, transport.KindAllReduce, n, w)
				if err != nil {
					fmt.Fprintln(os.Stderr, "scaletable:", err)
					os.Exit(1)
				}
				row += " " + cell(d, n, w, small) + " |"
			}
			a, _, err := algos.Resolve("auto", transport.KindAllReduce, n, w, m)
			if err != nil {
				fmt.Fprintln(os.Stderr, "scaletable:", err)
				os.Exit(1)
			}
			fmt.Println(row + " " + a.Name() + " |")
		}
		fmt.Println()
	}
}

func cell(d time.Duration, n, w int, small bool) string {
	if small {
		return strconv.FormatFloat(d.Seconds()*1e6, 'f', 1, 64)
	}
	if d <= 0 {
		return "-"
	}
	bus := float64(n) / d.Seconds() / 1e9 * 2 * float64(w-1) / float64(w)
	return strconv.FormatFloat(bus, 'f', 2, 64)
}

func parseModel(s string) (algos.CostModel, error) {
	f := strings.Split(s, ",")
	if len(f) < 2 || len(f) > 3 {
		return algos.CostModel{}, fmt.Errorf("link model %q: want alpha,beta[,gamma] like 5us,12.5e9", s)
	}
	a, err := time.ParseDuration(f[0])
	if err != nil {
		return algos.CostModel{}, fmt.Errorf("link model %q: alpha: %v", s, err)
	}
	m := algos.CostModel{Alpha: a}
	if m.Beta, err = strconv.ParseFloat(f[1], 64); err != nil || m.Beta <= 0 {
		return algos.CostModel{}, fmt.Errorf("link model %q: beta %q is not a positive bytes/s", s, f[1])
	}
	if len(f) == 3 {
		if m.Gamma, err = strconv.ParseFloat(f[2], 64); err != nil || m.Gamma < 0 {
			return algos.CostModel{}, fmt.Errorf("link model %q: gamma %q is not bytes/s", s, f[2])
		}
	}
	return m, nil
}
