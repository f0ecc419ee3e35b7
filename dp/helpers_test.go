package dp_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goccl/goccl"
	"github.com/goccl/goccl/dp"
	"github.com/goccl/goccl/dp/mlp"
)

// ranks returns world goroutine-rank communicators (goccl.InitLocal: the in-process
// transport), closed when the test ends.
func ranks(t *testing.T, world int, opts ...goccl.Option) []dp.Collectives {
	t.Helper()
	out, _ := ranksComms(t, world, opts...)
	return out
}

// ranksComms is ranks, also returning the communicators.
func ranksComms(t *testing.T, world int, opts ...goccl.Option) ([]dp.Collectives, []*goccl.Comm) {
	t.Helper()
	// A name per call: goccl numbers communicators per (store address, name, rank), and
	// a new MemStore may reuse a collected one's address (see .proposals/dp.md).
	name := fmt.Sprintf("dp-test-%d", worlds.Add(1))
	opts = append([]goccl.Option{goccl.WithTimeout(30 * time.Second), goccl.WithName(name)}, opts...)
	comms, err := goccl.InitLocal(testCtx(t), world, opts...)
	require.NoError(t, err)
	out := make([]dp.Collectives, world)
	for r, c := range comms {
		t.Cleanup(func() { c.Close() })
		out[r] = dp.Comm(c)
	}
	return out, comms
}

var worlds atomic.Int64

// parallel runs fn on every rank and returns the errors by rank.
func parallel(world int, fn func(r int) error) []error {
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(r)
		}()
	}
	wg.Wait()
	return errs
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run is one training configuration.
type run struct {
	world, batch, accum, steps, stage int
	dims                              []int
	precision, compress               string
	bucket                            int            // first and later bucket cap in bytes (0: defaults)
	shared                            bool           // shm links and Options.SharedMemory, direct at every size
	comms                             *[]*goccl.Comm // where train puts its communicators, when set
	opts                              []goccl.Option // more communicator settings (transport, algorithm, ...)
	eps                               float32        // AdamW's epsilon (0: the default, 1e-8)
}

// train runs cfg and returns, per step, every rank's parameter snapshot and the losses.
func train(t *testing.T, cfg run) (snaps [][][][]float32, losses [][]float64, mems []dp.Memory) {
	t.Helper()
	ctx := testCtx(t)
	var opts []goccl.Option
	if cfg.shared {
		opts = []goccl.Option{goccl.WithTransport("shm"), goccl.WithParam("shm.direct_min", "0")}
	}
	comms, gcomms := ranksComms(t, cfg.world, append(opts, cfg.opts...)...)
	if cfg.comms != nil {
		*cfg.comms = gcomms
	}
	data, err := mlp.NewSynthetic(cfg.dims[0], cfg.dims[len(cfg.dims)-1], 7)
	require.NoError(t, err)
	snaps = make([][][][]float32, cfg.steps) // step, rank, param, values
	losses = make([][]float64, cfg.steps)
	for s := range snaps {
		snaps[s] = make([][][]float32, cfg.world)
		losses[s] = make([]float64, cfg.world)
	}
	mems = make([]dp.Memory, cfg.world)
	errs := parallel(cfg.world, func(r int) error {
		model, err := mlp.New(cfg.dims)
		if err != nil {
			return err
		}
		hp := dp.DefaultAdamW()
		hp.LR = 1e-2
		if cfg.eps != 0 {
			hp.Eps = cfg.eps
		}
		eng, err := dp.NewOn(ctx, comms[r], model.Specs(42), dp.Options{Stage: cfg.stage, Precision: cfg.precision,
			AccumSteps: cfg.accum, Compress: cfg.compress, FirstBucketBytes: cfg.bucket, BucketBytes: cfg.bucket, AdamW: &hp,
			SharedMemory: cfg.shared})
		if err != nil {
			return err
		}
		defer eng.Close()
		tr, err := mlp.NewTrainer(eng, model, data, cfg.batch)
		if err != nil {
			return err
		}
		for s := range cfg.steps {
			st, err := tr.Step(ctx, s, true)
			if err != nil {
				return err
			}
			losses[s][r] = st.Loss
			if snaps[s][r], err = eng.Snapshot(ctx); err != nil {
				return err
			}
		}
		mems[r] = eng.Memory()
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	return snaps, losses, mems
}
